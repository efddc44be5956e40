#!/usr/bin/env python
"""Host time per NCCL all_reduce on one GPU, with and without the observer, on every NCCL plan.

    python benchmarks/nccl_overhead.py                  # on a machine with a CUDA device (world size 1)
    python benchmarks/nccl_overhead.py --rounds 2 --calls 100    # a quick look
    python benchmarks/nccl_overhead.py --steady 20        # and 20 s of back-to-back calls per configuration

Two launches, because torch reads its NCCL recorder's buffer size once per process: one with torch's
recorder as this torch has it by default (on from 2.11; on 2.5-2.10 set on as enable() does), one with it
off (TORCH_NCCL_TRACE_BUFFER_SIZE=0, TORCH_FR_BUFFER_SIZE=0).  Inside each launch the configurations are
interleaved, in rotating order, round after round: ``baseline`` (no observer), ``observer:auto`` (the plan
enable() picks: the recorder where it records, else the patch source with completion markers),
``observer:patch`` (the patch source: Work.is_completed, or a CUDA event marker for a call that returns no
Work), ``observer:pg_hooks`` where usable (2.14+), and ``ctrace`` (collective-trace) where installed.

Timed: the Python call only (what the host spends issuing it); every 50 calls the stream is synchronised,
outside the timed region, so that the GPU queue never fills.  Sizes: 4 B, 1 MiB and 64 MiB float32.
Prints per launch a row per size with 'median/p99 x(ratio to that launch's baseline)' in us, and torch's
own recorder cost (baseline with it on / baseline with it off).  Writes benchmarks/results/nccl_overhead.json.
"""
from __future__ import print_function

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, child_env, ratio, today, write_json  # noqa: E402
import overhead as ov  # noqa: E402  (the configurations and their summary; no torch at module level)

SIZES = (("4B", 1), ("1MiB", 1 << 18), ("64MiB", 1 << 24))  # (name, float32 elements)
OFF_ENV = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_FR_BUFFER_SIZE": "0"}


def worker(args):
    """One launch: every configuration, interleaved; prints its samples as JSON on the last line."""
    import torch
    import torch.distributed as dist
    import c10d_observer
    caps = c10d_observer.capabilities()
    configs = [ov._Baseline(), ov._Observer("auto", 60.0, args.dump_dir), ov._Observer("patch", 60.0, args.dump_dir)]
    if caps["sources"]["pg_hooks"]["usable"]:
        configs.append(ov._Observer("pg_hooks", 60.0, args.dump_dir))
    try:
        configs.append(ov._CTrace("ctrace", 60.0, args.dump_dir))
    except ImportError:
        pass
    if args.recorder == "on" and (caps.get("nccl_plan") or {}).get("recorder_on") == "enable":
        configs[1].on()  # enable() before the first NCCL group turns torch's recorder on (2.5-2.10)
        configs[1].off()
    smoke = args.smoke  # gloo on the CPU: checks this script end to end where there is no GPU (no figures)
    dist.init_process_group("gloo" if smoke else "nccl", rank=0, world_size=1,
                            init_method="file://" + os.path.join(args.dump_dir, "store"))
    sync = (lambda: None) if smoke else torch.cuda.synchronize
    if not smoke:
        torch.cuda.set_device(0)
    tensors = {name: torch.ones(n, device="cpu" if smoke else "cuda") for name, n in SIZES}
    samples = {c.name: {name: [] for name, _ in SIZES} for c in configs}
    plans = {}
    reads = {}  # configuration -> the flight-recorder source's entry reads (count, seconds) over its blocks
    now = time.perf_counter_ns if hasattr(time, "perf_counter_ns") else (lambda: int(time.perf_counter() * 1e9))
    for rnd in range(args.rounds):
        order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
        for c in order:
            c.on()
            if getattr(c, "obs", None) is not None:
                plans[c.name] = ((c.obs.plan.get("cells") or {}).get("collective") or {}).get("nccl")
            for name, _ in SIZES:
                t = tensors[name]
                for _ in range(20):  # warm-up
                    dist.all_reduce(t)
                sync()
                out = samples[c.name][name]
                for i in range(args.calls):
                    t0 = now()
                    dist.all_reduce(t)
                    out.append(now() - t0)
                    if i % 50 == 49:
                        sync()
                sync()
            src = _fr_source(getattr(c, "obs", None))
            if src is not None:
                n, sec = reads.get(c.name, (0, 0.0))
                reads[c.name] = (n + src.reads, sec + src.read_s)
            c.off()
    steady = {}
    if args.steady:  # a busy job: back-to-back calls for a while, the default poll (reads every 0.5 s)
        t = tensors["4B"]
        for c in configs[:2]:  # baseline, observer:auto
            c.on()
            src = _fr_source(getattr(c, "obs", None))
            r0, s0 = (src.reads, src.read_s) if src is not None else (0, 0.0)
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.steady:
                for _ in range(50):
                    dist.all_reduce(t)
                sync()
                n += 50
            wall = time.perf_counter() - t0
            steady[c.name] = {"calls_per_s": round(n / wall, 1), "seconds": round(wall, 2)}
            if src is not None:
                steady[c.name].update(entry_reads=src.reads - r0, read_ms=round(1e3 * (src.read_s - s0), 2),
                                      read_share_pct=round(100 * (src.read_s - s0) / wall, 3))
            c.off()
    dist.destroy_process_group()
    print(json.dumps({"samples": samples, "plans": plans, "reads": reads, "steady": steady,
                      "torch": torch.__version__,
                      "nccl": "none (smoke)" if smoke else ".".join(str(x) for x in torch.cuda.nccl.version()),
                      "gpu": "none (smoke)" if smoke else torch.cuda.get_device_name(0),
                      "nccl_plan": caps.get("nccl_plan")}))


