"""The store's load while nothing hangs: what the nodes' relays cost the job's c10d store, 8 to 2,048 nodes.

Issue 44: the job's own rendezvous and barriers share the store torchrun's agent serves, so the observer's
traffic there must stay small however many nodes the job has.  This measures it in real time (not the
simulated time of scale.py): a real ``TCPStore`` server in a process of its own, and per node one real
``StoreRelay`` (its node's acting relay, rank 8 x node) with a ``dump_dir`` of its own and a store client
of its own over TCP, stepped at its period with a random phase by one thread of this process, as its
``_run`` loop steps it while no gather is on.  What the relay reads in ``dump_dir`` stands in for the rank
side: each node's eight ranks' arrivals documents (``arrivals-rank<R>-pid<P>.json``, 60 starts on each of
two groups that span nodes, as a step of 50 ms gives over the 3 s a document covers), written once with a
date ahead (the relay sends them each period whatever their date; a watchdog rewrites them every 2 s), and
the collector node's join (``stragglers.json``), rewritten every 2 s as its watchdog does.

Measured per size, over ``--seconds`` after a warm-up of a few periods (leaders elected, store clients
open), a whole number of rounds of the arrivals exchange: operations and bytes a second through the store
(every client counted), the most operations any one node made a second (over the run, and in any one
second), the store server's CPU (user + system, from /proc) as a share of a core, and how late
this harness stepped the relays and the share of the time it spent in their steps (its own load: a late
step is taken at once and the next one stays due at its period, so the count holds while that share is under
1; the collector's step, which reads every node's key, makes the lag).

    python benchmarks/store_load.py                                 # 8, 64, 256, 1,024 and 2,048 nodes
    python benchmarks/store_load.py --nodes 2048 --seconds 30 --poll 1.0

Not in this: a gather (scale.py measures its operations and the server's CPU), the ranks' own use of the
store (rendezvous, barriers), a store server on another machine than the clients.
"""
import argparse
import heapq
import json
import math
import os
import platform
import random
import resource
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, today, write_json  # noqa: E402
from scale import CountingStore, Counter, server_connections, server_cpu_s, start_server  # noqa: E402
from c10d_observer import arrivals as _arrivals  # noqa: E402
from c10d_observer import dumpdir as _dumpdir  # noqa: E402
from c10d_observer import relay as _relay  # noqa: E402
from c10d_observer import relay_arrivals as _ra  # noqa: E402

JOB = "store-load-bench"
PER_NODE = 8
STARTS = 60  # a stream's starts in one arrivals document
JOIN_EVERY_S = 2.0  # arrivals.PERIOD_S: how often the collector's watchdog rewrites its join


def _arrivals_doc(rank, node, nodes, now):
    """Rank ``rank``'s arrivals document: its starts on the world group and on its data-parallel group
    (the ranks of its local index on every node), both spanning nodes, and on its node's group."""
    local = rank % PER_NODE
    world = list(range(nodes * PER_NODE))
    dp = [n * PER_NODE + local for n in range(nodes)]
    own = list(range(node * PER_NODE, (node + 1) * PER_NODE))
    t0 = now - 3.0
    streams = {s: [[q, round(t0 + 0.05 * i + 1e-4 * (rank % 7), 6)] for i, q in enumerate(range(1000, 1000 + STARTS))]
               for s in ("0", "dp%d" % local, "node%d" % node)}
    return {"format": "c10d_observer.arrivals", "version": 2, "rank": rank, "pid": 5000000 + rank, "job_id": JOB,
            "written_at": now + 3600.0,
            "members": _arrivals.members_json({"0": world, "dp%d" % local: dp, "node%d" % node: own}),
            "host": "node%04d" % node, "streams": streams}


_SAMPLE = {}  # (block_every, last call) -> {rank % 7: {seq: start}}: one per state of the sample, every node's


