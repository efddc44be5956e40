"""What each rank of a test job does.  Faults are injected by step, not by time."""
import os
import signal
import time
import warnings

import torch
import torch.distributed as dist

import c10d_observer


def _install_hooks_standin():
    """Put the test stand-in of torch.distributed.hooks where the observer's probe looks for it."""
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(here), "standins"))
    import torch_hooks_standin
    sys.modules["torch.distributed.hooks"] = torch_hooks_standin


def _enable(ctx, **over):
    if ctx.args.get("source") == "hooks":
        _install_hooks_standin()
    kw = dict(timeout=ctx.args.get("timeout", 1.0), dump_dir=ctx.args["dump_dir"],
              source=ctx.args.get("source", "auto"))
    if "on_timeout" in ctx.args:
        kw["on_timeout"] = ctx.args["on_timeout"]
    kw.update(over)
    if kw["timeout"] is None:  # no timeout chosen: learned deadlines, and the default hard one
        del kw["timeout"]
    dist.barrier()  # every rank is up: no rank waits on a slow start while watched
    obs = c10d_observer.enable(**kw)
    ctx.record(watchdog_pid=obs.watchdog_pid, source=obs.source, pid=os.getpid())
    return obs


def skip(ctx):
    """Rank ``culprit`` skips the all_reduce at step ``step`` (it is busy until released); ``late``: rank ->
    seconds it spends before that step's call (a slow rank, which still arrives)."""
    _enable(ctx)
    t = torch.ones(4)
    late = {int(r): s for r, s in ctx.args.get("late", {}).items()}
    for step in range(ctx.args.get("steps", 5)):
        if step == ctx.args["step"] and ctx.rank == ctx.args["culprit"]:
            ctx.record(stalled_at=step)
            ctx.stall_until_released()
        if step == ctx.args["step"] and ctx.rank in late:
            time.sleep(late[ctx.rank])  # the fault: a slow rank (its call starts this much after its peers')
        dist.all_reduce(t)
    ctx.record(result=t[0].item())
    if not ctx.args.get("keep_enabled"):
        c10d_observer.disable()


