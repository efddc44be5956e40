"""What the one rank of a tests/gpu job does: NCCL at world size 1 on one GPU (NCCL refuses two ranks on
one device).  A hang is made by queueing a ``torch.cuda._sleep`` kernel (seconds long) ahead of the call:
the call cannot finish until the GPU is free, whether or not Python's call has returned.

Each case has a setup (run once, then its call issued once quickly as a warm-up: NCCL communicators,
DDP's buckets and FSDP's state are made before anything is timed), a stuck call (issued behind the sleep
kernel) and, after the GPU is free again, ``quick`` quick calls of the same kind that must not be reported.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist

import c10d_observer
from c10d_observer import compat


def _legacy_backend():
    """The name that gives the legacy ProcessGroupNCCL: "nccl" until ProcessGroupNCCL2 took it (2.15)."""
    names = getattr(dist.Backend, "backend_list", []) or []
    return "nccl-legacy" if "nccl-legacy" in names else "nccl"


def run(ctx):
    a = ctx.args
    backend = "nccl" if a["kind"] == "nccl2" else _legacy_backend()
    kw = dict(timeout=a["timeout"], poll_interval=a["poll"], dump_dir=a["dump_dir"], source=a["source"],
              on_timeout=a.get("on_timeout", "dump"))
    obs = c10d_observer.enable(**kw) if a.get("enable_first") else None  # turns the recorder on (2.5-2.10)
    dist.init_process_group(backend, init_method="file://" + os.path.join(ctx.work_dir, "store"), rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=300))
    torch.cuda.set_device(0)
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)  # NCCL's communicator is made here; a call before enable(), numbered by torch
    torch.cuda.synchronize()
    if obs is None:
        obs = c10d_observer.enable(**kw)
    world = dist.group.WORLD
    ctx.record(source=obs.source, nccl_kind=compat.nccl_kind(world), plan=obs.plan,
               world_group=compat.describe_group(world)["group"])
    state = {"t": t}
    setup, stuck = CASES[a["case"]]
    setup(ctx, state)
    before = compat.torch_seq(world)
    stuck(ctx, state)  # the warm-up: the same call, the GPU free
    torch.cuda.synchronize()
    after = compat.torch_seq(world)
    if before is not None and after == before and a["case"] in ("fsdp", "dtensor"):
        # at world size 1 some torch lines issue no collective for these (nothing to gather or reduce)
        ctx.record(issues_no_collective=True)
    else:
        torch.cuda._sleep(int(a["sleep_cycles"]))  # the GPU is busy for seconds
        t0 = time.time()
        ctx.record(stuck_at=t0)
        try:
            stuck(ctx, state)
            ctx.record(returned_after_s=time.time() - t0)
            torch.cuda.synchronize()
            ctx.record(gpu_free_after_s=time.time() - t0)
        except c10d_observer.CollectiveHang as e:  # on_timeout="raise": the group was aborted, done with it
            ctx.record(raised=str(e), raised_after_s=time.time() - t0, ended=list(e.ended),
                       culprit_ranks=list(e.culprit_ranks))
            c10d_observer.disable()
            return
    for _ in range(a.get("quick", 20)):
        stuck(ctx, state)
        torch.cuda.synchronize()
    ctx.record(quick_done=True)
    c10d_observer.disable()
    dist.destroy_process_group()


# -- the cases ----------------------------------------------------------------------------------------
def _nothing(ctx, state):
    pass


def _sync(ctx, state):
    dist.all_reduce(state["t"])


def _async(ctx, state):
    state["work"] = dist.all_reduce(state["t"], async_op=True)  # held, never waited on


def _coalesced(ctx, state):
    from torch.distributed.distributed_c10d import _coalescing_manager
    a, b = state["t"], state.setdefault("t2", torch.ones(8, device="cuda"))
    with _coalescing_manager(device=torch.device("cuda", 0)):
        dist.all_reduce(a)
        dist.all_reduce(b)


def _ddp_setup(ctx, state):
    from torch.nn.parallel import DistributedDataParallel as DDP
    state["model"] = DDP(torch.nn.Linear(256, 256).cuda(), device_ids=[0])
    state["x"] = torch.randn(32, 256, device="cuda")
    for _ in range(2):  # DDP rebuilds its buckets after the first iteration
        state["model"](state["x"]).sum().backward()
    torch.cuda.synchronize()


def _ddp(ctx, state):
    state["model"](state["x"]).sum().backward()  # the bucket all-reduce is issued from C++


def _fsdp_setup(ctx, state):
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 256)).cuda()
    fully_shard = None
    for mod in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            fully_shard = getattr(__import__(mod, fromlist=["fully_shard"]), "fully_shard")
            break
        except (ImportError, AttributeError):
            continue
    if fully_shard is not None:  # FSDP2: all-gathers in forward, reduce-scatters in backward
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(model)
    state["model"] = model
    state["x"] = torch.randn(32, 256, device="cuda")


def _fsdp(ctx, state):
    state["model"](state["x"]).sum().backward()


def _funcol(ctx, state):
    import torch.distributed._functional_collectives as funcol
    state["out"] = funcol.all_reduce(state["t"], "sum", dist.group.WORLD)  # not waited on here


def _dtensor_setup(ctx, state):
    try:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    except ImportError:  # before 2.4
        from torch.distributed._tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (1,))
    state["dt"] = distribute_tensor(torch.ones(64, device="cuda"), mesh, [Shard(0)])
    state["to"] = (mesh, [Replicate()])


def _dtensor(ctx, state):
    state["out"] = state["dt"].redistribute(*state["to"]).to_local()  # an all-gather


def _subgroup_setup(ctx, state):
    state["sub"] = dist.new_group([0])
    ctx.record(sub_group=compat.describe_group(state["sub"])["group"])


def _subgroup(ctx, state):
    dist.all_reduce(state["t"], group=state["sub"])


def _barrier(ctx, state):
    dist.barrier(device_ids=[0])  # from 2.8 it blocks the CPU until the GPU has finished it


def _stuck_item(ctx, state):
    dist.all_reduce(state["t"])
    state["t"].sum().item()  # the main thread waits here, in C++, for the GPU


def _stuck_cpu(ctx, state):
    dist.all_reduce(state["t"])
    state["t"].cpu()


def _stuck_synchronize(ctx, state):
    dist.all_reduce(state["t"])
    torch.cuda.synchronize()


def _graph_setup(ctx, state):
    """A CUDA graph holding an all_reduce, captured and replayed with the observer on."""
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            dist.all_reduce(state["t"])
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        dist.all_reduce(state["t"])
    for _ in range(50):
        g.replay()
    torch.cuda.synchronize()
    ctx.record(replays=50)


def _healthy_setup(ctx, state):
    """10,000 mixed calls, each quick: nothing may be reported."""
    t = state["t"]
    gathered = torch.empty(4, device="cuda")
    scattered = torch.empty(4, device="cuda")
    works = []
    for i in range(10000):
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
        elif i % 600 == 5:  # i % 6 == 5 too: 17 barriers
            dist.barrier(device_ids=[0])
        else:
            dist.all_reduce(t, async_op=True).wait()
        if len(works) > 64:
            works.pop(0).wait()
    torch.cuda.synchronize()
    ctx.record(healthy_calls=10000)


# name -> (setup, the call made stuck); "graph" and "healthy" do their work in setup and then make an
# ordinary synchronous all_reduce stuck, which must still be found
CASES = {
    "sync": (_nothing, _sync), "async": (_nothing, _async), "coalesced": (_nothing, _coalesced),
    "ddp": (_ddp_setup, _ddp), "fsdp": (_fsdp_setup, _fsdp), "funcol": (_nothing, _funcol),
    "dtensor": (_dtensor_setup, _dtensor), "subgroup": (_subgroup_setup, _subgroup),
    "barrier": (_nothing, _barrier), "item": (_nothing, _stuck_item), "cpu": (_nothing, _stuck_cpu),
    "synchronize": (_nothing, _stuck_synchronize), "graph": (_graph_setup, _sync),
    "healthy": (_healthy_setup, _sync),
}
