"""A job that knows nothing of c10d_observer, started with torch.multiprocessing.spawn (issue 24, row 6):
three ranks; at the second call rank 2 broadcasts where the others all_reduce.  Run under
``c10d-observer run --on-timeout abort``.  argv: store file, work dir."""
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, store, work):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=3)
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 2:
        dist.broadcast(t, src=2)
    else:
        dist.all_reduce(t)
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2]), nprocs=3)
