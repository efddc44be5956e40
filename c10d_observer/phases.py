"""Rank side: phases the job declares (``with c10d_observer.phase("checkpoint", up_to=600):``).

A rank inside a declared phase is busy on purpose (saving a checkpoint, evaluating): the ranks that wait
for it in a collective get a soft verdict naming it and its phase ("rank 0 is in phase 'checkpoint', 40 s
of up to 600 s"), and the hard verdict (and ``on_timeout="abort"``) is held until ``up_to`` has passed.
The phase goes to the rank's watchdog through the channel's header (channel.set_phase); phases nest, and
the innermost is the one shown.  Without an enabled observer a phase does nothing.
"""
import datetime
import threading
import time

_lock = threading.Lock()
_stack = []  # (number, name, since monotonic ns, until monotonic ns or 0)
_count = [0]
_channel = [None]  # the enabled observer's channel writer, while one is


def _up_to_seconds(up_to):
    if up_to is None:
        return None
    if isinstance(up_to, datetime.timedelta):
        up_to = up_to.total_seconds()
    elif isinstance(up_to, str):
        from .config import parse_duration
        return parse_duration(up_to, "up_to")
    if isinstance(up_to, bool) or not isinstance(up_to, (int, float)) or not up_to > 0 or up_to != up_to:
        raise ValueError("up_to must be a duration > 0 (seconds as int or float, a datetime.timedelta, or text "
                         "such as '10m'), or None for no limit; got %r" % (up_to,))
    return float(up_to)


def begin_phase(name, up_to=None):
    """Declare that this rank enters phase ``name`` (for at most ``up_to``: seconds, a timedelta or
    '10m'; None: no limit); end it with end_phase().  Returns the phase's number."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a phase's name must be a non-empty str, got %r" % (name,))
    secs = _up_to_seconds(up_to)
    now = time.monotonic_ns()
    with _lock:
        _count[0] += 1
        _stack.append((_count[0], name.strip(), now, now + int(secs * 1e9) if secs else 0))
        _publish()
        return _count[0]


def end_phase():
    """End the innermost phase begun by begin_phase() (or phase()).  Ending none is a no-op."""
    with _lock:
        if _stack:
            _stack.pop()
        _publish()


class phase(object):  # noqa: N801 (used as a function: with c10d_observer.phase(...))
    """``with c10d_observer.phase("checkpoint", up_to=600): save(...)``: the ranks that wait for this one
    meanwhile get a soft verdict that names the phase; their hard verdict is held until ``up_to``."""

    def __init__(self, name, up_to=None):
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a phase's name must be a non-empty str, got %r" % (name,))
        _up_to_seconds(up_to)  # checked now, where the mistake is
        self.name, self.up_to = name, up_to

    def __enter__(self):
        begin_phase(self.name, self.up_to)
        return self

    def __exit__(self, *exc):
        end_phase()
        return False


def current():
    """(name, since monotonic ns, until monotonic ns or 0) of the innermost phase, or None."""
    with _lock:
        return _stack[-1][1:] if _stack else None


def attach(channel):
    """An observer started (or stopped: None): its channel shows the phase from now on."""
    with _lock:
        _channel[0] = channel
        _publish()


def _publish():
    chan = _channel[0]
    if chan is None:
        return
    try:
        if _stack:
            number, name, since, until = _stack[-1]
            chan.set_phase(number, name, since, until)
        else:
            chan.set_phase(0, "", 0, 0)
    except Exception:  # a closed channel (disable() raced): the phase is the job's own business
        pass
