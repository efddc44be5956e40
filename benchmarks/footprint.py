#!/usr/bin/env python
"""Footprint of c10d_observer: the watchdog's memory and CPU share, the rank-side threads, enable()'s time.

    torchrun --standalone --nproc_per_node=2 benchmarks/footprint.py [--idle-s 10] [--busy-s 10] \
        [--rate 10000] [--timeout 60] [--short-timeout 1] [--busy-world-1]
    # torch 1.8 (no torchrun):
    python -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=29533 \
        benchmarks/footprint.py --json benchmarks/results/footprint_torch18.json

Targets (the footprint issue): the watchdog under 30 MB resident and under 1 % of a core.

What is measured, per rank (gloo, CPU; works with any world size, 1 included):

* enable(): the first call alone (it imports the package's modules and runs the capabilities probe),
  then --enable-cycles enable()/disable() cycles: median, min, max (ms); disable() likewise.
* Configurations, in this order: ``baseline`` (no observer: the rank's own CPU, for the deltas), then
  ``timeout <--timeout>`` (default 60 s, so poll 1 s) and ``timeout <--short-timeout>`` (default 1 s,
  poll 0.1 s: the short poll users pick, the worst case; 0 skips it).  Each observer configuration starts
  with enable(), waits --settle-s (the watchdog's start-up is reported apart) and ends with disable().
* Phases of each configuration: ``idle`` (every rank sleeps --idle-s) and ``busy world`` (--busy-s of
  synchronous all_reduce of a 4-byte float32 tensor on the world group, paced to --rate per second);
  with --busy-world-1 also ``busy self`` (the same on a group of this rank alone, where gloo is fast
  enough for 10,000 calls/s; with world size 1 the world group is that already).
* Pacing: the calls of a phase are counted in advance (all ranks make the same number), and call i is
  not issued before t0 + i / rate: --pace sleep (default) sleeps when more than 1 ms ahead, so calls
  come in short bursts and the rank's CPU is what the calls cost; --pace spin busy-waits (the rank then
  uses a whole core).  Gloo with 2 ranks on 2 cores cannot reach 10,000 calls/s: a calibration (no
  observer, unpaced) measures the slowest rank's maximum rate, and a phase is paced to the lower of
  --rate and --headroom (80 %) of that maximum (--strict-rate: always --rate, running flat out when it cannot be
  reached), so that every configuration runs at the same rate; the achieved rate is reported.
* Watchdog (``obs.watchdog_pid``): VmRSS, VmHWM, RssAnon/RssFile/RssShmem from /proc/<pid>/status, and
  Rss/PSS/USS (Private_Clean + Private_Dirty) from /proc/<pid>/smaps_rollup (summed from smaps where
  the rollup is missing), after the settle time and after the busy phases.  Shared-library pages count
  fully in RSS and are split among their users in PSS; USS is what exiting the watchdog would free.
  CPU share of a phase: utime + stime from /proc/<pid>/stat, divided by SC_CLK_TCK and the phase's wall
  time (a tick is 10 ms, so 1 tick in 10 s is 0.1 %), and the same from /proc/<pid>/schedstat (on-CPU
  nanoseconds), which is exact and is what the pass/fail uses when available; wake-ups per second
  (voluntary context switches).
* Rank side: the whole rank process's CPU (time.process_time, all threads, not its children) per phase,
  its delta against the baseline at the same rate, and per call; the observer's threads in the rank
  (found by name prefix ``c10d_observer``, by ``Thread.native_id``: the completion poller
  ``c10d_observer-completion``, the watchdog health thread blocked in waitpid) from
  /proc/self/task/<tid>/schedstat and stat; the rank's VmRSS before enable() and after the settle time.

Rank 0 prints a table and writes JSON (default benchmarks/results/footprint.json) with torch and Python
versions, the machine, the load average before and after, every rank's numbers and pass/fail.  With the
default durations a run takes about 65 s (3 configurations x (10 s idle + 10 s busy), settle times,
enable cycles, calibration), about 95 s with --busy-world-1; a busy phase runs longer where the achieved
rate falls below the paced one.  Short check: --idle-s 2 --busy-s 2 --enable-cycles 3.
"""
from __future__ import print_function

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, fmt, loadavg, machine, summary, table, write_json  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import c10d_observer  # noqa: E402

