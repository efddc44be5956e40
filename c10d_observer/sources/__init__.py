"""Event sources and the dispatch between them.

``build(name, ...)`` puts together what a source choice needs: the native source, torch's recorders for
the groups they record, and the patch source for just the ops (or groups) that those do not see.
``Dispatch.native_for(pg)`` answers, once per group, which recorder or hook makes its collective events
(None: the patch source).  ``plan(name, caps)`` says which source covers what; it is shown in the start-up
log line, ``capabilities()``, ``obs.plan`` and reports.
"""
from .. import compat

P2P = ("send", "recv", "recv_anysource")
COLLECTIVE_METHODS = tuple(m for m, _ in compat.PG_METHODS if m not in P2P and m != "monitored_barrier")


def nccl_events(name, auto):
    """Whether torch's NCCL recorders make NCCL groups' events under this choice: ``auto`` and
    ``flight_recorder`` (the recorder adds nothing per call: on an H100 with torch 2.11 its own cost is
    3-5 us per call, which torch pays anyway from 2.11, against 7-8 us for the patch source and 28k
    instructions for pg_hooks); an explicitly chosen ``patch``, ``pg_hooks`` or ``hooks`` keeps them."""
    return auto or name == "flight_recorder"


class Dispatch(object):
    """Which source makes the collective events of each group, for one source choice.

    ``nccl_on``: the legacy NCCL recorder records in this process (compat.nccl_plan, decided at enable())."""

    def __init__(self, name, caps, auto=False, nccl_on=False):
        self.name = name
        nplan = caps.get("nccl_plan") or {}
        self.gloo = name == "flight_recorder"
        self.nccl = nccl_events(name, auto) and bool(nccl_on)
        self.nccl2 = nccl_events(name, auto) and bool(nplan.get("nccl2_recorder"))
        self.everything = name if name in ("pg_hooks", "hooks") else None
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

    def native_for(self, pg, desc):
        """The recorder or hook that reports a group's collectives ("gloo", "nccl", "nccl2", "pg_hooks",
        "hooks"), or None where the patch source does."""
        backend = (desc or {}).get("backend") or (compat.backend_name(pg) if pg is not None else "unknown")
        if pg is not None and id(pg) in self.unrecorded:
            return self.everything
        if "nccl" in backend:
            kind = compat.nccl_kind(pg) if pg is not None else backend
            if kind == "nccl" and self.nccl:
                return "nccl"
            if kind == "nccl2" and self.nccl2 and (pg is None or compat.fr_hooked(pg)):
                return "nccl2"
        elif backend == "gloo" and self.gloo:
            return "gloo"
        return self.everything

    def recorders(self, caps):
        """The recorders the flight-recorder reader follows: those that make events, and the others where
        they record, for the flight-recorder entries reports carry."""
        from . import flight_recorder as fr
        out = []
        if caps["sources"]["flight_recorder"]["usable"]:
            out.append(fr.gloo_recorder(events=self.gloo))
        nplan = caps.get("nccl_plan") or {}
        if nplan.get("recorder") and (self.nccl or nplan.get("recorder_on") in ("default", "env")):
            out.append(fr.nccl_recorder(events=self.nccl))
        if nplan.get("nccl2_recorder"):
            out.append(fr.nccl2_recorder(events=self.nccl2))
        return out


def plan(name, caps, auto=False, nccl_on=None):
    """Which source sees which calls, for source ``name`` on this torch."""
    fr_snap = name != "flight_recorder" and caps["sources"]["flight_recorder"]["usable"]
    if name == "pg_hooks":
        p = {"collectives": "pg_hooks", "p2p": "pg_hooks", "monitored_barrier": "patch",
             "ddp_gradients": "pg_hooks", "other_backends": "pg_hooks", "completion": "Work.wait (patch)"}
    elif name == "flight_recorder":
        p = {"collectives": "flight_recorder (gloo groups)", "p2p": "patch", "monitored_barrier": "patch",
             "ddp_gradients": "flight_recorder", "other_backends": "patch"}
    elif name == "hooks":
        p = {"collectives": "hooks", "p2p": "patch", "monitored_barrier": "patch", "ddp_gradients": "hooks",
             "other_backends": "hooks"}
    else:
        p = {"collectives": "patch", "p2p": "patch", "monitored_barrier": "patch",
             "ddp_gradients": "patch (comm hook)", "other_backends": "patch"}
    p["report_fr_entries"] = bool(fr_snap or name == "flight_recorder")
    p["functional"] = functional_row(name, caps)
    p["nccl"] = nccl_row(name, caps, auto, nccl_on)
    nplan = caps.get("nccl_plan") or {}
    if nplan.get("nccl2_recorder"):
        p["nccl2"] = ("ProcessGroupNCCL2's flight-recorder hook (pg_status, read every poll/2; nothing per "
                      "call; chosen over pg_hooks, which cost per call and see no more), where torch attached "
                      "it to the group; else %s" % (
                          "pg_hooks" if name == "pg_hooks" or caps["auto"] == "pg_hooks" else "patch")
                      if nccl_events(name, auto) else
                      "%s (chosen explicitly; the recorder hook only for reports)" % name)
    return p


def functional_row(name, caps):
    """Who sees the functional collectives (funcol, DTensor) under this choice."""
    kind = caps.get("funcol")
    if kind is None:
        return "none (this torch has no functional collectives)"
    if kind == "python":
        return "the ProcessGroup wrappers or %s (this torch issues them through torch.distributed)" % name
    via = ("funcol wrappers on torch.ops._c10d_functional: a call ends when its result is waited "
           "(sources/funcol.py)")
    if name == "pg_hooks":
        return "pg_hooks (its hooks fire for them)"
    if name == "flight_recorder":
        return "flight_recorder on the groups it records (gloo); %s on the others" % via
    return via


