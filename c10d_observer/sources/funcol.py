"""Functional collectives (``torch.ops._c10d_functional``: ``funcol``, DTensor, tensor parallelism) on
groups that no native source records.

From torch 2.3 the functional collectives run in C++: ``funcol.all_reduce`` calls the op
``torch.ops._c10d_functional.all_reduce``, whose kernel calls ``ProcessGroup::allreduce`` directly, so
no ProcessGroup wrapper sees it (../shared/gpu-facts.md; torch's ``Functional.cpp``).  The op returns its
output at once and keeps the work in a registry; ``wait_tensor(output)`` waits on it (an
``AsyncCollectiveTensor`` does so at its first use).  Every Python caller (the funcol module, DTensor's
redistributions, user code) calls the op's packet, ``torch.ops._c10d_functional.all_reduce(...)``, whose
``__call__`` calls the packet's ``_op``: a wrapper set there sees them all, and one on ``wait_tensor``'s
sees the waits.  The packets themselves stay as they are (compiled graphs and torch's own code refer to
them and to their overloads, ``.default``, which are not wrapped).

A call starts when it is issued, on its group's collective stream (numbered with the group's other
collectives), and ends when one of its outputs is waited, or when all of its outputs have been freed
unwaited (nobody can wait on it any more; the tracker's poller looks).  A GPU call ends once the GPU
has passed a marker recorded after the wait (the wait makes the current stream wait on the collective).
A result kept unwaited past the timeout reads as overdue: the functional API gives no other way to ask
whether its work is done.  Graphs compiled with ``torch.compile`` call the ops from C++ and are not
seen; while dynamo traces, the wrappers only call through.  Before 2.3 (and for 2.1-2.2's default Python
implementation) the functional collectives go through ``torch.distributed`` and the ProcessGroup
wrappers see them: nothing is installed there.
"""
import logging
import weakref

from .. import callword as _cw
from .. import compat
from .base import Source

log = logging.getLogger("c10d_observer")


class _Call(object):
    __slots__ = ("g", "st", "seq", "refs", "ended")

    def __init__(self, g, st, seq, refs):
        self.g, self.st, self.seq, self.refs, self.ended = g, st, seq, refs, False

    def end(self, waited):
        if self.ended:
            return
        self.ended = True
        if waited:  # a GPU backend's ends behind the wait, on the current stream (a marker); a CPU's now
            self.g.end_call(self.st, self.seq, None)
        else:
            self.st.done(self.seq)


class FuncolSource(Source):
    """Wrappers on the ``_op`` of the functional collectives' packets and of ``wait_tensor``'s
    (compat.funcol_ops)."""

    name = "funcol"

    def __init__(self, tracker, registry):
        self.tracker = tracker
        self.registry = registry
        self.pending = {}  # output storage pointer -> _Call, for the waits
        self.live = {}  # id -> _Call not ended (a pointer reused by a later output drops out of pending)
        self.installed = []

    @classmethod
    def build(cls, ctx):
        return cls(ctx.tracker, ctx.registry)  # where the plan uses its row (sources.PARTS)

    def install(self):
        found = compat.funcol_ops()
        if found is None:
            return
        wait_packet, ops, is_compiling = found
        for packet, name, op_name, group_index, size_index in ops:
            code = _cw.encode_op(op_name, "funcol")
            if self.registry.wrap(packet, "_op", lambda o, code=code, gi=group_index, si=size_index:
                                  self._make_op_wrapper(o, code, gi, si, is_compiling)):
                self.installed.append(name)
        if self.installed:
            self.registry.wrap(wait_packet, "_op", lambda o: self._make_wait_wrapper(o, is_compiling))
            self.tracker.pollers.append(self.poll)

    def uninstall(self):
        try:
            self.tracker.pollers.remove(self.poll)
        except ValueError:
            pass
        calls = list(self.live.values())
        self.live.clear()
        self.pending.clear()
        for c in calls:
            c.end(False)

    # -- the call path -------------------------------------------------------------------------------
    def _make_op_wrapper(self, orig, code, group_index, size_index, is_compiling):
        tracker = self.tracker
        pending = self.pending
        live = self.live
        dtype_codes = tracker.dtype_codes
        by_name = {}  # group name -> _Group: the name is what the op carries
        # the op word's layout (callword.py), bound as locals: the call path reads no global
        dtype_shift, sig_shift, numel_mask = _cw.DTYPE_SHIFT, _cw.SIG_SHIFT, _cw.NUMEL_MASK

        def wrapper(*args, **kwargs):
            if is_compiling():
                return orig(*args, **kwargs)
            try:
                name = args[group_index] if len(args) > group_index else kwargs.get("group_name")
                g = by_name.get(name)
                if g is None:
                    g = by_name[name] = tracker.group_by_name(name)
            except Exception:  # an odd group must never break the collective
                return orig(*args, **kwargs)
            if g.native_functional:
                return orig(*args, **kwargs)
            word = code
            if size_index is not None and len(args) > size_index:
                x = args[size_index]
                c = dtype_codes.get(getattr(x, "dtype", None), 0)
                if c:
                    word |= (c << dtype_shift | (x.numel() & numel_mask)) << sig_shift
            st = g.coll
            seq = st.start(word)
            try:
                out = orig(*args, **kwargs)
            except BaseException:
                st.done(seq)
                raise
            outs = out if isinstance(out, (list, tuple)) else (out,)
            try:
                call = _Call(g, st, seq, [weakref.ref(o) for o in outs])
                for o in outs:
                    pending[o.untyped_storage().data_ptr()] = call
                live[id(call)] = call
            except Exception:  # cannot follow its outputs: end it rather than report it forever
                st.done(seq)
            return out

        return wrapper

    def _make_wait_wrapper(self, orig, is_compiling):
        pending = self.pending

        def wait_tensor(*args, **kwargs):
            result = orig(*args, **kwargs)
            if pending and not is_compiling():
                try:
                    x = args[0] if args else kwargs.get("tensor")
                    call = pending.pop(x.untyped_storage().data_ptr(), None)
                except Exception:
                    call = None
                if call is not None:
                    call.end(True)
            return result

        return wait_tensor

    # -- the tracker's poller ------------------------------------------------------------------------
    def poll(self):
        """End the calls whose outputs were all freed unwaited; drop what ended calls left behind."""
        live = self.live
        if not live:
            return
        for key, call in list(live.items()):
            if not call.ended and all(r() is None for r in call.refs):
                call.end(False)
            if call.ended:
                live.pop(key, None)
        for key, call in list(self.pending.items()):
            if call.ended:
                self.pending.pop(key, None)

    def pending_calls(self):
        return bool(self.live)