TARGET_RSS_BYTES = 30 * 1000 * 1000  # "30 MB"; decimal, the stricter reading
TARGET_CPU_SHARE = 0.01  # 1 % of a core
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_now = time.perf_counter


# -- /proc readers --------------------------------------------------------------------------------------
def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return None


def _stat_ticks(prefix):
    """utime + stime (clock ticks) of /proc/<pid> or /proc/<pid>/task/<tid>; for a process, all threads."""
    s = _read(prefix + "/stat")
    if s is None:
        return None
    f = s[s.rindex(")") + 2:].split()  # fields from 3 (state) on; comm may hold spaces and parentheses
    return int(f[11]) + int(f[12])


def _schedstat_ns(prefix):
    """On-CPU time in ns of one task (the main thread for /proc/<pid>), or None where unavailable."""
    s = _read(prefix + "/schedstat")
    if not s:
        return None
    try:
        return int(s.split()[0])
    except (ValueError, IndexError):
        return None


def _status(prefix):
    """Numeric fields of /proc/.../status (kB values in kB)."""
    s = _read(prefix + "/status")
    out = {}
    if s is None:
        return out
    for line in s.splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if parts and parts[0].isdigit():
            out[k] = int(parts[0])
    return out


def _smaps_rollup(pid):
    """Rss/Pss/USS and the rest of smaps_rollup in kB; summed from smaps where the rollup is missing."""
    s = _read("/proc/%d/smaps_rollup" % pid)
    source = "smaps_rollup"
    if s is None:
        s = _read("/proc/%d/smaps" % pid)
        source = "smaps"
        if s is None:
            return None
    out = {}
    for line in s.splitlines():
        k, sep, v = line.partition(":")
        parts = v.split()
        if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[k] = out.get(k, 0) + int(parts[0])
    if "Rss" not in out:
        return None
    out["USS"] = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    out["source"] = source
    return out


def watchdog_memory(pid):
    prefix = "/proc/%d" % pid
    st = _status(prefix)
    keys = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmSize", "Threads")
    mem = {k: st.get(k) for k in keys}
    roll = _smaps_rollup(pid)
    if roll is not None:
        mem["smaps"] = {k: roll.get(k) for k in ("Rss", "Pss", "USS", "Shared_Clean", "Shared_Dirty",
                                                 "Private_Clean", "Private_Dirty", "Anonymous", "source")}
    else:
        mem["smaps"] = None
    return mem


def _task_cpu(prefix):
    st = _status(prefix)
    return {"ticks": _stat_ticks(prefix), "ns": _schedstat_ns(prefix),
            "vcsw": st.get("voluntary_ctxt_switches"), "nvcsw": st.get("nonvoluntary_ctxt_switches")}


def _observer_threads():
    """{name: native_id} of the rank's threads the observer started (names start with c10d_observer)."""
    out = {}
    for t in threading.enumerate():
        if t.name.startswith("c10d_observer"):
            tid = getattr(t, "native_id", None)  # Python 3.8+
            if tid is not None:
                name = t.name
                if name in out:
                    name = "%s#%d" % (name, tid)
                out[name] = tid
    return out


def sample(wd_pid, threads):
    """Everything a phase reads at its start and its end."""
    me = os.getpid()
    s = {"wall": _now(), "rank_cpu_ns": time.process_time_ns() if hasattr(time, "process_time_ns")
         else int(time.process_time() * 1e9),
         "rank_ticks": _stat_ticks("/proc/%d" % me),
         "main": _task_cpu("/proc/%d/task/%d" % (me, threading.main_thread().native_id)),
         "threads": {n: _task_cpu("/proc/%d/task/%d" % (me, tid)) for n, tid in threads.items()}}
    if wd_pid is not None:
        s["wd"] = _task_cpu("/proc/%d" % wd_pid)
    return s


def _share_ns(a, b, wall):
    if a is None or b is None or a.get("ns") is None or b.get("ns") is None:
        return None
    return (b["ns"] - a["ns"]) / 1e9 / wall


def _share_ticks(a, b, wall):
    if a is None or b is None or a.get("ticks") is None or b.get("ticks") is None:
        return None
    return (b["ticks"] - a["ticks"]) / float(CLK_TCK) / wall


def _rate(a, b, key, wall):
    if a is None or b is None or a.get(key) is None or b.get(key) is None:
        return None
    return (b[key] - a[key]) / wall


