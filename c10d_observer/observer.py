"""Rank side orchestration: enable() puts the parts together in order, disable() takes them apart.

Order on enable: validate everything (config, source) -> install the signal's stack dump -> create the
channel -> start the watchdog and wait for its readiness -> unlink the channel's name -> install the
source.  disable() runs it backwards; the watchdog is stopped before the signal handler is restored, so
that no late signal can meet the default action.
"""
import atexit
import json
import logging
import os
import sys
import threading
import time

from . import channel as _ch

from . import channel_writer as _ch_writer
from . import compat
from .console import say as _say
from . import config as _config
from . import dumpdir as _dumpdir
from . import relay as _relay
from . import requests as _requests
from . import scheduler as _scheduler
from . import signals as _signals
from . import supervisor as _supervisor
from . import tracker as _tracker

log = logging.getLogger("c10d_observer")
log.addHandler(logging.NullHandler())  # a library never configures logging

_state_lock = threading.RLock()
_active = [None]
_caps = [None]
_atexit_registered = [False]


def capabilities():
    """What the installed torch offers and which sources are usable, with reasons (a fresh dict)."""
    if _caps[0] is None:
        from . import sources as _sources
        caps = compat.probe()
        # what source="auto" does, from the dispatch table (sources/table.py): the source making gloo's
        # collective events, the whole plan, and why the others make none
        plan = _sources.make_plan(None, caps, auto=True)
        caps["auto"] = plan.main_source()
        if caps["auto"]:
            caps["auto_plan"] = plan.view()
            caps["auto_rejected"] = _sources.rejected(None, caps, auto=True)
        _caps[0] = caps
    return json.loads(json.dumps(_caps[0]))


def _check_source(name, origin):
    caps = capabilities()
    usable = [s for s in compat.SOURCES if caps["sources"][s]["usable"]]
    if name == "auto":
        if caps["auto"] is None:
            raise ValueError("%s='auto': no source is usable on torch %s: %s" % (
                origin, caps["torch_version"],
                "; ".join("%s: %s" % (s, caps["sources"][s]["reason"]) for s in compat.SOURCES)))
        return
    if name not in compat.SOURCES:
        raise ValueError("%s must be 'auto' or one of the usable sources (%s), got %r"
                         % (origin, ", ".join(usable) or "none", name))
    if not caps["sources"][name]["usable"]:
        raise ValueError("%s=%r cannot run on torch %s: %s; usable sources: %s"
                         % (origin, name, caps["torch_version"], caps["sources"][name]["reason"],
                            ", ".join(usable) or "none"))


def enable(timeout=_config.UNSET, poll_interval=_config.UNSET, dump_dir=_config.UNSET,
           signal=_config.UNSET, source=_config.UNSET, on_timeout=_config.UNSET, on_hang=None, soft=_config.UNSET):
    from . import on_hang as _on_hang
    _on_hang.check_callback(on_hang)
    try:
        cfg = _config.resolve(timeout, poll_interval, dump_dir, signal, source, on_timeout,
                              check_source=_check_source, soft=soft)
    except _config.SettingError as e:  # a bad variable (or default): off, in one line; the job goes on
        return Unobserved(str(e))
    with _state_lock:
        obs = _active[0]
        if obs is not None:
            if obs.config == cfg and obs.on_hang is on_hang:
                return obs
            raise RuntimeError("c10d_observer is already enabled with %s, on_hang=%r; call "
                               "c10d_observer.disable() before enabling it with %s, on_hang=%r"
                               % (_fmt(obs.config), obs.on_hang, _fmt(cfg), on_hang))
        obs = Observer(cfg, capabilities(), on_hang)
        obs.start()
        _active[0] = obs
        if not _atexit_registered[0]:
            atexit.register(disable)
            _atexit_registered[0] = True
        return obs


def disable():
    with _state_lock:
        obs, _active[0] = _active[0], None
    if obs is not None:
        obs.stop()


def active():
    return _active[0]


def _fmt(cfg):
    return ", ".join("%s=%r" % kv for kv in cfg._asdict().items())