def _steady_keep(relay, docs, rate, since):
    """A stand-in for ``relay.keep_arrivals`` once the job has run a while at ``rate`` calls a second on each
    stream (``--rate``): it keeps, for each of the node's ranks (``docs``: their documents), what the real one
    keeps then: of each stream that spans nodes, the blocks of the sample (relay_arrivals.sampled, block_every)
    among the calls up to the one the clock has reached, the last ARRIVALS_BLOCKS of them (the last one
    partly).  The documents themselves are not rewritten (16,384 of them every 2 s are more than this harness's
    one thread writes), so the real one would keep only the sample's seqs among their fixed 60 starts."""
    here = {d["rank"] for d in docs}
    spanning = {d["rank"]: [st for st in d["streams"] if _arrivals.spans(d["members"].get(st), here)] for d in docs}

    def keep(now, round_s):
        n = _ra.block_every(rate, round_s)
        top = 100000 + int((now - since) * rate)  # the last call issued (its seq)
        last = (top - 1) // n
        key = (n, top if (top - 1) % n < _ra.ARRIVALS_BLOCK else last * n + _ra.ARRIVALS_BLOCK)
        if relay.__dict__.get("_steady") == key:
            return  # nothing new in the sample since
        relay._steady = key
        got = _SAMPLE.get(key)
        if got is None:
            seqs = [q for k in range(max(0, last - _ra.ARRIVALS_BLOCKS + 1), last + 1)
                    for q in range(k * n + 1, min(k * n + _ra.ARRIVALS_BLOCK, top) + 1)]
            got = _SAMPLE[key] = {j: {q: round(since + (q - 100000) / rate + 1e-4 * j, 6) for q in seqs}
                                  for j in range(7)}
            if len(_SAMPLE) > 64:
                del _SAMPLE[next(iter(_SAMPLE))]
        relay._kept = {d["rank"]: {"doc": dict(d, written_at=now),
                                   "streams": {st: got[d["rank"] % 7] for st in spanning[d["rank"]]},
                                   "rooted": {}} for d in docs}
    return keep


def _join_doc(now, nodes):
    return {"format": "c10d_observer.stragglers", "version": 1, "written_at": now,
            "groups": [{"stream": "dp%d" % i, "ranks": [n * PER_NODE + i for n in range(min(nodes, 64))],
                        "calls": 1000, "last_share": {}, "straggler": None} for i in range(PER_NODE)]}


class _Store(CountingStore):
    """A node's store client, counting its operations per whole second too (its peak: a burst of reads)."""

    def _n(self, *parts):
        CountingStore._n(self, *parts)
        sec = int(time.monotonic())
        self._c.bins[sec] = self._c.bins.get(sec, 0) + 1


