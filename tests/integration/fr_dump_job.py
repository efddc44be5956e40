"""Two gloo ranks (torch.multiprocessing.spawn, a FileStore) that make a few collectives and dump torch's own
flight recorder as a user would, for torch's analyser: OUT/dumps/rank_<R> (its pickled dump).

argv: OUT, "observed" or "plain".  Observed: c10d_observer.enable() before the process group, as a job that
calls it at its top; the recorder's buffer size is whatever the environment says."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, out, observed):
    from torch._C import _distributed_c10d as C
    if observed:
        import c10d_observer
        c10d_observer.enable(timeout=60, dump_dir=os.path.join(out, "observer"))
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "store"), rank=rank, world_size=2)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.barrier()
    raw = C._dump_fr_trace(includeCollectives=True, includeStackTraces=False)
    with open(os.path.join(out, "dumps", "rank_%d" % rank), "wb") as f:
        f.write(raw)
    if observed:
        c10d_observer.disable()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.makedirs(os.path.join(sys.argv[1], "dumps"))
    mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2] == "observed"), nprocs=2)