class Observer(object):
    """One enabled observer: the handle enable() returns."""

    def __init__(self, config, caps, on_hang=None):
        self.config = config
        self.on_hang = on_hang
        self.capabilities = caps
        self.source = caps["auto"] if config.source == "auto" else config.source
        self.auto = config.source == "auto"
        from . import sources as _sources
        from .sources import recorders as _fr
        self.nccl_on = _fr.nccl_recorder_on(caps, self.auto or self.source == "flight_recorder")
        # the plan, computed once: the start-up line, the reports and build() all read this one
        self.planned = _sources.make_plan(self.source, caps, self.auto, self.nccl_on)
        self.plan = self.planned.view()
        self.rejected = _sources.table.rejected(caps, None if self.auto else self.source, self.planned)
        self.stack_path = None
        self.off = None  # why the observer is off (a fault of its own), or None while it watches
        self.supervisor = None  # the watchdog process (supervisor.Supervisor), once started
        self._stopping = False
        self._undo = []
        self.parts = None  # the event source's parts (sources.Composite), once started

    def __repr__(self):
        return "<c10d_observer.Observer source=%r watchdog_pid=%r timeout=%g%s>" % (
            self.source, self.watchdog_pid, self.config.timeout, " off: %s" % self.off if self.off else "")

    @property
    def watchdog_pid(self):
        return self.supervisor.pid if self.supervisor is not None else None

    @property
    def _proc(self):
        return self.supervisor.proc if self.supervisor is not None else None

    @property
    def active(self):
        """Whether it watches (False where a fault of its own left it off: ``off`` says why)."""
        return self.off is None and not self._stopping

    # -- start -----------------------------------------------------------------------------------------
    def start(self):
        """Put the parts together.  The observer's own faults (no room for the channel, a watchdog that does
        not start) leave it off, said in one line: the job goes on unobserved rather than harmed."""
        cfg = self.config
        rank, world = compat.rank_and_world()
        pid = os.getpid()
        self.windows = _config.windows(cfg.poll_interval, _relay.nodes() if _relay.multi_node() else 1, cfg.timing)
        self.dd = _dumpdir.DumpDir(cfg.dump_dir)  # a full dump_dir is said by the watchdog, once
        self.stack_path = self.dd.join(_dumpdir.stacks_name(rank, pid))
        try:
            self._start_signals(pid, rank)
            chan = self._start_channel(rank, world)
            self._start_watchdog(chan, rank)
            tracker = self._start_tracker(chan, rank, pid)
            self._start_sources(tracker)
            self._start_helpers(rank)
            self.tracker = tracker
            _name_threads(self.dump_signal)
        except _Off as e:
            self._rollback()
            self.off = str(e)
            _say("not enabled: %s; the job goes on unobserved" % e)
            return
        except BaseException:
            self._rollback()
            raise
        self._say_started(rank)

    def _start_signals(self, pid, rank):
        """The job's signal handler (its notice of a hard verdict) and the stacks' signal."""
        cfg = self.config
        notify = None
        if cfg.signal is not None:
            notify = _signals.NotifyHandler(cfg.signal)
            notify.mine = _notify_mark(self.dd, pid)
            notify.said_foreign = _say_foreign(rank)
            notify.install()
            self._undo.append(notify.uninstall)
        self.notify = notify
        dump = _signals.DumpSignal(self.stack_path, avoid=(cfg.signal,))
        dump.install()
        self._undo.append(dump.uninstall)
        self.dump_signal = dump

    def _start_channel(self, rank, world):
        try:
            chan = _ch_writer.ChannelWriter()
        except _ch.ChannelError as e:
            raise _Off(str(e))
        self._undo.append(chan.close)
        self.channel = chan
        from . import phases as _phases
        _phases.attach(chan)  # the phase this rank is in (c10d_observer.phase), for its watchdog
        self._undo.append(lambda: _phases.attach(None))
        if rank >= 0:
            chan.set_rank(rank, world)
        chan.set_main_thread(threading.main_thread().ident)
        return chan

    def _start_watchdog(self, chan, rank):
        sup = _supervisor.Supervisor(lambda restarts: self._watchdog_config(chan, rank, restarts),
                                     self.windows.restart_window, _say)
        try:
            sup.start(chan.fd)
        except _supervisor.StartError as e:
            raise _Off(str(e))
        self.supervisor = sup
        self._undo.append(sup.stop)
        chan.unlink()  # the watchdog has it mapped (and this rank its descriptor): nothing is left behind

    def _start_tracker(self, chan, rank, pid):
        """The tracker, with the checks its helper thread runs (requests in dump_dir, the handler's)."""
        cfg = self.config
        notify = self.notify
        tracker = _tracker.Tracker(chan, cfg.poll_interval)
        tracker.rank = rank
        tracker.timeout = cfg.timeout
        ender = _requests.RankExit(self.dd, pid, rank, time.time(), _say, also_unregister=(disable,))
        if cfg.on_timeout == "abort":
            atexit.register(ender.last_look)
            self._undo.append(lambda: atexit.unregister(ender.last_look))
        checks = [_stack_requests(self.dd, pid, self.stack_path), ender.check]
        if cfg.on_timeout == "raise":
            from . import raising as _raising
            raiser = _raising.RankRaise(self.dd, pid, rank, time.time(), _say, handler=notify)
            if notify is not None:
                notify.after = raiser.from_signal
            checks.append(raiser.check)
        if notify is not None:
            checks.insert(0, _handler_check(notify, chan, self.dd, rank, pid, _config.signal_name(cfg.signal)))
        tracker.check_handler = _helper_checks(*checks)
        for pg in compat.all_groups():  # groups made later are checked when first seen
            try:
                tracker.check_torch_timeout(compat.describe_group(pg))
            except Exception:
                log.debug("c10d_observer: cannot describe a group", exc_info=True)
        return tracker

    def _start_sources(self, tracker):
        from . import sources as _sources
        src = self.parts = _sources.build(self.planned, tracker, self.config, self.capabilities, self.nccl_on)
        src.install()
        self._undo.append(src.uninstall)
        from .sources import patch as _patch
        _patch.set_active_tracker(tracker)
        self._undo.append(lambda: _patch.set_active_tracker(None))
        tracker.start_poller()
        self._undo.append(tracker.stop)

    def _start_helpers(self, rank):
        """The store relay (several nodes) and the on_hang callback's thread."""
        cfg = self.config
        if _relay.multi_node():  # several nodes: the gather goes through the c10d store too
            rel = _relay.StoreRelay(cfg.dump_dir, rank, _job_id(), cfg.poll_interval, self.windows.relay_window,
                                    arrivals_every=cfg.timing.relay_period_s)
            rel.start()
            self._undo.append(rel.stop)
        if self.on_hang is not None:
            from .on_hang import HangCallback
            cb = HangCallback(self.on_hang, cfg.dump_dir, cfg.poll_interval, self.windows.on_hang_wait)
            cb.start()
            self._undo.append(cb.stop)

    def _say_started(self, rank):
        from . import sources as _sources
        cfg = self.config
        if os.environ.get("LOCAL_RANK", "0") == "0" and not _config.flag(_config.ENV_QUIET):
            # one line per node, by default (C10D_OBSERVER_QUIET=1: none); the full plan is in the log below
            sys.stderr.write("c10d_observer: watching collectives with source %s%s; timeout %g s, poll %g s; "
                             "reports in %s\n" % (self.source, _sources.table.view_brief(self.plan), cfg.timeout,
                                                   cfg.poll_interval, cfg.dump_dir))
        log.info("c10d_observer: enabled on rank %s: source %s (%s; not used for gloo's collectives: %s); "
                 "timeout %g s, poll %g s, dump_dir %s, watchdog pid %d", rank, self.source,
                 _sources.table.view_text(self.plan), "; ".join("%s: %s" % kv for kv in self.rejected.items()) or
                 "none", cfg.timeout, cfg.poll_interval, cfg.dump_dir, self.watchdog_pid)

    def _watchdog_config(self, chan, rank, restarts=0):
        cfg = self.config
        caps = self.capabilities
        return _config.WatchdogConfig(
            rank_pid=os.getpid(), dump_dir=cfg.dump_dir, stack_path=self.stack_path, timeout=cfg.timeout,
            poll_interval=cfg.poll_interval, nodes=_relay.nodes() if _relay.multi_node() else 1,
            channel=chan.path, channel_fd=chan.fd, signal=cfg.signal, signal_name=_config.signal_name(cfg.signal),
            dump_signal=self.dump_signal.signum, on_timeout=cfg.on_timeout, soft=cfg.soft, host=compat.hostname(),
            job_id=_job_id(), scheduler=_scheduler.info(),
            error_file=os.environ.get("TORCHELASTIC_ERROR_FILE", ""), py_spy=_py_spy(),
            torch_version=caps["torch_version"], source_in_use=self.source,
            source_reasons={s: r["reason"] for s, r in caps["sources"].items()}, source_plan=self.plan,
            source_rejected=self.rejected,
            public_config=dict(cfg._asdict(), signal=_config.signal_name(cfg.signal), timing=cfg.timing.describe()),
            restarts=restarts, timing=cfg.timing.describe())

    # -- stop ------------------------------------------------------------------------------------------
    def stop(self):
        self._stopping = True
        self._rollback()

    def _rollback(self):
        self._stopping = True
        if self.supervisor is not None:
            self.supervisor.stopping = True  # a watchdog that ends now is not started again
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:
                log.warning("c10d_observer: cleanup step %r failed", undo, exc_info=True)


