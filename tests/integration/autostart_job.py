"""A job that knows nothing of c10d_observer: two ranks started with torch.multiprocessing.spawn, or by
torchrun (rank, world and store then come from the launcher's environment).

argv: store file (unused under torchrun), work dir.  Rank 1 skips the second all_reduce until WORK/release exists.  Each rank
writes WORK/rank<R>.json: whether an observer was active in it, and its pid; and WORK/handler<R>.json: how
many times the SIGUSR1 handler it installed before the observer started ran."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, store, work):
    import signal
    calls = []
    signal.signal(signal.SIGUSR1, lambda s, f: calls.append(s))  # the job's own handler, before the observer
    if "LOCAL_RANK" in os.environ:  # a worker of a launcher
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    obs = sys.modules.get("c10d_observer.observer")
    active = obs is not None and obs.active() is not None
    with open(os.path.join(work, "rank%d.json" % rank), "w") as f:
        json.dump({"pid": os.getpid(), "observed": active, "source": active and obs.active().source,
                   "trace_env": os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")}, f)
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        while not os.path.exists(os.path.join(work, "release")):
            time.sleep(0.02)
    dist.all_reduce(t)
    dist.barrier()  # past the hang: what the observer sent has been handled
    with open(os.path.join(work, "handler%d.json" % rank), "w") as f:
        json.dump({"calls": len(calls)}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    if "LOCAL_RANK" in os.environ:  # a worker of torchrun (or torch.distributed.launch --use_env)
        rank_main(int(os.environ["RANK"]), sys.argv[1], sys.argv[2])
        sys.exit(0)
    with open(os.path.join(sys.argv[2], "parent.json"), "w") as f:
        json.dump({"pid": os.getpid(), "imported": "c10d_observer.observer" in sys.modules}, f)
    mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2]), nprocs=2)
