"""A training script that knows nothing of c10d_observer, for the cross-node straggler tests: ``steps`` steps of
compute (``step_s``, 20 % jitter) and two calls each (the gradients' all_reduce and the loss's, right after);
rank ``slow`` computes ``factor`` times longer.  ``mesh`` (a sixth argument, 4 ranks): a 2x2 mesh, tp groups
[0, 1] and [2, 3] (within a node of two ranks), dp groups [0, 2] and [1, 3] (across): each step the compute, a tp
all_reduce, and two dp all_reduces back to back (a bucket each).  Each rank writes WORK/rank<R>.json with when
each step began.

argv: work dir, steps, step_s, slow rank, factor[, mesh]."""
import json
import os
import random
import sys
import time

import torch
import torch.distributed as dist

work, steps, step_s, slow, factor = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5])
mesh = sys.argv[6:7] == ["mesh"]
dist.init_process_group("gloo")
rank = dist.get_rank()
if mesh:
    tp = [dist.new_group([0, 1]), dist.new_group([2, 3])][rank // 2]
    dp = [dist.new_group([0, 2]), dist.new_group([1, 3])][rank % 2]
rng = random.Random(rank)
x, t = torch.ones(32, 32), torch.ones(256)
step_at = {}
for step in range(steps):
    step_at[step] = time.time()
    until = time.monotonic() + step_s * (factor if rank == slow else 1.0) * (1 + 0.2 * (rng.random() - 0.5))
    while time.monotonic() < until:
        x = (x @ x).clamp_(-1, 1)
    if mesh:
        dist.all_reduce(t, group=tp)
        dist.all_reduce(t, group=dp)
        dist.all_reduce(torch.ones(1), group=dp)
        continue
    dist.all_reduce(t)
    dist.all_reduce(torch.ones(1))
dist.barrier()
with open(os.path.join(work, "rank%d.json" % rank), "w") as f:
    json.dump({"step_at": step_at}, f)
