#!/usr/bin/env python
"""Per-call latency of gloo collectives under no tool, c10d_observer (each usable source) and collective-trace.

    torchrun --standalone --nproc_per_node=2 benchmarks/overhead.py
    # torch 1.8 (no torchrun):
    python -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=29533 \
        benchmarks/overhead.py --json benchmarks/results/overhead_worker_torch18.json

One launch measures one world size under one flight-recorder setting (torch reads TORCH_FR_BUFFER_SIZE
once per process); benchmarks/run_overhead.py launches this worker for several world sizes with the flight
recorder off and on, alternating, and merges the results.

Configurations, interleaved in one process:
  baseline            no tool;
  observer:<source>   c10d_observer.enable(timeout=--timeout, dump_dir=<tmp>, source=<source>), for every
                      source that c10d_observer.capabilities() says is usable on this torch;
  ctrace              collective-trace (PyPI `collective-trace`) as a user sets it up to catch hangs: its
                      timeout watchdog thread on (COLLECTIVE_TIMEOUT=--timeout, whole seconds), hooks on the
                      torch.distributed functions, nothing printed (verbose=False), no log file;
  ctrace+file         the same plus its per-call trace log to a file (trace_file=<tmp>/ct; its README's way),
                      written by its logger thread.
A collective-trace configuration is left out, with the reason in the JSON, where the package is missing.

The run is a sequence of rounds; each round has one block per configuration, in forward order in even
rounds and reversed in odd rounds (B O C F, F C O B, ...), so that a drift in machine speed hits all alike.
A block turns its configuration on, then for each op (all_reduce, broadcast from rank 0, all_gather) and
each size (4 B, 64 KiB, 4 MiB of float32 per rank): barrier, warm-up calls, barrier, timed synchronous
calls, each timed alone (time.perf_counter_ns); then turns it off.  The function is looked up on
torch.distributed after the configuration is on (collective-trace replaces those module attributes).

Rank 0 reports, per (op, size) and configuration: median and p99 per call (us) with all blocks pooled, the
ratio to the baseline's median and p99, the added latency (median - baseline median) and the paired added
latency (median over rounds of block median - the same round's baseline block median), the main thread's
CPU time per call (paired delta), and for each collective-trace configuration its added latency divided by
each observer configuration's.

Then a direct measure (--direct-rounds; 4-byte all_reduce): timing probes on ProcessGroup.allreduce and
Work.wait (installed before the tool is turned on: below any tool's wrappers) and on
torch.distributed.all_reduce (installed after: above them).  Per call, outer - inner time is the Python code
on the call path: torch's own all_reduce function plus whatever a tool added at either layer; the same
with no tool (baseline) is subtracted.  That measures each tool's per-call cost free of the collective's
latency and its scheduling noise (not the cost of its background threads or processes).

JSON (--json, default benchmarks/results/overhead_worker.json): versions, machine, load average, every
block's medians, every rank's medians, the flight recorder's state (env, entries recorded); with --raw,
every per-call sample too (run_overhead.py pools them across launches).
"""
from __future__ import print_function

import argparse
import contextlib
import io
import os
import platform
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import fmt, loadavg, machine, median, ratio, summary, table, write_json  # noqa: E402

_now = time.perf_counter_ns
_cpu = time.thread_time_ns

OPS = ("all_reduce", "broadcast", "all_gather")
# name, float32 elements per rank, timed calls per block, warm-up calls per block
DEFAULT_SIZES = (("4 B", 1, 250, 40), ("64 KiB", 16384, 120, 15), ("4 MiB", 1048576, 10, 2))
BASELINE = "baseline"


# -- statistics and tables (also used by run_overhead.py; no torch needed) --------------------------------
def stats_us(samples_ns):
    return summary(samples_ns, scale=1e-3, suffix="_us")


def cell_key(op, size):
    return "%s %s" % (op, size)


