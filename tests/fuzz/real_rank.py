"""One rank of a fuzzer program run by real gloo ranks (issue 42, item 4): ``programs.make_case(SEED)``
rebuilt here, its groups made with ``new_group`` in the order of their names (torch names them "1", "2", ...
as the program does), and this rank's calls of the faulty program issued with torch.distributed (a ring's
isends and irecvs of one step in one ``batch_isend_irecv``), under
``C10D_OBSERVER=1`` (the driver, real.py, sets the environment as torchrun would).  A stall stops the rank in
Python (it sleeps) before its call; an exit ends it there (``os._exit(1)``); a freeze stops its process
(SIGSTOP) there, and a freeze inside a call half a second after it entered the call (a thread of its own
sends the SIGSTOP: where the call completes sooner, the rank freezes just after it; ``--kind``: the case's
fault of that kind, programs.EXTRA_KINDS; a fault in the making of the groups, programs.MAKING_KINDS: the rank
makes its groups as ``programs.making`` says).  ``fault.json`` (wall time) is
written into ``--out`` just before the fault; ``rank<R>.json`` when the rank is done with its program (calls
made, or the error torch raised); a rank done lives on for ``--linger-s`` without collectives.  Python 3.8, torch 1.8.1+.
"""
import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/, for ``fuzz``

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from fuzz import programs  # noqa: E402

# gloo has no bfloat16 reductions before torch 1.10 ("Unsupported data type"): float16 there, the same size
_OLD = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (1, 10)
DTYPES = {"float32": torch.float32, "bfloat16": torch.float16 if _OLD else torch.bfloat16, "int64": torch.int64,
          "uint8": torch.uint8}


