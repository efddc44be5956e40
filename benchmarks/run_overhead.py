#!/usr/bin/env python
"""Runs benchmarks/overhead.py for world sizes 2 and 4 with the flight recorder off and on, and merges.

    python benchmarks/run_overhead.py                 # with the Python of the env to measure
    python benchmarks/run_overhead.py --worlds 2 --launches 1 --rounds 2 --scale 0.2   # a quick look

torch reads TORCH_FR_BUFFER_SIZE once per process, so the flight recorder's setting cannot change inside
one launch: each launch runs one (world size, FR setting), and all configurations of overhead.py
(baseline, observer:<source>, ctrace, ctrace+file) interleaved inside it.  FR off is
TORCH_FR_BUFFER_SIZE=0; FR on is torch's default (the variable unset; --fr-buffer-size N sets N).  Where
the torch has no flight recorder (no torch._C._distributed_c10d._dump_fr_trace, before 2.8) there is one
setting, 'n/a'.  The launches are repeated --launches times, in forward order and then reversed
((2,off) (2,on) (4,off) (4,on), then (4,on) (4,off) (2,on) (2,off), ...), so that a drift in machine
speed hits every setting alike.

Launcher: `python -m torch.distributed.run --standalone` (torchrun) where this torch has it, else
`python -m torch.distributed.launch --use_env --master_port=<a free port>` (torch 1.8).

Per (world size, FR setting), the per-call samples of all launches are pooled; ratios compare each
configuration with the baseline of the same launches; 'baseline' under FR on is compared with 'baseline'
under FR off (other launches, same world size).  Prints one table, rows (world, op, size), a column per
(FR setting, configuration) with 'median/p99 x(ratio)' in us; then the added latency and collective-trace's
added latency over the observer's; then the direct measure.  Writes benchmarks/results/overhead.json.
"""
from __future__ import print_function

import argparse
import json
import os
import platform
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import child_env, fmt, free_port, loadavg, machine, run_logged, table, write_json  # noqa: E402
import overhead as ov  # noqa: E402  (the worker's summaries and tables; imports no torch at module level)

WORKER = os.path.join(HERE, "overhead.py")


def probe_torch():
    import torch
    info = {"torch_version": torch.__version__, "python_version": platform.python_version(),
            "has_run": _has_module("torch.distributed.run"), "fr": False}
    try:
        from torch._C._distributed_c10d import _dump_fr_trace  # noqa: F401
        info["fr"] = True
    except ImportError:
        pass
    info["collective_trace"] = _has_module("collective_trace")
    info["collective_trace_version"] = ov.ctrace_version()
    return info


def _has_module(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def launch_cmd(info, world, worker_args):
    if info["has_run"]:
        base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % world]
    else:
        base = [sys.executable, "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node=%d" % world,
                "--master_addr=127.0.0.1", "--master_port=%d" % free_port()]
    return base + [WORKER] + worker_args


def launch_env(fr, fr_buffer_size):
    env = child_env(COLLECTIVE_TIMEOUT=None)  # overhead.py sets it from --timeout
    env.setdefault("OMP_NUM_THREADS", "1")
    if fr == "off":
        env["TORCH_FR_BUFFER_SIZE"] = "0"
    elif fr == "on":
        if fr_buffer_size is None:
            env.pop("TORCH_FR_BUFFER_SIZE", None)
        else:
            env["TORCH_FR_BUFFER_SIZE"] = str(fr_buffer_size)
    return env


def _tail(path, n=25):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def merge(runs):
    """runs: worker JSONs (with raw samples) of one (world, FR setting); pooled samples and blocks."""
    configs, cells, samples, blocks, direct, direct_cpu = [], None, {}, [], {}, {}
    for i, r in enumerate(runs):
        for c in r["configs"]:
            if c not in configs:
                configs.append(c)
        if cells is None:
            cells = [dict((k, v) for k, v in c.items() if k in ("key", "op", "size", "bytes", "calls_per_block",
                                                                  "warmup_per_block")) for c in r["cells"]]
        for cfg, per_cell in r["samples_ns"].items():
            for k, v in per_cell.items():
                samples.setdefault(cfg, {}).setdefault(k, []).extend(v)
        for b in r["blocks"]:
            b = dict(b)
            b["launch"] = i
            blocks.append(b)
        for cfg, v in (r.get("direct_samples_ns") or {}).items():
            direct.setdefault(cfg, []).extend(v)
        for cfg, v in (r.get("direct_cpu_samples_ns") or {}).items():
            direct_cpu.setdefault(cfg, []).extend(v)
    rows = ov.summarize(cells, configs, samples, blocks)
    d = ov.summarize_direct(configs, direct, direct_cpu)
    return {"configs": configs, "cells": rows, "direct": d, "target_20x": ov.target_summary(rows, d),
            "launches": len(runs)}


