"""What the straggler rule's join costs the watchdog that runs it, per period (arrivals.Stragglers.update): the
node leader joins its node's ranks; the relay's collector joins every node's ranks of the groups that span nodes,
so at 2,048 nodes it joins 16,384 ranks' starts.  Synthetic arrivals documents: N ranks, a world group with 60
calls a period (30 a second) and a p2p stream per rank, three periods, rank N-1 10 ms late; timed with the rule
as it is, without reading whose lateness a late arrival is (``Timelines.own`` off), and without the ranks'
timelines at all (the join before issue 42's slow rank).  Then the join as the watchdog runs it, on a thread of
its own (watchdog_io.Arrivals), beside a loop that polls every 10 ms as the watchdog's does: the longest wait of
a poll while the join runs (the join on the loop itself made a poll wait the whole join).  ``--memory``: what
the join holds after PERIODS_MEMORY periods (tracemalloc), within timelines.Timelines.BUDGET and without it.

    python benchmarks/straggler_join.py [--ranks 1024 4096 16384]    # results/straggler_join.json
    python benchmarks/straggler_join.py --memory --ranks 1024 4096   # results/straggler_join_memory.json
    python benchmarks/straggler_join.py --span 2.5    # results/straggler_join_span2.5.json

``--span P``: each period's documents hold the starts of the last P periods, as a watchdog's do
(arrivals.RECENT_PERIODS: 1.5 until cd49184, 2.5 since), so a call comes in more than one document and the join
reads each again; without it, each period's calls once (the documents of this benchmark until 2026-12-03).
"""
import argparse
import os
import select
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from c10d_observer import arrivals as _arrivals  # noqa: E402
import _harness  # noqa: E402  (benchmarks/_harness.py)

CALLS = 60  # a period's calls of the world group
PERIODS = 3
SPAN = None  # --span: the periods a document holds (None: its own period's calls, each once)


def _docs(n, period):
    """Each rank's document of a period: its starts of the world group's calls and of its p2p stream over the
    last ``SPAN`` periods (one: the period's own calls), the last rank 10 ms late.  A call's start is the same in
    every document that holds it: its jitter, 0 to 4 ms, a function of the rank and the seq (random until
    2026-12-03, drawn anew per document)."""
    last = (period + 1) * CALLS
    first = max(1, last - int(round((SPAN or 1) * CALLS)) + 1)
    out = []
    for r in range(n):
        late = 0.01 if r == n - 1 else 0.0
        streams = {"0": [[s, 1000.0 + (s - 1) * 0.05 + ((r * 7919 + s * 104729) % 4001) * 1e-6 + late]
                         for s in range(first, last + 1)],
                   "0:p2p:%d->%d" % (r, (r + 1) % n): [[s, 1000.0 + (s - 1) * 0.05 + 0.02]
                                                       for s in range(first, last + 1)]}
        out.append({"rank": r, "host": "h0", "streams": streams})
    return out


def _timed(n, mode):
    own, add = _arrivals.Timelines.own, _arrivals.Timelines.add
    try:
        if mode in ("no attribution", "no timelines"):
            _arrivals.Timelines.own = lambda self, *a, **k: None
        if mode == "no timelines":
            _arrivals.Timelines.add = lambda self, *a, **k: None
        s, out = _arrivals.Stragglers(), []
        for p in range(PERIODS):
            docs = _docs(n, p)
            t = time.time()
            s.update(docs, {"0": list(range(n))}, 2000.0 + p, "h0")
            out.append(round(time.time() - t, 3))
        return out
    finally:
        _arrivals.Timelines.own, _arrivals.Timelines.add = own, add


def _beside_the_loop(n, poll_s=0.01):
    """(seconds the join took on its thread, the longest a poll waited past its time, polls) for one period's
    join of ``n`` ranks while this thread polls every ``poll_s`` (a poll: a select's timeout, then a little
    work, as the watchdog's loop)."""
    s = _arrivals.Stragglers()
    s.update(_docs(n, 0), {"0": list(range(n))}, 2000.0, "h0")  # its first period: calls wait for the next
    docs = _docs(n, 1)
    took = []

    def join():
        t = time.time()
        s.update(docs, {"0": list(range(n))}, 2001.0, "h0")
        took.append(time.time() - t)

    th = threading.Thread(target=join)
    th.start()
    late, polls = 0.0, 0
    while th.is_alive():
        due = time.time() + poll_s
        select.select([], [], [], poll_s)
        late = max(late, time.time() - due)
        sum(range(2000))  # a poll's work (~30 us here)
        polls += 1
    th.join()
    return round(took[0], 3), round(late, 4), polls


