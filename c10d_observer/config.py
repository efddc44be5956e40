"""One frozen config: explicit arguments beat C10D_OBSERVER_* variables, which beat the defaults.

Everything is validated here, before any process is started, and every error names the argument or the
variable and what is accepted.  The rank resolves the config once; the watchdog receives it as JSON and
never reads the environment.
"""
import datetime
import math
import os
import signal as _signal
import tempfile
from collections import namedtuple

ENV_TIMEOUT = "C10D_OBSERVER_TIMEOUT"
ENV_POLL_INTERVAL = "C10D_OBSERVER_POLL_INTERVAL"
ENV_DIR = "C10D_OBSERVER_DIR"
ENV_SOURCE = "C10D_OBSERVER_SOURCE"
ENV_ON_TIMEOUT = "C10D_OBSERVER_ON_TIMEOUT"
ENV_SIGNAL = "C10D_OBSERVER_SIGNAL"

DEFAULT_TIMEOUT = 300.0
DEFAULT_DIR = "c10d_observer"
DEFAULT_SOURCE = "auto"
ON_TIMEOUT_CHOICES = ("dump", "abort")

# Signals the watchdog may send.  SIGTERM and SIGINT are how launchers stop jobs, the fatal signals belong
# to faulthandler's crash handler, SIGKILL and SIGSTOP cannot be caught.
_NAMED_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGHUP", "SIGWINCH", "SIGURG", "SIGPWR")
ACCEPTED_SIGNALS = tuple(sorted(
    {int(getattr(_signal, n)) for n in _NAMED_SIGNALS if hasattr(_signal, n)}
    | (set(range(_signal.SIGRTMIN, _signal.SIGRTMAX + 1)) if hasattr(_signal, "SIGRTMIN") else set())))


from ._unset import UNSET  # noqa: F401  (re-exported)

Config = namedtuple("Config", "timeout poll_interval dump_dir signal source on_timeout")
Config.__doc__ = """The resolved, validated configuration (immutable).

timeout, poll_interval: seconds (float); dump_dir: an absolute path that exists and is writable;
signal: an int; source: the requested source name ("auto" or a source); on_timeout: "dump" or "abort".
"""


def _seconds(value, name, allow_timedelta=True):
    if isinstance(value, bool) or not (isinstance(value, (int, float))
                                       or (allow_timedelta and isinstance(value, datetime.timedelta))):
        raise TypeError("%s must be a number of seconds (int or float)%s, got %s %r"
                        % (name, " or datetime.timedelta" if allow_timedelta else "",
                           type(value).__name__, value))
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("%s must be finite and > 0 seconds, got %r" % (name, value))
    return value


def _env_choice(env, var):
    raw = env.get(var)
    if raw is None or raw.strip() == "":
        return UNSET
    return raw.strip()


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(raw, name):
    """Seconds from text: '90', '90s', '1.5m', '1h' (finite and > 0)."""
    text = str(raw).strip().lower()
    scale = _UNITS.get(text[-1:], None) if text else None
    try:
        value = float(text[:-1] if scale else text) * (scale or 1.0)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise ValueError("%s must be a duration, finite and > 0: a number of seconds, or one with a unit s, m or "
                         "h (90, 90s, 5m, 1h); got %r" % (name, raw))
    return value


def _env_seconds(env, var):
    raw = _env_choice(env, var)
    if raw is UNSET:
        return UNSET
    return parse_duration(raw, var)


def _check_dump_dir(path, name):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("%s must be a path (str or os.PathLike), got %s %r" % (name, type(path).__name__, path))
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError("%s must be a directory, but %s is a file" % (name, path))
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".c10d_observer-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError("%s must be a writable directory; %s is not (%s)" % (name, path, e.strerror or e))
    return path


