"""A training script with a SIGUSR1 handler of its own at its top (as PyTorch Lightning installs one for
Slurm's requeue), and nothing of c10d_observer: run under `c10d_observer run` by the CLI test.

Rank argv[2] stalls before its second all_reduce until the file named by argv[1] exists.  Each rank's
handler appends a line to argv[1] + ".handler-rank<R>"; at the end each rank prints how many it appended.
"""
import os
import signal
import sys
import time

release, culprit = sys.argv[1], int(sys.argv[2])
calls = []


def on_usr1(signum, frame):
    calls.append(signum)


signal.signal(signal.SIGUSR1, on_usr1)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == culprit:
    while not os.path.exists(release):
        time.sleep(0.02)
dist.all_reduce(t)
dist.barrier()
print("rank %d handler calls: %d" % (dist.get_rank(), len(calls)), flush=True)