def _paired(blocks, cfg, key, cell):
    """(cfg block value, baseline block value) for each (launch, round) that has both."""
    by = {}
    for b in blocks:
        v = b.get(key, {}).get(cell)
        if v is not None:
            by.setdefault((b.get("launch", 0), b["round"]), {})[b["config"]] = v
    return [(v[cfg], v[BASELINE]) for _k, v in sorted(by.items()) if cfg in v and BASELINE in v]


def is_observer(cfg):
    return cfg.startswith("observer:")


def is_ctrace(cfg):
    return cfg.startswith("ctrace")


def summarize(cells, configs, samples, blocks):
    """Per cell: each configuration's pooled stats, ratios to the baseline, added and paired added latency,
    CPU delta; and collective-trace's added latency over the observer's.  ``samples[cfg][cell]``: ns."""
    out = []
    for c in cells:
        key = c["key"]
        base = stats_us(samples.get(BASELINE, {}).get(key, []))
        row = dict(c)
        row["configs"] = {}
        for cfg in configs:
            st = stats_us(samples.get(cfg, {}).get(key, []))
            if st is None:
                continue
            e = {"stats": st}
            if base is not None:
                e["ratio_median"] = ratio(st["median_us"], base["median_us"])
                e["ratio_p99"] = ratio(st["p99_us"], base["p99_us"])
            if cfg != BASELINE and base is not None:
                e["added_median_us"] = st["median_us"] - base["median_us"]
                pairs = _paired(blocks, cfg, "median_us", key)
                if pairs:
                    d = [a - b for a, b in pairs]
                    e["paired_added_us"] = summary(d, keys=("median", "min", "max", "n"))
                    e["paired_ratio_median"] = median([a / b for a, b in pairs if b])
                cp = _paired(blocks, cfg, "cpu_us_per_call", key)
                if cp:
                    e["cpu_us_per_call"] = {"baseline": median([b for _a, b in cp]),
                                            "config": median([a for a, _b in cp]),
                                            "paired_delta_median": median([a - b for a, b in cp])}
            row["configs"][cfg] = e
        row["ctrace_vs_observer"] = compare_added(row["configs"])
        out.append(row)
    return out


def compare_added(cfgs):
    """For each (collective-trace config, observer config): added latency of the first over the second,
    pooled and paired; None where the observer's added latency is <= 0 (inside the noise)."""
    res = {}
    for ct in [c for c in cfgs if is_ctrace(c)]:
        for ob in [c for c in cfgs if is_observer(c)]:
            a, b = cfgs[ct], cfgs[ob]
            pa = (a.get("paired_added_us") or {}).get("median")
            pb = (b.get("paired_added_us") or {}).get("median")
            ma, mb = a.get("added_median_us"), b.get("added_median_us")
            res["%s / %s" % (ct, ob)] = {
                "added_us": [ma, mb], "ratio": ratio(ma, mb) if mb and mb > 0 else None,
                "paired_added_us": [pa, pb], "paired_ratio": ratio(pa, pb) if pb and pb > 0 else None}
    return res