def phase_result(name, s0, s1, calls=0, rate_target=None):
    wall = s1["wall"] - s0["wall"]
    r = {"phase": name, "wall_s": wall, "calls": calls, "rate_target": rate_target,
         "rate_achieved": calls / wall if calls else 0.0,
         "rank_cpu_share": (s1["rank_cpu_ns"] - s0["rank_cpu_ns"]) / 1e9 / wall,
         "rank_cpu_share_ticks": _share_ticks({"ticks": s0["rank_ticks"]}, {"ticks": s1["rank_ticks"]}, wall),
         "rank_cpu_us_per_call": (s1["rank_cpu_ns"] - s0["rank_cpu_ns"]) / 1e3 / calls if calls else None,
         "main_thread_cpu_share": _share_ns(s0["main"], s1["main"], wall),
         "threads": {}}
    for n in s1["threads"]:
        a, b = s0["threads"].get(n), s1["threads"][n]
        r["threads"][n] = {"cpu_share": _share_ns(a, b, wall), "cpu_share_ticks": _share_ticks(a, b, wall),
                           "wakeups_per_s": _rate(a, b, "vcsw", wall)}
    if "wd" in s1:
        a, b = s0["wd"], s1["wd"]
        r["watchdog"] = {"cpu_share_ns": _share_ns(a, b, wall), "cpu_share_ticks": _share_ticks(a, b, wall),
                         "ticks": (b["ticks"] - a["ticks"]) if a["ticks"] is not None and b["ticks"] is not None
                         else None,
                         "wakeups_per_s": _rate(a, b, "vcsw", wall),
                         "involuntary_per_s": _rate(a, b, "nvcsw", wall)}
        w = r["watchdog"]
        w["cpu_share"] = w["cpu_share_ns"] if w["cpu_share_ns"] is not None else w["cpu_share_ticks"]
    return r


# -- the rank's work ------------------------------------------------------------------------------------
def _all_reduce(t, group):
    if group is None:
        dist.all_reduce(t)
    else:
        dist.all_reduce(t, group=group)


def paced_calls(t, group, n, rate, spin):
    """n synchronous all_reduces, call i not before t0 + i / rate."""
    ar = dist.all_reduce
    kw = {} if group is None else {"group": group}
    interval = 1.0 / rate
    now = _now
    sleep = time.sleep
    t0 = now()
    for i in range(n):
        due = t0 + i * interval
        ahead = due - now()
        if ahead > 0:
            if spin:
                while now() < due:
                    pass
            elif ahead > 0.001:
                sleep(ahead)
        ar(t, **kw)


def calibrate(t, group, calls, warmup):
    """Unpaced: the slowest rank's calls per second (group members only take part; the MIN is global)."""
    for _ in range(warmup):
        _all_reduce(t, group)
    t0 = _now()
    for _ in range(calls):
        _all_reduce(t, group)
    rate = calls / (_now() - t0)
    x = torch.tensor([rate], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MIN)
    return rate, float(x.item())


