"""Diagnosis, not a test: why a call behind a busy GPU after 10,000 quick calls can go unreported under the
default source (tests/gpu, nccl-auto-healthy, failed once on an H200 on 2026-11-27).

    python3 tests/gpu/diag_healthy.py OUT_DIR CALLS [CALLS ...]     # one process per CALLS, in parallel

Each process: NCCL at world size 1, enable(timeout=2, poll 0.2), CALLS mixed quick calls (as gpu_scenarios'
healthy case), then an all_reduce behind a ~10 s sleep kernel.  A thread samples, every 50 ms from the stuck
call until the GPU is free, what the flight-recorder reader holds (in flight, held, the stream's numbers,
its open calls, the pin, the done hint) and what a channel reader sees (each stream's oldest call).
"""
import datetime
import glob
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def one(out, calls):
    import torch
    import torch.distributed as dist

    import c10d_observer
    from c10d_observer import channel_reader as ch_reader
    from c10d_observer import compat
    from c10d_observer.sources import flight_recorder as fr

    dump = os.path.join(out, "dumps")
    os.makedirs(dump, exist_ok=True)
    dist.init_process_group("nccl", init_method="file://" + os.path.join(out, "store"), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=300))
    torch.cuda.set_device(0)
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    obs = c10d_observer.enable(timeout=2.0, poll_interval=0.2, dump_dir=dump, source="auto")
    src = [p for p in obs.parts.parts if isinstance(p, fr.FlightRecorderSource)]
    src = src[0] if src else None
    reader = ch_reader.ChannelReader.attach(obs.channel)
    gathered, scattered, works = torch.empty(4, device="cuda"), torch.empty(4, device="cuda"), []
    for i in range(calls):
        k = i % 6
        if k == 0:
            dist.all_reduce(t)
        elif k == 1:
            works.append(dist.all_reduce(t, async_op=True))
        elif k == 2:
            dist.broadcast(t, 0)
        elif k == 3:
            dist.all_gather_into_tensor(gathered, t)
        elif k == 4:
            dist.reduce_scatter_tensor(scattered, t)
        elif i % 600 == 5:
            dist.barrier(device_ids=[0])
        else:
            dist.all_reduce(t, async_op=True).wait()
        if len(works) > 64:
            works.pop(0).wait()
    torch.cuda.synchronize()
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.wait(0.05):
            s = {"t": time.time()}
            try:
                s["status"] = {str(k): v for k, v in compat.nccl_status().items()}
            except Exception as e:
                s["status"] = repr(e)
            if src is not None:
                pgs = {}
                for key, p in [((r.name, k), q) for r in src.readers for k, q in list(r.pgs.items())]:
                    st = p.stream
                    pgs[str(key)] = {
                        "inflight": sorted(p.inflight)[:6], "n_inflight": len(p.inflight),
                        "held": sorted(p.held)[:6], "completed": p.completed,
                        "st_seq": st.seq if st is not None else None,
                        "open_n": len(st.open) if st is not None else None,
                        "open_min": min(list(st.open)) if st is not None and st.open else None,
                        "pin": st._pin if st is not None else None,
                        "hint": st._mv[st._hint] if st is not None else None,
                    }
                s["pgs"] = pgs
            s["snap"] = [[st.desc.get("group"), st.desc.get("kind"), st.last_started, st.last_completed,
                          list(st.oldest) if st.oldest else None, st.overflow] for st in reader.snapshot()]
            samples.append(s)

    th = threading.Thread(target=sample, daemon=True)
    torch.cuda._sleep(int(2e10))
    t0 = time.time()
    th.start()
    dist.all_reduce(t)
    torch.cuda.synchronize()
    free = time.time() - t0
    time.sleep(0.5)
    stop.set()
    th.join()
    c10d_observer.disable()
    dist.destroy_process_group()
    reports = glob.glob(os.path.join(dump, "report-*.json"))
    res = {"calls": calls, "stuck_at": t0, "gpu_free_after_s": free, "reported": bool(reports),
           "samples": samples}
    with open(os.path.join(out, "diag.json"), "w") as f:
        json.dump(res, f)


def main():
    if sys.argv[1] == "--one":
        return one(sys.argv[2], int(sys.argv[3]))
    out = sys.argv[1]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = []
    for i, calls in enumerate(sys.argv[2:]):
        d = os.path.join(out, "run%02d-%s" % (i, calls))
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(d, "log.txt"), "w")
        procs.append((d, subprocess.Popen([sys.executable, __file__, "--one", d, calls], stdout=log,
                                          stderr=subprocess.STDOUT, env=env)))
    for d, p in procs:
        rc = p.wait(timeout=240)
        try:
            with open(os.path.join(d, "diag.json")) as f:
                r = json.load(f)
            print(d, "rc", rc, "calls", r["calls"], "reported", r["reported"], "free %.1f" % r["gpu_free_after_s"])
        except Exception as e:
            print(d, "rc", rc, "no diag:", e)


if __name__ == "__main__":
    main()