def summarize_direct(configs, direct_samples, cpu_samples=None):
    """direct_samples[cfg] = list of ns spent between the probes per call; added = median - baseline's.
    cpu_samples[cfg]: the main thread's CPU ns over each whole call; cpu_added = median - baseline's.  The
    probes are Python wrappers, so what a tool runs inside torch's C++ (pg_hooks' hooks, called from
    ProcessGroup.allreduce) is inside the inner probe and only the CPU measure sees it."""
    if not direct_samples or BASELINE not in direct_samples or not direct_samples[BASELINE]:
        return None
    base = median(direct_samples[BASELINE])
    out = {"baseline_between_median_ns": base, "added_ns": {}, "calls": {}, "cpu_added_ns": {}}
    cpu_samples = cpu_samples or {}
    cpu_base = median(cpu_samples[BASELINE]) if cpu_samples.get(BASELINE) else None
    out["baseline_cpu_median_ns"] = cpu_base
    for cfg in configs:
        v = direct_samples.get(cfg)
        if cfg == BASELINE or not v:
            continue
        out["added_ns"][cfg] = median(v) - base
        out["calls"][cfg] = len(v)
        if cpu_base is not None and cpu_samples.get(cfg):
            out["cpu_added_ns"][cfg] = median(cpu_samples[cfg]) - cpu_base
    ratios = {}
    for ct in [c for c in out["added_ns"] if is_ctrace(c)]:
        for ob in [c for c in out["added_ns"] if is_observer(c)]:
            ob_ns = out["added_ns"][ob]
            if ob.endswith(":pg_hooks"):  # its hooks run inside the inner probe: use the CPU measure
                ob_ns = out["cpu_added_ns"].get(ob)
                ratios["%s / %s" % (ct, ob)] = (out["cpu_added_ns"].get(ct, 0) / ob_ns
                                                if ob_ns and ob_ns > 0 else None)
                continue
            ratios["%s / %s" % (ct, ob)] = out["added_ns"][ct] / ob_ns if ob_ns > 0 else None
    out["ctrace_vs_observer"] = ratios
    return out


def fmt_ratio(v):
    return fmt(v, "x%.2f")


def print_latency_table(rows, columns, label_fields, title=None, file=None):
    """rows: list of (labels tuple, {column: (median, p99, ratio)}).  One cell per column:
    'median/p99 xratio' in us."""
    def cell(v):
        return None if v is None else "%s/%s %s" % (fmt(v[0]), fmt(v[1]), fmt_ratio(v[2]))
    table(list(label_fields) + list(columns), [list(lab) + [cell(vals.get(c)) for c in columns] for lab, vals in rows],
          align="l" * len(label_fields), rule_after=len(label_fields), title=title, file=file)


# -- configurations ----------------------------------------------------------------------------------------
class _Baseline(object):
    name = BASELINE

    def on(self):
        pass

    def off(self):
        pass

    def check(self, timed_calls):
        return None


class _Observer(object):
    def __init__(self, source, timeout, dump_dir):
        import c10d_observer
        self.mod = c10d_observer
        self.source = source
        self.name = "observer:%s" % source
        self.timeout = timeout
        self.dump_dir = dump_dir
        self.obs = None

    def on(self):
        self.obs = self.mod.enable(timeout=self.timeout, dump_dir=self.dump_dir, source=self.source)

    def check(self, timed_calls):
        """Calls the observer recorded in this block and works it still has pending; reads the tracker's
        internals, so None where they changed.  The flight-recorder source numbers calls when its reader
        next looks (every half poll), so it is given up to 5 s to catch up (outside the timed calls)."""
        try:
            tr = self.obs.tracker
            deadline = time.monotonic() + (5 if self.source == "flight_recorder" else 0)
            while True:
                n = sum(g.coll.seq for g in list(tr.groups.values()))
                if n >= timed_calls or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            return {"recorded_calls": n, "pending": len(tr.waiting) + len(tr.polling),
                    "timed_calls": timed_calls, "ok": n >= timed_calls and not (len(tr.waiting) + len(tr.polling))}
        except Exception:  # noqa: BLE001
            return None

    def off(self):
        self.mod.disable()
        self.obs = None


