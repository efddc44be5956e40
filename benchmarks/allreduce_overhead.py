#!/usr/bin/env python
"""all_reduce latency with and without c10d_observer, gloo on CPU, configurations interleaved in one run.

    torchrun --standalone --nproc_per_node=2 benchmarks/allreduce_overhead.py
    # torch 1.8:
    python -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=29531 \
        benchmarks/allreduce_overhead.py

The run is a sequence of rounds; each round has one baseline block and one observer block (order
alternates between rounds: B O, O B, B O, ... so that a drift in machine speed hits both alike).  An
observer block starts with c10d_observer.enable(timeout=60, dump_dir=<tmp>) and ends with disable().
Inside a block, for each size (4 B, 64 KiB, 4 MiB by default): barrier, warm-up calls, barrier, then
timed synchronous dist.all_reduce calls, each timed alone with time.perf_counter_ns.

Reported per size (rank 0; JSON has every rank's medians and every block's):
  * median and p99 per call (µs) of each configuration, all its blocks pooled, and observer / baseline;
  * the paired delta: median over rounds of (observer block median - baseline block median), which is
    less sensitive to load changing between blocks than the pooled numbers;
  * main-thread CPU time per call (time.thread_time_ns), baseline and paired delta: the observer's work
    runs on the calling thread, so this shows its cost even when wall-clock latency is noisy.

After the rounds comes a direct measure (--direct-rounds, 4-byte tensor): timing wrappers are put on
ProcessGroup.allreduce and Work.wait below and above the observer's own wrappers, so the time spent
inside the observer's wrappers is measured per call, without the collective's latency and its noise.
The same probes without the observer give their own cost, which is subtracted.

Also measured: how long enable() and disable() take (the first enable() includes the capabilities
probe).  JSON goes to benchmarks/results/allreduce_overhead.json (--json) with torch and python
versions, the machine, and the load average before and after.  About 30-60 s on 2 cores.
"""
from __future__ import print_function

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import c10d_observer  # noqa: E402

_now = time.perf_counter_ns
_cpu = time.thread_time_ns  # the calling (main) thread: where the observer's work runs

# name, number of float32 elements, timed calls per block, warm-up calls per block
DEFAULT_SIZES = (("4 B", 1, 800, 100), ("64 KiB", 16384, 300, 30), ("4 MiB", 1048576, 15, 2))