def nccl_row(name, caps, auto, nccl_on=None):
    """How legacy NCCL groups (ProcessGroupNCCL) are followed under this choice, with the reason."""
    nplan = caps.get("nccl_plan") or {}
    if not nplan.get("fallback"):
        return "none (%s)" % nplan.get("why", "no NCCL in this build")
    on = nplan.get("recorder_on") in ("default", "env", "enable") if nccl_on is None else nccl_on
    if nplan.get("recorder") and on and nccl_events(name, auto):
        over = ("; chosen over pg_hooks, whose two Python hooks cost +28,100 instructions per call (10-30 us "
                "in context, measured on gloo, torch 2.15) and see no more" if name == "pg_hooks" else "")
        return ("torch's NCCL flight recorder (pg_status, read every poll/2; nothing per call; torch's own "
                "collective numbers; %s%s)" % (nplan.get("why"), over))
    other = "pg_hooks, with a CUDA event marker where the post hook has no Work" if name == "pg_hooks" else (
        "hooks" if name == "hooks" else nplan["fallback"])
    if not nplan.get("recorder"):
        why = nplan.get("why")
    elif not nccl_events(name, auto):
        why = "%r chosen explicitly" % name
    else:
        why = "the recorder is off: %s" % nplan.get("why")
    return "%s (%s); DDP's C++ all-reduce through the patch source's comm hook, functional collectives not " \
           "seen" % (other, why) if name == "patch" else "%s (%s)" % (other, why)


def rejected(name, caps):
    """{better source: why it is not the one in use} for every source ranked above ``name``."""
    out = {}
    for s in compat.SOURCES:
        if s == name:
            break
        r = caps["sources"][s]
        out[s] = r["reason"] if not r["usable"] else "usable, but %r was asked for" % (name,)
    return out


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


def build(name, tracker, cfg, caps, auto=False, nccl_on=False):
    from .groups import GroupWatch
    from .patch import PatchRegistry, PatchSource
    dispatch = Dispatch(name, caps, auto, nccl_on)
    tracker.native_for = dispatch.native_for
    tracker.seq_base = dispatch.seq_base
    plan_ = plan(name, caps, auto, nccl_on)
    reg = PatchRegistry()
    parts = []
    on_group = []  # called for every group as it is created (and for those made before enable())
    if name == "patch":
        parts.append(PatchSource(tracker, registry=reg))
    else:
        # p2p and monitored_barrier: no recorder or gloo hook sees them (pg_hooks: p2p is its own, its
        # groups pass through the p2p wrappers); collectives on groups no native source covers (NCCL with
        # the recorder off, other backends) get the wrappers when the first such group appears
        pg_hooks = name == "pg_hooks"
        gap = PatchSource(tracker, methods=set(P2P) | {"monitored_barrier"}, side={"monitored_barrier"},
                          wait=pg_hooks, ddp=False, registry=reg)
        parts.append(gap)
        wrapped = []

        def gap_collectives(pg):
            if not wrapped and dispatch.native_for(pg, None) is None:
                wrapped.append(True)
                gap.wrap_methods(COLLECTIVE_METHODS)

        on_group.append(gap_collectives)
        if pg_hooks:
            from .pg_hooks import PgHooksSource
            hooks = PgHooksSource(tracker)
            parts.append(hooks)
            on_group.append(hooks.hook_group)
        elif name == "hooks":
            from .hooks import HooksSource
            parts.append(HooksSource(tracker, caps["features"]["hooks_module"]))
        elif name != "flight_recorder":
            raise ValueError("unknown source %r" % (name,))
    # functional collectives (2.3+ issues them from C++): on groups no native source records
    from .funcol import FuncolSource
    parts.append(FuncolSource(tracker, reg))
    reader = None
    recorders = dispatch.recorders(caps)
    watch = GroupWatch(reg, on_group)
    if recorders:
        from .flight_recorder import FlightRecorderSource
        reader = FlightRecorderSource(tracker, cfg.poll_interval / 2.0, cfg.timeout, cfg.dump_dir, recorders)

        def announce(pg):  # an NCCL recorder is read once this rank has a group it records
            kind = compat.nccl_kind(pg)
            if kind is not None:
                reader.activate(kind)
            if kind == "nccl":
                reader.register_group(pg)

        def not_recorded(pg):  # the recorder does not record it after all: the patch source takes it over
            dispatch.unrecorded.add(id(pg))
            g = tracker.groups.get(pg)
            if g is not None:
                g.native = dispatch.native_for(pg, None)
            for fn in on_group:
                fn(pg)

        reader.on_not_recorded = not_recorded
        watch.on_group.insert(0, announce)
    parts.append(_CaptureWatch(tracker.gpu, reg))
    parts.append(watch)
    if reader is not None:
        parts.append(reader)  # last: its thread starts once every group has been announced
    return Composite(name, parts, plan_)


class _CaptureWatch(object):
    """CUDA graph captures counted (gpu.GpuCompletion.watch_captures); restored with the registry."""

    def __init__(self, gpu, registry):
        self.gpu = gpu
        self.registry = registry

    def install(self):
        self.gpu.watch_captures(self.registry)

    def uninstall(self):
        pass  # the registry is restored by the patch source's uninstall
