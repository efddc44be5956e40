"""What a node's relay spends reading its ranks' calls between two calls of a group across nodes
(relay_arrivals.NodeWalks, issue 44): 8 ranks, each step a tp all_reduce on the node's own group and a dp
all_reduce across nodes, at STEPS steps a second; every KEEP_EVERY_S (1 s) the relay takes the documents
written since (each holds the last RECENT_PERIODS x PERIOD_S: 5 s, 3 s before 2026-12-03) and walks the dp
calls it keeps (the sample's blocks: block_every at a round of ARRIVALS_EVERY_S, the last ARRIVALS_BLOCKS blocks).  Printed: ms of one core per second of the job
(the relay's keep), and the share's packed bytes with and without the walks; the mean of 20 s of the job after
10 s of warm-up.

    python benchmarks/node_walks.py [--steps 10,100,500]
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from c10d_observer import arrivals, relay_arrivals, wire  # noqa: E402

RANKS = 8
WARM_S, MEASURED_S = 10, 20


def _starts(steps_per_s, seconds, seed=1):
    """{rank: {stream: [[seq, start], ...]}}: each step, 40 % of it computing, a tp call, then a dp call."""
    rng = random.Random(seed)
    step = 1.0 / steps_per_s
    out = {r: {"tp": [], "dp%d" % r: []} for r in range(RANKS)}
    for k in range(int(seconds * steps_per_s)):
        t0 = 1000.0 + k * step
        tp = {r: t0 + 0.4 * step + rng.uniform(0, 0.05 * step) for r in range(RANKS)}
        end = max(tp.values())
        for r in range(RANKS):
            out[r]["tp"].append([k + 1, tp[r]])
            out[r]["dp%d" % r].append([k + 1, end + 0.0001 + rng.uniform(0, 0.01 * step)])
    return out


def measure(steps_per_s):
    total = WARM_S + MEASURED_S
    starts = _starts(steps_per_s, total + 1)
    members = {r: {"tp": list(range(RANKS)), "dp%d" % r: [r, r + RANKS]} for r in range(RANKS)}
    walker = relay_arrivals.NodeWalks()
    every = relay_arrivals.block_every(2.0 * steps_per_s, relay_arrivals.ARRIVALS_EVERY_S)
    spent, share, plain = 0.0, None, None
    span = arrivals.RECENT_PERIODS * arrivals.PERIOD_S  # what each rank's document holds
    for s in range(3, total + 1):
        now = 1000.0 + s
        docs = [{"rank": r, "job_id": "j", "written_at": now, "members": members[r],
                 "whole": {"since": now - span, "until": now},
                 "streams": {st: [p for p in pairs if now - span <= p[1] <= now] for st, pairs in starts[r].items()}}
                for r in range(RANKS)]
        t = time.perf_counter()
        walker.feed(docs)
        cols = {}
        for r in range(RANKS):
            st = "dp%d" % r
            kept = [p for p in starts[r][st] if p[1] <= now and relay_arrivals.sampled(p[0], every)]
            first = ((kept[-1][0] - 1) // every - (relay_arrivals.ARRIVALS_BLOCKS - 1)) * every + 1 if kept else 0
            kept = [p for p in kept if p[0] >= first]
            cols[r] = (kept, walker.column(r, st, kept, range(RANKS)))
        took = time.perf_counter() - t
        if s > WARM_S:
            spent += took
        if s == total:
            sent = [{"rank": r, "streams": {"dp%d" % r: arrivals.columns(kept)}} for r, (kept, _) in cols.items()]
            plain = len(wire.pack({"docs": sent}))
            share = len(wire.pack({"docs": [dict(d, walks={"dp%d" % d["rank"]: cols[d["rank"]][1]}) for d in sent]}))
            known = sum(1 for _, c in cols.values() for x in c.split(",") if x and x != "?")
            walked = sum(len(k) for k, _ in cols.values())
    return {"steps_per_s": steps_per_s, "calls_per_s_per_rank": 2 * steps_per_s, "keep_ms_per_s": round(1e3 * spent / MEASURED_S, 2),
            "share_bytes": share, "share_bytes_without_walks": plain, "walks_known": known, "walks_sent": walked}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="10,100,500")
    a = ap.parse_args()
    for n in [int(x) for x in a.steps.split(",")]:
        print(json.dumps(measure(n)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