def async_never(ctx):
    """Rank 0 issues an async all_reduce and never waits on it; rank 1 joins only when released."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == 0:
        work = dist.all_reduce(t, async_op=True)
        ctx.record(issued=True)
        ctx.stall_until_released()  # rank 0 keeps running Python: nothing blocks it
        work.wait()
    else:
        ctx.stall_until_released()
        dist.all_reduce(t)
    c10d_observer.disable()


def recv_nosender(ctx):
    _enable(ctx)
    t = torch.zeros(4)
    if ctx.rank == 1:
        dist.recv(t, src=0)
        ctx.record(received=t[0].item())
    else:
        ctx.stall_until_released()
        dist.send(torch.ones(4), dst=1)
    c10d_observer.disable()


def subgroup(ctx):
    """World of 3 is fine; in group [0, 1] rank 1 skips an all_reduce; rank 2 idles."""
    _enable(ctx)
    sub = dist.new_group([0, 1])
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == 0:
        dist.all_reduce(t, group=sub)
    elif ctx.rank == 1:
        ctx.stall_until_released()
        dist.all_reduce(t, group=sub)
    else:
        ctx.stall_until_released()
    dist.barrier()
    c10d_observer.disable()


def ddp(ctx):
    """A DDP training step in which rank ``culprit`` skips backward."""
    torch.manual_seed(0)
    _enable(ctx)
    # DDP's construction is a collective (verify_params): the ranks in step first, so that a loaded machine's
    # start-up skew is not a hang at the tests' deadline of a second (seen on torch 2.15, 2026-12-03)
    ctx.rendezvous("ddp")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(ctx.args.get("steps", 4)):
        loss = model(torch.ones(2, 8) * (ctx.rank + 1)).sum()
        if step == ctx.args["step"] and ctx.rank == ctx.args["culprit"]:
            ctx.record(stalled_at=step)
            ctx.stall_until_released()
        loss.backward()
        opt.step()
        opt.zero_grad()
    ctx.record(weight=model.module.weight.detach().sum().item())
    c10d_observer.disable()


def quiet(ctx):
    """Long computation between collectives (several timeouts) never fires; then a real hang does."""
    _enable(ctx)
    t = torch.ones(4)
    works = [dist.all_reduce(t, async_op=True) for _ in range(3)]  # completed, nobody waits
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    busy_until = time.monotonic() + ctx.args["compute_s"]
    x = torch.ones(64, 64)
    while time.monotonic() < busy_until:
        x = (x @ x).clamp_(-1, 1)
    ctx.record(computed=True)
    dist.barrier()
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t)  # the positive control: rank 0 waits here until rank 1 is released
    del works
    c10d_observer.disable()


def block(ctx):
    """Enable, then block in a collective nobody else joins (for SIGKILL tests)."""
    _enable(ctx)
    ctx.record(ready=True)
    if ctx.rank == 0:
        dist.all_reduce(torch.ones(1))
    else:
        ctx.stall_until_released(limit=600)


def cycles(ctx):
    """20 enable/disable cycles leave no process, handler, patch or shared-memory segment behind."""
    from torch._C import _distributed_c10d as C
    from c10d_observer import compat
    calls = []
    signal.signal(signal.SIGUSR1, lambda s, f: calls.append(s))
    before = {
        "handler": signal.getsignal(signal.SIGUSR1),
        "pg": {m: C.ProcessGroup.__dict__[m] for m, _ in compat.PG_METHODS if m in C.ProcessGroup.__dict__},
        "wait": compat.work_class().__dict__["wait"],
        "all_reduce": dist.all_reduce,
        "c10d_all_gather_object": dist.distributed_c10d.all_gather_object,
        "shm": _shm_entries(),
    }
    t = torch.ones(2)
    pids = []
    for i in range(ctx.args.get("n", 20)):
        obs = c10d_observer.enable(timeout=30.0, dump_dir=ctx.args["dump_dir"])
        pids.append(obs.watchdog_pid)
        dist.all_reduce(t)
        dist.all_gather_object([None] * ctx.world, i)
        c10d_observer.disable()
        c10d_observer.disable()  # twice is fine
    after_pg = {m: C.ProcessGroup.__dict__[m] for m in before["pg"]}
    os.kill(os.getpid(), signal.SIGUSR1)  # the user's handler is back: it runs, nothing dies
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    ctx.record(
        watchdog_pids=pids,
        handler_restored=signal.getsignal(signal.SIGUSR1) is before["handler"],
        user_handler_calls=len(calls),
        pg_restored=all(after_pg[m] is before["pg"][m] for m in after_pg),
        wait_restored=compat.work_class().__dict__["wait"] is before["wait"],
        functions_restored=(dist.all_reduce is before["all_reduce"]
                            and dist.distributed_c10d.all_gather_object is before["c10d_all_gather_object"]),
        shm_left=sorted(set(_shm_entries()) - set(before["shm"])),
        children=sorted(_children()),
    )


def _shm_entries():
    from c10d_observer.channel import default_shm_dir
    d = default_shm_dir()
    return [n for n in os.listdir(d) if n.startswith("c10d_observer-%d-" % os.getpid())]


def _children():
    import glob
    out = set()
    for path in glob.glob("/proc/self/task/*/children"):
        with open(path) as f:
            out.update(int(x) for x in f.read().split())
    return out


def user_handler(ctx):
    """Every rank has a SIGUSR1 handler of its own, installed before enable() (to checkpoint, page someone,
    exit cleanly); rank ``culprit`` skips an all_reduce until released.  The handler appends a line to
    handler-rank<R> at each run.  The observer must run it on the ranks that waited (once per hang), never
    on the culprit; with ``signal=None`` on none.  It still runs for a SIGUSR1 from elsewhere (a scheduler's)
    while the observer is on, and the rank is not killed."""
    marker = os.path.join(ctx.work_dir, "handler-rank%d" % ctx.rank)

    def handler(signum, frame):
        with open(marker, "a") as f:
            f.write("called\n")

    signal.signal(signal.SIGUSR1, handler)
    over = {"signal": None} if ctx.args.get("no_signal") else {}
    _enable(ctx, **over)
    t = torch.ones(4)
    for step in range(ctx.args.get("steps", 4)):
        if step == ctx.args["step"] and ctx.rank == ctx.args["culprit"]:
            ctx.record(stalled_at=step)
            ctx.stall_until_released()
        dist.all_reduce(t)
    dist.barrier()  # every rank is past the hang: what the observer sent has been handled
    ctx.record(handler_calls=_lines(marker))
    os.kill(os.getpid(), signal.SIGUSR1)  # a signal of the job's own (a scheduler's), observer still on
    deadline = time.monotonic() + 10
    while _lines(marker) <= ctx._facts["handler_calls"] and time.monotonic() < deadline:
        time.sleep(0.01)
    ctx.record(handler_calls_by_others=_lines(marker) - ctx._facts["handler_calls"])
    c10d_observer.disable()


def _lines(path):
    try:
        with open(path) as f:
            return len(f.read().splitlines())
    except OSError:
        return 0


def watchdog_dies(ctx):
    """The rank's watchdog is killed (the OOM killer, kill -9) mid-job: the observer starts another, said
    once, and a later hang (rank 1 skips an all_reduce after the restart) is still reported."""
    obs = _enable(ctx)
    t = torch.ones(4)
    first = obs.watchdog_pid
    os.kill(first, ctx.args.get("how", signal.SIGKILL))
    deadline = time.monotonic() + 30
    while obs.watchdog_pid == first and time.monotonic() < deadline:  # the health thread restarts it
        time.sleep(0.01)
    ctx.record(first_watchdog=first, second_watchdog=obs.watchdog_pid)
    for _ in range(5):
        dist.all_reduce(t)
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t)
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def watchdog_stopped(ctx):
    """The watchdog is stopped (SIGSTOP) for a while, then resumed, while the job runs healthy calls: no
    false report; then rank 1 skips an all_reduce: reported."""
    obs = _enable(ctx)
    t = torch.ones(4)
    os.kill(obs.watchdog_pid, signal.SIGSTOP)
    busy_until = time.monotonic() + ctx.args["stopped_s"]
    n = 0
    go = torch.ones(1)
    while go[0].item():  # rank 0's clock decides for both, so that they issue the same calls
        dist.all_reduce(t)
        n += 1
        go[0] = float(time.monotonic() < busy_until)
        dist.broadcast(go, src=0)
    os.kill(obs.watchdog_pid, signal.SIGCONT)
    ctx.record(healthy_calls=n, resumed=True)
    dist.barrier()
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t)
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def all_ops(ctx):
    """Every collective and p2p call this torch has, once; then the channel as each rank saw it."""
    obs = _enable(ctx, timeout=60.0)
    r, w = ctx.rank, ctx.world
    c10d = dist.distributed_c10d
    done = []

    def run(name, fn):
        fn()
        done.append(name)

    def maybe(name, fn):  # ops gloo implements only in some releases
        try:
            run(name, fn)
        except RuntimeError as e:
            if "support" not in str(e) and "implemented" not in str(e):
                raise

    t = torch.ones(4)
    run("all_reduce", lambda: dist.all_reduce(t))
    run("all_reduce_async", lambda: dist.all_reduce(t, async_op=True).wait())
    run("broadcast", lambda: dist.broadcast(t, src=0))
    run("reduce", lambda: dist.reduce(t, dst=0))
    run("all_gather", lambda: dist.all_gather([torch.zeros(4) for _ in range(w)], t))
    run("gather", lambda: dist.gather(t, [torch.zeros(4) for _ in range(w)] if r == 0 else None, dst=0))
    run("scatter", lambda: dist.scatter(t, [torch.ones(4) for _ in range(w)] if r == 0 else None, src=0))
    if hasattr(dist, "all_to_all_single"):
        run("all_to_all_single", lambda: dist.all_to_all_single(torch.zeros(2 * w), torch.ones(2 * w)))
    run("barrier", lambda: dist.barrier())
    if hasattr(dist, "monitored_barrier"):
        run("monitored_barrier", lambda: dist.monitored_barrier())
    run("all_gather_object", lambda: dist.all_gather_object([None] * w, {"r": r}))
    run("broadcast_object_list", lambda: dist.broadcast_object_list([r], src=0))
    run("gather_object", lambda: dist.gather_object(r, [None] * w if r == 0 else None, dst=0))
    run("scatter_object_list", lambda: dist.scatter_object_list([None], [1] * w if r == 0 else None, src=0))
    run("all_reduce_coalesced", lambda: dist.all_reduce_coalesced([torch.ones(2), torch.ones(3)]))
    run("all_gather_coalesced", lambda: dist.all_gather_coalesced(
        [[torch.zeros(2)] for _ in range(w)], [torch.ones(2)]))
    maybe("reduce_scatter", lambda: dist.reduce_scatter(torch.zeros(2), [torch.ones(2) for _ in range(w)]))
    maybe("all_to_all", lambda: dist.all_to_all([torch.zeros(2) for _ in range(w)],
                                                [torch.ones(2) for _ in range(w)]))
    if hasattr(dist, "reduce_scatter_tensor"):
        maybe("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(torch.zeros(2), torch.ones(2 * w)))
    if r == 0:
        run("send", lambda: dist.send(t, dst=1))
        run("recv", lambda: dist.recv(t, src=1))
        run("isend", lambda: dist.isend(t, dst=1).wait())
        run("irecv", lambda: dist.irecv(t, src=1).wait())
    else:
        run("recv", lambda: dist.recv(t, src=0))
        run("send", lambda: dist.send(t, dst=0))
        run("irecv", lambda: dist.irecv(t, src=0).wait())
        run("isend", lambda: dist.isend(t, dst=0).wait())
    peer = 1 - r
    ops = [dist.P2POp(dist.isend, torch.ones(2), peer), dist.P2POp(dist.irecv, torch.zeros(2), peer)]
    run("batch_isend_irecv", lambda: [x.wait() for x in dist.batch_isend_irecv(ops)])
    if hasattr(dist, "send_object_list"):
        if r == 0:
            run("send_object_list", lambda: dist.send_object_list([1], dst=1))
        else:
            run("recv_object_list", lambda: dist.recv_object_list([None], src=0))
    if hasattr(dist, "all_gather_into_tensor"):  # gloo on 1.13-2.1: "no support for _allgather_base"
        maybe("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.zeros(4 * w), t))
    if hasattr(c10d, "_coalescing_manager"):
        try:
            with c10d._coalescing_manager(group=None, async_ops=False):
                dist.all_reduce(torch.ones(2))
                dist.all_reduce(torch.ones(3))
            done.append("_coalescing_manager")
        except (RuntimeError, TypeError, NotImplementedError):
            pass
    direct = dist.distributed_c10d._get_default_group()
    run("group_method", lambda: direct.allreduce([torch.ones(2)]).wait())
    _channel_facts(ctx, obs, done)


# the calls the contract test checks by name, not by the world's count (test_source_contract.BY_NAME_ALWAYS)
_BY_NAME_ALWAYS = {"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list",
                   "monitored_barrier"}


def _channel_facts(ctx, obs, done):
    dist.barrier()
    from c10d_observer.channel import decode_op, decode_sig
    from c10d_observer.channel_reader import ChannelReader
    reader = ChannelReader.attach(obs.tracker.channel)
    # Sources end calls on their own schedule (the completion poller, the flight-recorder reader): wait,
    # up to 30 s, until nothing is in flight any more and the world's stream counts every collective made
    # (the flight-recorder source names a new group from the recorder's entries, read at most every quarter
    # timeout: a rank whose first read came before the group's first entry counts its calls up to 15 s
    # later, and read at once it showed none: test_source_contract failed so on 2.13, 2026-11-29 16:08 UTC,
    # once in many runs); the test then checks that this happened.
    collectives = len([d for d in done if d not in _BY_NAME_ALWAYS])

    def settled():
        snap = reader.snapshot()
        world = [st.last_started for st in snap if st.desc.get("kind") == "collective"
                 and st.desc.get("stream") == st.desc.get("group") == "0"]
        return not any(st.oldest for st in snap) and (not world or world[0] >= collectives)

    deadline = time.monotonic() + 30
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.05)
    streams = {}
    for st in reader.snapshot():
        calls = []
        for seq in range(1, st.last_started + 1):
            a, op, t0, b, d = reader.slot(st.idx, seq)
            calls.append([seq] + list(decode_op(op)) + [d == seq, decode_sig(op)])
        streams[st.desc["stream"]] = {"desc": st.desc, "last_started": st.last_started,
                                      "in_flight": st.oldest, "calls": calls}
    ctx.record(streams=streams, done=done)
    c10d_observer.disable()


def before_init(ctx):
    """enable() before init_process_group; a group created afterwards is covered (rank 1 skips in it)."""
    import datetime
    obs = c10d_observer.enable(timeout=ctx.args["timeout"], dump_dir=ctx.args["dump_dir"])
    ctx.record(watchdog_pid=obs.watchdog_pid)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(ctx.work_dir, "store"),
                            rank=ctx.rank, world_size=ctx.world, timeout=datetime.timedelta(seconds=120))
    t = torch.ones(4)
    dist.all_reduce(t)
    late = dist.new_group([0, 1])
    dist.all_reduce(t, group=late)
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t, group=late)
    c10d_observer.disable()


def reenable(ctx):
    """A second enable() with the same settings returns the active observer; other settings raise."""
    first = _enable(ctx, timeout=5.0)
    again = c10d_observer.enable(timeout=5.0, dump_dir=ctx.args["dump_dir"], source=ctx.args.get("source", "auto"))
    try:
        c10d_observer.enable(timeout=6.0, dump_dir=ctx.args["dump_dir"])
        error = None
    except RuntimeError as e:
        error = str(e)
    ctx.record(same_object=again is first, error=error, still_watching=c10d_observer.observer.active() is first)
    c10d_observer.disable()


def exit_without_disable(ctx):
    """The script ends without disable(): the watchdog leaves with it."""
    _enable(ctx)
    dist.all_reduce(torch.ones(1))


def forked_child(ctx):
    """A forked child (as DataLoader workers are) holds the lifeline pipe: disable() is still prompt."""
    obs = _enable(ctx, timeout=30.0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: holds every fd of the rank until the parent says so
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    c10d_observer.disable()
    ctx.record(watchdog_exit=obs._proc.returncode, watchdog_pid=obs.watchdog_pid)
    os.close(w)
    os.waitpid(pid, 0)


def nccl_gpu_completion(ctx):
    """NCCL, world size 1 (one GPU): a call is in flight until the GPU has finished it, not until the
    Python call returns.  A sleep kernel queued before the all_reduce keeps the GPU busy past the
    timeout; the Python call returns at once; the watchdog must still find the all_reduce overdue."""
    import datetime
    dist.init_process_group("nccl", init_method="file://" + os.path.join(ctx.work_dir, "store"),
                            rank=0, world_size=1, timeout=datetime.timedelta(seconds=120))
    torch.cuda.set_device(0)
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    obs = c10d_observer.enable(timeout=ctx.args["timeout"], dump_dir=ctx.args["dump_dir"])
    ctx.record(source=obs.source)
    torch.cuda._sleep(int(ctx.args["sleep_cycles"]))  # the GPU is busy for seconds
    t0 = time.monotonic()
    dist.all_reduce(t)  # synchronous from Python's point of view: returns once enqueued
    ctx.record(returned_after_s=time.monotonic() - t0)
    ctx.stall_until_released()  # the test releases us once it has seen the report
    torch.cuda.synchronize()
    dist.all_reduce(t)  # a quick one afterwards must not be reported
    torch.cuda.synchronize()
    ctx.record(quick_done=True)
    dist.barrier()
    c10d_observer.disable()
    dist.destroy_process_group()


def compute(ctx):
    """Rank ``culprit`` is stalled in computation (tensor work) while the others wait in an all_reduce."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == ctx.args["culprit"]:
        x = torch.ones(256, 256)
        while not ctx.released():
            x = torch.tanh(x @ x / 256.0)  # a slow step: no collective, the interpreter keeps running
    dist.all_reduce(t)
    c10d_observer.disable()


def cascade(ctx):
    """World of 3 and group [1, 2]: rank 2 is busy; rank 1 waits for it in the subgroup, so rank 0 waits
    for both in the world group.  The root is the subgroup's call, the culprit rank 2."""
    _enable(ctx)
    sub = dist.new_group([1, 2])
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == 2:
        ctx.stall_until_released()
    if ctx.rank in (1, 2):
        dist.all_reduce(t, group=sub)
    dist.all_reduce(t)
    c10d_observer.disable()


def mismatch(ctx):
    """Rank ``culprit`` issues a broadcast where the others issue an all_reduce (same seq): a desync
    (``kind``: "size", an all_reduce of half the elements; "root", a broadcast from itself where the others
    broadcast from rank 0; a rank whose broadcast completed goes on to the next call, as a training loop
    does).  The job cannot recover from it; the test kills it."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == ctx.args["culprit"]:
        if ctx.args.get("kind") == "size":  # the same op with half the elements
            dist.all_reduce(torch.ones(t.numel() // 2))
        elif ctx.args.get("kind") == "root":  # a broadcast from itself where the others broadcast from 0
            dist.broadcast(t, src=ctx.rank)
        else:
            dist.broadcast(t, src=ctx.rank)
        ctx.record(mismatched=True)
    elif ctx.args.get("kind") == "root":
        dist.broadcast(t, src=0)
        # a rank whose broadcast completes goes on to the next step's call: a receiver of root 0 does; root 0 itself
        # where gloo let its sends complete without rank 1's recv (CI once saw it, 2026-12-05: rank 0, stalled here in
        # Python, was named beside rank 1)
        dist.all_reduce(t)
    else:
        dist.all_reduce(t)
    ctx.stall_until_released()


def dead(ctx):
    """Rank ``culprit`` dies before an all_reduce the others wait in.  A dead host closes no sockets; on
    one machine the kernel would close them and gloo would raise in the others at once, so a child of the
    dead rank keeps its sockets open (the test kills it): the others then hang, as on a lost node."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == ctx.args["culprit"]:
        child = os.fork()
        if child == 0:
            time.sleep(120)
            os._exit(0)
        ctx.record(holder_pid=child)
        os._exit(3)
    dist.all_reduce(t)
    ctx.stall_until_released()


def raise_mode(ctx):
    """on_timeout="raise": rank ``culprit`` skips an all_reduce until released; the others wait in it, each
    inside its own ``try`` that catches c10d_observer.CollectiveHang (a gloo call cannot be ended from
    outside: the exception comes once the call returns) and records what it carried.  The job has a SIGUSR1
    handler of its own, set before enable(): it runs too, before the exception."""
    handled = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: handled.append(signum))
    _enable(ctx, on_timeout="raise")
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == ctx.args["culprit"]:
        ctx.stall_until_released()
    try:
        dist.all_reduce(t)
        for _ in range(200):  # the exception comes when this rank is next in Python: it never comes late
            pass
        ctx.record(raised=None, job_handler_ran=len(handled))
    except c10d_observer.CollectiveHang as e:
        ctx.record(raised=str(e), is_runtime_error=isinstance(e, RuntimeError), culprit_ranks=list(e.culprit_ranks),
                   calls=list(e.calls), groups=list(e.groups), ended=list(e.ended), job_handler_ran=len(handled))
    dist.barrier()  # the group still works under gloo: the call the exception interrupted had completed
    c10d_observer.disable()


