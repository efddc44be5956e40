"""The patch source: wrappers around ProcessGroup methods, Work.wait and a few module functions.

Which layer, and why (docs/sources.md says the same):

* ``ProcessGroup`` methods (``allreduce``, ``send``, ``_allgather_base``, ...) are where every Python
  entry point ends on every torch from 1.8 on: the ``torch.distributed`` functions, their
  ``distributed_c10d`` twins, the ``*_object`` and coalesced variants, ``_coalescing_manager`` (which
  issues ``allreduce_coalesced`` & co.) and calls made on a group object directly.  They return the
  ``Work``, so completion can be followed whatever the caller does with it.  One wrapper per method, so
  no call is counted twice.
* ``Work.wait``: for CPU backends a call ends when its work's ``wait()`` returns; works nobody waits on
  are found complete by the tracker's poller.
* Module functions, only to name composite calls (``all_gather_object`` issues two all_gathers) and to
  see DDP's C++ helpers that take a group (``_broadcast_coalesced``, ``_verify_params_across_processes``).
* DDP's gradient all-reduce is issued from C++ and never passes through Python.  At a DDP model's first
  forward, unless the user registered a comm hook of their own, the source registers one that does what
  DDP does by default (average with one all_reduce per bucket) through ``torch.distributed.all_reduce``,
  so the ProcessGroup wrappers see it.
"""
import functools
import logging
import queue
import threading

from .. import callword as _cw
from .. import channel as _ch
from .. import compat
from . import table as _table
from .base import Source
from .registry import PatchRegistry

log = logging.getLogger("c10d_observer")

P2P = ("send", "recv", "recv_anysource")
COLLECTIVE_METHODS = tuple(m for m, _ in compat.PG_METHODS if m not in P2P and m != "monitored_barrier")
ROOTED_METHODS = tuple(m for m, op in compat.PG_METHODS if op in compat.ROOT_ARG)

# The wrappers below are the call path: each binds what it needs as locals and calls no more than the
# stream's start/done.  A call ends at once (it raised, or a CPU backend returned no work), joins its
# group's coalescing batch, is left in tracker.waiting (CPU backends: done when wait() returns or the
# poller sees it complete), or is handed to the group's ``gpu`` (GPU backends: done when the GPU has
# finished it, from its work or, where it returned none, from a marker on its stream; gpu.py).

def _make_call_wrapper(tracker, orig, op, p2p=None, side=None):
    """The wrapper of one ProcessGroup method.  ``p2p``: None for a collective (the group's collective
    stream), else (index of the peer argument or None for any source, its keyword name, is_send).
    ``side``: put the calls on the group's side stream of that name (an op a native source never sees).
    A collective on a group whose collectives a recorder or hook reports (``_Group.native``) passes
    through.  The common case, a plain collective on the group's own stream, takes one test to skip the
    rest (benchmarks/README.md, where the time goes)."""
    groups = tracker.groups
    get_group = tracker.group
    ctx = tracker.ctx
    inside = tracker.inside
    plain = p2p is None and side is None
    peer_index, peer_kw, is_send = p2p if p2p is not None else (None, None, False)
    size_arg = compat.SIZE_TENSOR.get(_ch.OPS[op], (None, None))[1]
    if size_arg is None:
        size_arg = 1 << 30  # no size signature for this op: len(args) is never above it
    root_arg = compat.ROOT_ARG.get(_ch.OPS[op], 1 << 30)  # a rooted op's options (or root): len(args) above it
    rooted = plain and root_arg < 1 << 30  # its root noted where gloo's recorder makes its events (_native_rooted)
    dtype_codes = tracker.dtype_codes
    # the op word's layout (callword.py), bound as locals: the call path reads no global
    api_shift, dtype_shift, sig_shift, numel_mask = _cw.API_SHIFT, _cw.DTYPE_SHIFT, _cw.SIG_SHIFT, _cw.NUMEL_MASK
    root_shift, root_mask = _cw.ROOT_SHIFT, _cw.ROOT_MASK

    @functools.wraps(orig)
    def wrapper(self, *args, **kwargs):
        g = groups.get(self) or get_group(self)
        if plain:
            if g.native:
                if rooted and g.native == "gloo" and len(args) > root_arg:
                    return _native_rooted(g, self, orig, args, kwargs, op, args[root_arg])
                return orig(self, *args, **kwargs)
            st = g.coll
        elif side is not None:  # an op no native source sees: its own stream where one sees the others
            st = (g.sides.get(side) or g.side(side)) if g.native else g.coll
        elif g.native_p2p:  # pg_hooks where chosen: its hooks see p2p calls
            return orig(self, *args, **kwargs)
        else:
            if peer_index is None:
                peer = None
            elif len(args) > peer_index:
                peer = args[peer_index]
            else:
                peer = kwargs.get(peer_kw)
            st = (g.sends if is_send else g.recvs).get(peer) or g.p2p_stream(peer, is_send)
        word = op | ctx.api << api_shift if inside else op
        if len(args) > size_arg:  # the size signature, one tensor's dtype and numel: callword.encode_sig inlined
            x = args[size_arg]
            while x.__class__ is list:
                x = x[0] if x else None
            code = dtype_codes.get(getattr(x, "dtype", None), 0)
            if code:
                word |= (code << dtype_shift | (x.numel() & numel_mask)) << sig_shift
        if len(args) > root_arg:  # the root its ranks must agree on: callword.encode_root inlined
            root = args[root_arg]
            root = root if root.__class__ is int else getattr(root, "rootRank", -1)
            if root.__class__ is int and root >= 0:
                word |= ((root + 1) & root_mask) << root_shift
        seq = st.start(word)
        try:
            if not plain and g.native == "gloo":
                # gloo's recorder counts this op (not recorded) with the collectives, which torch numbers apart:
                # the reader needs its place (recorder_books._Numbers); only p2p and side ops come here
                before = compat.torch_seq(self)
                work = orig(self, *args, **kwargs)
                g.other_ops.append((before, compat.torch_seq(self), p2p is not None))
            else:
                work = orig(self, *args, **kwargs)
        except BaseException:
            st.done(seq)
            raise
        if g.batch is not None:
            g.batch.calls.append((st, seq))
        elif work is not None and g.gpu is None:  # a CPU backend's call (gloo): _Group.end_call, inlined
            g.sink[work] = (st, seq)
        else:  # a GPU backend's, or one that returned no work (a synchronous NCCL collective, 2.8+)
            g.end_call(st, seq, work)
        return work

    return wrapper