def _pct(sorted_vals, q):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(round(q / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def _stats_us(samples_ns):
    s = sorted(samples_ns)
    return {"n": len(s), "median_us": statistics.median(s) / 1e3, "p99_us": _pct(s, 99) / 1e3,
            "p90_us": _pct(s, 90) / 1e3, "mean_us": sum(s) / float(len(s)) / 1e3, "min_us": s[0] / 1e3,
            "max_us": s[-1] / 1e3}


def _loadavg():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def _paired(blocks, size, key):
    """Per round: (observer block value, baseline block value) for one size."""
    by_round = {}
    for b in blocks:
        by_round.setdefault(b["round"], {})[b["config"]] = b[key][size]
    return [(v["observer"], v["baseline"]) for _r, v in sorted(by_round.items())
            if "observer" in v and "baseline" in v]


def _observed_calls(obs):
    """Calls the observer recorded (sequence numbers handed out), and works still pending; reads the
    tracker's internals, so (None, None) where they changed."""
    try:
        tr = obs.tracker
        n = 0
        for g in list(tr.groups.values()):
            n += g.coll.seq
        return n, len(tr.waiting) + len(tr.polling)
    except Exception:  # noqa: BLE001
        return None, None


def run_block(sizes, tensors, samples, cpu):
    """Timed calls of every size; ``cpu[name]``: CPU time of this thread per call, in ns."""
    for name, _numel, calls, warmup in sizes:
        t = tensors[name]
        dist.barrier()
        for _ in range(warmup):
            dist.all_reduce(t)
        dist.barrier()
        out = samples[name]
        ar = dist.all_reduce
        now = _now
        c0 = _cpu()
        for _ in range(calls):
            t0 = now()
            ar(t)
            out.append(now() - t0)
        cpu[name] = (_cpu() - c0) / float(calls)
    dist.barrier()


# -- direct measure: time spent inside the observer's wrappers, per call --------------------------------
def _c10d_classes():
    from torch._C import _distributed_c10d as C
    return C.ProcessGroup, (getattr(C, "Work", None) or C.ProcessGroup.Work)


def _inner_probe(orig, slot):
    def inner(self_, *args, **kwargs):
        t0 = _now()
        r = orig(self_, *args, **kwargs)
        slot[0] = _now() - t0
        return r
    return inner


def _outer_probe(cur, slot, out):
    def outer(self_, *args, **kwargs):
        t0 = _now()
        r = cur(self_, *args, **kwargs)
        out.append(_now() - t0 - slot[0])
        return r
    return outer


class _Probes(object):
    """Timing wrappers on ProcessGroup.allreduce and Work.wait, one below the observer's wrappers (installed
    before enable()) and one above them (installed after).  Per call, outer time - inner time is the time
    spent in whatever lies between: the observer's wrappers, plus the probes' own cost, which a baseline
    block (probes, no observer) measures."""

    def __init__(self):
        self.pg_cls, self.work_cls = _c10d_classes()
        self.saved = []
        self.inner = {"allreduce": [0], "wait": [0]}
        self.between = {"allreduce": [], "wait": []}

    def _set(self, owner, name, fn):
        self.saved.append((owner, name, vars(owner)[name]))
        setattr(owner, name, fn)

    def _pop(self):
        owner, name, prev = self.saved.pop()
        setattr(owner, name, prev)

    def install_inner(self):
        for owner, name in ((self.pg_cls, "allreduce"), (self.work_cls, "wait")):
            self._set(owner, name, _inner_probe(vars(owner)[name], self.inner[name]))

    def install_outer(self):
        for owner, name in ((self.pg_cls, "allreduce"), (self.work_cls, "wait")):
            self._set(owner, name, _outer_probe(vars(owner)[name], self.inner[name], self.between[name]))

    def remove_outer(self):
        self._pop()
        self._pop()

    def remove_inner(self):
        self._pop()
        self._pop()


def run_direct(rounds, calls, timeout, dump_dir):
    """Interleaved blocks of 4-byte all_reduces with the probes, without and with the observer."""
    t = torch.zeros(1)
    res = {"baseline": {"allreduce": [], "wait": []}, "observer": {"allreduce": [], "wait": []}}
    for r in range(rounds):
        for cfg in (("baseline", "observer") if r % 2 == 0 else ("observer", "baseline")):
            pr = _Probes()
            pr.install_inner()
            try:
                if cfg == "observer":
                    c10d_observer.enable(timeout=timeout, dump_dir=dump_dir)
                try:
                    pr.install_outer()
                    try:
                        dist.barrier()
                        for _ in range(50):
                            dist.all_reduce(t)
                        del pr.between["allreduce"][:], pr.between["wait"][:]
                        for _ in range(calls):
                            dist.all_reduce(t)
                    finally:
                        pr.remove_outer()
                finally:
                    if cfg == "observer":
                        c10d_observer.disable()
            finally:
                pr.remove_inner()
            for name in ("allreduce", "wait"):
                res[cfg][name].extend(pr.between[name])
    dist.barrier()
    out = {}
    for name in ("allreduce", "wait"):
        b = sorted(res["baseline"][name])
        o = sorted(res["observer"][name])
        out[name] = {"baseline_median_ns": statistics.median(b), "observer_median_ns": statistics.median(o),
                     "baseline_p90_ns": _pct(b, 90), "observer_p90_ns": _pct(o, 90),
                     "added_median_ns": statistics.median(o) - statistics.median(b), "calls": len(o)}
    out["added_per_call_median_ns"] = out["allreduce"]["added_median_ns"] + out["wait"]["added_median_ns"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="rounds (one baseline + one observer block each)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the calls per block by this")
    ap.add_argument("--timeout", type=float, default=60.0, help="enable(timeout=...)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--direct-rounds", type=int, default=4,
                    help="rounds of the direct in-wrapper measure (4-byte all_reduce; 0: skip it)")
    ap.add_argument("--direct-calls", type=int, default=1000, help="calls per direct block")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "allreduce_overhead.json"))
    ap.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [(n, e, max(1, int(c * args.scale)), w) for n, e, c, w in DEFAULT_SIZES]
    tensors = {n: torch.zeros(e, dtype=torch.float32) for n, e, _c, _w in sizes}

    dump_dir = tempfile.mkdtemp(prefix="c10d_observer_bench-r%d-" % rank)
    samples = {"baseline": {n: [] for n, _e, _c, _w in sizes}, "observer": {n: [] for n, _e, _c, _w in sizes}}
    blocks = []
    enable_ns, disable_ns, observed = [], [], []
    t_start = time.time()
    load_before = _loadavg()
    try:
        for r in range(args.rounds):
            order = ("baseline", "observer") if r % 2 == 0 else ("observer", "baseline")
            for cfg in order:
                block = {n: [] for n, _e, _c, _w in sizes}
                cpu = {}
                obs = None
                if cfg == "observer":
                    dist.barrier()
                    t0 = _now()
                    obs = c10d_observer.enable(timeout=args.timeout, dump_dir=dump_dir)
                    enable_ns.append(_now() - t0)
                run_block(sizes, tensors, block, cpu)
                if obs is not None:
                    calls, pending = _observed_calls(obs)
                    observed.append({"round": r, "recorded_calls": calls, "pending_after": pending,
                                     "timed_calls": sum(len(v) for v in block.values())})
                    t0 = _now()
                    c10d_observer.disable()
                    disable_ns.append(_now() - t0)
                for n in block:
                    samples[cfg][n].extend(block[n])
                blocks.append({"round": r, "config": cfg,
                               "median_us": {n: statistics.median(v) / 1e3 for n, v in block.items()},
                               "cpu_us_per_call": {n: v / 1e3 for n, v in cpu.items()}})
        direct = None
        if args.direct_rounds > 0:
            direct = run_direct(args.direct_rounds, args.direct_calls, args.timeout, dump_dir)
        # the other ranks' medians, for the record (observer disabled by now)
        meds = [statistics.median(samples[c][n]) / 1e3 for n, _e, _c, _w in sizes
                for c in ("baseline", "observer")]
        mine = torch.tensor(meds, dtype=torch.float64)
        gathered = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(gathered, mine)
        dist.barrier()
    finally:
        c10d_observer.disable()
        shutil.rmtree(dump_dir, ignore_errors=True)
    elapsed = time.time() - t_start
    load_after = _loadavg()

    if rank == 0:
        results = []
        for i, (n, e, c, w) in enumerate(sizes):
            b = _stats_us(samples["baseline"][n])
            o = _stats_us(samples["observer"][n])
            pairs = _paired(blocks, n, "median_us")
            deltas = [ob - ba for ob, ba in pairs]
            cpu_pairs = _paired(blocks, n, "cpu_us_per_call")
            cpu_deltas = [ob - ba for ob, ba in cpu_pairs]
            results.append({
                "size": n, "bytes": e * 4, "calls_per_block": c, "warmup_per_block": w,
                "baseline": b, "observer": o,
                "ratio_median": o["median_us"] / b["median_us"], "ratio_p99": o["p99_us"] / b["p99_us"],
                "delta_median_us": o["median_us"] - b["median_us"],
                "paired_rounds": len(pairs),
                "paired_delta_us": {"median": statistics.median(deltas), "min": min(deltas),
                                    "max": max(deltas), "all": deltas},
                "paired_ratio_median": statistics.median([ob / ba for ob, ba in pairs]),
                "cpu_us_per_call": {"baseline": statistics.median([ba for _ob, ba in cpu_pairs]),
                                    "observer": statistics.median([ob for ob, _ba in cpu_pairs]),
                                    "paired_delta_median": statistics.median(cpu_deltas)},
                "per_rank_median_us": [{"rank": k, "baseline": float(g[2 * i]), "observer": float(g[2 * i + 1])}
                                       for k, g in enumerate(gathered)],
            })
        en = [x / 1e6 for x in enable_ns]
        di = [x / 1e6 for x in disable_ns]
        print("all_reduce, gloo, world %d, torch %s, python %s, %d rounds (blocks alternate B/O), %.1f s"
              % (world, torch.__version__, platform.python_version(), args.rounds, elapsed))
        print("load average before/after: %s / %s" % (load_before, load_after))
        print("per call, rank 0, all blocks of a configuration pooled (us):")
        print("%-7s %9s %9s %9s %9s %7s %7s %8s | %9s %8s %8s %8s" % (
            "size", "base med", "obs med", "base p99", "obs p99", "ratio", "r p99", "delta",
            "paired d", "p ratio", "cpu base", "cpu d"))
        for x in results:
            print("%-7s %9.1f %9.1f %9.1f %9.1f %7.3f %7.3f %8.2f | %9.2f %8.3f %8.1f %8.2f" % (
                x["size"], x["baseline"]["median_us"], x["observer"]["median_us"], x["baseline"]["p99_us"],
                x["observer"]["p99_us"], x["ratio_median"], x["ratio_p99"], x["delta_median_us"],
                x["paired_delta_us"]["median"], x["paired_ratio_median"], x["cpu_us_per_call"]["baseline"],
                x["cpu_us_per_call"]["paired_delta_median"]))
        print("(ratio, r p99: observer/baseline of the pooled median and p99; delta: obs - base median;\n"
              " paired d / p ratio: median over rounds of (observer block median - baseline block median) and\n"
              " of their ratio; cpu base / cpu d: main-thread CPU time per call, baseline and paired delta)")
        print("enable(): first %.1f ms, median %.1f ms, min %.1f ms (%d calls); disable(): median %.1f ms"
              % (en[0], statistics.median(en), min(en), len(en), statistics.median(di)))
        if any(o["recorded_calls"] is None for o in observed):
            print("observer recorded every timed call: unknown (tracker internals changed)")
        else:
            bad = [o for o in observed if o["recorded_calls"] < o["timed_calls"] or o["pending_after"]]
            print("observer recorded every timed call: %s" % ("yes" if not bad else "NO: %r" % bad))
        if direct is not None:
            print("direct: time inside the observer's wrappers per 4-byte all_reduce (median, probes' own cost "
                  "subtracted): ProcessGroup.allreduce wrapper %.2f us + Work.wait wrapper %.2f us = %.2f us"
                  % (direct["allreduce"]["added_median_ns"] / 1e3, direct["wait"]["added_median_ns"] / 1e3,
                     direct["added_per_call_median_ns"] / 1e3))

        out = {
            "benchmark": "allreduce_overhead",
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "machine": {"processor": platform.processor(), "uname": list(platform.uname()),
                        "platform": platform.platform(), "cpu_count": os.cpu_count()},
            "backend": dist.get_backend(), "world_size": world, "torch_num_threads": torch.get_num_threads(),
            "rounds": args.rounds, "timeout": args.timeout, "elapsed_s": elapsed,
            "loadavg_before": load_before, "loadavg_after": load_after,
            "unit": "microseconds per synchronous dist.all_reduce call, rank 0",
            "results": results,
            "enable_ms": {"first": en[0], "median": statistics.median(en), "min": min(en), "all": en},
            "disable_ms": {"median": statistics.median(di), "min": min(di), "all": di},
            "direct_wrapper_overhead": direct,
            "observer_blocks": observed,
            "blocks": blocks,
        }
        d = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print("wrote %s" % args.json)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
