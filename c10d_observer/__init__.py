"""c10d-observer: finds hung collectives in PyTorch distributed jobs.

Importing this package does nothing: no torch import, no patch, no signal handler, no process.
``enable()`` is the opt-in and ``disable()`` puts everything back.
"""
from ._unset import UNSET as _UNSET
from ._version import __version__

__all__ = ["enable", "disable", "capabilities", "load_verdict", "phase", "begin_phase", "end_phase", "Verdict",
           "CollectiveHang", "HANG_EXIT_CODE", "__version__"]

# on_timeout="abort": every rank the observer ends exits with this code: "a collective hang was found; the
# verdict is in dump_dir", never a crash's or a test skip's code (config.HANG_EXIT_CODE says why 93)
HANG_EXIT_CODE = 93


def enable(timeout=_UNSET, *, poll_interval=_UNSET, dump_dir=_UNSET, signal=_UNSET, source=_UNSET,
           on_timeout=_UNSET, on_hang=None, soft=_UNSET):
    """Watch every collective of this rank; returns the active Observer (``.source``, ``.watchdog_pid``).

    timeout: the hard deadline: seconds (int or float), datetime.timedelta or a duration string ("5m"),
        finite and > 0.  Default $C10D_OBSERVER_TIMEOUT, else 300 (below torch's own 10 and 30 minutes, so the
        observer speaks, and on_timeout acts, before torch ends the job).  There is no need to choose one:
        soft deadlines are learned from each group's calls (see soft).
    poll_interval: seconds between the watchdog's checks, < timeout.  Default
        $C10D_OBSERVER_POLL_INTERVAL, else min(1.0, timeout / 10).
    dump_dir: where reports and stack dumps go.  Default $C10D_OBSERVER_DIR, else ./c10d_observer.
    signal: sent to this rank once per hang at a hard verdict on a call of its own (past the timeout;
        default SIGUSR1), where the observer's handler is still the one installed: it runs the handler the job
        had before enable().  Soft verdicts never send it.  None: no signal.  Stacks never need it (the rank's
        helper thread writes them).
    source: "auto" (default; $C10D_OBSERVER_SOURCE) or the name of an event source, see capabilities().
    on_timeout: "dump" (report and stacks; training goes on; default, $C10D_OBSERVER_ON_TIMEOUT) or
        "abort" (at the hard deadline only, once the verdict is merged: every rank of the hang, the culprit
        first, exits with HANG_EXIT_CODE (93), "a collective hang was found; the verdict is in dump_dir",
        and torchrun's error file names the culprit; a rank that cannot run Python ends by SIGTERM, then
        SIGKILL 10 s later), or "raise" (at the hard verdict, in each rank with a call past the deadline,
        never the culprit: CollectiveHang, carrying the verdict, is raised in the main thread once it is
        next in Python, so that the job's except/finally blocks and checkpoints run; an NCCL group's
        communicators are aborted so that its waiting calls end at once (not run on a GPU); a gloo call
        cannot be ended from outside, so a gloo rank raises when its call returns or raises).
    on_hang: a callable taking one argument, or None.  Called in this rank, on a helper thread (never in a
        signal handler), with a Verdict (see load_verdict; ``.level`` "soft" or "hard") once a verdict with
        stuck calls is merged, or, where none comes within the gather window, with the verdict made from
        dump_dir after this rank reported an overdue call.  Once per set of stuck calls and level.  What it
        raises is logged, not raised.
    soft: True (default; $C10D_OBSERVER_SOFT): a call past the deadline learned for its group, op and size
        (several times the longest such calls took, at least 10 s; from the first steps) gets a soft verdict:
        report, stacks and on_hang; it informs and never acts (no signal, no abort).  False: the timeout
        alone.

    Explicit arguments beat the environment, which beats the defaults.  Calling enable() again with the
    same settings returns the active observer; with other settings it raises RuntimeError.
    """
    from . import observer
    return observer.enable(timeout, poll_interval, dump_dir, signal, source, on_timeout, on_hang, soft)


def disable():
    """Stop the watchdog and restore every patched function and signal handler.  Safe to call twice."""
    from . import observer
    observer.disable()


def phase(name, up_to=None):
    """``with c10d_observer.phase("checkpoint", up_to=600): ...``: this rank is busy on purpose (a checkpoint,
    an evaluation).  The ranks that wait for it meanwhile get a soft verdict that names it and its phase,
    and their verdicts, soft and hard alike, are held (no signal, no on_timeout="abort") until ``up_to``
    (seconds, a timedelta or "10m"; None: no limit) has passed.  Phases nest; without an enabled observer a phase does nothing."""
    from .phases import phase as _phase
    return _phase(name, up_to)


def begin_phase(name, up_to=None):
    """The call form of phase(), for code that cannot use ``with``: end it with end_phase()."""
    from .phases import begin_phase as _begin
    return _begin(name, up_to)


def end_phase():
    """End the innermost phase begun by begin_phase() or phase()."""
    from .phases import end_phase as _end
    _end()


def load_verdict(dump_dir):
    """The verdict for a dump_dir as ``report DIR --json`` gives it, as a Verdict: ``.hangs`` (each with
    ``.op``, ``.seq``, ``.group``, ``.waiting_ranks``, ``.missing_ranks``, ...), ``.culprit_ranks``,
    ``.culprits`` (each culprit's ``.rank``, ``.node`` as its scheduler names it, ``.node_from``, ``.host``,
    ``.pid``, and the job's ``.slurm_job_id``/``.torchelastic_run_id`` where set), ``.ranks_silent``,
    ``.ranks_dead``, ``.resolved``, ``.summary``, ``.exit_code``, ``.text``,
    ``.to_dict()``.  Reads DIR/c10d_observer where DIR holds nothing (the job's folder).  Raises ValueError
    naming the folder where it holds no report, state or torch dump.  Needs no torch."""
    from .on_hang import load_verdict as _load
    return _load(dump_dir)


def __getattr__(name):  # Verdict without importing anything at import time (PEP 562, Python 3.7+)
    if name == "Verdict":
        from .verdict import Verdict
        return Verdict
    if name == "CollectiveHang":
        from .raising import CollectiveHang
        return CollectiveHang
    raise AttributeError("module 'c10d_observer' has no attribute %r" % name)


def capabilities():
    """A dict: the installed torch's version, probed features, and each source with (usable, reason)."""
    from . import observer
    return observer.capabilities()