PERIODS_MEMORY = 20  # 1,200 calls of the world group and as many p2p calls a rank: past what a rank keeps


def _held(n, budget=None):
    """MB the join (an arrivals.Stragglers) holds after PERIODS_MEMORY periods of ``n`` ranks, and the calls
    kept per rank; ``budget``: Timelines.BUDGET, None as it is."""
    import tracemalloc
    s = _arrivals.Stragglers()
    if budget is not None:
        s.timelines.BUDGET = budget
    tracemalloc.start()
    try:
        for p in range(PERIODS_MEMORY):
            s.update(_docs(n, p), {"0": list(range(n))}, 2000.0 + p, "h0")
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return round(held / 2.0 ** 20, 1), max(len(v) for v in s.timelines.of_rank.values())


def _memory(ranks):
    rows = []
    for n in ranks:
        mb, kept = _held(n)
        mb_all, kept_all = _held(n, 10 ** 12)
        rows.append({"ranks": n, "held_mb": mb, "calls_kept_per_rank": kept, "unbounded_held_mb": mb_all,
                     "unbounded_calls_kept_per_rank": kept_all})
        print("%6d ranks, %d periods: the join holds %.0f MB (%d calls a rank at most), %.0f MB without "
              "Timelines.BUDGET (%d)" % (n, PERIODS_MEMORY, mb, kept, mb_all, kept_all))
        sys.stdout.flush()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--memory", action="store_true", help="what the join holds (tracemalloc), not its time")
    ap.add_argument("--span", type=float, help="each period's documents hold the starts of this many periods "
                    "(arrivals.RECENT_PERIODS); results/straggler_join_span<P>.json")
    a = ap.parse_args(argv)
    global SPAN
    if a.span is not None and not a.span >= 1:
        ap.error("--span: a number of periods, 1 or more (got %s)" % a.span)
    SPAN = a.span
    if a.memory:
        rows = _memory(a.ranks)
        _harness.write_json(os.path.join(HERE, "results", "straggler_join_memory%s.json" % _suffix()), {
            "command": "python benchmarks/straggler_join.py --memory --ranks %s%s" % (
                " ".join(map(str, a.ranks)), _span_arg()),
            "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": _harness.machine(), "periods": PERIODS_MEMORY, "rows": rows})
        return 0
    rows = []
    for n in a.ranks:
        row = {"ranks": n}
        for mode in ("as it is", "no attribution", "no timelines"):
            row[mode] = _timed(n, mode)
        took, late, polls = _beside_the_loop(n)
        row["beside the loop"] = {"join_s": took, "longest_poll_wait_s": late, "polls": polls}
        rows.append(row)
        print("%6d ranks: seconds per period, as it is %s; without the attribution %s; without timelines %s; "
              "on a thread %.2f s, beside a loop polling every 10 ms (%d polls), a poll waited %.1f ms at most" % (
                  n, row["as it is"], row["no attribution"], row["no timelines"], took, polls, late * 1e3))
        sys.stdout.flush()
    commit = _commit()
    _harness.write_json(os.path.join(HERE, "results", "straggler_join%s.json" % _suffix()), {
        "command": "python benchmarks/straggler_join.py --ranks %s%s" % (" ".join(map(str, a.ranks)), _span_arg()),
        "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": _harness.machine(), "loadavg": _harness.loadavg(), "calls_per_period": CALLS,
        "calls_per_document": CALLS if SPAN is None else int(round(SPAN * CALLS)), "rows": rows})
    return 0


def _span_arg():
    return "" if SPAN is None else " --span %g" % SPAN


def _suffix():
    """The results file's name's end: "_span2.5" with --span 2.5, else nothing."""
    return "" if SPAN is None else "_span%g" % SPAN


def _commit():
    try:
        return subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                       universal_newlines=True).strip()
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
