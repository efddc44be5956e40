"""The diagnosis fuzzer, first slice (issue 42): random programs, one fault each, gloo's matching simulated, the
documents the watchdogs would write, judged by the real verdict engine (``c10d_observer.verdict.analyze``).

    python tests/fuzz/run.py --cases 2000 --seed 1      # the table, and every WRONG case with its seed
    python tests/fuzz/run.py --replay 1000042           # one case: the program, the fault, the hang, the verdict

Each case is classified by the verdict's ``culprit_ranks`` against the culprit the fault put there: exact
(the same set), undecided (none named: "cannot decide"; split by whether the case is flagged undecidable,
programs.undecidable), partial (some of the expected, none else) or WRONG (a rank outside the expected set:
never acceptable).  ``--two``: two faults on two ranks (programs.make_case2); "mimic" counts a rank outside
the two named where both did the same to the same call (the documents of one fault on the call's other rank).  Every program is also run without its fault: it must end with every rank done, and its
documents must give no verdict.  The verdict is handed each document typed, as it reads the JSON the watchdog
writes (simulate.documents(typed=True): the RankDoc that documents.RankDoc.from_json makes of it, a test holds
them equal), not the JSON itself: a case read each JSON only to analyze it.  Python 3.8.
"""
import argparse
import collections
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (ROOT, os.path.dirname(HERE)):  # the package from this checkout; tests/ (for ``fuzz``)
    if _p not in sys.path:
        sys.path.insert(0, _p)

from c10d_observer import verdict as _verdict  # noqa: E402
from fuzz import programs, simulate, stragglers  # noqa: E402

OUTCOMES = ("exact", "undecided_ok", "undecided", "partial", "mimic", "wrong")
HEADS = {"exact": "exact", "undecided_ok": "undec(flag)", "undecided": "undecided", "partial": "partial",
         "mimic": "mimic", "wrong": "WRONG"}

Result = collections.namedtuple("Result", "case mode outcome culprits summary healthy_ok healthy_why hung reason")

# what the verdict says where it names nobody (its ``undecided`` lines), in a word
REASONS = (("none has a majority", "desync, no majority"),
           ("do not show who broke the order", "ordering cycle"),
           ("is not known", "root not known"),
           ("sent nothing", "silent rank"),
           ("every rank", "all arrived"),
           ("completed it and", "some finished"))


def reason(v):
    """Why a verdict named nobody, in a word (REASONS), from its first ``undecided`` line."""
    for line in v.undecided or ():
        for key, word in REASONS:
            if key in line:
                return word
    return "other" if v.undecided else "no undecided line"


def case_seed(seed, i):
    return seed * 1000000 + i


# ``dump``: a list to append each case's outcome to (its seed, outcome, culprits, categories, summary, why
# undecided, the healthy check, and the SHA-1 of each verdict's JSON): benchmarks/fuzz.py --dump, to hold a
# change of the simulator or the engine to the same outcomes case for case; None (the default) costs nothing
dump = None


def _digest(v):
    import hashlib
    import json
    return hashlib.sha1(json.dumps(v.to_json(), sort_keys=True).encode()).hexdigest()


def healthy_check(sim):
    """'' where the healthy run ended with every rank done and its documents give no verdict, else why not."""
    if sim.hung:
        return "the healthy program hangs: %s" % ", ".join(
            "rank %d %s%s" % (r, s, " in %s #%d" % sim.blocked[r] if sim.blocked[r] else "")
            for r, s in enumerate(sim.state) if s != "done")
    v = _verdict.analyze(simulate.healthy_docs(sim, typed=True))
    if dump is not None:
        dump.append(("healthy", _digest(v)))
    if v.hangs or v.culprit_ranks:
        return "the healthy program's documents give a verdict: %s" % v.summary
    return ""