def cross_fr(merged_by_fr, fr_settings):
    """Each configuration under FR on, and the baseline, compared with the FR-off baseline (other launches)."""
    if "off" not in merged_by_fr or "on" not in merged_by_fr:
        return None
    off, on = merged_by_fr["off"], merged_by_fr["on"]
    out = []
    for c_on, c_off in zip(on["cells"], off["cells"]):
        b_off = c_off["configs"].get(ov.BASELINE)
        if not b_off:
            continue
        e = {"op": c_on["op"], "size": c_on["size"], "vs_fr_off_baseline": {}}
        for cfg, v in c_on["configs"].items():
            e["vs_fr_off_baseline"][cfg] = {
                "ratio_median": v["stats"]["median_us"] / b_off["stats"]["median_us"],
                "ratio_p99": v["stats"]["p99_us"] / b_off["stats"]["p99_us"],
                "added_median_us": v["stats"]["median_us"] - b_off["stats"]["median_us"]}
        out.append(e)
    return out


def print_tables(results, fr_settings, configs):
    fr_lab = {"off": "FR off", "on": "FR on", "n/a": ""}
    cols = []
    for fr in fr_settings:
        for cfg in configs:
            cols.append((fr, cfg, ("%s|%s" % (cfg, fr_lab[fr])) if fr_lab[fr] else cfg))
    rows = []
    worlds = sorted(set(w for w, _fr in results))
    for w in worlds:
        first = results.get((w, fr_settings[0]))
        if first is None:
            continue
        for i, c in enumerate(first["cells"]):
            vals = {}
            for fr, cfg, name in cols:
                m = results.get((w, fr))
                if m is None or i >= len(m["cells"]):
                    continue
                e = m["cells"][i]["configs"].get(cfg)
                if e is None:
                    continue
                ratio = e.get("ratio_median")
                if cfg == ov.BASELINE and fr == "on" and (w, "off") in results:
                    b_off = results[(w, "off")]["cells"][i]["configs"].get(ov.BASELINE)
                    ratio = e["stats"]["median_us"] / b_off["stats"]["median_us"] if b_off else None
                vals[name] = (e["stats"]["median_us"], e["stats"]["p99_us"], ratio)
            rows.append(((w, c["op"], c["size"]), vals))
    title = "per call, rank 0, all launches pooled: median/p99 us x(median ratio to the baseline"
    title += (" of the same FR setting; for baseline|FR on: to baseline|FR off)" if "on" in fr_settings
              and "off" in fr_settings else ")")
    ov.print_latency_table(rows, [n for _f, _c, n in cols], ("world", "op", "size"), title=title)
    print()
    tools = [c for c in configs if c != ov.BASELINE]
    pairs = ["%s / %s" % (a, b) for a in tools if ov.is_ctrace(a) for b in tools if ov.is_observer(b)]
    print("added latency, us, paired (median over rounds of block median - same round's baseline block median);"
          " and collective-trace's over the observer's ('-': observer's added <= 0, inside the noise)")
    head = ["world", "op", "size", "FR"] + tools + pairs
    lines = []
    for w in worlds:
        for fr in fr_settings:
            m = results.get((w, fr))
            if m is None:
                continue
            for c in m["cells"]:
                line = [str(w), c["op"], c["size"], fr]
                for t in tools:
                    e = c["configs"].get(t, {})
                    line.append(fmt((e.get("paired_added_us") or {}).get("median")))
                for p in pairs:
                    v = c["ctrace_vs_observer"].get(p, {})
                    line.append(ov.fmt_ratio(v.get("paired_ratio")))
                lines.append(line)
    table(head, lines)
    print()
    print("direct measure (4-byte all_reduce; per-call time of the Python on the call path, minus baseline's):")
    for w in worlds:
        for fr in fr_settings:
            m = results.get((w, fr))
            d = m and m.get("direct")
            if not d:
                continue
            print("  world %d, FR %s: %s; %s" % (
                w, fr, ", ".join("%s +%.2f us" % (k, v / 1e3) for k, v in d["added_ns"].items()),
                ", ".join("%s %s" % (k, ov.fmt_ratio(v)) for k, v in d["ctrace_vs_observer"].items()) or "-"))
            if d.get("cpu_added_ns"):
                print("    main thread's CPU over the whole call (sees hooks run from C++): %s" % ", ".join(
                    "%s %+.2f us" % (k, v / 1e3) for k, v in d["cpu_added_ns"].items()))
    print()
    print("target: collective-trace's added latency >= 20x the observer's")
    for w in worlds:
        for fr in fr_settings:
            m = results.get((w, fr))
            for p, v in sorted(((m or {}).get("target_20x") or {}).items()):
                print("  world %d, FR %s, %s: %s" % (w, fr, p, ov.fmt_target(v)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", default="2,4", help="comma-separated world sizes (default 2,4)")
    ap.add_argument("--launches", type=int, default=2, help="repetitions of every (world, FR) launch")
    ap.add_argument("--fr", default="auto", help="'auto' (off,on where this torch has the flight recorder), "
                                                 "'off', 'on' or 'off,on'")
    ap.add_argument("--fr-buffer-size", type=int, default=None,
                    help="TORCH_FR_BUFFER_SIZE for FR on (default: unset, torch's default)")
    ap.add_argument("--rounds", type=int, default=4, help="overhead.py --rounds per launch")
    ap.add_argument("--scale", type=float, default=1.0, help="overhead.py --scale")
    ap.add_argument("--timeout", type=float, default=60.0, help="hang timeout given to every tool")
    ap.add_argument("--configs", default="", help="overhead.py --configs")
    ap.add_argument("--ops", default=None, help="overhead.py --ops")
    ap.add_argument("--sizes", default=None, help="overhead.py --sizes")
    ap.add_argument("--direct-rounds", type=int, default=2, help="overhead.py --direct-rounds per launch")
    ap.add_argument("--launch-timeout", type=float, default=1200.0, help="seconds before a launch is ended")
    ap.add_argument("--keep-launches", default=None, help="directory to keep every launch's JSON and log in")
    ap.add_argument("--verbose", action="store_true", help="show every launch's output")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "overhead.json"))
    args = ap.parse_args(argv)

    info = probe_torch()
    worlds = [int(x) for x in args.worlds.split(",") if x]
    if args.fr == "auto":
        fr_settings = ["off", "on"] if info["fr"] else ["n/a"]
    else:
        fr_settings = [x for x in args.fr.split(",") if x]
        if not info["fr"]:
            print("note: torch %s has no flight recorder; --fr %s ignored" % (info["torch_version"], args.fr))
            fr_settings = ["n/a"]
        for x in fr_settings:
            if x not in ("off", "on", "n/a"):
                ap.error("--fr: unknown setting %r" % x)
    notes = []
    if not info["fr"]:
        notes.append("torch %s has no flight recorder (torch._C._distributed_c10d._dump_fr_trace, torch 2.8+): "
                     "one FR setting, n/a" % info["torch_version"])
    if not info["collective_trace"]:
        notes.append("collective-trace is not installed in this env (pip install collective-trace): "
                     "its configurations are left out")
    elif _release(info["torch_version"]) < (1, 10):
        notes.append("collective-trace declares torch>=1.10; on torch %s it was installed with --no-deps"
                     % info["torch_version"])
    for n in notes:
        print("note: " + n)

    worker_args = ["--rounds", str(args.rounds), "--scale", str(args.scale), "--timeout", str(args.timeout),
                   "--direct-rounds", str(args.direct_rounds), "--raw"]
    for opt in ("configs", "ops", "sizes"):
        v = getattr(args, opt)
        if v:
            worker_args += ["--" + opt, v]

    combos = [(w, fr) for w in worlds for fr in fr_settings]
    plan = []
    for rep in range(args.launches):
        for w, fr in (combos if rep % 2 == 0 else combos[::-1]):
            plan.append((rep, w, fr))

    keep = args.keep_launches
    work = keep or tempfile.mkdtemp(prefix="c10d_overhead_runs-")
    if keep and not os.path.isdir(keep):
        os.makedirs(keep)
    print("torch %s, python %s, launcher %s, %d launches: %s" % (
        info["torch_version"], info["python_version"],
        "torch.distributed.run --standalone" if info["has_run"] else "torch.distributed.launch --use_env",
        len(plan), " ".join("(%d,%s)" % (w, fr) for _r, w, fr in plan)))
    sys.stdout.flush()

    load_before = loadavg()
    t_start = time.time()
    by_key, launches, failed = {}, [], 0
    for i, (rep, w, fr) in enumerate(plan):
        label = "w%d-fr_%s-%d" % (w, fr.replace("/", ""), rep)
        out_json = os.path.join(work, "launch-%02d-%s.json" % (i, label))
        log_path = os.path.join(work, "launch-%02d-%s.log" % (i, label))
        cmd = launch_cmd(info, w, worker_args + ["--json", out_json, "--launch-label", label])
        env = launch_env(fr, args.fr_buffer_size)
        rc, secs = run_logged(cmd, env, args.launch_timeout, log_path, args.verbose)
        rec = {"index": i, "label": label, "repeat": rep, "world_size": w, "fr": fr, "rc": rc,
               "seconds": secs, "command": cmd,
               "env": {"TORCH_FR_BUFFER_SIZE": env.get("TORCH_FR_BUFFER_SIZE"),
                       "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS")}}
        r = None
        if rc == 0 and os.path.exists(out_json):
            with open(out_json) as f:
                r = json.load(f)
        if r is None:
            failed += 1
            print("[%d/%d] %s: FAILED (rc %d, %.0f s); last lines:\n%s" % (i + 1, len(plan), label, rc, secs,
                                                                         _tail(log_path)))
        else:
            by_key.setdefault((w, fr), []).append(r)
            fr_st = r["flight_recorder"]
            rec.update({"elapsed_s": r["elapsed_s"], "loadavg_before": r["loadavg_before"],
                        "loadavg_after": r["loadavg_after"], "configs": r["configs"],
                        "skipped_configs": r["skipped_configs"], "flight_recorder": fr_st,
                        "flight_recorder_per_rank_entries": r.get("flight_recorder_per_rank_entries"),
                        "all_checks_ok": r["all_checks_ok"], "on_off_ms": r["on_off_ms"],
                        "ctrace_remove_hooks_left_wrapped": r.get("ctrace_remove_hooks_left_wrapped"),
                        "collective_trace_version": r.get("collective_trace_version"),
                        "blocks": r["blocks"], "per_rank_median_us": r["per_rank_median_us"]})
            fr_bad = (fr == "off" and fr_st.get("entries")) or (fr == "on" and fr_st.get("entries") == 0)
            if fr_bad:
                failed += 1
                rec["fr_mismatch"] = True
            print("[%d/%d] %s: %.0f s, load %s -> %s, checks %s%s" % (
                i + 1, len(plan), label, secs, _fmt_load(r["loadavg_before"]), _fmt_load(r["loadavg_after"]),
                "ok" if r["all_checks_ok"] else "NOT ok",
                ("; FR entries %s does not match FR %s" % (fr_st.get("entries"), fr)) if fr_bad else ""))
        sys.stdout.flush()
        launches.append(rec)
    elapsed = time.time() - t_start
    load_after = loadavg()

    results = {}
    for (w, fr), runs in sorted(by_key.items()):
        results[(w, fr)] = merge(runs)
    configs = []
    for m in results.values():
        for c in m["configs"]:
            if c not in configs:
                configs.append(c)
    skipped = {}
    for rec in launches:
        skipped.update(rec.get("skipped_configs") or {})
    print()
    print("gloo on CPU, torch %s, python %s, %s, %d cpus; %d launches in %.0f s; load average before/after: "
          "%s / %s" % (info["torch_version"], info["python_version"], platform.platform(), os.cpu_count(),
                       len(plan), elapsed, _fmt_load(load_before), _fmt_load(load_after)))
    for n, why in sorted(skipped.items()):
        print("left out: %s: %s" % (n, why))
    if results:
        print_tables(results, fr_settings, configs)

    out = {
        "benchmark": "overhead", "format_version": 1,
        "torch_version": info["torch_version"], "python_version": info["python_version"],
        "collective_trace_version": info["collective_trace_version"],
        "machine": machine(), "backend": "gloo",
        "launcher": "torch.distributed.run --standalone" if info["has_run"] else "torch.distributed.launch --use_env",
        "worlds": worlds, "fr_settings": fr_settings, "fr_buffer_size_on": args.fr_buffer_size,
        "launches_per_setting": args.launches, "rounds_per_launch": args.rounds, "scale": args.scale,
        "timeout_s": args.timeout, "notes": notes, "skipped_configs": skipped, "configs": configs,
        "elapsed_s": elapsed, "loadavg_before": load_before, "loadavg_after": load_after,
        "unit": "microseconds per synchronous call on rank 0, all launches of a (world, FR) pooled",
        "results": [{"world_size": w, "fr": fr, "launches": m["launches"], "configs": m["configs"],
                     "cells": m["cells"], "direct": m["direct"], "target_20x": m["target_20x"]}
                    for (w, fr), m in sorted(results.items())],
        "fr_vs_off_baseline": [{"world_size": w, "cells": cross_fr(dict((fr, results[(w2, fr)])
                                                                       for (w2, fr) in results if w2 == w),
                                                                  fr_settings)}
                               for w in worlds] if "on" in fr_settings and "off" in fr_settings else None,
        "launches": launches, "failed_launches": failed,
    }
    write_json(args.json, out)
    if failed and not keep:
        print("launch logs and JSON kept in %s" % work)
    elif not keep:
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    return 1 if failed or not results else 0


def _release(version):
    out = []
    for part in version.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


def _fmt_load(v):
    return "-" if not v else "%.2f" % v[0]


if __name__ == "__main__":
    sys.exit(main())