class Unobserved(object):
    """What enable() returns where a setting from the environment (or a default) is bad: nothing started,
    ``active`` False, ``off`` says why (one line on stderr said it, on local rank 0).  disable() is a no-op."""

    source = watchdog_pid = config = plan = parts = None
    active = False

    def __init__(self, why):
        self.off = why
        if os.environ.get("LOCAL_RANK", "0") in ("", "0"):
            _say("not enabled: %s; the job goes on unobserved" % why)

    def __repr__(self):
        return "<c10d_observer.Observer off: %s>" % self.off


class _Off(Exception):
    """The observer cannot start for a fault of its own: it stays off, said in one line."""




def _name_threads(dump):
    """Say in the stacks file which threads are the observer's: faulthandler names threads by id only."""
    ours = ["0x%016x %s" % (t.ident, t.name) for t in threading.enumerate()
            if t.name.startswith("c10d_observer") and t.ident]
    if ours:
        dump.note("# c10d_observer: the observer's own threads in this process (not the job's): %s\n"
                  % "; ".join(ours))


def _helper_checks(*checks):
    def check():
        for c in checks:
            c()
    return check


def _stack_requests(dd, pid, stack_path):
    """Run by the rank's helper thread every poll or half poll: the watchdog asks for this rank's stacks
    (requests.StackRequest), and the helper writes them with the GIL held (signals.dump_threads), which is
    safe while other threads run; faulthandler's dump on the observer's own signal remains for a rank whose
    helper cannot run (a thread holds the GIL), when the watchdog gets no answer."""
    def check():
        req = _requests.StackRequest.take(dd, pid)
        if req is None:
            return
        try:
            _signals.dump_threads(stack_path, req.header or "stacks asked by the watchdog", dd)
        except Exception:
            log.debug("c10d_observer: could not write the stacks", exc_info=True)
    return check