def _fr_source(obs):
    """The observer's flight-recorder source (its entry reads are counted), or None."""
    from c10d_observer.sources import flight_recorder as fr
    parts = getattr(getattr(obs, "parts", None), "parts", ())
    return next((p for p in parts if isinstance(p, fr.FlightRecorderSource)), None)


def launch(recorder, args):
    env = child_env()
    if recorder == "off":
        env.update(OFF_ENV)
    d = tempfile.mkdtemp(prefix="nccl-overhead-")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--recorder", recorder,
                          "--dump-dir", d, "--rounds", str(args.rounds), "--calls", str(args.calls),
                          "--steady", str(args.steady)]
                         + (["--smoke"] if args.smoke else []),
                         env=env, stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(res):
    base = res["samples"][ov.BASELINE]
    rows = {}
    for cfg, by_size in res["samples"].items():
        for name, s in by_size.items():
            st, b = ov.stats_us(s), ov.stats_us(base[name])
            r = ratio(st["median_us"], b["median_us"])
            rows.setdefault(name, {})[cfg] = dict(st, ratio=None if r is None else round(r, 3))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--recorder", default="on", choices=("on", "off"), help=argparse.SUPPRESS)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=500, help="timed calls per size, configuration and round")
    p.add_argument("--steady", type=float, default=0.0,
                   help="then this many seconds of back-to-back 4-byte calls, no observer and observer:auto "
                        "(calls/s, the recorder's entry reads and the share of the time they took)")
    p.add_argument("--out", default=os.path.join(RESULTS, "nccl_overhead.json"))
    p.add_argument("--smoke", action="store_true",
                   help="gloo on the CPU, to check the script where there is no GPU: its figures mean nothing")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    import torch
    if not torch.cuda.is_available() and not args.smoke:
        sys.exit("nccl_overhead.py needs a CUDA device (world size 1, one GPU)")
    out = {"date": today(), "machine": platform.node(), "python": platform.python_version(),
           "rounds": args.rounds, "calls": args.calls, "launches": {}}
    for recorder in ("on", "off"):
        res = launch(recorder, args)
        out.update(torch=res["torch"], nccl=res["nccl"], gpu=res["gpu"])
        out["launches"][recorder] = {"plans": res["plans"], "nccl_plan": res["nccl_plan"], "rows": summarize(res),
                                     "steady": res.get("steady"),
                                     "entry_reads": {k: {"reads": n, "read_ms": round(1e3 * sec, 2)}
                                                     for k, (n, sec) in res.get("reads", {}).items()}}
    on, off = out["launches"]["on"]["rows"], out["launches"]["off"]["rows"]
    out["torch_recorder_cost"] = {
        name: round(on[name][ov.BASELINE]["median_us"] / off[name][ov.BASELINE]["median_us"], 3) for name in on}
    print("torch %s, NCCL %s, %s, %s" % (out["torch"], out["nccl"], out["gpu"], out["date"]))
    for recorder, launch_ in out["launches"].items():
        print("\ntorch's NCCL recorder %s; plans: %s; entry reads: %s" % (recorder, launch_["plans"],
                                                                           launch_["entry_reads"]))
        for name, cfgs in launch_["rows"].items():
            print("  %-6s " % name + "  ".join("%s %.1f/%.1f x%.2f" % (c, v["median_us"], v["p99_us"], v["ratio"] or 0)
                                              for c, v in cfgs.items()))
    print("\ntorch's own recorder (baseline on / off): %s" % out["torch_recorder_cost"])
    for recorder, launch_ in out["launches"].items():
        if launch_.get("steady"):
            print("steady, recorder %s: %s" % (recorder, launch_["steady"]))
    write_json(args.out, out)


if __name__ == "__main__":
    main()
