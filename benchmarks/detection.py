"""Detection latency: how long after (call start + timeout) the watchdog writes the report and signals.

    torchrun --standalone --nproc_per_node=2 benchmarks/detection.py [--hangs 20] [--timeout 0.5]

(torch 1.8: python -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=PORT ...)

Each of ``--hangs`` rounds, rank 1 stalls before an all_reduce for ``timeout + 4 * poll_interval`` while
rank 0 waits in it; rank 0's watchdog reports and signals once per round.  The report records, per
overdue call, when it started and when it was detected (the signal follows the report's rename at once).
The bound the design promises is ``timeout + 2 * poll_interval``.  Rank 0 prints a table and writes JSON.
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import c10d_observer  # noqa: E402


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hangs", type=int, default=20)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--poll-interval", type=float, default=0.05)
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "detection.json"))
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dump = tempfile.mkdtemp(prefix="c10d_observer-bench-") if rank == 0 else None
    holder = [dump]
    dist.broadcast_object_list(holder, src=0)
    dump = holder[0]
    dist.barrier()
    obs = c10d_observer.enable(timeout=a.timeout, poll_interval=a.poll_interval, dump_dir=dump)
    t = torch.ones(1)
    for _ in range(a.hangs):
        dist.barrier()
        if rank == 1:
            time.sleep(a.timeout + 4 * a.poll_interval)
        dist.all_reduce(t)
    dist.barrier()
    c10d_observer.disable()
    if rank == 0:
        rep = [json.load(open(os.path.join(dump, n))) for n in os.listdir(dump) if n.startswith("report-rank0")][0]
        late = [(e["detected_at"] - e["started_at"] - a.timeout) * 1e3 for e in rep["overdue"]
                if e["op"] == "all_reduce"]
        bound = 2 * a.poll_interval * 1e3
        res = {
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "source": obs.source, "timeout_s": a.timeout,
            "poll_interval_s": a.poll_interval, "hangs": a.hangs, "detected": len(late),
            "late_ms": {"min": min(late), "median": percentile(late, 50), "p99": percentile(late, 99),
                        "max": max(late)},
            "bound_ms": bound, "within_bound": sum(1 for x in late if x <= bound),
        }
        print("detection after start + timeout (%s, torch %s, timeout %g s, poll %g s)"
              % (obs.source, torch.__version__, a.timeout, a.poll_interval))
        print("  hangs injected %d, detected %d, within timeout + 2*poll: %d"
              % (a.hangs, len(late), res["within_bound"]))
        print("  late by (ms): min %.1f  median %.1f  p99 %.1f  max %.1f   bound %.0f"
              % (min(late), res["late_ms"]["median"], res["late_ms"]["p99"], max(late), bound))
        os.makedirs(os.path.dirname(a.json), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        shutil.rmtree(dump, ignore_errors=True)
    dist.barrier()


if __name__ == "__main__":
    main()
