"""c10d-observer: finds hung collectives in PyTorch distributed jobs.

Importing this package does nothing: no torch import, no patch, no signal handler, no process.
``enable()`` is the opt-in and ``disable()`` puts everything back.
"""
from ._unset import UNSET as _UNSET
from ._version import __version__

__all__ = ["enable", "disable", "capabilities", "load_verdict", "Verdict", "__version__"]


def enable(timeout=_UNSET, *, poll_interval=_UNSET, dump_dir=_UNSET, signal=_UNSET, source=_UNSET,
           on_timeout=_UNSET, on_hang=None):
    """Watch every collective of this rank; returns the active Observer (``.source``, ``.watchdog_pid``).

    timeout: seconds (int or float) or datetime.timedelta, finite and > 0.  Default
        $C10D_OBSERVER_TIMEOUT, else 300.
    poll_interval: seconds between the watchdog's checks, < timeout.  Default
        $C10D_OBSERVER_POLL_INTERVAL, else min(1.0, timeout / 10).
    dump_dir: where reports and stack dumps go.  Default $C10D_OBSERVER_DIR, else ./c10d_observer.
    signal: the fallback for stack dumps (default SIGUSR1): the rank's helper thread writes every thread's
        stack to dump_dir when asked; the signal (faulthandler's dump) is sent only where it cannot answer
        (a thread holds the GIL).  A handler installed earlier is still called after that dump.
    source: "auto" (default; $C10D_OBSERVER_SOURCE) or the name of an event source, see capabilities().
    on_timeout: "dump" (report and stacks; training goes on; default, $C10D_OBSERVER_ON_TIMEOUT) or
        "abort" (then SIGTERM, and SIGKILL 10 s later, so that the launcher can restart the rank).
    on_hang: a callable taking one argument, or None.  Called in this rank, on a helper thread (never in a
        signal handler), with a Verdict (see load_verdict) once a verdict with stuck calls is merged, or,
        where none comes within the gather window, with the verdict made from dump_dir after this rank
        reported an overdue call.  Once per set of stuck calls.  What it raises is logged, not raised.

    Explicit arguments beat the environment, which beats the defaults.  Calling enable() again with the
    same settings returns the active observer; with other settings it raises RuntimeError.
    """
    from . import observer
    return observer.enable(timeout, poll_interval, dump_dir, signal, source, on_timeout, on_hang)


def disable():
    """Stop the watchdog and restore every patched function and signal handler.  Safe to call twice."""
    from . import observer
    observer.disable()


def load_verdict(dump_dir):
    """The verdict for a dump_dir as ``report DIR --json`` gives it, as a Verdict: ``.hangs`` (each with
    ``.op``, ``.seq``, ``.group``, ``.waiting_ranks``, ``.missing_ranks``, ...), ``.culprit_ranks``,
    ``.ranks_silent``, ``.ranks_dead``, ``.resolved``, ``.summary``, ``.exit_code``, ``.text``,
    ``.to_dict()``.  Reads DIR/c10d_observer where DIR holds nothing (the job's folder).  Raises ValueError
    naming the folder where it holds no report, state or torch dump.  Needs no torch."""
    from .on_hang import load_verdict as _load
    return _load(dump_dir)


def __getattr__(name):  # Verdict without importing anything at import time (PEP 562, Python 3.7+)
    if name == "Verdict":
        from .documents import Verdict
        return Verdict
    raise AttributeError("module 'c10d_observer' has no attribute %r" % name)


def capabilities():
    """A dict: the installed torch's version, probed features, and each source with (usable, reason)."""
    from . import observer
    return observer.capabilities()