def frozen(ctx):
    """Rank ``culprit`` stops (SIGSTOP: its Python cannot run, like a process stuck holding the GIL)
    while the others wait in an all_reduce; the test continues it (SIGCONT) and releases everyone."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == ctx.args["culprit"]:
        os.kill(os.getpid(), signal.SIGSTOP)
    dist.all_reduce(t)
    c10d_observer.disable()


def frozen_inside(ctx):
    """Issue 33: every rank enters a long all_reduce (``numel`` floats) and rank ``culprit`` stops (SIGSTOP)
    ``after`` seconds into it: the others wait in a call every rank entered.  The test continues it."""
    import threading
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    big = torch.ones(int(ctx.args.get("numel", 1 << 26)))
    dist.barrier()
    if ctx.rank == ctx.args["culprit"]:
        ctx.record(pid=os.getpid())
        threading.Timer(float(ctx.args.get("after", 0.1)), os.kill, (os.getpid(), signal.SIGSTOP)).start()
    dist.all_reduce(big)
    c10d_observer.disable()


def torch_timeouts(ctx):
    """enable() warns of each group whose torch timeout is not above the observer's; the verdict states it."""
    import datetime
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _enable(ctx)  # the world group exists: checked by enable() itself
        at_enable = [str(w.message) for w in caught]
        default_sub = dist.new_group([0, 1])  # torch's default timeout, not the world's
        short_sub = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=ctx.args["short_s"]))
        t = torch.ones(4)
        for g in (default_sub, short_sub):
            dist.all_reduce(t, group=g)  # first seen here (by a native source: at its next poll)
        from c10d_observer import compat
        short = compat.describe_group(short_sub)["group"]
        deadline = time.monotonic() + (30 if compat.group_timeout(short_sub) is not None else 0)
        while time.monotonic() < deadline and not any("group %s " % short in str(w.message) for w in caught):
            time.sleep(0.01)
        dist.barrier()  # the other rank's source has had the same time
    ctx.record(at_enable=at_enable, warnings=[str(w.message) for w in caught],
               world=compat.describe_group(dist.group.WORLD)["group"],
               default_sub=compat.describe_group(default_sub)["group"],
               short_sub=compat.describe_group(short_sub)["group"])
    c10d_observer.disable()