def _check_signal(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("signal must be a signal number or signal.Signals member, got %s %r"
                        % (type(value).__name__, value))
    if int(value) not in ACCEPTED_SIGNALS:
        raise ValueError("signal must be one of %s or a real-time signal, got %r"
                         % (", ".join(n for n in _NAMED_SIGNALS if hasattr(_signal, n)), value))
    return int(value)


def parse_signal(raw, name):
    """A signal given as text ('SIGUSR2', 'USR2' or '12', from a variable or the command line)."""
    text = str(raw).strip().upper()
    if text.isdigit():
        value = int(text)
    else:
        value = getattr(_signal, text if text.startswith("SIG") else "SIG" + text, None)
    if not isinstance(value, int) or int(value) not in ACCEPTED_SIGNALS:
        raise ValueError("%s must be one of %s or a real-time signal number, got %r"
                         % (name, ", ".join(n for n in _NAMED_SIGNALS if hasattr(_signal, n)), raw))
    return int(value)


def _check_on_timeout(value, name):
    if not isinstance(value, str) or value not in ON_TIMEOUT_CHOICES:
        raise ValueError("%s must be one of %s, got %r" % (name, ", ".join(map(repr, ON_TIMEOUT_CHOICES)), value))
    return value


def _check_source_type(value, name):
    if not isinstance(value, str):
        raise TypeError("%s must be a source name (str), got %s %r" % (name, type(value).__name__, value))
    return value


def resolve(timeout=UNSET, poll_interval=UNSET, dump_dir=UNSET, signal=UNSET, source=UNSET,
            on_timeout=UNSET, env=None, check_source=None):
    """Merge arguments, environment and defaults into a validated Config.

    ``None`` for poll_interval or dump_dir means "not given" (their documented defaults are None); ``None``
    for timeout is an error.  ``check_source(name, origin)`` raises when this torch cannot run the source;
    ``origin`` is the argument's or the variable's name, for the message.
    """
    env = os.environ if env is None else env

    if timeout is UNSET:
        timeout = _env_seconds(env, ENV_TIMEOUT)
        timeout = DEFAULT_TIMEOUT if timeout is UNSET else timeout
    else:
        timeout = _seconds(timeout, "timeout")

    if poll_interval is UNSET or poll_interval is None:
        poll_interval = _env_seconds(env, ENV_POLL_INTERVAL)
        name = ENV_POLL_INTERVAL
        if poll_interval is UNSET:
            poll_interval, name = min(1.0, timeout / 10.0), None
    else:
        poll_interval, name = _seconds(poll_interval, "poll_interval"), "poll_interval"
    if name and poll_interval >= timeout:
        raise ValueError("%s must be < timeout (%g s), got %g" % (name, timeout, poll_interval))

    if signal is UNSET:
        raw = _env_choice(env, ENV_SIGNAL)
        signal = _signal.SIGUSR1 if raw is UNSET else parse_signal(raw, ENV_SIGNAL)
    signal = _check_signal(signal)

    if source is UNSET:
        source, origin = _env_choice(env, ENV_SOURCE), ENV_SOURCE
        if source is UNSET:
            source, origin = DEFAULT_SOURCE, "source"
    else:
        source, origin = _check_source_type(source, "source"), "source"
    if check_source is not None:
        check_source(source, origin)

    if on_timeout is UNSET:
        raw = _env_choice(env, ENV_ON_TIMEOUT)
        on_timeout = "dump" if raw is UNSET else _check_on_timeout(raw, ENV_ON_TIMEOUT)
    else:
        on_timeout = _check_on_timeout(on_timeout, "on_timeout")

    if dump_dir is UNSET or dump_dir is None:
        raw = env.get(ENV_DIR)
        if raw:
            dump_dir = _check_dump_dir(raw, ENV_DIR)
        else:
            dump_dir = _check_dump_dir(DEFAULT_DIR, "dump_dir (default ./%s)" % DEFAULT_DIR)
    else:
        dump_dir = _check_dump_dir(dump_dir, "dump_dir")

    return Config(timeout, poll_interval, dump_dir, signal, source, on_timeout)