def _write(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _tensor(size):
    numel, dtype = size.split(" x ")
    return torch.ones(int(numel), dtype=DTYPES[dtype])


def _batch(ops, groups):
    """One step's posted calls (programs.POSTED_OPS), their works waited for together: a ring's isends and
    irecvs as one batch_isend_irecv, a burst of all_reduces each with async_op=True."""
    p2p = [dist.P2POp(dist.isend if c.op == "isend" else dist.irecv, _tensor(c.size), c.peer, group=groups[c.group])
           for c in ops if c.op in programs.BATCH_OPS]
    works = list(dist.batch_isend_irecv(p2p)) if p2p else []
    works += [dist.all_reduce(_tensor(c.size), group=groups[c.group], async_op=True)
              for c in ops if c.op in programs.ASYNC_OPS]
    for w in works:
        w.wait()


def _issue(c, groups, rank):
    if c.op == "send":
        dist.send(_tensor(c.size), dst=c.peer, group=groups[c.group])
    elif c.op == "recv":
        dist.recv(_tensor(c.size), src=c.peer, group=groups[c.group])
    elif c.op == "barrier":
        dist.barrier(group=groups[c.group])
    elif c.op == "all_reduce":
        dist.all_reduce(_tensor(c.size), group=groups[c.group])
    elif c.op == "broadcast":
        dist.broadcast(_tensor(c.size), src=c.root, group=groups[c.group])
    elif c.op == "all_gather":
        t = _tensor(c.size)
        n = dist.get_world_size(groups[c.group])
        dist.all_gather([torch.empty_like(t) for _ in range(n)], t, group=groups[c.group])
    elif c.op in ("reduce", "gather", "scatter", "all_to_all", "all_reduce_coalesced"):
        _issue_more(c, groups[c.group], rank)
    elif c.op in programs.OBJECT_OPS:  # its two calls (the sizes, the bytes) are torch's: one call here
        _issue_object(c, groups[c.group], rank)
    elif c.op.endswith(programs.DATA):
        pass  # the object collective's second call: issued by its first
    else:
        raise ValueError("no such op in a fuzzer program: %r" % c.op)


def _issue_more(c, group, rank):
    """programs.MORE_OPS but the object collectives (gloo: every one on the three lines, 1.8.1 included)."""
    t = _tensor(c.size)
    n = dist.get_world_size(group)
    if c.op == "reduce":
        dist.reduce(t, dst=c.root, group=group)
    elif c.op == "gather":
        dist.gather(t, [torch.empty_like(t) for _ in range(n)] if rank == c.root else None, dst=c.root, group=group)
    elif c.op == "scatter":
        dist.scatter(t, [torch.empty_like(t) for _ in range(n)] if rank == c.root else None, src=c.root, group=group)
    elif c.op == "all_to_all":  # all_to_all_single: numel a multiple of the group's size
        t = t.repeat(n)
        dist.all_to_all_single(torch.empty_like(t), t, group=group)
    else:
        dist.all_reduce_coalesced([t, t.clone()], group=group)


def _issue_object(c, group, rank):
    """all_gather_object or broadcast_object_list of an object of about the program's number of bytes."""
    obj = {"rank": rank, "blob": "x" * int(c.size.split(" x ")[0])}
    if c.op == "all_gather_object":
        dist.all_gather_object([None] * dist.get_world_size(group), obj, group=group)
    else:
        dist.broadcast_object_list([obj], src=c.root, group=group)


def _setup_done(out, rank, world, wait_s=120.0):
    """Wait (files, not a collective: no call the observer watches) until every rank made its groups.  The
    simulated program starts at step 0 with every group made; without this gate a rank with a fault at step 0
    (an exit) can end before its peers finished ``new_group``, and a peer then waits inside group creation
    (gloo's rendezvous with the dead rank, the store's host maybe), not in any call of the program: a fault the
    injector does not make (seed 63000044, one run in five under load).  A peer that never arrives (it raised in
    ``new_group``) lets the others go on after ``wait_s``."""
    open(os.path.join(out, "setup-rank%d" % rank), "w").close()
    end = time.time() + wait_s
    while time.time() < end and not all(os.path.exists(os.path.join(out, "setup-rank%d" % r)) for r in range(world)):
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--step-s", type=float, default=0.02, help="the compute of one step (a sleep)")
    ap.add_argument("--linger-s", type=float, default=300.0, help="how long a rank done with its program lives on")
    ap.add_argument("--kind", help="the case's fault of this kind (programs.make_case's ``kind``)")
    ap.add_argument("--shape", help="the case's program of this shape (programs.make_case's ``shape``)")
    ap.add_argument("--two", action="store_true", help="two faults: programs.make_case2's case")
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    case = (programs.make_case2 if a.two else programs.make_case)(a.seed, kind=a.kind, shape=a.shape)
    assert case.program.world == world, (case.program.world, world)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=600))
    groups = {"0": None}
    faulty = case.fault is not None and case.fault.kind in programs.MAKING_KINDS and rank == case.fault.rank
    for j, (gid, ranks) in enumerate(programs.making(case, rank)):  # every rank in one order, but a faulty one
        if faulty and j == case.fault.index:
            _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": case.fault.kind})
        groups[gid] = dist.new_group(list(ranks))
    if case.fault is None or case.fault.kind not in programs.MAKING_KINDS:
        _setup_done(a.out, rank, world)  # a fault in the making: the ranks go on as a job's do
    calls = case.calls[rank]
    stop = case.stop.get(rank)
    # the fault of the loop's calls this rank writes fault.json at (a skip, a mismatch; a stop writes its own):
    # none where the case's fault is in the making (a second fault of two then marks nothing: the making's is
    # the fault's time)
    loop_fault = case.fault if case.fault is not None and case.fault.kind not in programs.MAKING_KINDS else None
    step, made, error, batch = None, 0, None, []
    try:
        for i, c in enumerate(calls):
            if stop is not None and stop[0] == i:
                if loop_fault is not None or not os.path.exists(os.path.join(a.out, "fault.json")):
                    _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": stop[1]})
                if stop[1] == "dead":
                    os._exit(1)
                if stop[1] == "frozen":
                    os.kill(os.getpid(), signal.SIGSTOP)
                elif stop[1] == "frozen_in":  # stopped once inside the call it issues now
                    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGSTOP)).start()
                    _issue(c, groups, rank)
                while True:
                    time.sleep(3600)
            if loop_fault is not None and rank == loop_fault.rank and i == loop_fault.index:
                _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": case.fault.kind})
            if c.step != step:
                step = c.step
                time.sleep(a.step_s)
            if c.op in programs.POSTED_OPS:  # the ops of one step's slot: one batch, posted at its last op
                batch.append(c)
                nxt = calls[i + 1] if i + 1 < len(calls) else None
                if nxt is None or nxt.op not in programs.POSTED_OPS or (nxt.step, nxt.slot) != (c.step, c.slot) or (
                        stop is not None and stop[0] == i + 1):
                    _batch(batch, groups)
                    made += len(batch)
                    batch = []
                continue
            _issue(c, groups, rank)
            made += 1
        if loop_fault is not None and rank == loop_fault.rank and loop_fault.index >= len(calls):
            # a skip of the rank's last call: the fault is that it ends without it
            _write(os.path.join(a.out, "fault.json"), {"at": time.time(), "rank": rank, "kind": case.fault.kind})
    except Exception as e:  # torch raised (gloo saw a closed connection, a size it refuses): the job fails
        error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    _write(os.path.join(a.out, "rank%d.json" % rank), {"calls": made, "error": error})
    if error is None:
        # done with its program, the rank goes on without collectives (saving, evaluating), as the simulation's
        # "done" rank does: its exit would make gloo raise in the ranks that wait for it (the driver kills it)
        time.sleep(a.linger_s)
    sys.exit(1 if error else 0)  # atexit runs (C10D_OBSERVER=1's disable), as in a job that ends


if __name__ == "__main__":
    main()