def _notify_mark(dd, pid):
    """In the observer's signal handler: did the watchdog send this signal (its mark, taken away)?"""
    def mine():
        return _requests.NotifyMark.taken(dd, pid)
    return mine


def _say_foreign(rank):
    said = set()

    def say(signum, had):
        if signum in said:
            return
        said.add(signum)
        name = _config.signal_name(signum)
        _say("rank %s received %s, which the observer's watchdog did not send (the scheduler's? Slurm's "
             "--signal, a kill): the job had no handler of its own for it before enable(), so nothing ran.  "
             "PyTorch Lightning installs its Slurm auto-requeue handler only where none is installed, and "
             "finds the observer's: to keep both, give the observer another signal (C10D_OBSERVER_SIGNAL=SIGUSR2, "
             "enable(signal=signal.SIGUSR2) or run --signal SIGUSR2)" % (rank, name))
    return say


def _handler_check(handler, chan, dd, rank, pid, signame):
    """Run by the rank's helper thread every poll or half poll: is the observer's handler still the one
    installed?  When code replaces it after enable() (PyTorch Lightning installs its own SIGUSR1 handler
    for SLURM requeue), the watchdog must not send that signal: it would run their handler.  The rank
    says so in the channel (the watchdog reads it before each signal) and names the handler in a file."""
    state = {"by": None}

    def check():
        by = handler.replaced_by()
        if by == state["by"]:
            return
        state["by"] = by
        if by is None:
            chan.set_handler_replaced(False)
            return
        try:
            _requests.HandlerReplaced.write(dd, rank, pid, signame, by, time.time())
        except OSError:
            log.debug("c10d_observer: cannot say the handler was replaced in %s", dd.root, exc_info=True)
        chan.set_handler_replaced(True)
        log.warning("c10d_observer: the %s handler was replaced after enable() by %s: the observer sends no %s "
                    "to this rank (it would run that handler); stacks still come from the rank's helper thread. "
                    "To keep both, choose another signal: enable(signal=signal.SIGUSR2), "
                    "C10D_OBSERVER_SIGNAL=SIGUSR2 or run --signal SIGUSR2", signame, by, signame)

    return check


def _job_id():
    """What every rank of one job agrees on, to tell its files from an earlier job's in the same dump_dir."""
    env = os.environ
    if env.get("TORCHELASTIC_RUN_ID"):
        return "run:" + env["TORCHELASTIC_RUN_ID"]
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return "master:%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"])
    return ""


def _py_spy():
    """py-spy's path where it is installed (on PATH or beside this Python), else None.
    C10D_OBSERVER_PY_SPY=0 turns it off."""
    import shutil
    if not _config.flag(_config.ENV_PY_SPY, default=True):
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.access(beside, os.X_OK) else None)
