"""One rank of a fault-matrix job (benchmarks/fault_matrix.py starts ``world`` of these, one process each, under
``C10D_OBSERVER=1``): a training-like loop of jittered steps, an all_reduce each step (and a p2p exchange or a
subgroup call where the kind needs one), and at step ``--fault-step`` rank ``--culprit`` does the fault of
``--kind``.  The culprit writes ``fault.json`` (when the fault began, wall time) into ``--out`` just before it;
every rank writes ``rank<R>.json`` (calls made) when its loop ends.

Kinds: healthy, skip, early_stall, dataloader_stall, late (stalls ``--late-s``, then catches up), exit,
sigkill, frozen_before, frozen_inside, gil_c (a C call that holds the GIL: the rank's Python and helper stop),
op_mismatch, size_mismatch, dtype_mismatch, subgroup_skip, order (the culprit issues a second group's call
before the first's), unmatched_recv (the culprit skips a send: its peer waits in recv), unmatched_send (the
culprit skips a recv: its peer waits in send), wrong_root (the culprit broadcasts from another root),
async_burst (four async all_reduces a step, waited together; the culprit issues three and stalls), ddp_stall
(a DistributedDataParallel model; the culprit stalls before its backward, the others wait inside DDP's
gradient all_reduce), checkpoint (the culprit, rank 0, saves for ``--late-s`` while the others wait in a
barrier; then the job goes on) and checkpoint_phase (the same inside ``c10d_observer.phase("checkpoint",
up_to=60)``), eval_one_rank (rank 0 evaluates alone, and its model syncs a buffer with a broadcast the others
never issue: DDP's broadcast_buffers under ``if rank == 0: evaluate()``), batch_p2p (a ring exchange each step
with batch_isend_irecv; the culprit skips its batch; batch_drop_send / batch_drop_recv: it leaves its isend or
its irecv out of the batch), subgroup_skip_early (subgroup_skip at step 1), mesh_skip (a 2 x 2 mesh, a
tensor-parallel then a data-parallel all_reduce each step; rank 3 skips one tensor-parallel call: the job runs
on and hangs at its end), coalesced (all_reduce_coalesced each step; the culprit skips one), straggler (from the fault step the culprit computes 40 % longer every step: no hang; named in
stragglers.json), and nodes2_skip / nodes4_skip (skip, with the ranks spread over two or four nodes: each
node its own dump_dir, the gather carried between them by the store, as torchrun sets LOCAL_WORLD_SIZE),
fsdp_stall (a FullyShardedDataParallel model on CPU; the culprit stalls before its forward, the others wait in
FSDP's parameter all_gather), funcol_skip (a functional all_reduce each step, as tensor parallelism issues them
from C++; the culprit skips one) and dtensor_skip (a DTensor sharded on a 1-D mesh is gathered each step with
redistribute(Replicate); the culprit skips one), lightning_stall (a PyTorch Lightning ``Trainer``, DDP on
CPU; the culprit stalls in ``training_step``, the others wait in DDP's gradient all_reduce) and
accelerate_stall (the same loop under Hugging Face Accelerate).  A kind this torch cannot run (no FSDP on CPU,
no functional collectives, no DTensor, the framework not installed) writes ``unavailable.json`` with the
reason and ends every rank cleanly.
"""
import argparse
import json
import os
import random
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

KINDS = ("healthy", "skip", "early_stall", "dataloader_stall", "late", "exit", "sigkill", "frozen_before",
         "frozen_inside", "gil_c", "op_mismatch", "size_mismatch", "dtype_mismatch", "subgroup_skip", "order",
         "unmatched_recv", "unmatched_send", "wrong_root", "async_burst", "ddp_stall", "checkpoint",
         "checkpoint_phase", "eval_one_rank", "batch_p2p", "batch_drop_send", "batch_drop_recv", "coalesced",
         "straggler", "nodes2_skip", "nodes4_skip", "subgroup_skip_early", "mesh_skip",
         "fsdp_stall", "funcol_skip", "dtensor_skip", "lightning_stall", "accelerate_stall")
FRAMEWORKS = {"lightning_stall": "lightning", "accelerate_stall": "accelerate"}


