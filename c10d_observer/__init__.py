"""c10d-observer: finds hung collectives in PyTorch distributed jobs.

Importing this package does nothing: no torch import, no patch, no signal handler, no process.
``enable()`` is the opt-in and ``disable()`` puts everything back.
"""
from ._unset import UNSET as _UNSET
from ._version import __version__

__all__ = ["enable", "disable", "capabilities", "__version__"]


def enable(timeout=_UNSET, *, poll_interval=_UNSET, dump_dir=_UNSET, signal=_UNSET, source=_UNSET,
           on_timeout=_UNSET):
    """Watch every collective of this rank; returns the active Observer (``.source``, ``.watchdog_pid``).

    timeout: seconds (int or float) or datetime.timedelta, finite and > 0.  Default
        $C10D_OBSERVER_TIMEOUT, else 300.
    poll_interval: seconds between the watchdog's checks, < timeout.  Default
        $C10D_OBSERVER_POLL_INTERVAL, else min(1.0, timeout / 10).
    dump_dir: where reports and stack dumps go.  Default $C10D_OBSERVER_DIR, else ./c10d_observer.
    signal: sent to this rank when one of its collectives is overdue (default SIGUSR1).  The rank then
        writes every thread's stack to dump_dir; a handler installed earlier is still called.
    source: "auto" (default; $C10D_OBSERVER_SOURCE) or the name of an event source, see capabilities().
    on_timeout: "dump" (report and stacks; training goes on; default, $C10D_OBSERVER_ON_TIMEOUT) or
        "abort" (then SIGTERM, and SIGKILL 10 s later, so that the launcher can restart the rank).

    Explicit arguments beat the environment, which beats the defaults.  Calling enable() again with the
    same settings returns the active observer; with other settings it raises RuntimeError.
    """
    from . import observer
    return observer.enable(timeout, poll_interval, dump_dir, signal, source, on_timeout)


def disable():
    """Stop the watchdog and restore every patched function and signal handler.  Safe to call twice."""
    from . import observer
    observer.disable()


def capabilities():
    """A dict: the installed torch's version, probed features, and each source with (usable, reason)."""
    from . import observer
    return observer.capabilities()