class _CTrace(object):
    """collective-trace turned on and off in-process.  CollectiveTracer() starts its timeout thread (polls
    every 0.1 s under a lock) and reads COLLECTIVE_TIMEOUT (int seconds; anything else silently means 480);
    apply_hooks() replaces torch.distributed.{all_reduce, all_gather, reduce_scatter, broadcast,
    all_gather_into_tensor, reduce_scatter_tensor, batch_isend_irecv, barrier}.  remove_hooks() does not
    restore barrier and batch_isend_irecv (0.1.444), so they are saved and restored here; the thread is
    stopped with timeout_daemon.stop(), the file logger with close()."""

    def __init__(self, name, timeout, log_dir):
        import collective_trace.trace_collectives as ct  # noqa: F401  (ImportError: config left out)
        self.ct = ct
        self.name = name
        self.timeout = timeout
        self.trace_file = os.path.join(log_dir, "ct") if name == "ctrace+file" else None
        self.tracer = None
        self.saved = None
        self.not_restored = None
        self.logger_stuck = False  # its file logger could not be drained (off())

    def on(self):
        import torch.distributed as dist
        os.environ["COLLECTIVE_TIMEOUT"] = str(int(max(1, round(self.timeout))))
        names = list(self.ct.function_names) + ["barrier", "batch_isend_irecv"]
        self.saved = dict((n, getattr(dist, n)) for n in names if hasattr(dist, n))
        with contextlib.redirect_stdout(io.StringIO()):  # it prints one line per hooked function
            self.tracer = self.ct.CollectiveTracer(trace_file=self.trace_file, verbose=False)
            self.tracer.apply_hooks()
        assert self.tracer.timeout_daemon.get_timeout_threshold() == int(os.environ["COLLECTIVE_TIMEOUT"])
        assert self.tracer.timeout_daemon.monitor_thread.is_alive()

    def check(self, timed_calls):
        n = len(self.tracer.trace_data)
        return {"recorded_calls": n, "timed_calls": timed_calls, "ok": n >= timed_calls}

    def off(self):
        """remove_hooks(), then whatever it left wrapped is put back (noted in not_restored)."""
        import torch.distributed as dist
        tr = self.tracer
        with contextlib.redirect_stdout(io.StringIO()):
            tr.remove_hooks()
        self.not_restored = sorted(n for n, f in self.saved.items() if getattr(dist, n) is not f)
        for n, f in self.saved.items():
            setattr(dist, n, f)
        tr.timeout_daemon.stop()
        lg = tr.config.async_logger
        if lg is not None:
            # close() (0.1.444) stops its writer thread, then flushes with no timeout: a line queued after the
            # thread stopped is never taken, and close() waits forever (seen once in a world-4 launch).  So
            # drain first, bounded; if that fails, stop the thread and give up on the file's last lines.
            try:
                lg.flush(timeout=10)
                lg.close()  # joins its thread: up to 1 s (queue.get(timeout=1))
            except TimeoutError:
                lg._stop_event.set()
                self.logger_stuck = True
            tr.config.async_logger = None
        self.tracer = None


def make_configs(wanted, timeout, dump_dir, log_dir):
    """The configurations to run, and {name: reason} for those left out."""
    import c10d_observer
    caps = c10d_observer.capabilities()
    usable = [s for s, v in sorted(caps["sources"].items()) if v["usable"]]
    names = [BASELINE] + ["observer:%s" % s for s in usable] + ["ctrace", "ctrace+file"]
    if wanted:
        names = [n for n in names if n in wanted or n == BASELINE]
    configs, skipped = [], {}
    for s, v in sorted(caps["sources"].items()):
        if not v["usable"]:
            skipped["observer:%s" % s] = v["reason"]
    for n in names:
        try:
            if n == BASELINE:
                configs.append(_Baseline())
            elif is_observer(n):
                configs.append(_Observer(n.split(":", 1)[1], timeout, dump_dir))
            else:
                configs.append(_CTrace(n, timeout, log_dir))
        except ImportError as e:
            skipped[n] = "collective-trace is not importable (%s); pip install collective-trace" % e
    if wanted:
        for n in wanted:
            if n not in names and n not in skipped:
                skipped[n] = "unknown or unusable configuration"
    return configs, skipped


def ctrace_version():
    try:
        from importlib import metadata
        return metadata.version("collective-trace")
    except Exception:  # noqa: BLE001  (Python 3.7, or not installed)
        try:
            import pkg_resources
            return pkg_resources.get_distribution("collective-trace").version
        except Exception:  # noqa: BLE001
            return None


