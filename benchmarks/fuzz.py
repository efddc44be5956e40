"""The diagnosis fuzzer (issue 42), one command: random programs shaped like users' jobs, one fault each with
its ground truth, gloo's matching simulated, the documents the watchdogs would write judged by the real
verdict engine; the tables by fault kind, shape and fault step, and every wrong culprit with its seed.

    python benchmarks/fuzz.py --cases 20000 --seed 7          # the tables; results/fuzz_sim_seed7.json
    python tests/fuzz/run.py --replay 7013475                  # one case, whole

Source model: the exact sources (the patch wrappers, torch's pre/post hooks): every call a rank issued is in
its document, as the watchdog writes it.  Not yet here (issue 42, left for the next slice): torch's recorders'
quirks (entries without completion times, bounded rings, reads between polls), two faults at once, and the
same programs run by real gloo ranks.  Exit status 1 where a culprit was wrong, a healthy program hung or
gave a verdict, or a fault made no hang.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import run as _run  # noqa: E402  (tests/fuzz/run.py)


def _commit():
    try:
        return subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                       universal_newlines=True, stderr=subprocess.DEVNULL).strip()
    except Exception:
        return None


def _counts(table):
    return {k: dict(v) for k, v in sorted(table.items())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skew", action="store_true", help="each rank's clock off by up to 2 h")
    ap.add_argument("--out", help="the results file (default benchmarks/results/fuzz_sim_seed<SEED>.json)")
    a = ap.parse_args(argv)
    t0 = time.time()
    got = _run.run(a.cases, a.seed, skew=a.skew)
    dt = time.time() - t0
    doc = {"command": "python benchmarks/fuzz.py --cases %d --seed %d%s" % (a.cases, a.seed, " --skew" if a.skew else ""),
           "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": "%s, %d cores, Python %s" % (platform.machine(), os.cpu_count() or 0, platform.python_version()),
           "source_model": "exact (patch, hooks)", "cases": a.cases, "seconds": round(dt, 1),
           "cases_per_s": round(a.cases / dt, 1) if dt else None,
           "by_kind": _counts(got["by_kind"]), "by_shape": _counts(got["by_shape"]), "by_step": _counts(got["by_step"]),
           "undecided_why": _counts(got["reasons"]),
           "wrong": [{"seed": r.case.seed, "kind": r.case.fault.kind, "named": r.culprits,
                      "expected": sorted(r.case.expected), "summary": r.summary} for r in got["wrong"]],
           "unhealthy": [r.case.seed for r in got["unhealthy"]], "nohang": [r.case.seed for r in got["nohang"]]}
    out = a.out or os.path.join(HERE, "results", "fuzz_sim_seed%d%s.json" % (a.seed, "_skew" if a.skew else ""))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("\nresults: %s" % os.path.relpath(out, ROOT))
    return 1 if got["wrong"] or got["unhealthy"] or got["nohang"] else 0


if __name__ == "__main__":
    sys.exit(main())
