#!/usr/bin/env python
"""Cost of recording one call ("event" = its start + its completion) on the rank side.

Variants, all single-threaded in this process:

  channel        StreamWriter.start(op, t) + StreamWriter.done(seq): the shared-memory writes and the
                 in-flight set, with a given start time
  channel+clock  StreamWriter.start(op) + done(seq): the same, reading time.monotonic_ns (what a call pays)
  patch wrappers the patch source's ProcessGroup wrapper + Work.wait wrapper around a no-op Python
                 "collective" on a 1-element tensor that returns a fake work (everything the observer
                 adds to one call, minus torch)
  mp.Queue       multiprocessing.Queue.put((op, seq, t)) for the start and again for the completion,
                 drained by a consumer process (how a pure-Python watchdog process is usually fed)
  lock+dict      `with lock: inflight[seq] = (op, t)` for the start, `with lock: del inflight[seq]`
                 for the completion (how collective-trace records calls for its watchdog thread)
  empty loop     the timing loop alone, for reference (not subtracted from the others)

Each variant runs --iterations events per repeat, --repeats times; the table shows the median and the
minimum over repeats of (loop time / iterations), in ns per event.

    python benchmarks/channel_bench.py [--iterations N] [--repeats R] [--json PATH]

Needs only the standard library and c10d_observer; with torch installed the patch wrappers get a real
tensor (whose dtype and size they record), without it None.
"""
from __future__ import print_function

import argparse
import gc
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, machine, summary, table, write_json  # noqa: E402

from c10d_observer import channel as _ch  # noqa: E402

from c10d_observer import channel_writer as _ch_writer  # noqa: E402

from c10d_observer import channel_reader as _ch_reader  # noqa: E402
from c10d_observer import tracker as _tracker  # noqa: E402

_now = time.perf_counter_ns
OP = _ch.OP_CODES["all_reduce"]


# -- variants: each returns elapsed ns for n events ----------------------------------------------------
def bench_empty(n, ctx):
    t0 = _now()
    for _ in range(n):
        pass
    return _now() - t0


def bench_channel(n, ctx):
    sw = ctx["stream_writer"]
    start = sw.start
    done = sw.done
    t_ns = 123456789
    t0 = _now()
    for _ in range(n):
        done(start(OP, t_ns))
    return _now() - t0


def bench_channel_clock(n, ctx):
    sw = ctx["stream_writer"]
    start = sw.start
    done = sw.done
    t0 = _now()
    for _ in range(n):
        done(start(OP))
    return _now() - t0


class _FakeWork(object):
    """Hashable like torch's Work (identity), with a wait() and is_completed()."""

    __slots__ = ()

    def wait(self, *args, **kwargs):
        return True

    def is_completed(self):
        return True


def bench_patch(n, ctx):
    call = ctx["patched_call"]
    wait = ctx["patched_wait"]
    pg = ctx["fake_pg"]
    tensors = ctx["tensors"]
    t0 = _now()
    for _ in range(n):
        work = call(pg, tensors)
        wait(work)
    return _now() - t0


def bench_lock_dict(n, ctx):
    lock = threading.Lock()
    inflight = {}
    t_ns = 123456789
    t0 = _now()
    for seq in range(n):
        with lock:
            inflight[seq] = (OP, t_ns)
        with lock:
            del inflight[seq]
    return _now() - t0


def _drain(q, ack):
    """Consumer process: take items until None, then report how many it got."""
    got = 0
    get = q.get
    while True:
        item = get()
        if item is None:
            ack.put(got)
            got = 0
            continue
        if item == "quit":
            return
        got += 1


def bench_mp_queue(n, ctx):
    q = ctx["mpq"]
    ack = ctx["mpq_ack"]
    put = q.put
    t_ns = 123456789
    t0 = _now()
    for seq in range(n):
        put((OP, seq, t_ns))
        put((OP, seq, 0))
    t1 = _now()
    q.put(None)
    got = ack.get(timeout=120)
    t2 = _now()
    if got != 2 * n:
        raise RuntimeError("consumer received %d of %d items" % (got, 2 * n))
    ctx.setdefault("mpq_drained_ns", []).append(t2 - t0)
    return t1 - t0


VARIANTS = [
    ("empty loop", bench_empty, "for-loop only (reference)"),
    ("channel", bench_channel, "StreamWriter.start + StreamWriter.done"),
    ("channel+clock", bench_channel_clock, "StreamWriter.start (reads the clock) + done"),
    ("patch wrappers", bench_patch, "PG method wrapper + Work.wait wrapper, no-op 'collective'"),
    ("mp.Queue", bench_mp_queue, "2 x multiprocessing.Queue.put(tuple), drained by another process"),
    ("lock+dict", bench_lock_dict, "2 x (with threading.Lock: dict set / del)"),
]


