"""The ``hooks`` source: ``torch.distributed.hooks`` (or ``_hooks``), where a torch build ships it.

The module (PR #108815, relanded as ``_hooks``, reverted in October 2023; in no release, but in builds and
forks of that time) calls ``register_collective_start_hook`` / ``register_collective_end_hook`` callbacks
from a background thread with a ``CollectiveStatus`` (``pg_name``, ``backend``, ``sequence_number``,
``operation``, ``timestamp`` in whole seconds, ``duration``, ``drop_count``).  It has no way to unregister,
so the callbacks stay and do nothing once the observer is disabled.

A call starts when its start event arrives (torch's own thread, so the time is when the observer heard of
it) and ends with its end event; events are matched by (group name, torch's sequence number).  The events
carry no peer, so point-to-point calls are left to the patch source, as is ``monitored_barrier``.
"""
import importlib
import logging

from .. import channel as _ch
from .. import compat
from .base import Source

log = logging.getLogger("c10d_observer")
_P2P = frozenset(("send", "recv", "recv_anysource"))


class HooksSource(Source):
    name = "hooks"

    def __init__(self, tracker, module_name):
        self.tracker = tracker
        self.module_name = module_name
        self.active = False
        self.pending = {}  # (pg_name, torch seq) -> (stream, seq)
        self.drops = 0

    @classmethod
    def build(cls, ctx):
        return cls(ctx.tracker, ctx.caps["features"]["hooks_module"])  # where the plan uses its row (PARTS)

    def install(self):
        mod = importlib.import_module(self.module_name)
        self.active = True
        if not getattr(mod, "_c10d_observer_registered", False):  # once per process: no unregister
            mod.register_collective_start_hook(_dispatch_start)
            mod.register_collective_end_hook(_dispatch_end)
            mod._c10d_observer_registered = True
        _CURRENT[0] = self

    def uninstall(self):
        self.active = False
        if _CURRENT[0] is self:
            _CURRENT[0] = None
        self.pending.clear()

    def on_start(self, status):
        op = compat.op_name(status.operation)
        if op in _P2P:
            return
        g = self.tracker.group_by_name(status.pg_name, str(status.backend).lower())
        st = g.coll
        self.pending[(status.pg_name, status.sequence_number)] = (st, st.start(_ch.OP_CODES.get(op, 0)))
        if getattr(status, "drop_count", 0):
            self.drops += status.drop_count
            log.warning("c10d_observer: torch dropped %d collective events; calls may be missed", status.drop_count)

    def on_end(self, status):
        entry = self.pending.pop((status.pg_name, status.sequence_number), None)
        if entry is not None:
            entry[0].done(entry[1])


_CURRENT = [None]


def _dispatch_start(status):
    src = _CURRENT[0]
    if src is not None and src.active:
        src.on_start(status)


def _dispatch_end(status):
    src = _CURRENT[0]
    if src is not None and src.active:
        src.on_end(status)