def _write(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


class _Slow(torch.utils.data.Dataset):
    """A dataset whose item ``stall_at`` never comes (its worker sleeps): a DataLoader stall."""

    def __init__(self, n, stall_at):
        self.n, self.stall_at = n, stall_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.stall_at:
            time.sleep(3600)
        return torch.ones(4)


def _hold_gil_forever():
    """A C call that never releases the GIL: ctypes.pythonapi calls keep it, and sleep(3) of libc blocks."""
    import ctypes
    libc = ctypes.PyDLL(None)  # PyDLL: the GIL stays held during the call
    while True:
        libc.sleep(3600)


SIGNALS = []  # the job's own SIGUSR1 handler, installed at its top (as a Lightning job's): the hard verdict's


def _on_signal(signum, frame):
    SIGNALS.append(time.time())


def _parallel(kind, world):
    """The step of the kinds that run through torch's parallel APIs, or None for the others; raises where
    this torch cannot (ImportError, or FSDP refusing a CPU device)."""
    if kind == "fsdp_stall":
        from torch.distributed.fsdp import FullyShardedDataParallel
        model = FullyShardedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)),
                                         device_id=torch.device("cpu"))
        x = torch.ones(8, 64)

        def step():
            model(x).sum().backward()  # forward: FSDP all_gathers the parameters; backward: reduce_scatter
        step()
        return step
    if kind == "funcol_skip":
        import torch.distributed._functional_collectives as funcol
        t = torch.ones(256)

        def step():
            funcol.wait_tensor(funcol.all_reduce(t, "sum", dist.group.WORLD))
        step()
        return step
    if kind == "dtensor_skip":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (world,))
        d = distribute_tensor(torch.ones(4 * world, 16), mesh, [Shard(0)])

        def step():
            d.redistribute(mesh, [Replicate()]).to_local()  # an all_gather (a functional collective)
        step()
        return step
    return None


