"""Detection latency: how long after (call start + timeout) the watchdog writes the report and signals.

    torchrun --standalone --nproc_per_node=2 benchmarks/detection.py [--hangs 20] [--timeout 0.5]

(torch 1.8: python -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=PORT ...)

Each of ``--hangs`` rounds, rank 1 stalls before an all_reduce for ``timeout + 4 * poll_interval`` while
rank 0 waits in it; rank 0's watchdog reports and signals once per round.  Two times are measured against
``start + timeout`` (``start`` from rank 0's report, one entry per round):

* detected: ``detected_at`` in the report (the watchdog's decision; the report is renamed into place,
  then the signal is sent);
* signal: when rank 0's stack dump grows, as seen by rank 1, which polls the file every millisecond
  while it stalls (the rank's helper thread writes it when the watchdog asks by a file, looked for every
  poll or half poll; faulthandler from the signal handler where the helper does not answer).

The bound the design promises is ``timeout + 2 * poll_interval``.  Time to verdict: rank 0's watchdog
gathers both ranks' states and writes ``verdict.json`` each round; rank 1 reads it when it changes while
it stalls, and the verdict's ``verdict_at`` minus its first ``detected_at`` is the time from detection to
the merged verdict.  Rank 0 prints a table and writes JSON.
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import RESULTS, summary, write_json  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import c10d_observer  # noqa: E402


def _stats(values):  # every sample kept: the figures can be recomputed
    return summary(values, keys=("min", "median", "p99", "max"), keep_all=True)


def _watch(path, verdict_path, stall_s):
    """Stall for ``stall_s``; return (when (time.time()) the file at ``path`` grew or None, the seconds
    from first detection to the verdict of a verdict.json written meanwhile or None)."""
    def stat(p, attr):
        try:
            return getattr(os.stat(p), attr)
        except OSError:
            return 0
    before = stat(path, "st_size")
    verdict_before = stat(verdict_path, "st_mtime_ns")
    seen = to_verdict = None
    deadline = time.monotonic() + stall_s
    while time.monotonic() < deadline:
        if seen is None and stat(path, "st_size") > before:
            seen = time.time()
        if to_verdict is None and stat(verdict_path, "st_mtime_ns") != verdict_before:
            try:
                with open(verdict_path) as f:
                    v = json.load(f)
                detected = [h["detected_at"] for h in v["hangs"] if h.get("detected_at")]
                to_verdict = v["verdict_at"] - min(detected)
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.001)
    return seen, to_verdict


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hangs", type=int, default=20)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--poll-interval", type=float, default=0.05)
    p.add_argument("--json", default=os.path.join(RESULTS, "detection.json"))
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dump = tempfile.mkdtemp(prefix="c10d_observer-bench-") if rank == 0 else None
    holder = [dump]
    dist.broadcast_object_list(holder, src=0)
    dump = holder[0]
    dist.barrier()
    obs = c10d_observer.enable(timeout=a.timeout, poll_interval=a.poll_interval, dump_dir=dump)
    holder = [obs.stack_path]
    dist.broadcast_object_list(holder, src=0)
    stacks = holder[0]
    arrivals, verdicts = [], []
    t = torch.ones(1)
    for _ in range(a.hangs):
        dist.barrier()
        if rank == 1:
            # long enough for the gather window (max(2 s, 2.5 polls + 0.5 s)) to close at the latest
            arrived, to_verdict = _watch(stacks, os.path.join(dump, "verdict.json"), a.timeout + 2.5)
            arrivals.append(arrived)
            verdicts.append(to_verdict)
        dist.all_reduce(t)
    holder = [(arrivals, verdicts)]
    dist.broadcast_object_list(holder, src=1)
    arrivals, verdicts = holder[0]
    dist.barrier()
    c10d_observer.disable()
    if rank == 0:
        rep = [json.load(open(os.path.join(dump, n))) for n in os.listdir(dump) if n.startswith("report-rank0")][0]
        entries = [e for e in rep["overdue"] if e["op"] == "all_reduce"]
        late = [(e["detected_at"] - e["started_at"] - a.timeout) * 1e3 for e in entries]
        sig = [(arr - e["started_at"] - a.timeout) * 1e3 for e, arr in zip(entries, arrivals) if arr]
        bound = 2 * a.poll_interval * 1e3
        res = {
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "source": obs.source, "timeout_s": a.timeout,
            "poll_interval_s": a.poll_interval, "hangs": a.hangs, "detected": len(late),
            "signals_seen": len(sig), "bound_ms": bound,
            "detected_late_ms": _stats(late), "signal_late_ms": _stats(sig),
            "detected_within_bound": sum(1 for x in late if x <= bound),
            "signal_within_bound": sum(1 for x in sig if x <= bound),
            "verdicts": sum(1 for x in verdicts if x is not None),
            "to_verdict_ms": _stats([x * 1e3 for x in verdicts if x is not None]),
        }
        print("after start + timeout (%s, torch %s, timeout %g s, poll %g s, bound 2*poll = %.0f ms)"
              % (obs.source, torch.__version__, a.timeout, a.poll_interval, bound))
        print("  hangs injected %d; detected %d (%d within bound); signals seen %d (%d within bound)"
              % (a.hangs, len(late), res["detected_within_bound"], len(sig), res["signal_within_bound"]))
        for name, key in (("detected", "detected_late_ms"), ("signal", "signal_late_ms")):
            st = res[key]
            if st:
                print("  %-9s late by (ms): min %.1f  median %.1f  p99 %.1f  max %.1f"
                      % (name, st["min"], st["median"], st["p99"], st["max"]))
        st = res["to_verdict_ms"]
        if st:
            print("  verdicts %d; from first detection to verdict (ms): min %.1f  median %.1f  p99 %.1f  max %.1f"
                  % (res["verdicts"], st["min"], st["median"], st["p99"], st["max"]))
        write_json(a.json, res)
        shutil.rmtree(dump, ignore_errors=True)
    dist.barrier()


if __name__ == "__main__":
    main()
