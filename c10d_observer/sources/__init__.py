"""Event sources and the dispatch between them.

The dispatch table (``table.py``) says which source sees which calls and at what cost; ``table.Plan``
computes, for a choice, which source makes the events of each (backend, kind of op).  This module puts a
plan to work: ``Dispatch`` answers, once per group, which recorder or hook makes its collective events
(None: the patch wrappers), and ``build`` installs the parts the plan uses and nothing else.  Sources read
their coverage from the group (``_Group.native``, set by the tracker from ``Dispatch.native_for``); none
decides it.
"""
import importlib

from .. import compat
from . import base as _base
from . import table as _table


def _choice(name, auto):
    return None if auto else name


def make_plan(name, caps, auto=False, nccl_on=None):
    """The table's plan for source ``name`` (``auto``: the automatic choice) on this torch.  ``nccl_on``:
    whether the legacy NCCL recorder records in this process (recorders.nccl_recorder_on; None: as
    the capabilities say)."""
    if nccl_on is not None and (caps.get("nccl_plan") or {}).get("recorder"):
        caps = dict(caps, nccl_plan=dict(caps["nccl_plan"], recorder_on=(
            compat.RecorderOn(nccl_on) if nccl_on in tuple(compat.RecorderOn) else
            compat.RecorderOn.ENABLE if nccl_on else compat.RecorderOn.OFF)))
    return _table.Plan(caps, _choice(name, auto))


def backend_key(pg, desc):
    """The table's backend of a group: gloo, nccl (ProcessGroupNCCL), nccl2 (ProcessGroupNCCL2) or other."""
    backend = (desc or {}).get("backend") or (compat.backend_name(pg) if pg is not None else "unknown")
    if "nccl" in backend:
        return (compat.nccl_kind(pg) if pg is not None else None) or "nccl"
    return "gloo" if backend == "gloo" else "other"


class Dispatch(object):
    """The plan at run time: which row makes each group's collective events."""

    def __init__(self, plan, caps):
        self.plan = plan
        self.unrecorded = set()  # ids of groups a recorder turned out not to record
        self.counts_collectives = bool((caps.get("nccl") or {}).get("trace_json"))

    def seq_base(self, pg, desc):
        """torch's count of the collectives a legacy NCCL group issued before the patch source saw it, or
        None.  From 2.5 (the release that also brought the recorder's JSON) it counts collectives only;
        before, its counter also counted p2p calls, which differ between ranks: those lines number from
        enable()."""
        if not self.counts_collectives or "nccl" not in ((desc or {}).get("backend") or ""):
            return None
        if compat.nccl_kind(pg) != "nccl":
            return None
        return compat.torch_seq(pg)

    def native_for(self, pg, desc, kind="collective"):
        """The recorder or hook that makes a group's events of ``kind`` ("gloo", "nccl", "nccl2",
        "pg_hooks", "hooks"), or None where the patch wrappers do: the cell's first row that sees this
        group (a recorder may not: NCCL2 groups torch attached no hook to, groups found unrecorded)."""
        for name in self.plan.cells[(backend_key(pg, desc), kind)]:
            row = _table.BY_NAME[name]
            if row.events in ("gloo", "nccl", "nccl2") and pg is not None:
                if id(pg) in self.unrecorded or (row.events == "nccl2" and not compat.fr_hooked(pg)):
                    continue
            return row.events
        return None

    def recorders(self, caps):
        """The recorders the flight-recorder reader follows: those that make events, and the others where
        they record, for the flight-recorder entries reports carry."""
        from . import recorders as fr
        plan = self.plan
        out = []
        if plan.probes["gloo_recorder"][0]:
            out.append(fr.gloo_recorder(events=plan.uses("gloo_recorder")))
        nplan = caps.get("nccl_plan") or {}
        on = nplan.get("recorder_on")
        if plan.probes["nccl_recorder"][0] or (nplan.get("recorder") and on in (compat.RecorderOn.DEFAULT,
                                                                                 compat.RecorderOn.ENV)):
            out.append(fr.nccl_recorder(events=plan.uses("nccl_recorder")))
        if plan.probes["nccl2_recorder"][0]:
            out.append(fr.nccl2_recorder(events=plan.uses("nccl2_recorder")))
        return out


def plan(name, caps, auto=False, nccl_on=None):
    """Which source sees which calls, for source ``name`` on this torch (table.Plan.view)."""
    return make_plan(name, caps, auto, nccl_on).view()


def rejected(name, caps, auto=False):
    """{other source: why it does not make gloo's collective events} (table.rejected)."""
    return _table.rejected(caps, _choice(name, auto))


class Composite(object):
    """The parts of one source choice, installed in order and removed in reverse."""

    def __init__(self, name, parts, plan_):
        self.name = name
        self.parts = parts
        self.plan = plan_

    def install(self):
        done = []
        try:
            for p in self.parts:
                p.install()
                done.append(p)
        except BaseException:
            for p in reversed(done):
                p.uninstall()
            raise

    def uninstall(self):
        for p in reversed(self.parts):
            p.uninstall()


# The rows that build themselves (base.Source.build), in install order: the legacy NCCL recorder's switch
# where this enable() turns it on (its row's side effect), the patch wrappers, pg_hooks or hooks where chosen,
# the functional collectives' wrappers where they make some cell's events, CUDA graph captures counted, the
# watch that announces each group, and last the flight-recorder reader (its thread starts once every group
# has been announced).  A new recorder or hook: one row here, one file.  The second field, where set, is the
# dispatch table's row the part makes events for: a plan that does not use it leaves the part's module unread
# (enable() imports only what it installs).
PARTS = (("recorders:NcclRecorderSwitch", None), ("patch:PatchSource", None), ("pg_hooks:PgHooksSource", "pg_hooks"),
         ("hooks:HooksSource", "hooks"), ("funcol:FuncolSource", "funcol"), ("_CaptureWatch", None),
         ("groups:GroupWatch", None), ("flight_recorder:FlightRecorderSource", None))


def _part(row):
    if ":" not in row:
        return globals()[row]
    module, name = row.split(":")
    return getattr(importlib.import_module("." + module, __name__), name)


def build(plan_, tracker, cfg, caps, nccl_on=False):
    """The parts a plan (make_plan's, made once by enable()) uses, in install order (PARTS): each row builds
    itself from the plan, or is left out."""
    from .registry import PatchRegistry
    dispatch = Dispatch(plan_, caps)
    tracker.native_for = dispatch.native_for
    tracker.seq_base = dispatch.seq_base
    ctx = _base.BuildContext(plan_, dispatch, tracker, cfg, caps, PatchRegistry(), [], nccl_on)
    parts = []
    for row, table_row in PARTS:
        if table_row is not None and not plan_.uses(table_row):
            continue
        part = _part(row).build(ctx)
        if part is None:
            continue
        parts.append(part)
        if part.hears_groups():
            ctx.on_group.append(part.on_group)
    return Composite(plan_.main_source(), parts, plan_.view())


class _CaptureWatch(_base.Source):
    """CUDA graph captures counted (gpu.GpuCompletion.watch_captures); restored with the registry."""

    def __init__(self, gpu, registry):
        self.gpu = gpu
        self.registry = registry

    @classmethod
    def build(cls, ctx):
        return cls(ctx.tracker.gpu, ctx.registry)

    def install(self):
        self.gpu.watch_captures(self.registry)

    def uninstall(self):
        pass  # the registry is restored by the patch source's uninstall