# -- setup ---------------------------------------------------------------------------------------------
def _setup(tmpdir):
    ctx = {}
    writer = _ch_writer.ChannelWriter(max_streams=8, directory=tmpdir)
    writer.unlink()
    idx = writer.add_stream({"group": "bench", "kind": "collective", "stream": "bench"})
    ctx["channel"] = writer
    ctx["stream_writer"] = writer.stream_writer(idx)

    try:  # the patch source's wrappers around a fake ProcessGroup; uses internals, so optional
        from c10d_observer.sources import patch as _patch

        from c10d_observer import compat as _compat

        tr2 = _tracker.Tracker(writer, 0.25)
        pg = object()
        # Register the fake group through the tracker's own code, with compat's torch look-ups stubbed
        # for this one call (rank 0 of 2, backend gloo: completion through Work.wait, as in the
        # all_reduce benchmark).
        saved = _compat.describe_group, _compat.rank_and_world
        _compat.describe_group = lambda _pg: {"group": "bench3", "name": "", "ranks": [0, 1],
                                              "backend": "gloo", "size": 2, "group_rank": 0}
        _compat.rank_and_world = lambda: (0, 2)
        try:
            tr2.group(pg)
        finally:
            _compat.describe_group, _compat.rank_and_world = saved
        work = _FakeWork()

        def allreduce(self, tensors, opts=None):
            return work

        try:  # a real tensor where torch is installed: the wrapper reads its dtype and size
            import torch
            ctx["tensors"] = [torch.ones(1)]
        except ImportError:
            ctx["tensors"] = None
        ctx["patched_call"] = _patch._make_coll_wrapper(tr2, allreduce, OP)
        ctx["patched_wait"] = _patch._make_wait_wrapper(tr2, _FakeWork.wait)
        ctx["fake_pg"] = pg
        ctx["patch_tracker"] = tr2
    except Exception as e:  # noqa: BLE001
        ctx["patch_error"] = "%s: %s" % (type(e).__name__, e)

    mp = multiprocessing.get_context("spawn")
    ctx["mpq"] = mp.Queue()
    ctx["mpq_ack"] = mp.Queue()
    ctx["mpq_proc"] = mp.Process(target=_drain, args=(ctx["mpq"], ctx["mpq_ack"]), daemon=True)
    ctx["mpq_proc"].start()
    ctx["mpq"].put(None)  # wait until the consumer runs
    ctx["mpq_ack"].get(timeout=60)
    return ctx


def _teardown(ctx):
    try:
        ctx["mpq"].put("quit")
        ctx["mpq_proc"].join(timeout=10)
    finally:
        if ctx["mpq_proc"].is_alive():
            ctx["mpq_proc"].terminate()
        ctx["channel"].close()


def _check(ctx, name):
    """Sanity: the channel variants really wrote to the channel."""
    if name == "channel":
        r = _ch_reader.ChannelReader.attach(ctx["channel"])
        st = r.snapshot()[0]
        ok = st.last_started == ctx["stream_writer"].seq and st.oldest is None
        r.close()
        return ok
    if name == "patch wrappers":
        tr = ctx["patch_tracker"]
        return not tr.waiting and tr.groups[ctx["fake_pg"]].coll.seq > 0
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=200000, help="events per repeat (default 200000)")
    ap.add_argument("--repeats", type=int, default=7, help="repeats per variant (default 7)")
    ap.add_argument("--queue-iterations", type=int, default=None,
                    help="events per repeat for mp.Queue (default: --iterations / 4, it is slow)")
    ap.add_argument("--json", default=os.path.join(RESULTS, "channel.json"))
    args = ap.parse_args(argv)
    qiter = args.queue_iterations or max(1000, args.iterations // 4)

    tmpdir = tempfile.mkdtemp(prefix="c10d_observer_bench-")
    ctx = _setup(tmpdir)
    results = []
    try:
        for name, fn, desc in VARIANTS:
            if name == "patch wrappers" and "patched_call" not in ctx:
                results.append({"name": name, "description": desc, "skipped": ctx.get("patch_error")})
                continue
            n = qiter if name == "mp.Queue" else args.iterations
            try:
                fn(min(n, 10000), ctx)  # warm-up; also finds out whether the package's API still fits
            except Exception as e:  # noqa: BLE001  (internals this variant uses changed)
                results.append({"name": name, "description": desc, "skipped": "%s: %s" % (type(e).__name__, e)})
                continue
            ctx.pop("mpq_drained_ns", None)
            per_event = []
            for _ in range(args.repeats):
                gc.collect()
                gc.disable()
                try:
                    per_event.append(fn(n, ctx) / float(n))
                finally:
                    gc.enable()
            row = {"name": name, "description": desc, "iterations": n, "repeats": args.repeats}
            row.update(summary(per_event, prefix="ns_per_event_", keys=("median", "min")))
            row.update({"ns_per_event_all": per_event, "sanity_ok": _check(ctx, name)})
            if name == "mp.Queue":
                drained = [d / float(n) for d in ctx.pop("mpq_drained_ns")]
                row.update(summary(drained, prefix="ns_per_event_until_drained_", keys=("median", "min")))
            results.append(row)
    finally:
        _teardown(ctx)
        shutil.rmtree(tmpdir, ignore_errors=True)

    base = next(r for r in results if r["name"] == "channel")["ns_per_event_median"]
    lines = []
    for r in results:
        if "skipped" in r:
            lines.append([r["name"], None, None, None, "skipped: %s" % r["skipped"]])
            continue
        lines.append([r["name"], "%.1f" % r["ns_per_event_median"], "%.1f" % r["ns_per_event_min"],
                      "%.2f" % (r["ns_per_event_median"] / base),
                      r["description"] + ("" if r["sanity_ok"] else "  [SANITY CHECK FAILED]")])
        if "ns_per_event_until_drained_median" in r:
            lines.append(["  ..drained", "%.1f" % r["ns_per_event_until_drained_median"],
                          "%.1f" % r["ns_per_event_until_drained_min"], "",
                          "(same, timed until the consumer has taken every item)"])
    table(("variant", "median", "min", "x chan", "what"), lines, align="lrrrl",
          title="ns per event (event = start + completion); median and min over %d repeats" % args.repeats)

    out = {
        "benchmark": "channel_bench",
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": machine(),
        "iterations": args.iterations, "queue_iterations": qiter, "repeats": args.repeats,
        "unit": "ns per event (start + completion)",
        "results": results,
    }
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