def _native_rooted(g, pg, orig, args, kwargs, op, root):
    """A rooted collective (broadcast, reduce, gather, scatter) on a group whose collectives gloo's recorder
    reports: its entry carries no root, so the root is noted here by torch's op id, which the entry carries
    (``op_id``: torch's op count just after the call is issued; recorders._op_word puts it in the op
    word).  Noted only where the count moved by exactly one (another thread's op between the two reads
    leaves it unknown: "cannot decide" rather than a root guessed)."""
    root = root if root.__class__ is int else getattr(root, "rootRank", -1)
    before = compat.torch_seq(pg)
    work = orig(pg, *args, **kwargs)
    if root.__class__ is int and root >= 0 and before is not None:
        after = compat.torch_seq(pg)
        if after == before + 1:
            g.note_root(after, op, root)
    return work


def _make_coll_wrapper(tracker, orig, op):
    return _make_call_wrapper(tracker, orig, op)


def _make_p2p_wrapper(tracker, orig, op, peer_index, peer_kw, is_send):
    return _make_call_wrapper(tracker, orig, op, (peer_index, peer_kw, is_send))


class _Batch(object):
    """The calls issued between ``_start_coalescing`` and ``_end_coalescing`` (NCCL's coalesced launch,
    used by ``batch_isend_irecv`` and ``_coalescing_manager(device=...)``): inside, recent NCCL builds
    return no work per call, and all of them end with the one work ``_end_coalescing`` returns.
    Stands in a completion table where a stream does: ``done`` ends every call of the batch."""

    __slots__ = ("calls",)

    def __init__(self):
        self.calls = []

    def done(self, _seq=None):
        for st, seq in self.calls:
            st.done(seq)


def _make_start_coalescing_wrapper(tracker, orig):
    @functools.wraps(orig)
    def wrapper(self, *args, **kwargs):
        result = orig(self, *args, **kwargs)  # gloo raises "does not implement": no batch then
        tracker.group(self).batch = _Batch()
        return result

    return wrapper


def _make_end_coalescing_wrapper(tracker, orig):
    @functools.wraps(orig)
    def wrapper(self, *args, **kwargs):
        g = tracker.group(self)
        batch, g.batch = g.batch, None
        try:
            work = orig(self, *args, **kwargs)
        except BaseException:
            if batch is not None:
                batch.done()
            raise
        if batch is not None and batch.calls:
            g.end_call(batch, 0, work)  # torch 2.8+ returns no work for a synchronous block
        return work

    return wrapper


def _make_wait_wrapper(tracker, orig):
    """Work.wait(timeout=...) (its signature on every torch from 1.8): no ``*args, **kwargs``, so that the
    common ``work.wait()`` calls the original without building a tuple and a dict."""
    pop = tracker.waiting.pop

    @functools.wraps(orig)
    def wait(self, timeout=None):
        result = orig(self) if timeout is None else orig(self, timeout)
        entry = pop(self, None)
        if entry is not None:
            st, seq = entry
            st.done(seq)
        return result

    return wait


