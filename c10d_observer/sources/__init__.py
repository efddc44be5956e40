"""Event sources and the dispatch between them.

``build(name, ...)`` puts together what a source choice needs: the native source, and the patch source
for just the ops (or backends) that the native source does not see.  ``plan(name, caps)`` says which
source covers what; it is shown in the start-up log line, ``capabilities()``, ``obs.plan`` and reports.
"""
from .. import compat

P2P = ("send", "recv", "recv_anysource")
COLLECTIVE_METHODS = tuple(m for m, _ in compat.PG_METHODS if m not in P2P and m != "monitored_barrier")


def plan(name, caps):
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
    return p


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


def build(name, tracker, cfg, caps):
    from .patch import PatchRegistry, PatchSource
    plan_ = plan(name, caps)
    reg = PatchRegistry()
    parts = []
    if name == "patch":
        parts.append(PatchSource(tracker, registry=reg))
    elif name == "pg_hooks":
        from .pg_hooks import PgHooksSource
        # Work.wait too: a waited call ends when wait() returns (some works never say is_completed(),
        # gloo's reduce_scatter on 2.15 for one)
        parts.append(PatchSource(tracker, methods={"monitored_barrier"}, side={"monitored_barrier"}, wait=True,
                                 ddp=False, registry=reg))
        parts.append(PgHooksSource(tracker, reg))
    elif name == "flight_recorder":
        from .flight_recorder import FlightRecorderSource, FR_BACKENDS
        from .groups import GroupWatch
        gap = PatchSource(tracker, methods=set(P2P) | {"monitored_barrier"}, side={"monitored_barrier"},
                          wait=False, ddp=False, registry=reg)
        parts.append(gap)
        parts.append(FlightRecorderSource(tracker, cfg.poll_interval / 2.0, cfg.timeout, cfg.dump_dir))
        covered = []
        tracker.native_backends = FR_BACKENDS

        def on_group(pg):  # groups of a backend the recorder does not record get the patch source
            if compat.backend_name(pg) not in FR_BACKENDS and not covered:
                covered.append(True)
                gap.wrap_methods((), gap_methods=COLLECTIVE_METHODS)

        parts.append(GroupWatch(reg, on_group))
    elif name == "hooks":
        from .hooks import HooksSource
        parts.append(PatchSource(tracker, methods=set(P2P) | {"monitored_barrier"}, side={"monitored_barrier"},
                                 wait=False, ddp=False, registry=reg))
        parts.append(HooksSource(tracker, caps["features"]["hooks_module"]))
    else:
        raise ValueError("unknown source %r" % (name,))
    if plan_["report_fr_entries"] and name != "flight_recorder":
        from .flight_recorder import FlightRecorderSource
        parts.append(FlightRecorderSource(tracker, cfg.poll_interval / 2.0, cfg.timeout, cfg.dump_dir, events=False))
    return Composite(name, parts, plan_)