class _Env(object):
    """WORLD_SIZE and LOCAL_WORLD_SIZE as torchrun sets them for the job (relay.nodes() reads them)."""

    def __init__(self, nodes):
        self.new = {"WORLD_SIZE": str(nodes * PER_NODE), "LOCAL_WORLD_SIZE": str(PER_NODE)}

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.new}
        os.environ.update(self.new)

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(nodes, poll=1.0, seconds=20.0, seed=0, rate=None):
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="c10d-store-load-")
    import torch.distributed as dist
    import datetime
    server, port = start_server()
    counters = []
    relays = []
    try:
        with _Env(nodes):
            now = time.time()
            for node in range(nodes):
                d = os.path.join(root, "node%04d" % node)
                os.makedirs(d)
                dd = _dumpdir.DumpDir(d)
                docs = [_arrivals_doc(r, node, nodes, now) for r in range(node * PER_NODE, (node + 1) * PER_NODE)]
                for doc in docs:
                    dd.write_json(_dumpdir.arrivals_name(doc["rank"], doc["pid"]), doc)
                c = Counter()
                c.bins = {}
                counters.append(c)

                def factory(c=c):
                    return _Store(dist.TCPStore("127.0.0.1", port, 1, False,
                                                       datetime.timedelta(seconds=60)), c)
                relay = _relay.StoreRelay(d, node * PER_NODE, JOB, poll, 10.0, factory)
                relay.started_at -= 3 * poll  # it has beaten long enough to lead from its first step
                if rate:
                    relay.keep_arrivals = _steady_keep(relay, docs, rate, now - 3600.0)
                relays.append(relay)
            # the first step of each: its election, its store client (connects are start-up, not load)
            for relay in relays:
                relay.step()
            heap = [(time.monotonic() + rng.random() * poll, i) for i in range(nodes)]
            heapq.heapify(heap)
            collector = None
            lags = []
            busy = [0.0]
            next_join = 0.0

            def turn(until, keep):
                nonlocal collector, next_join
                while True:
                    t, i = heap[0]
                    now_m = time.monotonic()
                    if t > until:
                        return
                    if t > now_m:
                        time.sleep(min(t - now_m, 0.05))
                        continue
                    heapq.heapreplace(heap, (t + poll, i))
                    if keep:
                        lags.append(now_m - t)
                    if now_m >= next_join:  # the collector's watchdog rewrites its join
                        next_join = now_m + JOIN_EVERY_S
                        if collector is None:
                            collector = next((r for r in relays if r._arrivals_index == 1), None)
                        if collector is not None:
                            collector.dd.write_json(_dumpdir.STRAGGLERS, _join_doc(time.time(), nodes))
                    t_step = time.monotonic()
                    relays[i].step()
                    if keep:
                        busy[0] += time.monotonic() - t_step

            arrivals_every = max(_relay.ARRIVALS_EVERY_S, 0.02 * nodes)
            turn(time.monotonic() + max(3 * poll, arrivals_every + poll), False)  # warm-up: every node shared once
            ops0 = [c.ops for c in counters]
            sec0 = int(time.monotonic()) + 1
            bytes0 = sum(c.bytes for c in counters)
            cpu0, t0 = server_cpu_s(server.pid), time.monotonic()
            seconds = math.ceil(seconds / arrivals_every) * arrivals_every  # whole rounds of the exchange
            turn(t0 + seconds, True)
            el = time.monotonic() - t0
            cpu = server_cpu_s(server.pid) - cpu0
            per_node = [(c.ops - o) / el for c, o in zip(counters, ops0)]
            sec1 = int(time.monotonic())
            peak = max(n for c in counters for sec, n in c.bins.items() if sec0 <= sec < sec1)
            lags.sort()
            return {
                "nodes": nodes, "ranks": nodes * PER_NODE, "poll_s": poll, "seconds": round(el, 1),
                "store_ops_per_s": round(sum(per_node), 1),
                "store_kib_per_s": round((sum(c.bytes for c in counters) - bytes0) / el / 1024.0, 1),
                "max_node_ops_per_s": round(max(per_node), 2),
                "max_node_ops_in_1s": peak,
                "server_cpu_pct": round(100.0 * cpu / el, 2),
                "server_connections": server_connections(server.pid),
                "harness_busy": round(busy[0] / el, 3),
                "harness_lag_p99_s": round(lags[int(0.99 * (len(lags) - 1))], 3) if lags else None,
                "idle_read_every_s": round(_relay.idle_read_every(poll), 2),
            }
    finally:
        for relay in relays:
            relay.store = None
        server.stdin.close()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="8,64,256,1024,2048")
    ap.add_argument("--poll", type=float, default=1.0, help="the relays' period (the default for any timeout of "
                                                             "10 s or more)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", default="store_load.json")
    ap.add_argument("--rate", type=float, help="calls a second on each stream of a job that has run a while: each "
                                               "node's relay keeps the sample's steady state at that rate "
                                               "(_steady_keep), not the fixed starts of its ranks' documents")
    ap.add_argument("--no-bound", action="store_true", help="every idle node reads the request counter every "
                                                             "period, however many nodes (as before issue 44)")
    a = ap.parse_args(argv)
    if a.no_bound:
        _relay.IDLE_READS_PER_S = float("inf")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a client per node
    import torch
    rows = []
    for n in [int(x) for x in a.nodes.split(",")]:
        row = run(n, poll=a.poll, seconds=a.seconds, rate=a.rate)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_json(os.path.join(RESULTS, a.out), {"date": today(), "command": "python benchmarks/store_load.py " + " ".join(argv or sys.argv[1:]),
                       "machine": "%s, %d cpus" % (platform.machine(), os.cpu_count()),
                       "python": platform.python_version(), "torch": torch.__version__, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