def judge(seed, check_healthy=True, skew=False, two=False, source="exact", shape=None, kind=None):
    case = programs.make_case2(seed, shape=shape) if two else programs.make_case(seed, shape=shape, kind=kind)
    mode = simulate.mode_of(seed)
    healthy, faulty, docs = simulate.run_case(case, mode, skew=skew, source=source, healthy=check_healthy,
                                              typed=True)  # the documents as the verdict reads their JSON
    why = healthy_check(healthy) if healthy is not None else ""
    if case.fault is None:
        return Result(case, mode, None, [], "", not why, why, False, None)
    if docs is None:
        return Result(case, mode, "nohang", [], "the fault made no hang", not why, why, False, None)
    if not two:
        case = simulate.flag_at_hang(case, faulty, source)
    v = _verdict.analyze(docs)
    outcome = simulate.classify(case, v.culprit_ranks)
    if outcome == "wrong" and two and (case.undecidable or _mimicked(case, v.culprit_ranks)):
        outcome = "mimic"  # two faults that leave one fault's documents on another rank: that rank is named
    if dump is not None:
        dump.append(("faulty", [str(h.category) for h in v.hangs], _digest(v)))
    return Result(case, mode, outcome, list(v.culprit_ranks), v.summary, not why, why, True,
                  reason(v) if outcome in ("undecided", "undecided_ok") else None)


def _mimicked(case, named):
    """Whether each rank named outside the two faulted ones shares a group with both, of which they are half or
    more: whatever they did alike there, the documents are those of one fault on the others of that group."""
    extra = set(named) - case.expected
    return bool(extra) and all(
        any(x in g.ranks and case.expected <= set(g.ranks) and 2 * len(case.expected) >= len(g.ranks)
            for g in case.program.groups.values()) for x in extra)


def step_bucket(step, program):
    if step <= 2:
        return "steps 0-2"  # the prologue (-1) too
    return "step 3+"


def table(title, rows):
    """rows: {label: Counter of outcomes} -> text."""
    width = max([len(title)] + [len(k) for k in rows])
    out = ["%-*s %6s %s" % (width, title, "cases", " ".join("%11s" % HEADS[o] for o in OUTCOMES))]
    total = collections.Counter()
    for label in sorted(rows):
        c = rows[label]
        total.update(c)
        n = sum(c.values())
        out.append("%-*s %6d %s" % (width, label, n, " ".join(
            "%5d %4.0f%%" % (c[o], 100.0 * c[o] / n if n else 0) for o in OUTCOMES)))
    n = sum(total.values())
    out.append("%-*s %6d %s" % (width, "all", n, " ".join(
        "%5d %4.0f%%" % (total[o], 100.0 * total[o] / n if n else 0) for o in OUTCOMES)))
    return "\n".join(out)


def built_twins(res, source="exact"):
    """The kinds of the twins that, built for a judged case whatever its flags say, leave its documents
    (``twins.built_twins``): [] where none of them does."""
    from fuzz import twins  # twins builds on simulate
    _, faulty, _ = simulate.run_case(res.case, res.mode, source=source, healthy=False)
    return twins.built_twins(res.case, faulty, source)


def strict_table(rows):
    """rows: {step bucket: Counter of (outcome, whether a twin leaves its documents: one built, or the flags')}
    -> text: the cases no twin explains (exact, undecided, partial, wrong; exact of them), and those one explains
    (named: a bet; undecided)."""
    out = ["%-10s %6s  %s  | %s" % ("fault step", "cases", "no built twin: exact undecided partial wrong (exact %)",
                                   "a built twin: named (a bet) undecided")]
    total = collections.Counter()
    for label in sorted(rows) + ["all"]:
        c = rows[label] if label != "all" else total
        if label != "all":
            total.update(c)
        plain = {o: c[(o, False)] for o in OUTCOMES}
        undec = plain["undecided"] + plain["undecided_ok"]
        n_plain = plain["exact"] + undec + plain["partial"] + plain["wrong"] + plain["mimic"]
        bets = sum(c[(o, True)] for o in ("exact", "partial", "wrong", "mimic"))
        out.append("%-10s %6d  %14d %9d %7d %5d (%s)  | %12d %9d" % (
            label, sum(c.values()), plain["exact"], undec, plain["partial"], plain["wrong"],
            "%.2f %%" % (100.0 * plain["exact"] / n_plain) if n_plain else "-", bets,
            c[("undecided", True)] + c[("undecided_ok", True)]))
    return "\n".join(out)


