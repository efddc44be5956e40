"""The ``pg_hooks`` source: ``ProcessGroup.register_pre_hook`` / ``register_post_hook`` (torch 2.14+).

torch calls the pre hook on the calling thread before it issues a collective or send/recv on a group, and
the post hook once the op is issued, with its ``Work``; both fire for ops issued from C++ too (DDP's
gradient all-reduce).  A call starts in the pre hook and is followed to completion from its work, like
the patch source does: gloo works are ended by the completion poller, GPU works when the GPU is done.

What the hooks do not show, and how it is covered:
* ``monitored_barrier`` fires no hook: the patch source wraps that one method (PatchSource.build).
* A call that raises between the hooks gets no post hook: it is ended at the next pre hook on its group
  from the same thread.
* Hooks are per group: sources.groups.GroupWatch calls ``on_group`` for every group as it is created.
  A group whose collectives one of torch's recorders reports (legacy NCCL, or NCCL2 with its recorder
  hook: sources.Dispatch) gets no hooks: the recorder costs nothing per call, the hooks about 28,000
  instructions; its p2p calls go to the patch source's wrappers.
"""
import threading

from .. import callword as _cw
from .. import channel as _ch
from .. import compat
from .base import Source

HOOK_ID = 0x0C10D0B5  # register_*_hook takes an integer id; unregister_*_hook removes ours by it
_SKIP = frozenset(("unknown", "split", "new_window"))


class PgHooksSource(Source):
    name = "pg_hooks"

    def __init__(self, tracker):
        self.tracker = tracker
        self.hooked = []
        self._codes = {}

    @classmethod
    def build(cls, ctx):
        return cls(ctx.tracker)  # where the plan uses its row (sources.PARTS)

    def install(self):
        pass  # hooks go on each group as GroupWatch announces it (on_group)

    def _op(self, name):
        """The op code of a HookOpName, cached by its integer value: hashing the enum object itself calls
        back into pybind11 twice (hash and compare): about 8,000 instructions per call on the call path."""
        op = compat.op_name(name)
        code = self._codes[name.value] = -1 if op in _SKIP else _ch.OP_CODES.get(op, 0)
        return code

    def on_group(self, pg):
        t = self.tracker
        try:
            if t.native_for(pg, None) != self.name:
                return  # the plan has another source make this group's events (sources/table.py)
        except Exception:
            pass
        groups = t.groups
        # thread id -> (stream, seq, group) between a call's pre and post hook.  torch runs both on the calling
        # thread, the post hook as soon as the op is issued, so a thread has at most one call between them;
        # keyed by thread rather than by ``args.op_id``, which would cost a pybind11 property read per hook.
        pending = {}
        codes = self._codes
        op_of = self._op
        get_ident = threading.get_ident
        ctx = t.ctx
        inside = t.inside
        dtype_codes = t.dtype_codes
        # the op word's layout (callword.py), bound as locals: the call path reads no global
        api_shift, dtype_shift, sig_shift, numel_mask = _cw.API_SHIFT, _cw.DTYPE_SHIFT, _cw.SIG_SHIFT, _cw.NUMEL_MASK
        # op code -> True: the output tensors carry the size that must agree, False: the inputs
        sides = {_ch.OP_CODES[op]: side == "out" for op, (side, _) in compat.SIZE_TENSOR.items()}

        def pre(args):
            name = args.name
            code = codes.get(name.value)
            if code is None:
                code = op_of(name)
            if code < 0:
                return
            g = groups.get(pg) or t.group(pg)  # described at its first call: torch registers it late
            tid = get_ident()
            if pending:
                prev = pending.pop(tid, None)
                if prev is not None:  # an earlier call from this thread raised before its post hook: it is over
                    prev[0].done(prev[1])
            if code == _SEND or code == _RECV:
                peer = args.root
                st = g.p2p_stream(None if peer < 0 else peer, code == _SEND)
            else:
                st = g.coll
            word = code | ctx.api << api_shift if inside else code
            side = sides.get(code)
            if side is not None:  # the size signature: callword.encode_sig inlined (the call path)
                xs = (args.output_tensors if side else args.input_tensors) or (
                    args.input_tensors if side else args.output_tensors)
                x = xs[0] if xs else None
                dc = dtype_codes.get(getattr(x, "dtype", None), 0)
                if dc:
                    word |= (dc << dtype_shift | (x.numel() & numel_mask)) << sig_shift
            pending[tid] = (st, st.start(word), g)

        def post(args):
            entry = pending.pop(get_ident(), None)
            if entry is None:
                return
            st, seq, g = entry
            g.end_call(st, seq, args.work)

        pg.register_pre_hook(HOOK_ID, pre)
        pg.register_post_hook(HOOK_ID, post)
        self.hooked.append(pg)

    def uninstall(self):
        for pg in self.hooked:
            for fn in ("unregister_pre_hook", "unregister_post_hook"):
                try:
                    getattr(pg, fn)(HOOK_ID)
                except Exception:
                    pass
        del self.hooked[:]


_SEND = _ch.OP_CODES["send"]
_RECV = _ch.OP_CODES["recv"]