def fr_dump(ctx):
    """No observer: rank 1 skips the second all_reduce; each rank saves torch's own flight-recorder dump
    (JSON) where it is, for `report` to read."""
    import json
    from torch._C import _distributed_c10d as C

    def read():
        data = C._dump_fr_trace_json()  # bytes or str, by release
        data = data if isinstance(data, bytes) else data.encode("utf-8")
        d = json.loads(data.decode("utf-8"))
        st = (d.get("pg_status") or {}).get("0")
        counts = (int(st["last_enqueued_collective"]), int(st["last_completed_collective"])) if st else (0, 0)
        return data, d, counts

    base = read()[2][0]  # the group's op counter before this scenario's calls
    t = torch.ones(4)
    dist.all_reduce(t)
    path = os.path.join(ctx.args["dump_dir"], "torch_fr_rank_%d" % ctx.rank)  # torch's own naming style

    def dump(calls):
        deadline = time.monotonic() + 30
        while True:
            data, d, (enq, comp) = read()
            # the recorder may list a call, its entry and its completion a moment after torch returned:
            # dump once it shows this rank as it is (rank 1: its one call done; rank 0: the first done, the
            # second, async, in flight with its entry).  Counting from `base`: an older state (the first call
            # enqueued, its completion not yet written) also has one call in flight.
            if enq == base + calls and comp == base + 1 and (
                    calls == 1 or any(int(e.get("op_id", -1)) == enq for e in d["entries"])):
                break
            if time.monotonic() > deadline:
                raise AssertionError("the recorder never settled: %r" % ((base, enq, comp),))
            time.sleep(0.01)
        with open(path, "wb") as f:
            f.write(data)

    if ctx.rank == 1:
        dump(1)
        ctx.record(dumped=True)
        ctx.stall_until_released()
        dist.all_reduce(t)
    else:
        work = dist.all_reduce(t, async_op=True)
        dump(2)
        ctx.record(dumped=True)
        work.wait()
    dist.barrier()
    dist.destroy_process_group()  # no observer here to outlive: leave no gloo thread to the interpreter's exit


