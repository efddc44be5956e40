"""The diagnosis fuzzer (issue 42), one command: random programs shaped like users' jobs, one fault each with
its ground truth, gloo's matching simulated, the documents the watchdogs would write judged by the real
verdict engine; the tables by fault kind, shape and fault step, and every wrong culprit with its seed.

    python benchmarks/fuzz.py --cases 20000 --seed 7          # the tables; results/fuzz_sim_seed7.json
    python tests/fuzz/run.py --replay 7013475                  # one case, whole
    python benchmarks/fuzz.py --cases 20000 --seed 7 --twins  # and the strict test: every twin built (tests/fuzz/twins.py)

    python benchmarks/fuzz.py --cases 10000 --seed 21 --two   # two faults at once, on two ranks
    python benchmarks/fuzz.py --source recorder --seed 7      # documents as torch's gloo recorder leaves them
    python benchmarks/fuzz.py --source nccl --seed 7          # as torch's NCCL recorder, Python ahead of the GPU
    python benchmarks/fuzz.py --shape mesh3d --seed 51 --cases 5000   # pp x dp x tp meshes of 8-64 ranks
    python benchmarks/fuzz.py --shape ring --seed 61 --cases 10000    # batch_isend_irecv rings, one op left out
    python benchmarks/fuzz.py --kind swap --seed 13 --cases 20000      # two collectives swapped across groups
    python benchmarks/fuzz.py --real-only --real 40 --seed 5  # 40 programs by real gloo ranks (2-8 each)
    python benchmarks/fuzz.py --real-only --real 20 --kind freeze_in --seed 17   # a rank stopped (SIGSTOP) in a call
    python benchmarks/fuzz.py --real-only --real 30 --kind make_order --seed 71  # a rank made its groups its own way
    python benchmarks/fuzz.py --kind make_skip --cases 5000 --seed 7   # the same, simulated (torch 2.x and 1.x)
    python benchmarks/fuzz.py --real-only --real 12 --kind make_skip --two --seed 7  # and a fault of the loop on another
    python benchmarks/fuzz.py --kind slow --cases 2000 --seed 11 [--nodes 4] [--periods]  # one slow rank: the straggler rule

Source models (``--source``): ``exact``, the patch wrappers and torch's pre/post hooks: every call a rank
issued is in its document, as the watchdog writes it; ``recorder``, torch's gloo recorder (the default source
on 2.8+): collectives counted at the source's polls and named only by its reads of the buffer (each batch
period, and once for a rank waiting in a call), so a rank stalled, dead or ended keeps its newest calls
unnamed; ``nccl``, torch's NCCL recorders, named as the recorder model names them, where a rank's Python runs
ahead of its GPU: a rank whose GPU waits in a call has issued the calls after it up to its next
synchronisation, in flight in its document (tests/fuzz/simulate.py says what is modelled and what is not).  ``--real N``: the same programs run
by real gloo ranks under C10D_OBSERVER=1 (tests/fuzz/real.py), judged the same way.  Exit status 1 where a
culprit was wrong, a healthy program hung or gave a verdict, or a fault made no hang.
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

_MAKING = _run.programs.MAKING_KINDS  # faults in the making: simulated by making.py; real programs' ranks say so


SOURCE_WORDS = {"exact": "exact (patch, hooks)", "recorder": "recorder (torch's gloo recorder)",
                "nccl": "nccl (torch's NCCL recorder; Python ahead of the GPU to its next synchronisation)",
                "nccl-sizes": "nccl-sizes (nccl, and the members of the fewest bytes finish a size mismatch: a "
                              "hypothesis, not measured)"}


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
    ap.add_argument("--two", action="store_true", help="two faults at once, on two ranks")
    ap.add_argument("--shape", choices=("mesh3d", "ring", "async", "ops", "stages"),
                    help="every program of this shape, simulated and real (mesh3d: pp x dp x tp, 8-64 ranks; ring: "
                         "batch_isend_irecv rings beside world collectives; async: bursts of async all_reduces; "
                         "ops: every collective kind, rooted, coalesced and object ones; drawn only where asked)")
    ap.add_argument("--kind", choices=("swap", "freeze", "freeze_in", "mismatch_p2p", "slow", "make_order",
                                       "make_members", "make_skip", "make_own"),
                    help="every case's fault of this kind, simulated and real (swap: two collectives of two groups "
                         "issued the other way round; freeze, freeze_in: the rank's process stopped before a call, "
                         "inside a collective; mismatch_p2p: a send or recv of another size than its other half; drawn only "
                         "where asked; slow: one slow rank, no hang, judged by the straggler rule, simulated only: "
                         "tests/fuzz/stragglers.py; make_order, make_members, make_skip: one rank makes two of its "
                         "groups the other way round, passes one new_group other members, or leaves out one of a "
                         "group it is not in; make_own: every rank makes only the groups it is in; simulated as "
                         "torch's new_group makes groups (--line), tests/fuzz/making.py, or real: with --real-only)")
    ap.add_argument("--line", choices=("2.x", "1.x"), help="--kind make_*, simulated: torch's new_group of this line "
                    "(1.x: each a factory and the world's store-based barrier); default both")
    ap.add_argument("--nodes", type=int, default=1, help="--kind slow: the ranks on this many nodes, clocks apart")
    ap.add_argument("--periods", action="store_true", help="--kind slow: the documents written and joined every 2 s "
                                                           "as the watchdogs do (tests/fuzz/stragglers.periodic)")
    ap.add_argument("--source", default="exact", choices=("exact", "recorder", "nccl", "nccl-sizes"),
                    help="the source model of the documents: exact (patch, hooks), recorder (torch's gloo "
                         "recorder, the default source on 2.8+) or nccl (torch's NCCL recorder, each rank's "
                         "Python ahead of its GPU; nccl-sizes: and the members of the fewer bytes finish a size "
                         "mismatch; tests/fuzz/simulate.py)")
    ap.add_argument("--out", help="the results file (default benchmarks/results/fuzz_sim_seed<SEED>.json)")
    ap.add_argument("--real", type=int, default=0, metavar="N",
                    help="also run N of the programs (2-8 ranks, seeds from --seed's series) with real gloo ranks "
                         "under C10D_OBSERVER=1, at the settings users get (no timeout)")
    ap.add_argument("--real-wait", type=float, default=45.0, help="seconds after the fault to wait for a culprit")
    ap.add_argument("--real-only", action="store_true", help="the real programs only")
    ap.add_argument("--healthy-every", type=int, default=1, metavar="N",
                    help="run and judge the healthy program of every N-th case only (1: each; it checks the "
                         "generator, not the verdict, and costs more than the faulty run)")
    ap.add_argument("--twins", action="store_true",
                    help="also build every twin of each hung case (tests/fuzz/twins.py, whatever its flags say) and "
                         "give the strict table: the cases no twin built explains, and the verdict's bets (a case one "
                         "explains, named); some 20 simulated runs a case more; with --real-only, each program's row "
                         "carries its twins (they always do: cheap beside real ranks)")
    ap.add_argument("--dump", metavar="FILE",
                    help="write each case's outcome to FILE, a line a case (its seed, outcome, culprits, summary, "
                         "the verdicts' categories and the SHA-1 of their JSON), to compare two versions case for case")
    a = ap.parse_args(argv)
    if a.kind in _MAKING and not a.real_only and (a.two or a.real or a.source not in ("exact", "recorder")):
        ap.error("--kind %s, simulated: one fault (no --two), no --real, --source exact or recorder (the making is "
                 "the patch wrapper's; NCCL's not modelled); or real: --real-only --real N" % a.kind)
    if a.kind in _MAKING and not a.real_only:
        return _making(a)
    if a.two and a.real_only and a.kind not in _MAKING:
        ap.error("--two --real-only: real ranks run two faults with the first in the making only: add --kind %s"
                 % "|".join(_MAKING))
    if a.twins and not a.real_only and (a.two or a.source == "nccl-sizes"):
        ap.error("--twins: one fault a case (no --two), --source exact, recorder or nccl")
    if a.kind == "slow":
        return _slow(a)
    if a.real_only:
        return _real(a)
    if a.dump:
        _run.dump = []
    t0 = time.time()
    every = max(1, a.healthy_every)
    got = _run.run(a.cases, a.seed, skew=a.skew, two=a.two, source=a.source, shape=a.shape, kind=a.kind,
                   healthy_every=every, twins=a.twins)
    dt = time.time() - t0
    doc = {"command": "python benchmarks/fuzz.py --cases %d --seed %d%s%s%s%s%s" % (
               a.cases, a.seed, " --skew" if a.skew else "", " --two" if a.two else "",
               " --source %s" % a.source if a.source != "exact" else "", " --shape %s" % a.shape if a.shape else "",
               " --kind %s" % a.kind if a.kind else "") + (" --healthy-every %d" % every if every > 1 else "")
           + (" --twins" if a.twins else ""),
           "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": "%s, %d cores, Python %s" % (platform.machine(), os.cpu_count() or 0, platform.python_version()),
           "source_model": SOURCE_WORDS[a.source], "cases": a.cases, "seconds": round(dt, 1),
           "cases_per_s": round(a.cases / dt, 1) if dt else None, "healthy_every": every,
           "by_kind": _counts(got["by_kind"]), "by_shape": _counts(got["by_shape"]), "by_step": _counts(got["by_step"]),
           "undecided_why": _counts(got["reasons"]),
           "strict": {step: {"%s, %s" % (o, "a twin" if t else "no twin"): n for (o, t), n in c.items()}
                      for step, c in got["strict"].items()} if a.twins else None,
           "wrong": [{"seed": r.case.seed, "kind": r.case.fault.kind, "named": r.culprits,
                      "expected": sorted(r.case.expected), "summary": r.summary} for r in got["wrong"]],
           "unhealthy": [r.case.seed for r in got["unhealthy"]], "nohang": [r.case.seed for r in got["nohang"]]}
    out = a.out or os.path.join(HERE, "results", "fuzz_sim_seed%d%s%s%s%s%s.json" % (
        a.seed, "_skew" if a.skew else "", "_two" if a.two else "", "_%s" % a.source if a.source != "exact" else "",
        "_" + a.shape if a.shape else "", "_" + a.kind if a.kind else ""))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("\nresults: %s" % os.path.relpath(out, ROOT))
    if a.dump:
        with open(a.dump, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in _run.dump)
        _run.dump = None
    bad = got["wrong"] or got["unhealthy"] or got["nohang"]
    if a.real:
        bad = _real(a) or bad
    return 1 if bad else 0


def _making(a):
    """Faults in the making, simulated (tests/fuzz/making.py): per line of torch, the outcomes; results as data
    (results/fuzz_sim_seed<SEED>_<kind>[_<shape>][_<source>].json)."""
    import collections
    from fuzz import making  # tests/fuzz/making.py
    lines = [a.line] if a.line else list(making.LINES)
    doc = {"command": "python benchmarks/fuzz.py --kind %s --cases %d --seed %d%s%s%s" % (
               a.kind, a.cases, a.seed, " --shape %s" % a.shape if a.shape else "",
               " --source %s" % a.source if a.source != "exact" else "", " --line %s" % a.line if a.line else ""),
           "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": "%s, %d cores, Python %s" % (platform.machine(), os.cpu_count() or 0, platform.python_version()),
           "lines": {}}
    wrong = 0
    for line in lines:
        t0, by, bad = time.time(), collections.Counter(), []
        for i in range(a.cases):
            seed = _run.case_seed(a.seed, i)
            case, outcome, named, summary = making.judge(seed, a.kind, line, source=a.source, shape=a.shape)
            by[outcome or "no place"] += 1
            if outcome in ("wrong", "undecided"):
                bad.append({"seed": seed, "outcome": outcome, "named": named, "expected": sorted(case.expected),
                            "summary": summary})
        dt = time.time() - t0
        wrong += by["wrong"]
        print("%s, torch %s: %d cases, %.0f s (%.0f cases/s): %s" % (a.kind, line, a.cases, dt, a.cases / dt,
                                                                    ", ".join("%s %d" % kv for kv in sorted(by.items()))))
        for b in bad[:10]:
            print("  %s %d: named %s, expected %s: %s" % (b["outcome"], b["seed"], b["named"], b["expected"],
                                                         (b["summary"] or "")[:300]))
        doc["lines"][line] = {"outcomes": dict(by), "seconds": round(dt, 1), "not_exact": bad}
    out = a.out or os.path.join(HERE, "results", "fuzz_sim_seed%d_%s%s%s.json" % (
        a.seed, a.kind, "_" + a.shape if a.shape else "", "_" + a.source if a.source != "exact" else ""))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("results: %s" % os.path.relpath(out, ROOT))
    return 1 if wrong else 0


def _slow(a):
    """One slow rank per case, judged by the straggler rule (tests/fuzz/stragglers.py): the tables, results as
    data (results/fuzz_slow_seed<SEED>[_<shape>][_nodes<N>].json)."""
    from fuzz import stragglers  # tests/fuzz/stragglers.py
    every = max(1, a.healthy_every)
    t0 = time.time()
    got = stragglers.run(a.cases, a.seed, shape=a.shape, nodes=max(1, a.nodes), healthy_every=every,
                         periods=a.periods)
    dt = time.time() - t0
    doc = {"command": "python benchmarks/fuzz.py --kind slow --cases %d --seed %d%s%s%s" % (
               a.cases, a.seed, " --shape %s" % a.shape if a.shape else "", " --nodes %d" % a.nodes if a.nodes > 1
               else "", " --healthy-every %d" % every if every > 1 else "") + (" --periods" if a.periods else ""),
           "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": "%s, %d cores, Python %s" % (platform.machine(), os.cpu_count() or 0, platform.python_version()),
           "cases": a.cases, "seconds": round(dt, 1), "healthy_every": every,
           "by_shape": _counts(got["by_shape"]), "by_factor": _counts(got["by_factor"]),
           "wrong": [{"seed": c.seed, "slow": c.rank, "named": r} for c, r in got["wrong"]],
           "false_alarms": [{"seed": c.seed, "named": r} for c, r in got["false"]]}
    out = a.out or os.path.join(HERE, "results", "fuzz_slow_seed%d%s%s%s.json" % (
        a.seed, "_" + a.shape if a.shape else "", "_nodes%d" % a.nodes if a.nodes > 1 else "",
        "_periods" if a.periods else ""))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("\nresults: %s" % os.path.relpath(out, ROOT))
    return 1 if got["wrong"] or got["false"] else 0


def _real(a):
    """N programs by real gloo ranks (tests/fuzz/real.py), one at a time: the table, results as data."""
    import collections
    import real as _real_mode  # tests/fuzz/real.py
    import torch
    seeds, i = [], 0
    while len(seeds) < a.real:
        seed = _run.case_seed(a.seed, i)
        if _real_mode.eligible(seed, kind=a.kind, shape=a.shape, two=a.two):
            seeds.append(seed)
        i += 1
    rows, t0 = [], time.time()
    for seed in seeds:
        row = _real_mode.run_real(seed, wait_s=a.real_wait, kind=a.kind, shape=a.shape, two=a.two)
        rows.append(row)
        print("real %d/%d seed %d: %s %s rank(s) %s at step %d, world %d: %s%s%s" % (
            len(rows), len(seeds), seed, row["shape"], row["kind"], row["expected"], row["step"], row["world"],
            row["outcome"], " in %.1f s" % row["named_s"] if row["named_s"] is not None else "",
            "; said made apart by %s" % _rank_words(row["said_apart"]) if row["said_apart"] else ""))
        sys.stdout.flush()
    by = collections.Counter(r["outcome"] for r in rows)
    named = sorted(r["named_s"] for r in rows if r["outcome"] == "exact" and r["named_s"] is not None)
    p90 = named[min(len(named) - 1, int(0.9 * len(named)))] if named else None
    said = sum(1 for r in rows if r["said_apart"])
    print("\nreal programs: %d, torch %s, %.0f s: %s; the fault to the culprit (exact): p90 %s s; a new_group said "
          "not the same on every rank: %d of %d programs%s" % (
              len(rows), torch.__version__, time.time() - t0, ", ".join("%s %d" % kv for kv in sorted(by.items())),
              "%.1f" % p90 if p90 is not None else "-", said, len(rows),
              "" if a.kind in _MAKING else " (a false alarm each: these programs make their groups alike)"))
    strict = _run.strict_counts(rows)
    if strict:
        print(_run.strict_words(strict))
    out = os.path.join(HERE, "results", "fuzz_real_seed%d%s%s%s_torch%s.json" % (
        a.seed, "_" + a.shape if a.shape else "", "_" + a.kind if a.kind else "", "_two" if a.two else "",
        torch.__version__.split("+")[0]))
    with open(out, "w") as f:
        json.dump({"command": "python benchmarks/fuzz.py --real-only --real %d --seed %d%s%s%s" % (
                       a.real, a.seed, " --shape %s" % a.shape if a.shape else "", " --kind %s" % a.kind if a.kind else "",
                       " --two" if a.two else ""),
                   "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "torch": torch.__version__, "machine": "%s, %d cores" % (platform.machine(), os.cpu_count() or 0),
                   "outcomes": dict(by), "p90_named_s": p90, "said_apart": said, "strict": strict, "rows": rows}, f,
                  indent=1,
                  sort_keys=True)
        f.write("\n")
    print("results: %s" % os.path.relpath(out, ROOT))
    return 1 if by.get("wrong") or (said and a.kind not in _MAKING) else 0


def _rank_words(ranks):
    from c10d_observer.text import rank_list
    return rank_list(ranks)


if __name__ == "__main__":
    sys.exit(main())