HUNG = ("exact", "undecided", "undecided_ok", "partial", "wrong", "missed")  # a real program's outcomes where it hung


def strict_counts(rows):
    """Of real programs' rows that hung and carry their twins (real.py: ``twins``, every twin built,
    twins.built_twins), {"no twin": {outcome: n}, "a twin": {outcome: n}}: a twin built, or the flags' (``undecidable``:
    the flags' twins are built for seeds of each kind by tests/unit/test_fuzz_twins.py); {} where no row carries
    them."""
    out = {}
    for r in rows:
        if r.get("twins") is None or r["outcome"] not in HUNG:
            continue
        side = out.setdefault("a twin" if r["twins"] or r.get("undecidable") else "no twin", {})
        side[r["outcome"]] = side.get(r["outcome"], 0) + 1
    return out


def strict_words(strict):
    """A line of ``strict_counts``: the programs no twin explains, exact of them; the verdict's bets."""
    plain, twin = strict.get("no twin", {}), strict.get("a twin", {})
    n = sum(plain.values())
    undecided = plain.get("undecided", 0) + plain.get("undecided_ok", 0)
    return ("strict (every twin built, whatever the flags say): %d hung with no twin: %d exact (%s), %d "
            "undecided, %d partial, %d wrong, %d missed; %d with a twin (built, or the flags'): %d named (a bet: "
            "the twin's culprit is another rank), %d undecided" % (
                n, plain.get("exact", 0), "%.1f %%" % (100.0 * plain.get("exact", 0) / n) if n else "-", undecided,
                plain.get("partial", 0), plain.get("wrong", 0), plain.get("missed", 0), sum(twin.values()),
                sum(twin.get(o, 0) for o in ("exact", "partial", "wrong")),
                twin.get("undecided", 0) + twin.get("undecided_ok", 0)))


def run(cases, seed, show=(), out=sys.stdout, skew=False, two=False, source="exact", shape=None, kind=None,
        healthy_every=1, twins=False):
    # a case makes some 100,000 objects and frees them (no cycles to speak of): the collector's default
    # thresholds have it scan the young ones every 700 allocations (3,000 cases of seed 7: 250 -> 285 cases/s);
    # benchmarks/fuzz.py runs this too
    before = gc.get_threshold()
    gc.set_threshold(100000, 10, 10)
    try:
        return _run(cases, seed, show, out, skew, two, source, shape, kind, healthy_every, twins)
    finally:
        gc.set_threshold(*before)