def foreign_handler(ctx):
    """After enable(), each rank installs a SIGUSR1 handler of its own (as PyTorch Lightning does for SLURM
    requeue: checkpoint and requeue); then rank 1 skips the second all_reduce until released.  The handler
    records every run in foreign-rank<R>: the observer must never trigger it."""
    _enable(ctx)
    marker = os.path.join(ctx.work_dir, "foreign-rank%d" % ctx.rank)

    def _requeue_handler(signum, frame):
        with open(marker, "a") as f:
            f.write("ran\n")

    signal.signal(signal.SIGUSR1, _requeue_handler)
    t = torch.ones(4)
    dist.all_reduce(t)
    ctx.record(handler_installed=True)
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t)
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def burst(ctx):
    """Rank 1 is away while rank 0 issues ``calls`` async all_reduces in one burst (more than the channel's
    ring of 256 per stream): the stuck call is the first of the burst, #2."""
    _enable(ctx)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == 1:
        ctx.stall_until_released()
    works = [dist.all_reduce(t, async_op=True) for _ in range(ctx.args["calls"])]
    ctx.record(issued=len(works))
    for w in works:
        w.wait()
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def on_hang(ctx):
    """enable(on_hang=...): rank 1 skips the second all_reduce until released.  The callback records what
    it was handed and where it ran; with ``raise_in_callback`` it then raises (the job must go on)."""
    import threading
    calls = []

    def callback(v):
        calls.append(v)
        ctx.record(on_hang=dict(culprit_ranks=v.culprit_ranks, missing=v.hangs[0].missing_ranks,
                                waiting=v.hangs[0].waiting_ranks, call=v.hangs[0].call, exit_code=v.exit_code,
                                thread=threading.current_thread().name,
                                main_thread=threading.current_thread() is threading.main_thread(),
                                calls=len(calls)))
        if ctx.args.get("raise_in_callback"):
            raise RuntimeError("the user's callback failed")

    _enable(ctx, on_hang=callback)
    t = torch.ones(4)
    dist.all_reduce(t)
    if ctx.rank == 1:
        ctx.stall_until_released()
    dist.all_reduce(t)
    ctx.record(result=t[0].item(), callback_calls=len(calls))
    c10d_observer.disable()


