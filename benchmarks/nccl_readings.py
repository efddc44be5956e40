#!/usr/bin/env python
"""What torch's legacy NCCL flight recorder says while a call waits behind a busy GPU, read every millisecond.

    python benchmarks/nccl_readings.py --out tests/data/nccl/nccl-fr-readings-h200-torch2.11.json

On one GPU, world size 1 (NCCL refuses two ranks on one device).  Per case: a ``torch.cuda._sleep`` kernel
(about 1 s) is queued, the call is issued behind it, and ``pg_status`` is read every millisecond for the
first 300 ms, then every 10 ms until the GPU is free; a reading is kept where ``pg_status`` changed, with the
active entries (``onlyActive``) read at that moment.  This shows when torch's watchdog calls each call
completed against when the GPU finished it (the coalesced block: long before; flight_recorder.py's module
docstring).  Also: the cost of one read of the active entries with a full buffer (2,000 entries), and how
far a Python thread counts meanwhile (whether the read holds the GIL).  No observer runs here.
"""
from __future__ import print_function

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import today, write_json  # noqa: E402

SLEEP_CYCLES = int(2e9)  # about 1 s at 1.98 GHz


def _status(C):
    return json.loads(C._dump_nccl_trace_json(includeCollectives=False)).get("pg_status") or {}


def _active(C):
    return json.loads(C._dump_nccl_trace_json(includeCollectives=True, onlyActive=True)).get("entries") or []


def _cases(torch, dist):
    from torch.distributed.distributed_c10d import _coalescing_manager
    t = torch.ones(1024, device="cuda")
    t2 = torch.ones(1024, device="cuda")

    def sync():
        dist.all_reduce(t)

    def async_():
        return dist.all_reduce(t, async_op=True)

    def coalesced():
        with _coalescing_manager(device=torch.device("cuda", 0)):
            dist.all_reduce(t)
            dist.all_reduce(t2)

    def coalesced_async():
        with _coalescing_manager(device=torch.device("cuda", 0), async_ops=True) as cm:
            dist.all_reduce(t)
            dist.all_reduce(t2)
        return cm

    def all_gather_coalesced():
        out = torch.empty(1024, device="cuda")
        with _coalescing_manager(device=torch.device("cuda", 0)):
            dist.all_gather_into_tensor(out, t)

    return [("sync_all_reduce", sync), ("async_all_reduce", async_), ("coalesced", coalesced),
            ("coalesced_async", coalesced_async), ("all_gather_in_coalescing_manager", all_gather_coalesced)]


def record(torch, dist, C, name, fn):
    torch.cuda.synchronize()
    rows = [{"t_ms": 0.0, "note": "before", "pg_status": _status(C), "active": _active(C)}]
    torch.cuda._sleep(SLEEP_CYCLES)
    t0 = time.perf_counter()
    keep = fn()  # noqa: F841  (async works are held, not waited on)
    issued_ms = 1e3 * (time.perf_counter() - t0)
    last = None
    gpu_free = torch.cuda.Event()
    gpu_free.record()
    while True:
        st = _status(C)
        now_ms = 1e3 * (time.perf_counter() - t0)
        if st != last:
            rows.append({"t_ms": round(now_ms, 2), "note": "pg_status changed" if last else "issued (%.2f ms)" %
                         issued_ms, "pg_status": st, "active": _active(C), "gpu_busy": not gpu_free.query()})
            last = st
        if gpu_free.query():
            break
        time.sleep(0.001 if now_ms < 300 else 0.01)
    free_ms = 1e3 * (time.perf_counter() - t0)
    torch.cuda.synchronize()
    time.sleep(0.3)
    rows.append({"t_ms": round(1e3 * (time.perf_counter() - t0), 2), "note": "GPU free at %.1f ms; + 0.3 s" %
                 free_ms, "pg_status": _status(C), "active": _active(C)})
    return rows


def read_cost(torch, dist, C, reads=50):
    t = torch.ones(4, device="cuda")
    for i in range(2500):  # fill the buffer (2,000 entries by default)
        dist.all_reduce(t)
    torch.cuda.synchronize()
    count = [0]
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    th = threading.Thread(target=counter, daemon=True)
    th.start()
    time.sleep(0.2)
    c0, t0 = count[0], time.perf_counter()
    time.sleep(0.2)
    idle_rate = (count[0] - c0) / (time.perf_counter() - t0)
    costs, rates = [], []
    for _ in range(reads):
        c0, t0 = count[0], time.perf_counter()
        C._dump_nccl_trace_json(includeCollectives=True, onlyActive=True)
        dt = time.perf_counter() - t0
        costs.append(dt)
        rates.append((count[0] - c0) / dt)
    n_entries = len(json.loads(C._dump_nccl_trace_json(includeCollectives=True)).get("entries") or [])
    stop.set()
    costs.sort()
    rates.sort()
    return {"entries_in_buffer": n_entries, "reads": reads, "median_ms": round(1e3 * costs[len(costs) // 2], 3),
            "p90_ms": round(1e3 * costs[int(0.9 * len(costs))], 3),
            "python_thread_rate_during_read_vs_idle": round(rates[len(rates) // 2] / idle_rate, 3)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "nccl-fr-readings.json"))
    args = p.parse_args()
    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as C
    d = tempfile.mkdtemp(prefix="nccl-readings-")
    dist.init_process_group("nccl", rank=0, world_size=1, init_method="file://" + os.path.join(d, "store"))
    torch.cuda.set_device(0)
    warm = torch.ones(4, device="cuda")
    dist.all_reduce(warm)
    torch.cuda.synchronize()
    out = {"command": "python benchmarks/nccl_readings.py --out " + args.out, "date": today(),
           "machine": platform.node(), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "nccl": ".".join(str(x) for x in torch.cuda.nccl.version()), "world_size": 1,
           "sleep_cycles": SLEEP_CYCLES, "cases": {}}
    for name, fn in _cases(torch, dist):
        try:
            out["cases"][name] = record(torch, dist, C, name, fn)
        except Exception as e:  # noqa: BLE001  (a case this torch cannot run: say so, go on)
            out["cases"][name] = {"error": repr(e)}
        rows = out["cases"][name]
        if isinstance(rows, list):
            print(name, [(r["t_ms"], r["pg_status"].get("0"), [(a["collective_seq_id"], a["profiling_name"],
                                                                 a["state"]) for a in r["active"]], r.get("gpu_busy"))
                         for r in rows])
        else:
            print(name, rows)
    out["active_read_cost"] = read_cost(torch, dist, C)
    print("active read cost:", out["active_read_cost"])
    dist.destroy_process_group()
    write_json(args.out, out)


if __name__ == "__main__":
    main()
