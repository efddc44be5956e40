"""Should enable() turn the flight recorder on where torch leaves it off (2.8-2.10)?

It could only do so before the first process group exists (the recorder reads its buffer size once), so
the question is what recording costs the job.  This runs a 4-byte gloo all_reduce loop at world size 2
in alternating launches: recorder off (no variable), on (TORCH_FR_BUFFER_SIZE=2000), on with the observer
reading it (source="flight_recorder", what turning it on would buy), and off with the patch source (the
alternative on those releases); one core per rank.  Prints each configuration's median per-call latency
(median over launches of each launch's median) and its ratio to "off".

    python benchmarks/fr_default.py [--launches 3] [--iters 3000] [--json PATH]

Decision recorded in docs/sources.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import child_env, median, table, today, write_json  # noqa: E402


def rank_main(rank, store, iters, mode, out):
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        # one core per rank: otherwise whether the two ranks share a core changes from launch to launch
        # and that moves the median by 20 %, more than the differences measured here.
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank % len(os.sched_getaffinity(0))]})
    import datetime
    import torch
    import torch.distributed as dist
    if mode in ("patch", "fr_on_observer"):
        import c10d_observer
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    if mode == "patch":
        c10d_observer.enable(timeout=300, dump_dir=tempfile.mkdtemp(), source="patch")
    elif mode == "fr_on_observer":
        obs = c10d_observer.enable(timeout=300, dump_dir=tempfile.mkdtemp(), source="flight_recorder")
        assert obs.source == "flight_recorder", obs.source
    t = torch.ones(1)
    for _ in range(500):
        dist.all_reduce(t)
    lat = []
    for _ in range(iters):
        a = time.perf_counter_ns()
        dist.all_reduce(t)
        lat.append(time.perf_counter_ns() - a)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(lat, f)
    dist.destroy_process_group()


def launch(mode, iters):
    d = tempfile.mkdtemp()
    env = child_env(TORCH_FR_BUFFER_SIZE=2000 if mode in ("fr_on", "fr_on_observer") else None,
                    TORCH_NCCL_TRACE_BUFFER_SIZE=None)
    out = os.path.join(d, "lat.json")
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--store", os.path.join(d, "store"),
                               "--iters", str(iters), "--mode", mode, "--out", out], env=env) for r in range(2)]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a rank failed in mode %s" % mode)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--json")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--store")
    ap.add_argument("--mode")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.rank is not None:
        return rank_main(a.rank, a.store, a.iters, a.mode, a.out)
    import torch
    modes = ("fr_off", "fr_on", "fr_on_observer", "patch")
    meds = {m: [] for m in modes}
    for _ in range(a.launches):
        for m in modes:
            meds[m].append(median(launch(m, a.iters)) / 1e3)
    base = median(meds["fr_off"])
    res = {}
    for m in modes:
        med = median(meds[m])
        res[m] = {"median_us": med, "per_launch_us": meds[m], "ratio": med / base}
    table(("config", "median us", "ratio"), [(m, "%.1f" % r["median_us"], "%.3f" % r["ratio"]) for m, r in res.items()],
          align="l", title="torch %s, 4-byte gloo all_reduce, world size 2, %d launches x %d calls" % (
              torch.__version__, a.launches, a.iters))
    if a.json:
        write_json(a.json, {"torch": torch.__version__, "date": today(), "results": res})


if __name__ == "__main__":
    main()
