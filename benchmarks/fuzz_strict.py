"""Recorded real programs (``benchmarks/fuzz.py --real-only`` results) held to the strict test of issue 42's
fuzzer: for each program that hung, every twin of tests/fuzz/twins.py built from its seed (the program, its fault
and gloo's simulated run of it, as its flags are made: ``twins.built_twins``), whatever its flags say.  A program
one explains cannot be decided from its documents; the outcomes are the recorded ones, judged by the verdict of
the commit each file names (not this one's).  No torch, no ranks: the simulator only.

    python benchmarks/fuzz_strict.py benchmarks/results/fuzz_real_seed37_torch2.13.0.json [...] [--out FILE]
"""
import argparse
import json
import os
import shlex
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

from fuzz import programs, run, simulate, twins  # noqa: E402  (tests/fuzz)


def _drawn_by(command):
    """(shape, kind, two) of a results file's command line."""
    words = shlex.split(command or "")
    shape = words[words.index("--shape") + 1] if "--shape" in words else None
    kind = words[words.index("--kind") + 1] if "--kind" in words else None
    return shape, kind, "--two" in words


def twins_of(seed, shape=None, kind=None):
    """Every twin built for the real program of ``seed`` (tests/fuzz/real.py's case and flags), or None where it
    made no hang in gloo's simulated run or its fault is one in the making (not simulated here)."""
    case = programs.make_case(seed, kind=kind, shape=shape)
    if case.fault is None or case.fault.kind in programs.MAKING_KINDS:
        return None
    sim = simulate.Sim(case.program, case.calls, case.stop).run()
    if not sim.hung:
        return None
    return twins.built_twins(simulate.flag_at_hang(case, sim), sim)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", help="write the rows and counts here (JSON)")
    a = ap.parse_args(argv)
    doc = {"command": "python benchmarks/fuzz_strict.py " + " ".join(os.path.relpath(f, ROOT) for f in a.files),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "files": []}
    for path in a.files:
        with open(path) as f:
            got = json.load(f)
        shape, kind, two = _drawn_by(got.get("command"))
        if two:
            print("%s: two faults a program, not held to the strict test here" % os.path.relpath(path, ROOT))
            continue
        rows = []
        for row in got["rows"]:
            row = dict(row)
            if row.get("outcome") in run.HUNG:
                row["twins"] = twins_of(row["seed"], shape=shape, kind=kind)
            rows.append(row)
        strict = run.strict_counts(rows)
        print("%s (torch %s, the verdict of %s):\n  %s" % (os.path.relpath(path, ROOT), got.get("torch"),
                                                           got.get("commit"), run.strict_words(strict)))
        doc["files"].append({"file": os.path.relpath(path, ROOT), "torch": got.get("torch"),
                             "commit": got.get("commit"), "strict": strict,
                             "rows": [{k: r.get(k) for k in ("seed", "kind", "shape", "step", "outcome", "named",
                                                             "expected", "undecidable", "twins")} for r in rows]})
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print("results: %s" % os.path.relpath(a.out, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