def _funcol():
    import torch.distributed._functional_collectives as funcol
    return funcol


def _waited(funcol, x):
    """The result of a functional collective, waited: ``AsyncCollectiveTensor.wait()`` where it exists,
    ``wait_tensor`` on 2.1 (whose AsyncCollectiveTensor has no ``wait``)."""
    return x.wait() if hasattr(x, "wait") else funcol.wait_tensor(x)


def funcol_skip(ctx):
    """Rank 1 is away before a functional all_reduce (what DTensor and tensor parallelism issue; from
    torch 2.3 it runs in C++, past every ProcessGroup wrapper); rank 0 waits on its result."""
    funcol = _funcol()
    t = torch.ones(4)
    _waited(funcol, funcol.all_reduce(t, "sum", dist.group.WORLD))  # torch's first call takes seconds: before enable()
    packet = getattr(getattr(torch.ops, "_c10d_functional", None), "all_reduce", None)
    before = vars(packet).get("_op") if packet is not None else None
    _enable(ctx)
    ctx.record(wrapped=packet is not None and vars(packet).get("_op") is not before)
    for _ in range(3):
        t = _waited(funcol, funcol.all_reduce(t, "sum", dist.group.WORLD))  # healthy calls, waited
    if ctx.rank == 1:
        ctx.stall_until_released()
    out = funcol.all_reduce(t, "sum", dist.group.WORLD)
    ctx.record(issued=True)
    ctx.record(result=_waited(funcol, out)[0].item())
    c10d_observer.disable()
    ctx.record(restored=packet is None or vars(packet).get("_op") is before)


