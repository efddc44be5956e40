"""A plain DDP job as users write it, under torchrun: SIGTERM made an exception (so that ``finally`` runs),
``destroy_process_group`` in a ``finally``.  Rank CULPRIT (env, default 1) stops arriving at step 5 (sleeps
in Python); the others wait in DDP's gradient all_reduce."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def main():
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))  # as users do, so that finally runs
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    culprit = int(os.environ.get("CULPRIT", "1"))
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(10 ** 6):
            if step == 5 and rank == culprit:
                time.sleep(3600)
            loss = model(torch.randn(8, 16)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