def _run(cases, seed, show, out, skew, two, source, shape, kind, healthy_every, twins=False):
    """``twins``: also build every twin of each hung case (``built_twins``; some 20 runs a case more) and give
    the strict table (``strict_table``)."""
    if twins and (two or source == "nccl-sizes"):
        raise ValueError("twins=True: one fault a case, a source model of exact, recorder or nccl")
    strict = collections.defaultdict(collections.Counter)
    t = time.time()
    by_kind, by_shape, by_step = (collections.defaultdict(collections.Counter) for _ in range(3))
    reasons = collections.defaultdict(collections.Counter)  # undecided, not flagged: why, by fault kind
    wrong, unhealthy, shown, nohang, nofault, betting = [], [], [], [], 0, []
    for i in range(cases):
        res = judge(case_seed(seed, i), check_healthy=i % healthy_every == 0, skew=skew, two=two, source=source,
                    shape=shape, kind=kind)
        if dump is not None:
            dump.append((res.case.seed, res.outcome, res.culprits, res.summary, res.reason, res.healthy_why))
        if not res.healthy_ok:
            unhealthy.append(res)
        if res.outcome is None:
            nofault += 1
            continue
        if res.outcome == "nohang":
            nohang.append(res)
            continue
        f = res.case.fault
        by_kind[f.kind][res.outcome] += 1
        by_shape[res.case.program.shape][res.outcome] += 1
        by_step[step_bucket(f.step, res.case.program)][res.outcome] += 1
        if res.outcome == "undecided":
            reasons[res.reason][f.kind] += 1
        if twins:
            twin = bool(res.case.undecidable) or bool(built_twins(res, source))  # the flags' twin, or one built
            strict[step_bucket(f.step, res.case.program)][(res.outcome, twin)] += 1
        if res.outcome == "wrong":
            wrong.append(res)
        if res.outcome == "exact" and res.case.undecidable and not two:
            betting.append(res)  # a twin with another rank at fault leaves these documents: a bet, not a fact
        if res.outcome in show:
            _line(res, shown.append)  # its text, not the case (thousands of programs kept make the GC slow)
    dt = time.time() - t
    w = out.write
    w("%d cases (seed %d%s%s%s%s, source model %s) in %.1f s (%.0f cases/s, %s)\n\n" % (
        cases, seed, ", clocks skewed" if skew else "", ", two faults each" if two else "",
        ", shape %s" % shape if shape else "", ", fault %s" % kind if kind else "", source, dt,
        cases / dt if dt else 0, "each program's healthy run and its verdict included" if healthy_every == 1 else
        "a healthy run and its verdict every %d cases" % healthy_every))
    w(table("fault kind", by_kind) + "\n\n")
    w(table("shape", by_shape) + "\n\n")
    w(table("fault step", by_step) + "\n\n")
    if reasons:
        kinds = [k for k in programs.FAULT_KINDS + programs.EXTRA_KINDS if any(c[k] for c in reasons.values())]
        width = max(len(k) for k in reasons)
        w("undecided, not flagged, by what the verdict says (cases per fault kind):\n")
        w("  %-*s %s\n" % (width, "", " ".join("%13s" % k for k in kinds)))
        for key in sorted(reasons, key=lambda k: -sum(reasons[k].values())):
            w("  %-*s %s\n" % (width, key, " ".join("%13d" % reasons[key][k] for k in kinds)))
        w("\n")
    checked = len(range(0, cases, healthy_every))
    w("healthy programs: %d run, %d ended with every rank done and no verdict%s\n" % (
        checked, checked - len(unhealthy), "; %d programs had no call%s (no fault)" % (
            nofault, " the fault %s applies to" % kind if kind else "") if nofault else ""))
    for res in unhealthy:
        w("  UNHEALTHY seed %d: %s\n" % (res.case.seed, res.healthy_why))
    if two or kind == "swap":  # two faults can cancel (a send skipped, its recv skipped); a swap between groups
        # whose other ranks do not wait on each other goes through: no hang, no error
        w("  %d cases of %s made no hang\n" % (len(nohang), "two faults" if two else "a swap"))
        nohang = []
    for res in nohang:
        w("  NO HANG seed %d: the fault made no hang (%s)\n" % (res.case.seed, res.case.fault.kind))
    w("\nWRONG culprits: %d\n" % len(wrong))
    for res in wrong:
        _line(res, w)
    w("named in a case flagged undecidable (the flag's twin would make it a wrong culprit): %d\n" % len(betting))
    for res in betting:
        _line(res, w)
    if twins:
        w("\nevery twin built, and the flags' (the strict test: a case one explains cannot be decided from its "
          "documents):\n"
          + strict_table(strict) + "\n")
    if shown:
        w("\ncases shown (%s): %d\n" % (", ".join(show), len(shown)))
        for text in shown:
            w(text)
    return {"wrong": wrong, "unhealthy": unhealthy, "nohang": nohang, "by_kind": by_kind, "by_shape": by_shape,
            "by_step": by_step, "reasons": reasons, "betting": betting, "strict": strict}


def _line(res, w):
    f = res.case.fault
    w("  seed %d (--replay %d): %s on rank %d at step %d, shape %s, world %d, %s; named %s, expected %s\n    %s\n" % (
        res.case.seed, res.case.seed, f.kind, f.rank, f.step, res.case.program.shape, res.case.program.world,
        res.mode, res.culprits, sorted(res.case.expected), res.summary))