def compiled_funcol_skip(ctx):
    """A functional all_reduce inside a torch.compile'd graph (backend aot_eager: no C++ compiler needed),
    rank 1 away.  The graph calls the op overloads directly, past the funcol wrappers on the op packets:
    only a source that sees the group's calls in C++ (a recorder, pg_hooks) can see it."""
    funcol = _funcol()

    def step(t):
        return funcol.all_reduce(t, "sum", dist.group.WORLD).wait() * 1.0

    try:
        compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
        t = compiled(torch.ones(4))  # compiling takes seconds: before enable()
    except Exception as e:  # this torch's dynamo cannot trace it
        ctx.record(compiled="no: %s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:200]))
        return
    packet = torch.ops._c10d_functional.all_reduce
    calls = []
    _enable(ctx)
    ctx.record(compiled="yes")
    inner = vars(packet).get("_op")
    if callable(inner):  # counts calls through the packet (the funcol wrappers' way in)
        packet._op = lambda *a, **k: (calls.append(1), inner(*a, **k))[1]
    for _ in range(3):
        t = compiled(t)  # healthy compiled calls
    if ctx.rank == 1:
        ctx.stall_until_released()
    t = compiled(t)
    if callable(inner):
        packet._op = inner
    ctx.record(result=t[0].item(), packet_calls=len(calls))
    c10d_observer.disable()


def dtensor_skip(ctx):
    """A DTensor redistribution (Shard -> Replicate: a functional all_gather) with rank 1 late."""
    try:
        from torch.distributed.tensor import DeviceMesh, Replicate, Shard, distribute_tensor
    except ImportError:  # before 2.4
        from torch.distributed._tensor import DeviceMesh, Replicate, Shard, distribute_tensor
    mesh = DeviceMesh("cpu", list(range(ctx.world)))
    x = distribute_tensor(torch.arange(16.0).reshape(4, 4), mesh, [Shard(0)])
    x.redistribute(mesh, [Replicate()]).to_local()  # torch's first call takes seconds: before enable()
    _enable(ctx)
    if ctx.rank == 1:
        ctx.stall_until_released()
    full = x.redistribute(mesh, [Replicate()]).to_local()
    ctx.record(result=full.sum().item())
    c10d_observer.disable()


def dataloader_late(ctx):
    """Rank ``culprit`` stalls in its DataLoader (its worker's __getitem__ waits until released) at the batch
    of step ``step``, then catches up (issue 24, row 1)."""
    release = os.path.join(ctx.work_dir, "release")

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            if ctx.rank == ctx.args["culprit"] and i == ctx.args["step"]:
                while not os.path.exists(release):
                    time.sleep(0.02)
            return torch.ones(4)

    loader = torch.utils.data.DataLoader(Slow(), batch_size=1, num_workers=1)
    _enable(ctx)
    for i, x in enumerate(loader):
        dist.all_reduce(x)
        if i == ctx.args["steps"]:
            break
    ctx.record(result=x[0, 0].item())
    c10d_observer.disable()


def size_mismatch(ctx):
    """Rank ``culprit`` all_reduces 2 floats where the others all_reduce 1 (issue 24, row 3): gloo completes
    the others' call and they wait in the next all_reduce; the culprit waits in its own.  The job cannot
    recover; the test kills it (or on_timeout="abort" ends it)."""
    _enable(ctx)
    dist.all_reduce(torch.ones(4))
    dist.all_reduce(torch.ones(2 if ctx.rank == ctx.args["culprit"] else 1))
    ctx.record(second_done=True)
    dist.all_reduce(torch.ones(4))
    ctx.stall_until_released()


def ordering(ctx):
    """The world group and new_group([2, 3]): every step a world all_reduce, then ranks 2 and 3 an
    all_reduce on their group; rank 2 skips its group call at step ``step`` and goes on to the next world
    call (issue 24, row 5): an ordering deadlock."""
    _enable(ctx)
    pair = dist.new_group([2, 3])
    t = torch.ones(4)
    for step in range(ctx.args["steps"]):
        dist.all_reduce(t)
        if ctx.rank in (2, 3) and not (ctx.rank == 2 and step == ctx.args["step"]):
            dist.all_reduce(t, group=pair)
    ctx.stall_until_released()


def new_group_left_out(ctx):
    """``steps`` world all_reduces, then every rank but ``culprit`` makes ``new_group(members)`` (the
    ``new_group`` under an ``if`` that torch documents every rank must call), then a world all_reduce: the
    group's other members wait in its making (gloo's rendezvous; on 1.x the others in torch's store-based
    barrier after it), the culprit in the all_reduce.  ``die``: the culprit dies there instead (os._exit), as a
    rank that crashed before the job made its groups.  ``local_first``: those ranks alone make a group of
    themselves first, ``use_local_synchronization=True`` (torch 2.x), which the others never call.  Ended by
    the test (kill)."""
    _enable(ctx)
    t = torch.ones(4)
    for _ in range(ctx.args.get("steps", 3)):
        dist.all_reduce(t)
    local = ctx.args.get("local_first")  # these ranks alone make a group first (use_local_synchronization)
    if local and ctx.rank in local:
        dist.new_group(local, use_local_synchronization=True)
    if ctx.rank == ctx.args["culprit"] and ctx.args.get("die"):
        ctx.record(dying=True)
        os._exit(3)
    if ctx.rank != ctx.args["culprit"]:
        dist.new_group(ctx.args["members"])
    ctx.record(past_new_group=True)
    dist.all_reduce(t)
    ctx.stall_until_released()


def new_groups_in_another_order(ctx):
    """``steps`` world all_reduces, then each rank makes the ``groups`` (lists of ranks) with ``new_group``: the
    ranks in ``reverse`` in the other order (torch documents that every rank makes its groups in one order; a
    group is named by its place in it, so [0, 1] made first by one rank and second by another is two names,
    whose members wait for each other), then a world all_reduce and each rank's own group's; stalls after.
    ``instead``: {rank: the groups that rank makes instead} (another group's members than the others pass).
    Ended by the test (kill)."""
    _enable(ctx)
    t = torch.ones(4)
    for _ in range(ctx.args.get("steps", 3)):
        dist.all_reduce(t)
    groups = ctx.args.get("instead", {}).get(str(ctx.rank), ctx.args["groups"])
    order = list(reversed(groups)) if ctx.rank in ctx.args.get("reverse", ()) else list(groups)
    made = {tuple(ranks): dist.new_group(ranks) for ranks in order}
    ctx.record(past_new_group=True)
    dist.all_reduce(t)
    mine = [g for ranks, g in made.items() if ctx.rank in ranks]
    if mine:
        dist.all_reduce(t, group=mine[0])
    ctx.stall_until_released()


def _jittered_steps(ctx, n, t):
    """``n`` training steps of jittered compute (5-50 ms, a rank's own draw) and an all_reduce each."""
    import random
    rng = random.Random(ctx.rank * 7919 + 1)
    x = torch.ones(32, 32)
    for _ in range(n):
        until = time.monotonic() + rng.uniform(0.005, 0.05)
        while time.monotonic() < until:
            x = (x @ x).clamp_(-1, 1)
        dist.all_reduce(t)


def learned_stop(ctx):
    """No timeout chosen (issue 26): ``steps`` sub-second steps, then rank ``culprit`` stops arriving."""
    _enable(ctx, timeout=ctx.args.get("timeout"))
    t = torch.ones(1024)
    _jittered_steps(ctx, ctx.args["steps"], t)
    ctx.record(stopped_at=time.time())
    if ctx.rank == ctx.args["culprit"]:
        ctx.stall_until_released()
    dist.all_reduce(t)
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def checkpoint(ctx):
    """Rank 0 saves a checkpoint for ``save_s`` behind a barrier, the others waiting in barrier() (issue 26);
    with ``phase`` it says so (``c10d_observer.phase("checkpoint", up_to=...)``).  Then a few more steps."""
    _enable(ctx, timeout=ctx.args.get("timeout"))
    t = torch.ones(1024)
    _jittered_steps(ctx, ctx.args["steps"], t)
    if ctx.rank == 0:
        ctx.record(saving=time.time())
        if ctx.args.get("phase"):
            with c10d_observer.phase("checkpoint", up_to=ctx.args["phase"]):
                time.sleep(ctx.args["save_s"])
        else:
            time.sleep(ctx.args["save_s"])
    dist.barrier()
    _jittered_steps(ctx, 5, t)
    ctx.record(result=t[0].item())
    c10d_observer.disable()


def straggler(ctx):
    """``steps`` steps of ``step_s`` compute and an all_reduce; rank ``slow`` (if any) computes 40 % longer
    every step (it arrives last); then rank ``culprit`` (if any) stalls before the next all_reduce."""
    _enable(ctx)
    t = torch.ones(64)
    x = torch.ones(32, 32)
    for _ in range(ctx.args["steps"]):
        until = time.monotonic() + ctx.args["step_s"] * (1.4 if ctx.rank == ctx.args.get("slow") else 1.0)
        while time.monotonic() < until:
            x = (x @ x).clamp_(-1, 1)
        dist.all_reduce(t)
    ctx.record(trained=True)
    if ctx.rank == ctx.args.get("culprit"):
        ctx.stall_until_released()
    dist.all_reduce(t)
    c10d_observer.disable()


def mesh_straggler(ctx):
    """A 2x2 mesh (issue 42's slow rank): tp groups [0, 1] and [2, 3], dp groups [0, 2] and [1, 3]; ``steps``
    steps of ``step_s`` compute, a tp all_reduce, ``step_s`` compute, a dp all_reduce; rank ``slow`` (if any)
    computes half as long again (its tp partner waits for it, then arrives late at its own dp call).  Compute is
    a sleep: four ranks on two cores keep their timing."""
    _enable(ctx)
    tp = [dist.new_group([0, 1]), dist.new_group([2, 3])][ctx.rank // 2]
    dp = [dist.new_group([0, 2]), dist.new_group([1, 3])][ctx.rank % 2]
    t = torch.ones(64)
    step_s = ctx.args["step_s"] * (1.5 if ctx.rank == ctx.args.get("slow") else 1.0)
    for _ in range(ctx.args["steps"]):
        time.sleep(step_s)
        dist.all_reduce(t, group=tp)
        time.sleep(step_s)
        dist.all_reduce(t, group=dp)
    dist.barrier()
    ctx.record(trained=True)
    c10d_observer.disable()


def ddp_loop(ctx):
    """A job as users write it (issue 31): a DDP model, a DataLoader with a worker, jittered compute, the
    step's loss all_reduced; faults by step, each optional:

    - ``handler``: a SIGUSR1 handler of the job's own, installed first (as PyTorch Lightning does for Slurm's
      requeue); its calls are recorded at the end (``handler_calls``);
    - ``stall`` [rank, step]: that rank's DataLoader worker waits for the release at the batch of that step
      (``stalled_at``: when the rank asked for it);
    - ``pause`` [rank, step, seconds]: that rank sleeps, then goes on (a pause that resolves);
    - ``ckpt`` [step, seconds]: rank 0 saves behind a barrier (``phase``: inside phase("checkpoint", up_to));
    - ``slow`` [rank, factor] / ``late`` [rank, seconds]: that rank computes longer every step (a straggler);
    - ``p2p``: rank 0 sends rank 1 a tensor every step; ``skip_recv`` step: rank 1 skips that step's recv;
    - ``pairs``: an all_reduce on new_group([0, 1]) and new_group([2, 3]) every step; ``pair_skip`` step:
      rank 2 skips its own.
    Each rank records ``step_at`` (when each step began: {step: wall time}) every 10 steps, and ``result``.
    """
    import random
    calls = [0]
    if ctx.args.get("handler"):
        def handler(signum, frame):
            calls[0] += 1
        signal.signal(signal.SIGUSR1, handler)
    release = os.path.join(ctx.work_dir, "release")
    stall = ctx.args.get("stall")

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 20

        def __getitem__(self, i):
            if stall and stall[0] == ctx.rank and i == stall[1]:
                while not os.path.exists(release):
                    time.sleep(0.02)
            return torch.ones(16) * (i % 7), torch.ones(4)

    loader = iter(torch.utils.data.DataLoader(Data(), batch_size=1, num_workers=ctx.args.get("workers", 1)))
    torch.manual_seed(0)
    obs = _enable(ctx, timeout=ctx.args.get("timeout"))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pair = None
    if ctx.args.get("pairs"):
        pairs = [dist.new_group([r, r + 1]) for r in range(0, ctx.world - 1, 2)]
        pair = pairs[ctx.rank // 2] if ctx.rank // 2 < len(pairs) else None
    rng = random.Random(ctx.rank * 7919 + 11)
    x = torch.ones(32, 32)
    slow, late = ctx.args.get("slow"), ctx.args.get("late")
    step_at = {}
    for step in range(ctx.args.get("steps", 50)):
        step_at[step] = time.time()
        if step % 10 == 0:
            ctx.record(step_at=step_at, source=obs.source)
        if stall and stall[0] == ctx.rank and step == stall[1]:
            ctx.record(stalled_at=time.time())
        inputs, target = next(loader)
        pause = ctx.args.get("pause")
        if pause and pause[0] == ctx.rank and pause[1] == step:
            ctx.record(paused_at=time.time())
            time.sleep(pause[2])
        compute = ctx.args.get("step_s", 0.05) * (1.0 + ctx.args.get("jitter", 0.3) * (rng.random() - 0.5))
        if slow and slow[0] == ctx.rank:
            compute *= slow[1]
        if late and late[0] == ctx.rank:
            compute += late[1]
        until = time.monotonic() + compute
        while time.monotonic() < until:
            x = (x @ x).clamp_(-1, 1)
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()  # DDP's gradient all_reduce
        opt.step()
        opt.zero_grad()
        if ctx.args.get("p2p"):
            t = torch.ones(4) * step
            if ctx.rank == 0:
                dist.send(t, 1)
            elif ctx.rank == 1:
                if ctx.args.get("skip_recv") == step:
                    ctx.record(skipped_recv=step)
                else:
                    dist.recv(t, 0)
        if pair is not None:
            if ctx.args.get("pair_skip") == step and ctx.rank == 2:
                ctx.record(skipped_pair=step)
            else:
                dist.all_reduce(torch.ones(8), group=pair)
        dist.all_reduce(loss.detach().reshape(1))  # the step's loss, averaged for the log
        ckpt = ctx.args.get("ckpt")
        if ckpt and step == ckpt[0]:
            if ctx.rank == 0:
                ctx.record(saving=time.time())
                if ctx.args.get("phase"):
                    with c10d_observer.phase("checkpoint", up_to=ctx.args["phase"]):
                        time.sleep(ckpt[1])
                else:
                    time.sleep(ckpt[1])
            dist.barrier()
    ctx.record(step_at=step_at, trained=True)
    dist.barrier()  # every rank is past every hang: what the observer sent has been handled
    ctx.record(handler_calls=calls[0], result=x[0, 0].item())
    c10d_observer.disable()
