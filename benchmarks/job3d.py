"""A 3D-parallel training job on CPU ranks (issue 42): 8 gloo ranks as a (pp 2) x (dp 2) x (tp 2) mesh, the way
torchtitan-style jobs are built, with one fault (benchmarks/fault_matrix.py's kinds ``3d_*``).

Each pipeline stage is two transformer-MLP blocks with Megatron-style tensor parallelism (the first linear
split by columns, the second by rows, an ``all_reduce`` on the tp group after it in the forward pass and one
before the first in the backward pass), each block sharded over the dp group with FSDP2 (``fully_shard``:
an ``all_gather`` of its parameters before its forward and backward, a ``reduce_scatter`` of its gradients
after its backward), the stages driven by ``torch.distributed.pipelining`` (GPipe, two microbatches: the
activations and their gradients sent with ``batch_isend_irecv`` on the pp group).  Where the torch line lacks
``fully_shard`` or ``pipelining`` the job says so (``unavailable.json``) and runs nothing.

Faults (``--kind``), at ``--fault-step`` on the rank ``--culprit``:
    3d_pp_stall   the rank (a stage-1 rank) stops in Python before its pipeline step, forever
    3d_tp_skip    the rank leaves out the forward ``all_reduce`` of its first block's tensor-parallel pair once
    3d_fsdp_skip  the rank runs its second block without FSDP's hooks once (a conditional branch around a
                  block, as a mixture-of-experts or an early-exit model has): its ``all_gather`` is never issued

    python benchmarks/job3d.py --kind 3d_tp_skip --out DIR   (under torchrun or fault_matrix.py)
"""
import os
import sys
import time

import torch
import torch.distributed as dist

from fault_job import _write, job_args  # the job fault_matrix.py starts for the other kinds (benchmarks/)

KINDS = ("3d_healthy", "3d_pp_stall", "3d_tp_skip", "3d_fsdp_skip")
D, HIDDEN, BATCH, MICRO = 64, 256, 8, 2


class _ReduceForward(torch.autograd.Function):
    """Megatron's g: all_reduce the partial sums in the forward pass, pass the gradient through."""

    @staticmethod
    def forward(ctx, x, group, skip):
        x = x.clone()
        if not skip:
            dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class _ReduceBackward(torch.autograd.Function):
    """Megatron's f: the identity in the forward pass, all_reduce the input's gradient in the backward pass."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class Block(torch.nn.Module):
    """x + W2 relu(W1 x), W1 split by columns and W2 by rows over the tp group."""

    def __init__(self, tp_group, tp_size):
        super().__init__()
        self.tp_group = tp_group
        self.w1 = torch.nn.Linear(D, HIDDEN // tp_size)
        self.w2 = torch.nn.Linear(HIDDEN // tp_size, D, bias=False)
        self.skip_reduce = False

    def forward(self, x):
        h = torch.relu(self.w1(_ReduceBackward.apply(x, self.tp_group)))
        return x + _ReduceForward.apply(self.w2(h), self.tp_group, self.skip_reduce)


class Stage(torch.nn.Module):
    def __init__(self, tp_group, tp_size):
        super().__init__()
        self.a = Block(tp_group, tp_size)
        self.b = Block(tp_group, tp_size)
        self.bypass_b = None  # the fault: run block b's module without FSDP's hooks

    def forward(self, x):
        x = self.a(x)
        if self.bypass_b is not None:
            return self.bypass_b(x)
        return self.b(x)


def _apis():
    """(fully_shard, PipelineStage, ScheduleGPipe) of this torch, or raise ImportError."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard  # 2.4, 2.5
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    return fully_shard, PipelineStage, ScheduleGPipe


def main():
    a = job_args(KINDS, 5).parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        fully_shard, PipelineStage, ScheduleGPipe = _apis()
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        if rank == 0:
            _write(os.path.join(a.out, "unavailable.json"), {"kind": a.kind, "reason": "ImportError: %s" % e})
        dist.barrier()
        sys.exit(0)
    mesh = init_device_mesh("cpu", (2, 2, world // 4), mesh_dim_names=("pp", "dp", "tp"))
    pp, tp = mesh["pp"].get_local_rank(), mesh["tp"]
    torch.manual_seed(pp)  # the stage's weights (one per tp shard: enough for a job that only has to run)
    model = Stage(tp.get_group(), tp.size())
    fully_shard(model.a, mesh=mesh["dp"])
    fully_shard(model.b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    stage = PipelineStage(model, pp, 2, torch.device("cpu"), group=mesh["pp"].get_group())
    schedule = ScheduleGPipe(stage, n_microbatches=MICRO, loss_fn=lambda out, y: ((out - y) ** 2).mean())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    me = rank == a.culprit
    x, y = torch.ones(BATCH, D), torch.zeros(BATCH, D)
    steps = 0
    for step in range(a.steps):
        time.sleep(a.step_s)
        fault = me and step == a.fault_step
        if fault:
            _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": a.kind})
            if a.kind == "3d_pp_stall":
                time.sleep(3600)
            elif a.kind == "3d_tp_skip":
                model.a.skip_reduce = True
            elif a.kind == "3d_fsdp_skip":
                inner = Block(tp.get_group(), tp.size())  # unsharded, no hooks: FSDP never gathers block b
                model.bypass_b = inner
        if pp == 0:
            schedule.step(x)
        else:
            schedule.step(target=y)
        model.a.skip_reduce, model.bypass_b = False, None
        opt.step()
        opt.zero_grad()
        steps += 1
    _write(os.path.join(a.out, "rank%d.json" % rank), {"calls": 0, "steps": steps, "signals": 0})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
