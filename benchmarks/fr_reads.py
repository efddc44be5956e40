"""What reading torch's flight recorder costs the rank, off the call path (issue 31).

    python benchmarks/fr_reads.py                 # the reads, and a training loop with and without them
    python benchmarks/fr_reads.py --late          # whether a buffer size set after `import torch` still counts

A read of the recorder's entries holds the rank's GIL while torch builds the dump (it is a plain pybind call),
so its cost is both CPU and a pause of every other Python thread of the rank, the training loop's included.
Two ranks on gloo (a FileStore, one process each) issue 2,500 all_reduces, so the buffer is full (2,000
entries, torch's default); rank 0 then measures:

- ``reads``: the time of one read of the whole buffer, torch's pickled dump loaded as plain data
  (compat.fr_entries, what the observer does) and its JSON dump (what it did before), 30 reads each;
- ``gil``: the longest pause a Python thread of the rank sees while another thread reads, against none;
- ``loop``: all_reduces a second with the observer enabled (source flight_recorder), its batch reads at
  their natural pace (sources/flight_recorder.py, ``_Batches``), against the same loop with them off: their
  throughput cost, and the share of the time spent reading (``read_s`` / wall);
- ``--late``: in a fresh process, TORCH_NCCL_TRACE_BUFFER_SIZE=2000 set after `import torch` and before
  init_process_group, and set after it: whether gloo's recorder records (compat.recorder_on_before_init).

Results go to results/fr_reads_<torch line>.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, child_env, machine, summary, table, today, write_json  # noqa: E402


def _rank(rank, work, seconds):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + os.path.join(work, "store"), rank=rank, world_size=2)
    t = torch.ones(4)
    for _ in range(2500):
        dist.all_reduce(t)
    out = {}
    if rank == 0:
        from c10d_observer import compat
        from torch._C import _distributed_c10d as C

        def timed(fn, n=30):
            vals = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                vals.append(time.perf_counter() - t0)
            return summary(vals, 1e3, "_ms")

        n_entries = len(compat.fr_entries())
        out["entries"] = n_entries
        out["reads"] = {"pickle_plain": timed(compat.fr_entries),
                        "json": timed(lambda: json.loads(C._dump_fr_trace_json(includeCollectives=True)))}
        out["gil"] = {"idle": _pauses(None), "while_reading": _pauses(compat.fr_entries)}
    dist.barrier()
    out["loop"] = {"batches_off": _loop(dist, t, seconds, False), "batches_on": _loop(dist, t, seconds, True)}
    dist.barrier()
    if rank == 0:
        with open(os.path.join(work, "rank0.json"), "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def _pauses(reader, seconds=3.0):
    """The longest gaps between iterations of a tight Python loop, while another thread calls ``reader``
    every 50 ms (or none): a read pauses the loop for as long as it holds the GIL."""
    stop = threading.Event()

    def read():
        while not stop.wait(0.05):
            reader()
    th = threading.Thread(target=read, daemon=True) if reader else None
    if th:
        th.start()
    gaps, last = [], time.perf_counter()
    end = last + seconds
    while True:
        now = time.perf_counter()
        if now - last > 0.002:
            gaps.append(now - last)
        last = now
        if now > end:
            break
    stop.set()
    if th:
        th.join()
    gaps.sort()
    return {"pauses_over_2ms": len(gaps), "longest_ms": round(1e3 * gaps[-1], 2) if gaps else 0.0,
            "median_pause_ms": round(1e3 * gaps[len(gaps) // 2], 2) if gaps else 0.0}


def _loop(dist, t, seconds, batches):
    """all_reduces a second for ``seconds`` under the observer (source flight_recorder), batch reads on or off."""
    import c10d_observer
    from c10d_observer.sources import flight_recorder as fr
    from c10d_observer.sources import recorder_books as books
    obs = c10d_observer.enable(timeout=300, source="flight_recorder", dump_dir=tempfile.mkdtemp())
    src = next((p for p in getattr(obs.parts, "parts", ()) if isinstance(p, fr.FlightRecorderSource)), None)
    saved = books.LADDER
    if not batches:
        books.LADDER = (1e9,)  # the first read happens at once; the next never
    try:
        dist.barrier()
        n, t0 = 0, time.perf_counter()
        r0 = src.read_s if src else 0.0
        while time.perf_counter() - t0 < seconds:
            for _ in range(100):
                dist.all_reduce(t)
            n += 100
        wall = time.perf_counter() - t0
        read = (src.read_s - r0) if src else None
    finally:
        books.LADDER = saved
        c10d_observer.disable()
    return {"calls_per_s": round(n / wall, 1), "read_share_pct": round(100 * read / wall, 3) if read is not None
            else None, "reads": src.reads if src else None}


def late():
    """Whether TORCH_NCCL_TRACE_BUFFER_SIZE set after `import torch` counts (before init) or not (after)."""
    code = ("import os, sys, json, torch, torch.distributed as dist\n"
            "when = sys.argv[1]\n"
            "if when == 'before_init': os.environ['TORCH_NCCL_TRACE_BUFFER_SIZE'] = '2000'\n"
            "dist.init_process_group('gloo', init_method='file://' + sys.argv[2], rank=0, world_size=1)\n"
            "if when == 'after_init': os.environ['TORCH_NCCL_TRACE_BUFFER_SIZE'] = '2000'\n"
            "dist.all_reduce(torch.ones(1))\n"
            "print(json.dumps(bool(json.loads(torch._C._distributed_c10d._dump_fr_trace_json("
            "includeCollectives=False)).get('pg_status'))))\n")
    out = {}
    for when in ("unset", "before_init", "after_init"):
        store = tempfile.mktemp()
        env = child_env()
        env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
        env.pop("TORCH_FR_BUFFER_SIZE", None)
        res = subprocess.run([sys.executable, "-c", code, when, store], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        out[when] = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else res.stderr[-300:]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--late", action="store_true", help="only whether a late buffer size still counts")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of each loop (default 20)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank is not None:
        return _rank(args.rank, args.work, args.seconds)
    import torch
    line = "torch" + "".join(torch.__version__.split("+")[0].split(".")[:2])
    result = {"benchmark": "fr_reads", "date": today(), "machine": machine(), "torch": torch.__version__}
    if args.late:
        result["late"] = late()
        print("recorder records with the variable", result["late"])
        path = os.path.join(RESULTS, "fr_reads_late_%s.json" % line)
    else:
        work = tempfile.mkdtemp(prefix="c10d-fr-reads-")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), "--work", work,
                                   "--seconds", str(args.seconds)], env=child_env()) for r in (0, 1)]
        if any(p.wait() for p in procs):
            raise SystemExit("a rank failed")
        with open(os.path.join(work, "rank0.json")) as f:
            result.update(json.load(f))
        r = result["reads"]
        table(["read of %d entries" % result["entries"], "median ms", "p90 ms", "max ms"],
              [[k, "%.1f" % v["median_ms"], "%.1f" % v["p90_ms"], "%.1f" % v["max_ms"]] for k, v in r.items()])
        g = result["gil"]
        print("longest pause of a Python thread: %.1f ms idle, %.1f ms while another reads (median pause %.1f ms)"
              % (g["idle"]["longest_ms"], g["while_reading"]["longest_ms"], g["while_reading"]["median_pause_ms"]))
        lo = result["loop"]
        print("loop: %s calls/s with batch reads (%s %% of the time reading, %s reads), %s without" % (
            lo["batches_on"]["calls_per_s"], lo["batches_on"]["read_share_pct"], lo["batches_on"]["reads"],
            lo["batches_off"]["calls_per_s"]))
        path = os.path.join(RESULTS, "fr_reads_%s.json" % line)
    write_json(path, result)
    print("written:", path)


if __name__ == "__main__":
    main()