def gather_json(obj, world):
    """Every rank's JSON-able obj, on every rank (tensors only: no pickles, works on torch 1.8)."""
    data = json.dumps(obj).encode("utf-8")
    n = torch.tensor([len(data)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, n)
    m = max(int(x.item()) for x in sizes)
    buf = torch.zeros(m, dtype=torch.uint8)
    buf[:len(data)] = torch.tensor(list(bytearray(data)), dtype=torch.uint8)
    bufs = [torch.zeros(m, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(bufs, buf)
    return [json.loads(bytes(bytearray(b[:int(s.item())].tolist())).decode("utf-8"))
            for b, s in zip(bufs, sizes)]


def _alive(pid):
    s = _read("/proc/%d/stat" % pid)
    return s is not None and s[s.rindex(")") + 2:].split()[0] != "Z"


def _ms_stats(v):
    return summary(v, keys=("median", "min", "max", "n"), keep_all=True)


def measure_enable(cycles, timeout, dump_dir):
    first_en = _now()
    obs = c10d_observer.enable(timeout=timeout, dump_dir=dump_dir)
    first_en = (_now() - first_en) * 1e3
    pid = obs.watchdog_pid
    t0 = _now()
    c10d_observer.disable()
    first_dis = (_now() - t0) * 1e3
    en, dis, left = [], [], []
    for _ in range(cycles):
        t0 = _now()
        obs = c10d_observer.enable(timeout=timeout, dump_dir=dump_dir)
        en.append((_now() - t0) * 1e3)
        pid = obs.watchdog_pid
        t0 = _now()
        c10d_observer.disable()
        dis.append((_now() - t0) * 1e3)
        if _alive(pid):
            left.append(pid)
    return {"first_enable_ms": first_en, "first_disable_ms": first_dis, "enable_ms": _ms_stats(en),
            "disable_ms": _ms_stats(dis), "watchdogs_alive_after_disable": left}


def run_config(label, kwargs, args, busy, dump_dir):
    """One configuration: kwargs None is the baseline (no observer)."""
    res = {"config": label, "enable_kwargs": kwargs, "phases": []}
    wd = None
    threads = {}
    me = "/proc/%d" % os.getpid()
    dist.barrier()
    if kwargs is not None:
        res["rank_vmrss_kB_before_enable"] = _status(me).get("VmRSS")
        obs = c10d_observer.enable(dump_dir=dump_dir, **kwargs)
        wd = obs.watchdog_pid
        res["poll_interval"] = obs.config.poll_interval
        res["timeout"] = obs.config.timeout
        res["watchdog_pid"] = wd
        time.sleep(args.settle_s)
        c = _task_cpu("/proc/%d" % wd)
        res["watchdog_startup_cpu_ms"] = c["ns"] / 1e6 if c["ns"] is not None else c["ticks"] * 1e3 / CLK_TCK
        res["watchdog_threads"] = _status("/proc/%d" % wd).get("Threads")
        res["memory_after_settle"] = watchdog_memory(wd)
        res["rank_vmrss_kB_enabled"] = _status(me).get("VmRSS")
        threads = _observer_threads()
        res["observer_threads"] = threads
    try:
        dist.barrier()
        s0 = sample(wd, threads)
        time.sleep(args.idle_s)
        s1 = sample(wd, threads)
        res["phases"].append(phase_result("idle", s0, s1))
        t = torch.zeros(1, dtype=torch.float32)
        for name, group, rate, n in busy:
            dist.barrier()
            for _ in range(args.warmup):
                _all_reduce(t, group)
            s0 = sample(wd, threads)
            paced_calls(t, group, n, rate, args.pace == "spin")
            s1 = sample(wd, threads)
            res["phases"].append(phase_result(name, s0, s1, n, rate))
        if wd is not None:
            res["memory_after_busy"] = watchdog_memory(wd)
            try:
                obs = c10d_observer.observer.active()
                tr = obs.tracker
                want = sum(p["calls"] for p in res["phases"])
                # the flight-recorder source numbers calls when its reader next looks (every half poll)
                deadline = time.monotonic() + obs.config.poll_interval + 1.0
                while True:
                    res["recorded_calls"] = sum(g.coll.seq for g in list(tr.groups.values()))
                    if res["recorded_calls"] >= want or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            except Exception:  # noqa: BLE001  (tracker internals changed)
                res["recorded_calls"] = None
        dist.barrier()
    finally:
        if wd is not None:
            c10d_observer.disable()
            res["watchdog_alive_after_disable"] = _alive(wd)
    return res


def _mem_max(cfg, key):
    vals = []
    for m in (cfg.get("memory_after_settle"), cfg.get("memory_after_busy")):
        if not m:
            continue
        if key in ("Pss", "USS", "Rss"):
            v = (m.get("smaps") or {}).get(key)
        else:
            v = m.get(key)
        if v is not None:
            vals.append(v)
    return max(vals) if vals else None


def _percent(v):
    return None if v is None else v * 100.0


def _mb(v):
    return None if v is None else v / 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idle-s", type=float, default=10.0, help="idle phase, seconds (default 10)")
    ap.add_argument("--busy-s", type=float, default=10.0, help="each busy phase, seconds at the paced rate")
    ap.add_argument("--rate", type=float, default=10000.0, help="all_reduce calls per second (default 10000)")
    ap.add_argument("--timeout", type=float, default=60.0, help="enable(timeout=) of the main configuration")
    ap.add_argument("--short-timeout", type=float, default=1.0,
                    help="timeout of the short-poll configuration (default 1; 0 skips it)")
    ap.add_argument("--short-poll", type=float, default=None,
                    help="its poll_interval (default: the library's, min(1, timeout / 10))")
    ap.add_argument("--busy-world-1", action="store_true",
                    help="also a busy phase on a group of this rank alone (gloo reaches 10,000/s there)")
    ap.add_argument("--pace", choices=("sleep", "spin"), default="sleep")
    ap.add_argument("--strict-rate", action="store_true",
                    help="pace to --rate even where calibration says it cannot be reached (runs flat out)")
    ap.add_argument("--headroom", type=float, default=0.8,
                    help="where --rate cannot be reached, pace to this fraction of the calibrated maximum")
    ap.add_argument("--no-baseline", action="store_true", help="skip the configuration without observer")
    ap.add_argument("--enable-cycles", type=int, default=10)
    ap.add_argument("--settle-s", type=float, default=1.0, help="after enable(), before measuring")
    ap.add_argument("--calib-calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100, help="calls before each busy phase")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--json", default=os.path.join(RESULTS, "footprint.json"))
    ap.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t_start = time.time()
    load_before = loadavg()
    dump_dir = tempfile.mkdtemp(prefix="c10d_observer_footprint-r%d-" % rank)

    self_group = None
    if args.busy_world_1 and world > 1:
        groups = [dist.new_group([r]) for r in range(world)]  # every rank creates every group, in order
        self_group = groups[rank]

    try:
        dist.barrier()
        en = measure_enable(args.enable_cycles, args.timeout, dump_dir)

        # calibration without the observer; every rank takes part in every MIN
        t = torch.zeros(1, dtype=torch.float32)
        dist.barrier()
        calib = {}
        busy = []
        targets = [("busy world", None, world)]
        if self_group is not None:
            targets.append(("busy self", self_group, 1))
        for name, group, size in targets:
            mine, slowest = calibrate(t, group, args.calib_calls, args.warmup)
            reachable = args.rate <= args.headroom * slowest
            rate = args.rate if args.strict_rate or reachable else args.headroom * slowest
            n = max(1, int(round(rate * args.busy_s)))
            calib[name] = {"group_size": size, "max_rate_this_rank": mine, "max_rate_slowest_rank": slowest,
                           "paced_rate": rate, "calls": n, "rate_reachable": reachable}
            busy.append((name, group, rate, n))

        configs = []
        if not args.no_baseline:
            configs.append(("baseline", None))
        configs.append(("timeout %g" % args.timeout, {"timeout": args.timeout}))
        if args.short_timeout > 0:
            kw = {"timeout": args.short_timeout}
            if args.short_poll is not None:
                kw["poll_interval"] = args.short_poll
            configs.append(("timeout %g" % args.short_timeout, kw))
        results = [run_config(label, kw, args, busy, dump_dir) for label, kw in configs]
        reports = sorted(f for f in os.listdir(dump_dir) if f.startswith("report-"))
        mine = {"rank": rank, "pid": os.getpid(), "enable": en, "calibration": calib, "configs": results,
                "reports_written": reports}
        everyone = gather_json(mine, world)
        dist.barrier()
    finally:
        c10d_observer.disable()
        shutil.rmtree(dump_dir, ignore_errors=True)
    elapsed = time.time() - t_start
    load_after = loadavg()

    if rank == 0:
        report(args, everyone, world, elapsed, load_before, load_after)
    dist.destroy_process_group()
    return 0


def report(args, everyone, world, elapsed, load_before, load_after):
    obs_cfgs = [c["config"] for c in everyone[0]["configs"] if c["enable_kwargs"] is not None]

    print("c10d_observer footprint: torch %s, python %s, gloo, world %d, %s CPUs, %.1f s; load avg %s -> %s"
          % (torch.__version__, platform.python_version(), world, os.cpu_count(), elapsed,
             " ".join("%.2f" % x for x in load_before), " ".join("%.2f" % x for x in load_after)))
    print()
    print("enable() / disable(), ms (first enable includes the capabilities probe and the imports)")
    table(("rank", "first", "median", "min", "max", "dis first", "dis med"),
          [[r["rank"]] + ["%.1f" % v for v in (r["enable"]["first_enable_ms"], r["enable"]["enable_ms"]["median"],
                                              r["enable"]["enable_ms"]["min"], r["enable"]["enable_ms"]["max"],
                                              r["enable"]["first_disable_ms"], r["enable"]["disable_ms"]["median"])]
           for r in everyone], align="l")
    print()
    print("busy phases: 4-byte all_reduce, requested %g/s" % args.rate)
    for name, c in everyone[0]["calibration"].items():
        print("  %-10s group of %d: max %.0f/s (slowest rank, no observer, unpaced) -> paced at %.0f/s, "
              "%d calls%s" % (name, c["group_size"], c["max_rate_slowest_rank"], c["paced_rate"], c["calls"],
                              "" if c["rate_reachable"] else " (requested rate NOT reachable)"))
    print()

    # watchdog table
    print("watchdog, per rank (target: < 30 MB resident, < 1 %% of a core); MB = 10^6 bytes; %%core from "
          "schedstat (ticks: /proc/<pid>/stat utime+stime, %d/s)" % CLK_TCK)
    hdr = ("%-5s %-11s %5s %7s %7s %7s %7s %7s | %-10s %8s %8s %7s | %8s" % (
        "rank", "config", "poll", "VmRSS", "VmHWM", "shmem", "PSS", "USS", "phase", "%core", "ticks%",
        "wake/s", "start ms"))
    print(hdr)
    for r in everyone:
        for c in r["configs"]:
            if c["enable_kwargs"] is None:
                continue
            def mb(key):
                v = _mem_max(c, key)
                return "%7s" % "-" if v is None else "%7.1f" % (v * 1024 / 1e6)
            first = True
            for p in c["phases"]:
                w = p["watchdog"]
                left = ("%-5d %-11s %5s %s %s %s %s %s" % (
                    r["rank"], c["config"], "%gs" % c["poll_interval"], mb("VmRSS"), mb("VmHWM"), mb("RssShmem"),
                    mb("Pss"), mb("USS"))) if first else " " * len(hdr.split(" |")[0])
                print("%s | %-10s %8s %8s %7s | %8s" % (
                    left, p["phase"], fmt(_percent(w["cpu_share"]), "%7.3f%%"),
                    fmt(_percent(w["cpu_share_ticks"]), "%7.2f%%"),
                    fmt(w["wakeups_per_s"], "%7.1f"),
                    fmt(c.get("watchdog_startup_cpu_ms"), "%8.1f") if first else ""))
                first = False
    print()

    # rank side
    base = {}
    for r in everyone:
        for c in r["configs"]:
            if c["enable_kwargs"] is None:
                base[r["rank"]] = {p["phase"]: p for p in c["phases"]}
    print("rank side: the whole rank process's CPU (all threads) and the observer's threads in it; "
          "delta vs baseline at the same rate")
    hdr2 = "%-5s %-11s %-10s %9s %9s %9s %9s %9s | %-29s %8s %7s" % (
        "rank", "config", "phase", "calls/s", "rank%core", "delta", "us/call", "delta", "observer thread",
        "%core", "wake/s")
    print(hdr2)
    for r in everyone:
        for c in r["configs"]:
            for p in c["phases"]:
                b = base.get(r["rank"], {}).get(p["phase"])
                d_share = (p["rank_cpu_share"] - b["rank_cpu_share"]) * 100 if b and c["enable_kwargs"] else None
                d_call = (p["rank_cpu_us_per_call"] - b["rank_cpu_us_per_call"]) \
                    if b and c["enable_kwargs"] and p["rank_cpu_us_per_call"] is not None else None
                ths = sorted(p["threads"].items()) or [("", None)]
                for i, (tn, tv) in enumerate(ths):
                    if i == 0:
                        left = "%-5d %-11s %-10s %9.0f %8.2f%% %9s %9s %9s" % (
                            r["rank"], c["config"], p["phase"], p["rate_achieved"], p["rank_cpu_share"] * 100,
                            fmt(d_share, "%+8.2f%%"), fmt(p["rank_cpu_us_per_call"], "%9.1f"),
                            fmt(d_call, "%+9.1f"))
                    else:
                        left = " " * len(hdr2.split(" |")[0])
                    if tv is None:
                        print(left + " |")
                    else:
                        print("%s | %-29s %8s %7s" % (left, tn, fmt(_percent(tv["cpu_share"]), "%7.3f%%"),
                                                      fmt(tv["wakeups_per_s"], "%7.1f")))
    print()

    # verdict
    verdict = {"targets": {"watchdog_rss_bytes_lt": TARGET_RSS_BYTES, "watchdog_cpu_share_lt": TARGET_CPU_SHARE},
               "per_config": {}}
    for label in obs_cfgs:
        rss, pss, uss, cpu_idle, cpu_busy = [], [], [], [], []
        for r in everyone:
            for c in r["configs"]:
                if c["config"] != label:
                    continue
                for key, dst in (("VmRSS", rss), ("Pss", pss), ("USS", uss)):
                    v = _mem_max(c, key)
                    if v is not None:
                        dst.append(v * 1024)
                for p in c["phases"]:
                    v = p["watchdog"]["cpu_share"]
                    if v is not None:
                        (cpu_idle if p["phase"] == "idle" else cpu_busy).append(v)
        s = {"max_vmrss_bytes": max(rss) if rss else None, "max_pss_bytes": max(pss) if pss else None,
             "max_uss_bytes": max(uss) if uss else None,
             "max_cpu_share_idle": max(cpu_idle) if cpu_idle else None,
             "max_cpu_share_busy": max(cpu_busy) if cpu_busy else None}
        s["rss_pass"] = s["max_vmrss_bytes"] is not None and s["max_vmrss_bytes"] < TARGET_RSS_BYTES
        s["uss_pass"] = s["max_uss_bytes"] is not None and s["max_uss_bytes"] < TARGET_RSS_BYTES
        cpus = cpu_idle + cpu_busy
        s["cpu_pass"] = bool(cpus) and max(cpus) < TARGET_CPU_SHARE
        s["pass"] = s["rss_pass"] and s["cpu_pass"]
        verdict["per_config"][label] = s
        print("%-12s watchdog RSS max %s MB (PSS %s, USS %s): %s;  CPU max idle %s, busy %s of a core: %s" % (
            label, fmt(_mb(s["max_vmrss_bytes"]), "%.1f"), fmt(_mb(s["max_pss_bytes"]), "%.1f"),
            fmt(_mb(s["max_uss_bytes"]), "%.1f"), "PASS" if s["rss_pass"] else "FAIL",
            fmt(_percent(s["max_cpu_share_idle"]), "%.3f%%"), fmt(_percent(s["max_cpu_share_busy"]), "%.3f%%"),
            "PASS" if s["cpu_pass"] else "FAIL"))
    verdict["pass"] = all(s["pass"] for s in verdict["per_config"].values())
    checks = []
    for r in everyone:
        if r["enable"]["watchdogs_alive_after_disable"]:
            checks.append("rank %d: watchdogs alive after disable(): %r" % (r["rank"], r["enable"]
                                                                             ["watchdogs_alive_after_disable"]))
        if r["reports_written"]:
            checks.append("rank %d: unexpected hang reports: %r" % (r["rank"], r["reports_written"]))
        for c in r["configs"]:
            if c.get("watchdog_alive_after_disable"):
                checks.append("rank %d, %s: watchdog alive after disable()" % (r["rank"], c["config"]))
            if c["enable_kwargs"] is not None and c.get("recorded_calls") is not None:
                want = sum(p["calls"] for p in c["phases"])
                if c["recorded_calls"] < want:
                    checks.append("rank %d, %s: observer recorded %d calls, fewer than the %d timed" % (
                        r["rank"], c["config"], c["recorded_calls"], want))
    verdict["checks"] = checks
    print("overall: %s%s" % ("PASS" if verdict["pass"] else "FAIL",
                             "" if not checks else "; problems: " + "; ".join(checks)))

    out = {
        "benchmark": "footprint",
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "c10d_observer_version": c10d_observer.__version__,
        "machine": dict(machine(), clk_tck=CLK_TCK),
        "backend": "gloo", "world_size": world, "torch_num_threads": torch.get_num_threads(),
        "args": {k: v for k, v in vars(args).items() if k != "local_rank"},
        "elapsed_s": elapsed, "loadavg_before": load_before, "loadavg_after": load_after,
        "units": {"memory": "kB as /proc reports them (KiB)", "cpu_share": "fraction of one core",
                  "enable": "ms"},
        "summary": verdict,
        "ranks": everyone,
    }
    write_json(args.json, out)


if __name__ == "__main__":
    sys.exit(main())
