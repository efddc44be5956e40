"""When does a job's signal handler run, for a rank in Python and for a rank waiting in a collective?

    python benchmarks/signal_handler.py [--backend gloo] [--hold 3] [--tag TAG]

Two real ranks (a FileStore, no port), each with a SIGUSR1 handler that writes when it ran.  Rank 0 enters an
``all_reduce``; rank 1 stays in Python (a loop of 50 ms sleeps).  Once rank 0 is in its call, SIGUSR1 goes to
both.  Case ``returns``: ``--hold`` seconds later rank 1 enters the call, which returns.  Case ``never``:
rank 1 never enters it; after ``--hold`` seconds it is killed (its peer's connection closes: gloo raises).
Measured: the handler's delay after the signal, per rank, and rank 0's after the call returned (or raised).
Python runs a handler only between bytecodes of the main thread: the observer's signal cannot run the job's
handler sooner than this (docs/contracts.md, The signal).  NCCL is not run here (no GPU on this machine).
Results: benchmarks/results/signal_handler[_TAG].json, with the command, machine and date.
"""
from __future__ import print_function

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import RESULTS, machine, today, write_json  # noqa: E402


def _child(rank, tmp, case, backend):
    import torch
    import torch.distributed as dist

    def mark(name):
        with open(os.path.join(tmp, "%s-%d" % (name, rank)), "w") as f:
            f.write(repr(time.time()))

    signal.signal(signal.SIGUSR1, lambda s, f: mark("handler"))
    dist.init_process_group(backend, init_method="file://" + os.path.join(tmp, "store"), rank=rank, world_size=2)
    t = torch.ones(4)
    if rank == 0:
        mark("entering")
        try:
            dist.all_reduce(t)
            mark("returned")
        except Exception:
            mark("raised")
        time.sleep(0.5)  # a handler pending at the call's end runs here, if not before
        return
    while not os.path.exists(os.path.join(tmp, "release")):
        time.sleep(0.05)
    if case == "returns":
        dist.all_reduce(t)
        time.sleep(0.5)
    else:
        time.sleep(3600)


def _read(tmp, name, rank):
    try:
        with open(os.path.join(tmp, "%s-%d" % (name, rank))) as f:
            return float(f.read())
    except (IOError, OSError, ValueError):
        return None


def _wait(path, limit):
    end = time.time() + limit
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.01)
    return os.path.exists(path)


def run_case(case, backend, hold):
    tmp = tempfile.mkdtemp(prefix="sigbench-")
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(r), tmp, case, backend]) for r in (0, 1)]
    try:
        if not _wait(os.path.join(tmp, "entering-0"), 120):
            raise RuntimeError("rank 0 never reached its all_reduce")
        time.sleep(1.0)  # rank 0 is inside the call (rank 1 has not entered it)
        sent = time.time()
        for p in procs:
            p.send_signal(signal.SIGUSR1)
        _wait(os.path.join(tmp, "handler-1"), 10)
        time.sleep(hold)
        released = time.time()
        if case == "returns":
            open(os.path.join(tmp, "release"), "w").close()
        else:
            procs[1].kill()
        procs[0].wait(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    end0 = _read(tmp, "returned", 0) or _read(tmp, "raised", 0)
    h0, h1 = _read(tmp, "handler", 0), _read(tmp, "handler", 1)
    return {"case": case, "backend": backend, "hold_s": hold,
            "rank1_in_python_handler_after_s": None if h1 is None else round(h1 - sent, 3),
            "rank0_in_call_handler_after_s": None if h0 is None else round(h0 - sent, 3),
            "rank0_call": "returned" if _read(tmp, "returned", 0) else "raised" if end0 else "never ended",
            "rank0_call_ended_after_s": None if end0 is None else round(end0 - sent, 3),
            "rank0_handler_after_call_end_s": None if h0 is None or end0 is None else round(h0 - end0, 3),
            "released_or_killed_after_s": round(released - sent, 3)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--hold", type=float, default=3.0, help="seconds from the signal to the release (or the kill)")
    p.add_argument("--tag", default="")
    a = p.parse_args()
    import torch
    rows = [run_case(c, a.backend, a.hold) for c in ("returns", "never")]
    for r in rows:
        print(json.dumps(r))
    out = os.path.join(RESULTS, "signal_handler%s.json" % ("_" + a.tag if a.tag else ""))
    write_json(out, {"command": " ".join(["python"] + sys.argv), "machine": machine(), "date": today(),
                     "torch": torch.__version__, "python": sys.version.split()[0], "rows": rows})


if __name__ == "__main__":
    main()