def _make_api_wrapper(tracker, orig, api_code):
    ctx = tracker.ctx

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if ctx.api:
            return orig(*args, **kwargs)
        with _Inside(tracker, api_code):
            return orig(*args, **kwargs)

    return wrapper


class _Inside(object):
    """The calling thread is inside a composite call (``api_code``) while in this block (tracker.ctx)."""

    __slots__ = ("tracker", "code", "tid")

    def __init__(self, tracker, code):
        self.tracker = tracker
        self.code = code
        self.tid = threading.get_ident()

    def __enter__(self):
        self.tracker.ctx.api = self.code
        self.tracker.inside.add(self.tid)

    def __exit__(self, *exc):
        self.tracker.ctx.api = 0
        self.tracker.inside.discard(self.tid)
        return False


def _make_group_call_wrapper(tracker, orig, op, api_code):
    """A synchronous module-level helper whose first argument is the group (DDP's C++ helpers)."""

    @functools.wraps(orig)
    def wrapper(pg, *args, **kwargs):
        try:
            g = tracker.group(pg)
            st, seq = (None, 0) if g.native else (g.coll, g.coll.start(op | api_code << _cw.API_SHIFT))
        except Exception:
            st, seq = None, 0
        try:
            return orig(pg, *args, **kwargs)
        finally:
            if seq:
                st.done(seq)

    return wrapper


class PatchSource(Source):
    """Wraps the ProcessGroup methods that issue an op: ``methods`` (None: all; the plan wraps those whose
    cells it makes, ``build``), ``side`` (methods whose calls go on a side stream of their own where a
    native source makes the group's other collectives).  Calls on groups a native source covers pass
    through (``_Group.native``, ``native_p2p``).  ``wait``: end CPU-backend calls when Work.wait() returns
    (else the completion poller ends them); ``ddp``: register the DDP comm hook that makes DDP's C++
    all-reduce visible; ``coalescing``: follow ``_start_coalescing`` blocks (None: with every method)."""

    name = "patch"

    def __init__(self, tracker, methods=None, side=(), wait=True, composites=True, ddp=True, coalescing=None,
                 registry=None):
        self.tracker = tracker
        self.coalescing = methods is None if coalescing is None else coalescing
        self.registry = registry if registry is not None else PatchRegistry()
        self.methods = methods
        self.side = frozenset(side)
        self.wait = wait
        self.composites = composites
        self.ddp = ddp

    @classmethod
    def build(cls, ctx):
        """The wrappers for the cells they make: p2p and monitored_barrier always; collectives at once where
        they make gloo's, else when the first group whose collectives no recorder or hook makes appears; the
        rooted ones at once where gloo's recorder makes them (its entries carry no root, which the wrapper
        notes, _native_rooted, and the reader puts in the call's word)."""
        first = ctx.plan.first
        eager = first("gloo", "collective") == "patch"
        rooted = set(ROOTED_METHODS) if first("gloo", "collective") == "gloo_recorder" else set()
        methods = set(P2P) | {"monitored_barrier"} | (set(COLLECTIVE_METHODS) if eager else rooted)
        patch = cls(ctx.tracker, methods=methods, side={"monitored_barrier"},
                    wait=first("gloo", "collective") in ("patch", "pg_hooks"),
                    ddp=any(first(b, "ddp_allreduce") == "patch" for b in _table.BACKENDS),
                    coalescing=eager, registry=ctx.registry)
        if not eager:
            wrapped = []

            def gap_collectives(pg):
                if not wrapped and ctx.dispatch.native_for(pg, None) is None:
                    wrapped.append(True)
                    patch.wrap_methods(COLLECTIVE_METHODS)

            ctx.on_group.append(gap_collectives)
        return patch

    def install(self):
        self.wrap_methods(self.methods)
        t = self.tracker
        reg = self.registry
        pg_cls = compat.process_group_class()
        if self.coalescing and "_start_coalescing" in vars(pg_cls) and "_end_coalescing" in vars(pg_cls):
            reg.wrap(pg_cls, "_start_coalescing", lambda o: _make_start_coalescing_wrapper(t, o))
            reg.wrap(pg_cls, "_end_coalescing", lambda o: _make_end_coalescing_wrapper(t, o))
        if self.wait:
            reg.wrap(compat.work_class(), "wait", lambda o: _make_wait_wrapper(t, o))

        import torch.distributed as dist
        c10d = compat.c10d_module()
        if self.composites:
            for api in compat.COMPOSITE_APIS:
                code = _ch.API_CODES[api]
                for owner in (dist, c10d):
                    if hasattr(owner, api):
                        reg.wrap(owner, api, lambda o, code=code: _make_api_wrapper(t, o, code))
        if not self.ddp:
            return
        ddp_api = _ch.API_CODES["ddp_sync_module_states"]
        if hasattr(dist, "_broadcast_coalesced"):
            reg.wrap(dist, "_broadcast_coalesced", lambda o: _make_group_call_wrapper(
                t, o, _ch.OP_CODES["broadcast_coalesced"], ddp_api))
        if hasattr(dist, "_verify_params_across_processes"):
            reg.wrap(dist, "_verify_params_across_processes", lambda o: _make_group_call_wrapper(
                t, o, _ch.OP_CODES["verify_params"], ddp_api))
        ddp = compat.ddp_class()
        if ddp is not None and hasattr(ddp, "register_comm_hook"):
            reg.wrap(ddp, "forward", lambda o: _make_ddp_forward(o))

    def wrap_methods(self, methods):
        """Wrap these ProcessGroup methods (None: every one)."""
        t = self.tracker
        pg_cls = compat.process_group_class()
        for method, op_name in compat.PG_METHODS:
            if method not in vars(pg_cls):
                continue
            if methods is not None and method not in methods:
                continue
            op = _ch.OP_CODES[op_name]
            side = op_name if method in self.side else None
            if method in compat.P2P_METHODS:
                p2p = (compat.P2P_METHODS[method], "dstRank" if method == "send" else "srcRank", method == "send")
            else:
                p2p = None
            self.registry.wrap(pg_cls, method, lambda o, op=op, p2p=p2p, side=side:
                               _make_call_wrapper(t, o, op, p2p, side))

    def uninstall(self):
        self.registry.restore()


