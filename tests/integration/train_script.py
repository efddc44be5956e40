"""A training script that knows nothing of c10d_observer: run under `c10d_observer run` by the CLI test.

Rank argv[2] (default 1) stalls before its second all_reduce until the file named by argv[1] exists.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

release = sys.argv[1]
culprit = int(sys.argv[2]) if len(sys.argv) > 2 else 1
dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == culprit:
    while not os.path.exists(release):
        time.sleep(0.02)
dist.all_reduce(t)
print("rank %d finished: %s" % (dist.get_rank(), t[0].item()), flush=True)