# -- the measurement ---------------------------------------------------------------------------------------
def _caller(dist, op, t, outs):
    fn = getattr(dist, op)  # looked up now: collective-trace replaces the module attribute
    if op == "all_reduce":
        return lambda: fn(t)
    if op == "broadcast":
        return lambda: fn(t, 0)
    return lambda: fn(outs, t)


def run_block(dist, ops, sizes, tensors, outs, samples, cpu):
    n = 0
    for op in ops:
        for name, _numel, calls, warmup in sizes:
            key = cell_key(op, name)
            call = _caller(dist, op, tensors[name], outs[name])
            dist.barrier()
            for _ in range(warmup):
                call()
            dist.barrier()
            out = samples[key]
            now = _now
            c0 = _cpu()
            for _ in range(calls):
                t0 = now()
                call()
                out.append(now() - t0)
            cpu[key] = (_cpu() - c0) / float(calls)
            n += calls + warmup
    dist.barrier()
    return n


def _c10d_classes():
    from torch._C import _distributed_c10d as C
    return C.ProcessGroup, (getattr(C, "Work", None) or C.ProcessGroup.Work)


class _Probes(object):
    """Inner probes on ProcessGroup.allreduce and Work.wait (below every tool), outer probe on
    torch.distributed.all_reduce (above every tool).  between: outer time - inner times, per call."""

    def __init__(self):
        self.pg_cls, self.work_cls = _c10d_classes()
        self.inner_ns = [0]
        self.between = []
        self.cpu = []  # the main thread's CPU time over the whole call: sees what runs inside torch's C++ too
        self.saved = []

    def _set(self, owner, name, fn, getter):
        self.saved.append((owner, name, getter(owner, name)))
        setattr(owner, name, fn)

    def install_inner(self):
        acc = self.inner_ns

        def probe(orig):
            def inner(self_, *a, **k):
                t0 = _now()
                r = orig(self_, *a, **k)
                acc[0] += _now() - t0
                return r
            return inner

        for owner in (self.pg_cls, self.work_cls):
            name = "allreduce" if owner is self.pg_cls else "wait"
            self._set(owner, name, probe(vars(owner)[name]), lambda o, n: vars(o)[n])

    def install_outer(self, dist):
        cur = dist.all_reduce
        acc, out, cpu = self.inner_ns, self.between, self.cpu
        thread_ns = _cpu

        def outer(*a, **k):
            acc[0] = 0
            c0 = thread_ns()
            t0 = _now()
            r = cur(*a, **k)
            t1 = _now()
            cpu.append(thread_ns() - c0)
            out.append(t1 - t0 - acc[0])
            return r

        self._set(dist, "all_reduce", outer, getattr)

    def pop(self, n):
        for _ in range(n):
            owner, name, prev = self.saved.pop()
            setattr(owner, name, prev)