def _framework(a):
    """lightning_stall / accelerate_stall: a DDP loop as the framework runs it; the culprit stalls at the fault
    step of its first epoch (in Python), the others wait in DDP's gradient all_reduce."""
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    try:
        __import__(FRAMEWORKS[a.kind])
    except ImportError as e:
        if rank == 0:
            _write(os.path.join(a.out, "unavailable.json"), {"kind": a.kind, "reason": "%s: %s" % (
                type(e).__name__, e)})
        sys.exit(0)
    data = torch.utils.data.TensorDataset(torch.randn(16 * a.steps, 32), torch.randn(16 * a.steps, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16)

    def step_hook(i):
        time.sleep(a.step_s * random.Random(rank * 1000 + i).uniform(0.7, 1.3))  # compute, jittered
        if i == a.fault_step and rank == a.culprit:
            _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": a.kind})
            time.sleep(3600)

    if a.kind == "lightning_stall":
        import lightning as L

        class Tiny(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(32, 1)

            def training_step(self, batch, i):
                step_hook(i)
                x, y = batch
                return torch.nn.functional.mse_loss(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

        L.Trainer(accelerator="cpu", devices=world, strategy="ddp", max_epochs=1, logger=False,
                  enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                  use_distributed_sampler=False).fit(Tiny(), loader)
    else:
        from accelerate import Accelerator
        acc = Accelerator(cpu=True)
        model = torch.nn.Linear(32, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        model, opt = acc.prepare(model, opt)
        for i, (x, y) in enumerate(loader):
            step_hook(i)
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
        acc.wait_for_everyone()
    _write(os.path.join(a.out, "rank%d.json" % rank), {"calls": a.steps})


def job_args(kinds, culprit):
    """The options fault_matrix.py gives every job it starts (this one and job3d.py)."""
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=kinds, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--culprit", type=int, default=culprit)
    p.add_argument("--fault-step", type=int, default=30)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--step-s", type=float, default=0.1)
    return p


def main():
    signal.signal(signal.SIGUSR1, _on_signal)
    p = job_args(KINDS, 1)
    p.add_argument("--late-s", type=float, default=20.0)
    a = p.parse_args()
    if a.kind in FRAMEWORKS:  # the framework makes the process group itself
        return _framework(a)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = random.Random(rank)
    kind, me = a.kind, rank == a.culprit
    step_at = {"early_stall": 3, "subgroup_skip_early": 1}.get(kind, a.fault_step)
    sub = dist.new_group([world - 2, world - 1]) if kind in ("subgroup_skip", "subgroup_skip_early") else None
    mesh = None
    if kind == "mesh_skip":  # a 2 x 2 mesh: tensor-parallel [0, 1] [2, 3], data-parallel [0, 2] [1, 3]
        tp = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        dp = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        mesh = (tp[rank // 2], dp[rank % 2])
    other = dist.new_group(list(range(world))) if kind == "order" else None
    loader = None
    if kind == "dataloader_stall":
        loader = iter(torch.utils.data.DataLoader(_Slow(a.steps, step_at if me else -1), batch_size=1,
                                                  num_workers=1))
    t = torch.ones(1024)
    calls = 0
    ddp = None
    if kind == "ddp_stall":
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
        x = torch.ones(8, 64)

    try:
        parallel = _parallel(kind, world)  # () -> None: one step of the kind's FSDP / funcol / DTensor call
    except Exception as e:  # this torch has no such thing on CPU: said, and no run
        if rank == 0:
            _write(os.path.join(a.out, "unavailable.json"), {"kind": kind, "reason": "%s: %s" % (
                type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")})
        dist.barrier()
        sys.exit(0)

    def fault_began():
        _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": kind})

    for step in range(a.steps):
        slow = 1.4 if kind == "straggler" and me and step >= step_at else 1.0
        if slow > 1.0 and step == step_at:
            fault_began()
        time.sleep(a.step_s * slow * rng.uniform(0.7, 1.3))  # compute, jittered
        if loader is not None:
            if me and step == step_at:
                fault_began()
            next(loader)
        if me and step == step_at:
            if kind in ("skip", "early_stall", "nodes2_skip", "nodes4_skip"):
                fault_began()
                time.sleep(3600)
            elif kind == "late":
                fault_began()
                time.sleep(a.late_s)
            elif kind == "exit":
                fault_began()
                os._exit(1)
            elif kind == "sigkill":
                fault_began()
                os.kill(os.getpid(), signal.SIGKILL)
            elif kind == "frozen_before":
                fault_began()
                os.kill(os.getpid(), signal.SIGSTOP)
            elif kind == "gil_c":
                fault_began()
                _hold_gil_forever()
        if ddp is not None:
            loss = ddp(x).sum()
            if me and step == step_at:
                fault_began()
                time.sleep(3600)
            loss.backward()  # DDP's reducer all_reduces the gradients here (not through dist.all_reduce)
        if kind in ("checkpoint", "checkpoint_phase") and step == step_at:
            if me:
                fault_began()
                if kind == "checkpoint":
                    time.sleep(a.late_s)
                else:
                    import c10d_observer
                    with c10d_observer.phase("checkpoint", up_to=60):
                        time.sleep(a.late_s)
            dist.barrier()
            calls += 1
        if kind == "async_burst":
            n = 3 if me and step == step_at else 4
            if n == 3:
                fault_began()
            works = [dist.all_reduce(t, async_op=True) for _ in range(n)]
            if n == 3:
                time.sleep(3600)
            for w in works:
                w.wait()
            calls += n
        if kind == "eval_one_rank" and me and step == step_at:
            fault_began()
            dist.broadcast(torch.zeros(16), 0)  # the eval model's buffers, from rank 0: nobody else issues it
            calls += 1
        if kind in ("batch_p2p", "batch_drop_send", "batch_drop_recv"):
            if kind == "batch_p2p" and me and step == step_at:
                fault_began()
                time.sleep(3600)
            buf = torch.zeros(64)
            ops = [dist.P2POp(dist.isend, t[:64].clone(), (rank + 1) % world),
                   dist.P2POp(dist.irecv, buf, (rank - 1) % world)]
            if kind != "batch_p2p" and me and step == step_at:  # one op of the ring left out of its batch
                fault_began()
                ops = ops[1:] if kind == "batch_drop_send" else ops[:1]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            calls += len(ops)
        if parallel is not None:
            if me and step == step_at:
                fault_began()
                time.sleep(3600)
            parallel()
            calls += 1
        if kind == "coalesced":
            if me and step == step_at:
                fault_began()
                time.sleep(3600)
            dist.all_reduce_coalesced([t, torch.ones(16)])
            calls += 1
        if kind == "wrong_root" and step == step_at:
            if me:
                fault_began()
            dist.broadcast(t, 1 if me else 0)
            calls += 1
        if kind == "frozen_inside" and step == step_at:
            big = torch.ones(1 << 26)
            dist.barrier()
            if me:
                fault_began()
                threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGSTOP)).start()
            dist.all_reduce(big)
        if me and step == step_at and kind in ("op_mismatch", "size_mismatch", "dtype_mismatch"):
            fault_began()
            if kind == "op_mismatch":
                dist.broadcast(t, 0)
            elif kind == "size_mismatch":
                dist.all_reduce(torch.ones(2048))  # gloo aborts at once (either way); NCCL waits
            else:
                dist.all_reduce(torch.ones(1024, dtype=torch.float64))
        elif mesh is not None:  # each step a tp all_reduce, then a dp all_reduce; the culprit skips one tp call
            if me and step == step_at:
                fault_began()  # gloo matches by order: the job runs on, and hangs at its end
            else:
                dist.all_reduce(t, group=mesh[0])
            dist.all_reduce(t, group=mesh[1])
        else:
            dist.all_reduce(t)
        calls += 1
        if kind in ("unmatched_recv", "unmatched_send") and rank in (0, 1):
            # rank 0 sends rank 1 a tensor each step; the culprit skips its half once
            skip = me and step == step_at
            if skip:
                fault_began()
            if rank == 0 and not (skip and kind == "unmatched_recv"):
                dist.send(t, 1)
                calls += 1
            elif rank == 1 and not (skip and kind == "unmatched_send"):
                dist.recv(t, 0)
                calls += 1
        if sub is not None and rank in (world - 2, world - 1):
            if me and step == step_at:
                fault_began()
            else:
                dist.all_reduce(t, group=sub)
                calls += 1
        if other is not None:
            if me and step == step_at:  # the second group's call first: the order of the others is broken
                fault_began()
                dist.all_reduce(t, group=other)
                dist.barrier()
            else:
                dist.barrier()
                dist.all_reduce(t, group=other)
            calls += 2
    _write(os.path.join(a.out, "rank%d.json" % rank), {"calls": calls, "steps": a.steps, "signals": len(SIGNALS)})
    dist.barrier()
    dist.destroy_process_group() if hasattr(dist, "destroy_process_group") else None
    sys.exit(0)


if __name__ == "__main__":
    main()