# -- DDP ---------------------------------------------------------------------------------------------
# The hook stays registered on a model after disable(): DDP cannot unregister it.  It then behaves like
# DDP's default all-reduce, without the annotation.
_ACTIVE_TRACKER = [None]
_DDP_FLAG = "_c10d_observer_hook_checked"


def set_active_tracker(tracker):
    _ACTIVE_TRACKER[0] = tracker


def _make_ddp_forward(orig):
    @functools.wraps(orig)
    def forward(self, *args, **kwargs):
        if not self.__dict__.get(_DDP_FLAG):
            self.__dict__[_DDP_FLAG] = True
            _register_ddp_hook(self)
        return orig(self, *args, **kwargs)

    return forward


def _register_ddp_hook(model):
    pg = getattr(model, "process_group", None)
    tracker = _ACTIVE_TRACKER[0]
    try:
        if tracker is not None and pg is not None and tracker.group(pg).native:
            return  # a recorder sees DDP's own C++ all-reduce on this group: no hook needed
    except Exception:
        pass
    try:
        model.register_comm_hook(pg, ddp_allreduce_hook)
    except Exception as e:  # the user registered a hook of their own, or this DDP refuses Python hooks
        log.info("c10d_observer: DDP gradient all-reduce left to the model's own comm hook (%s); "
                 "collectives that hook issues through torch.distributed are still seen", e)


def _bucket_tensor(bucket):
    if hasattr(bucket, "buffer"):
        return bucket.buffer(), False
    if hasattr(bucket, "get_tensor"):
        return bucket.get_tensor(), True
    return bucket.get_tensors()[0], True


def ddp_allreduce_hook(process_group, bucket):
    """DDP's default gradient averaging, issued through torch.distributed so that it is observed."""
    import torch
    import torch.distributed as dist
    group = process_group if process_group is not None else dist.group.WORLD
    tensor, as_list = _bucket_tensor(bucket)
    tensor.div_(group.size())
    tracker = _ACTIVE_TRACKER[0]
    if tracker is not None and not tracker.ctx.api:
        with _Inside(tracker, _ch.API_CODES["ddp_gradient_allreduce"]):
            work = dist.all_reduce(tensor, group=group, async_op=True)
    else:
        work = dist.all_reduce(tensor, group=group, async_op=True)
    try:
        fut = work.get_future()
    except RuntimeError:  # torch 1.8 gloo: "getFuture not implemented"
        fut = torch.futures.Future()
        _Waiter.get().put((work, fut, tensor, as_list))
        return fut
    if as_list:
        return fut.then(lambda f: [f.value()[0]])
    return fut.then(lambda f: f.value()[0])


class _Waiter(object):
    """Completes DDP hook futures where Work.get_future() is not implemented: one thread, in order."""

    _instance = None
    _lock = threading.Lock()

    @classmethod
    def get(cls):
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def __init__(self):
        self._q = queue.Queue()
        threading.Thread(target=self._run, name="c10d_observer-ddp-waiter", daemon=True).start()

    def put(self, item):
        self._q.put(item)

    def _run(self):
        while True:
            work, fut, tensor, as_list = self._q.get()
            try:
                work.wait()
            except Exception as e:
                if hasattr(fut, "set_exception"):
                    fut.set_exception(e)
                    continue
            fut.set_result([tensor] if as_list else tensor)
