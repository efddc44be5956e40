"""One node's share of starts at 2,048 nodes (issue 44): 8 ranks, 2 streams that span nodes, the last 6 blocks
of 64 starts each (relay_arrivals: a block every 512 calls at 20 calls a second), 6,144 starts.  What the
node's relay spends to send it (packed for the store), what the collector's relay spends to take it in
(unpacked, written to its dump_dir as arrivals-node-<key>.json: 50 a second over its round), and what the
collector's watchdog spends to read it back for its join; the best of 3 x 50.  The tree measured is the one
given (default: this checkout), so an older commit's checkout measures the format it had:

    python benchmarks/relay_share.py [TREE]
"""
import json
import os
import random
import sys
import tempfile
import time

TREE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TREE)
from c10d_observer import arrivals, dumpdir, watchdog_io, wire  # noqa: E402

N = 50
COLUMNS = hasattr(arrivals, "columns")  # the format since the share went as columns; pairs of floats before


def _docs(seed=7):
    rng = random.Random(seed)
    seqs = [q for k in range(6) for q in range(k * 512 + 1, k * 512 + 65)]
    return [{"format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 1000 + r, "job_id": "j",
             "written_at": 1795990000.0, "host": "node0001",
             "members": {"0": {"runs": [[0, 16384, 1]]}, "dp%d" % (r % 8): {"runs": [[r % 8, 2048, 8]]}},
             "streams": {st: [[q, round(1795990000.0 + q / 20.0 + rng.uniform(0, 0.004), 6)] for q in seqs]
                         for st in ("0", "dp%d" % (r % 8))}} for r in range(8, 16)]


def main():
    docs = _docs()
    dd = dumpdir.DumpDir(tempfile.mkdtemp(prefix="c10d-relay-share-"))

    def send():  # relay_arrivals._share_arrivals: the node's kept starts, packed for its key
        out = [dict(d, streams={st: arrivals.columns(p) for st, p in d["streams"].items()}) for d in docs] \
            if COLUMNS else docs
        return wire.pack({"written_at": 1.0, "docs": out})

    def take(v):  # relay_arrivals.collect_arrivals and _bring: one node's key, into the collector's dump_dir
        dd.write_json(dumpdir.ARRIVALS_NODE % "8", {"format": "c10d_observer.arrivals_node", "job_id": "j",
                                                    "written_at": 1.0, "from_rank": "8",
                                                    "docs": wire.unpack(v)["docs"]})

    def read():  # the collector's watchdog, for its join
        return watchdog_io.read_relayed_arrivals(dd, "j", 0)

    v = send()
    take(v)
    assert read() == [dict(d, relayed=True) for d in docs], "the starts came back other than they went"

    def timed(f, *a):
        best = None
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(N):
                f(*a)
            ms = (time.perf_counter() - t) / N * 1e3
            best = ms if best is None else min(best, ms)
        return round(best, 2)
    print(json.dumps({"tree": TREE, "columns": COLUMNS, "starts": sum(len(p) for d in docs for p in d["streams"].values()),
                      "packed_bytes": len(v), "send_ms": timed(send), "take_ms": timed(take, v),
                      "watchdog_read_ms": timed(read)}))


if __name__ == "__main__":
    main()