def run_direct(dist, configs, rounds, calls, torch):
    t = torch.zeros(1)
    res = dict((c.name, []) for c in configs)
    res_cpu = dict((c.name, []) for c in configs)
    for r in range(rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for cfg in order:
            pr = _Probes()
            pr.install_inner()
            try:
                cfg.on()
                try:
                    pr.install_outer(dist)
                    try:
                        dist.barrier()
                        for _ in range(50):
                            dist.all_reduce(t)
                        del pr.between[:]
                        del pr.cpu[:]
                        for _ in range(calls):
                            dist.all_reduce(t)
                    finally:
                        pr.pop(1)
                finally:
                    cfg.off()
            finally:
                pr.pop(2)
            res[cfg.name].extend(pr.between)
            res_cpu[cfg.name].extend(pr.cpu)
    dist.barrier()
    return res, res_cpu


def fr_state(torch):
    """Whether this torch has the flight recorder, the env setting, and how many entries it holds now."""
    st = {"env_TORCH_FR_BUFFER_SIZE": os.environ.get("TORCH_FR_BUFFER_SIZE"), "available": False,
          "entries": None}
    try:
        from torch._C._distributed_c10d import _dump_fr_trace
    except ImportError:
        return st
    st["available"] = True
    try:
        import pickle
        d = pickle.loads(_dump_fr_trace())
        st["entries"] = len(d.get("entries", []))
    except Exception as e:  # noqa: BLE001
        st["error"] = repr(e)
    return st


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6, help="rounds (one block per configuration each)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the calls per block by this")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="hang timeout of every tool, seconds (collective-trace: rounded to whole seconds)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of %s" % ",".join(OPS))
    ap.add_argument("--sizes", default=",".join(s[0].replace(" ", "") for s in DEFAULT_SIZES),
                    help="comma-separated subset of 4B,64KiB,4MiB")
    ap.add_argument("--configs", default="",
                    help="comma-separated configurations besides baseline (default: all available: "
                         "observer:<each usable source>, ctrace, ctrace+file)")
    ap.add_argument("--direct-rounds", type=int, default=4, help="rounds of the direct measure (0: skip)")
    ap.add_argument("--direct-calls", type=int, default=600, help="calls per direct block")
    ap.add_argument("--raw", action="store_true", help="put every per-call sample in the JSON")
    ap.add_argument("--launch-label", default=None, help=argparse.SUPPRESS)  # set by run_overhead.py
    ap.add_argument("--json", default=os.path.join(HERE, "results", "overhead_worker.json"))
    ap.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)

    import torch
    import torch.distributed as dist

    ops = [o for o in args.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            ap.error("unknown op %r" % o)
    want_sizes = [s.replace(" ", "") for s in args.sizes.split(",") if s]
    sizes = [(n, e, max(1, int(round(c * args.scale))), w) for n, e, c, w in DEFAULT_SIZES
             if n.replace(" ", "") in want_sizes]
    if not sizes:
        ap.error("no known size in --sizes")
    wanted = [c for c in args.configs.split(",") if c]

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tensors = dict((n, torch.zeros(e, dtype=torch.float32)) for n, e, _c, _w in sizes)
    outs = dict((n, [torch.zeros(e, dtype=torch.float32) for _ in range(world)]) for n, e, _c, _w in sizes)
    cells = [{"key": cell_key(op, n), "op": op, "size": n, "bytes": e * 4, "calls_per_block": c,
              "warmup_per_block": w} for op in ops for n, e, c, w in sizes]

    tmp = tempfile.mkdtemp(prefix="c10d_overhead-r%d-" % rank)
    configs, skipped = make_configs(wanted, args.timeout, os.path.join(tmp, "obs"), tmp)
    names = [c.name for c in configs]
    samples = dict((c, dict((x["key"], []) for x in cells)) for c in names)
    blocks, checks, on_off_ms = [], [], dict((c, {"on": [], "off": []}) for c in names)
    t_start = time.time()
    load_before = loadavg()
    direct = None
    try:
        for r in range(args.rounds):
            for cfg in (configs if r % 2 == 0 else configs[::-1]):
                block = dict((x["key"], []) for x in cells)
                cpu = {}
                dist.barrier()
                t0 = _now()
                cfg.on()
                on_off_ms[cfg.name]["on"].append((_now() - t0) / 1e6)
                try:
                    n = run_block(dist, ops, sizes, tensors, outs, block, cpu)
                    chk = cfg.check(n)
                finally:
                    t0 = _now()
                    cfg.off()
                    on_off_ms[cfg.name]["off"].append((_now() - t0) / 1e6)
                if chk is not None:
                    chk.update({"round": r, "config": cfg.name})
                    checks.append(chk)
                for k, v in block.items():
                    samples[cfg.name][k].extend(v)
                blocks.append({"round": r, "config": cfg.name,
                               "median_us": dict((k, median(v) / 1e3) for k, v in block.items()),
                               "cpu_us_per_call": dict((k, v / 1e3) for k, v in cpu.items())})
        direct_samples = direct_cpu = None
        if args.direct_rounds > 0:
            direct_samples, direct_cpu = run_direct(dist, configs, args.direct_rounds, args.direct_calls, torch)
        fr = fr_state(torch)
        # every rank's medians, for the record (all tools off by now)
        mine = {"rank": rank, "median_us": dict((c, dict((k, median(v) / 1e3)
                                                         for k, v in samples[c].items())) for c in names),
                "fr_entries": fr["entries"]}
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        dist.barrier()
    finally:
        for c in configs:
            if isinstance(c, _Observer):
                c.mod.disable()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.time() - t_start
    load_after = loadavg()

    if rank == 0:
        rows = summarize(cells, names, samples, blocks)
        direct = summarize_direct(names, direct_samples, direct_cpu)
        out = {
            "benchmark": "overhead", "format_version": 1,
            "torch_version": torch.__version__, "python_version": platform.python_version(),
            "collective_trace_version": ctrace_version(),
            "machine": machine(), "backend": "gloo", "world_size": world,
            "torch_num_threads": torch.get_num_threads(), "launch_label": args.launch_label,
            "flight_recorder": fr, "flight_recorder_per_rank_entries": [g["fr_entries"] for g in gathered],
            "configs": names, "skipped_configs": skipped, "rounds": args.rounds, "scale": args.scale,
            "timeout_s": args.timeout, "elapsed_s": elapsed, "loadavg_before": load_before,
            "loadavg_after": load_after,
            "unit": "microseconds per synchronous call, rank 0 (per_rank_median_us: every rank)",
            "cells": rows, "direct": direct, "target_20x": target_summary(rows, direct), "checks": checks,
            "all_checks_ok": all(c.get("ok") for c in checks) if checks else None,
            "ctrace_remove_hooks_left_wrapped": dict((c.name, c.not_restored) for c in configs
                                                     if isinstance(c, _CTrace)),
            "ctrace_logger_not_drained": dict((c.name, c.logger_stuck) for c in configs if isinstance(c, _CTrace)),
            "on_off_ms": dict((c, {"on_median": median(v["on"]), "off_median": median(v["off"]),
                                   "on_first": v["on"][0]}) for c, v in on_off_ms.items() if v["on"]),
            "per_rank_median_us": [{"rank": g["rank"], "median_us": g["median_us"]} for g in gathered],
            "blocks": blocks,
        }
        if args.raw:
            out["samples_ns"] = samples
            out["direct_samples_ns"] = direct_samples
            out["direct_cpu_samples_ns"] = direct_cpu
        print_report(out)
        write_json(args.json, out)
    dist.destroy_process_group()
    return 0


def print_report(out, file=None):
    file = file or sys.stdout
    fr = out["flight_recorder"]
    frs = ("flight recorder: not in this torch" if not fr["available"] else
           "flight recorder: TORCH_FR_BUFFER_SIZE=%s, %s entries at the end"
           % (fr["env_TORCH_FR_BUFFER_SIZE"], fr["entries"]))
    print("gloo, world %d, torch %s, python %s, collective-trace %s, %d rounds, %.1f s; %s"
          % (out["world_size"], out["torch_version"], out["python_version"], out["collective_trace_version"],
             out["rounds"], out["elapsed_s"], frs), file=file)
    print("load average before/after: %s / %s" % (out["loadavg_before"], out["loadavg_after"]), file=file)
    for n, why in sorted(out["skipped_configs"].items()):
        print("left out: %s: %s" % (n, why), file=file)
    names = out["configs"]
    rows = []
    for c in out["cells"]:
        vals = {}
        for cfg, e in c["configs"].items():
            vals[cfg] = (e["stats"]["median_us"], e["stats"]["p99_us"], e.get("ratio_median"))
        rows.append(((c["op"], c["size"]), vals))
    print_latency_table(rows, names, ("op", "size"), title="per call, rank 0, blocks pooled: median/p99 us "
                "x(median ratio to baseline)", file=file)
    print_added(out["cells"], names, file=file)
    d = out.get("direct")
    if d:
        print("direct (4-byte all_reduce, Python on the call path, baseline's %.2f us subtracted): %s"
              % (d["baseline_between_median_ns"] / 1e3,
                 ", ".join("%s +%.2f us" % (k, v / 1e3) for k, v in d["added_ns"].items())), file=file)
        if d.get("cpu_added_ns"):
            print("direct, main thread's CPU over the whole call (baseline's %.2f us subtracted; sees hooks run "
                  "from C++): %s" % (d["baseline_cpu_median_ns"] / 1e3, ", ".join(
                      "%s %+.2f us" % (k, v / 1e3) for k, v in d["cpu_added_ns"].items())), file=file)
        for k, v in d["ctrace_vs_observer"].items():
            print("direct: added by %s: %s" % (k, fmt_ratio(v)), file=file)
    for p, v in sorted((out.get("target_20x") or {}).items()):
        print("target (collective-trace adds >= 20x the observer's latency), %s: %s" % (p, fmt_target(v)),
              file=file)
    if out.get("checks"):
        bad = [c for c in out["checks"] if not c.get("ok")]
        print("every tool recorded every call of its blocks: %s" % ("yes" if not bad else "NO: %r" % bad[:4]),
              file=file)


def fmt_target(v):
    return ("direct %s; paired, per cell: median %s, min %s, >= 20x in %d of %d cells (%d undefined)"
            % (fmt_ratio(v["direct_ratio"]), fmt_ratio(v["paired_ratio_median_over_cells"]),
               fmt_ratio(v["paired_ratio_min"]), v["cells_at_least_20x"], v["cells"], v["cells_undefined"]))


def print_added(cells, names, file=None):
    """Added latency (us): pooled median delta and paired delta per tool; collective-trace / observer."""
    file = file or sys.stdout
    tools = [n for n in names if n != BASELINE]
    pairs = ["%s / %s" % (ct, ob) for ct in tools if is_ctrace(ct) for ob in tools if is_observer(ob)]
    cols = ["%s added" % t for t in tools] + pairs
    print("added latency, us: median - baseline median / paired (median over rounds of block median - the same "
          "round's baseline block median); collective-trace's over the observer's, the same two ways", file=file)
    lines = []
    for c in cells:
        line = [c["op"], c["size"]]
        for t in tools:
            e = c["configs"].get(t, {})
            line.append("%s / %s" % (fmt(e.get("added_median_us")),
                                     fmt((e.get("paired_added_us") or {}).get("median"))))
        for p in pairs:
            v = c["ctrace_vs_observer"].get(p, {})
            line.append("%s / %s" % (fmt_ratio(v.get("ratio")), fmt_ratio(v.get("paired_ratio"))))
        lines.append(line)
    table(["op", "size"] + cols, lines, file=file)
    print("(a ratio is '-' where the observer's added latency is <= 0, i.e. inside the noise)", file=file)


def target_summary(cells, direct):
    """collective-trace's added latency over the observer's: direct measure, and per cell (paired)."""
    out = {}
    pairs = set()
    for c in cells:
        pairs.update(c["ctrace_vs_observer"])
    if direct:
        pairs.update(direct.get("ctrace_vs_observer", {}))
    for p in sorted(pairs):
        vals = [c["ctrace_vs_observer"][p].get("paired_ratio") for c in cells if p in c["ctrace_vs_observer"]]
        ok = [v for v in vals if v is not None]
        out[p] = {"direct_ratio": (direct or {}).get("ctrace_vs_observer", {}).get(p),
                  "cells": len(vals), "cells_undefined": len(vals) - len(ok),
                  "cells_at_least_20x": sum(1 for v in ok if v >= 20),
                  "paired_ratio_median_over_cells": median(ok) if ok else None,
                  "paired_ratio_min": min(ok) if ok else None}
    return out


if __name__ == "__main__":
    sys.exit(main())