def replay(seed, out=sys.stdout, skew=False, two=False, source="exact", shape=None, kind=None):
    w = out.write
    case = programs.make_case2(seed, shape=shape) if two else programs.make_case(seed, shape=shape, kind=kind)
    mode = simulate.mode_of(seed)
    w(programs.describe(case) + "\n")
    healthy, faulty, docs = simulate.run_case(case, mode, skew=skew, source=source)
    w("healthy run: %s\n" % (healthy_check(healthy) or "every rank done, no verdict"))
    if faulty is None:
        return
    w("faulty run (gather %s):\n" % mode)
    for r, s in enumerate(faulty.state):
        where = ""
        if s == "blocked":
            stream, seq = faulty.blocked[r]
            h = faulty.hist[r][stream][-1]
            where = " in %s #%d on stream %s (%s)" % (h[1], seq, stream, h[2])
        counts = ", ".join("%s: %d" % (k, v) for k, v in sorted(faulty.started[r].items()))
        w("  rank %d: %s%s; started per stream: %s\n" % (r, s, where, counts))
    if docs is None:
        w("no hang\n")
        return
    if not two:
        flagged = simulate.flag_at_hang(case, faulty, source)
        if flagged.why_undecidable != case.why_undecidable:
            w("at the hang: %s\n" % (("undecidable: %s" % flagged.why_undecidable) if flagged.undecidable else
                                      "no desync at the place (a shift): not flagged"))
        case = flagged
    v = _verdict.analyze(docs)
    w("culprits: %s, expected %s: %s\n\n" % (v.culprit_ranks, sorted(case.expected),
                                             simulate.classify(case, v.culprit_ranks)))
    w(_verdict.format_text(v.to_json()) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replay", type=int, help="one case, by the seed the table lists")
    ap.add_argument("--skew", action="store_true", help="each rank's clock off by up to 2 h (ranks on other "
                                                         "nodes): the verdict never compares two ranks' clocks")
    ap.add_argument("--two", action="store_true", help="two faults at once, on two ranks (programs.make_case2)")
    ap.add_argument("--source", default="exact", choices=simulate.SOURCES,
                    help="what the documents say of the calls: exact (patch, hooks), recorder (torch's gloo "
                         "recorder, the default source on 2.8+) or nccl (torch's NCCL recorder, each rank's "
                         "Python ahead of its GPU: simulate.py)")
    ap.add_argument("--shape", choices=programs.SHAPES + programs.EXTRA_SHAPES,
                    help="every program of this shape (mesh3d: pp x dp x tp, 8-64 ranks, drawn only where asked)")
    ap.add_argument("--kind", choices=programs.FAULT_KINDS + programs.EXTRA_KINDS + ("slow",),
                    help="every case's fault of this kind (swap: two collectives of two groups issued the other way "
                         "round, drawn only where asked; slow: one slow rank, no hang, judged by the straggler "
                         "rule: stragglers.py)")
    ap.add_argument("--nodes", type=int, default=1, help="--kind slow: the ranks on this many nodes, each "
                                                          "node's clock off by up to 1 s")
    ap.add_argument("--periods", action="store_true", help="--kind slow: the documents written and joined every "
                                                           "2 s as the watchdogs do (stragglers.periodic), not "
                                                           "all at once at the end")
    ap.add_argument("--healthy-every", type=int, default=1, metavar="N",
                    help="run and judge the healthy program of every N-th case only (1: each; it checks the "
                         "generator, and costs more than the faulty run)")
    ap.add_argument("--show", default="", help="also list the cases of these outcomes (comma separated: "
                                                "undecided, undecided_ok, partial, exact)")
    ap.add_argument("--twins", action="store_true", help="also build every twin of each hung case and give the "
                                                         "strict table (built_twins)")
    a = ap.parse_args(argv)
    if a.kind == "slow":
        got = stragglers.run(a.cases, a.seed, shape=a.shape, nodes=max(1, a.nodes),
                             healthy_every=max(1, a.healthy_every), periods=a.periods)
        return 1 if got["wrong"] or got["false"] else 0
    if a.replay is not None:
        replay(a.replay, skew=a.skew, two=a.two, source=a.source, shape=a.shape, kind=a.kind)
        return 0
    got = run(a.cases, a.seed, [s for s in a.show.split(",") if s], skew=a.skew, two=a.two, source=a.source,
              shape=a.shape, kind=a.kind, healthy_every=max(1, a.healthy_every), twins=a.twins)
    return 1 if got["wrong"] or got["unhealthy"] or got["nohang"] else 0


if __name__ == "__main__":
    sys.exit(main())
