"""One frozen config: explicit arguments beat C10D_OBSERVER_* variables, which beat the defaults.

Everything is validated here, before any process is started, and every error names the argument or the
variable and what is accepted.  The rank resolves the config once; the watchdog receives it as JSON and
never reads the environment.
"""
import datetime
import json
import math
import os
import signal as _signal
import tempfile
from collections import namedtuple
from typing import NamedTuple, Optional

ENV_TIMEOUT = "C10D_OBSERVER_TIMEOUT"
ENV_POLL_INTERVAL = "C10D_OBSERVER_POLL_INTERVAL"
ENV_DIR = "C10D_OBSERVER_DIR"
ENV_SOURCE = "C10D_OBSERVER_SOURCE"
ENV_ON_TIMEOUT = "C10D_OBSERVER_ON_TIMEOUT"
ENV_SIGNAL = "C10D_OBSERVER_SIGNAL"
ENV_SOFT = "C10D_OBSERVER_SOFT"
ENV_TIMING = "C10D_OBSERVER_TIMING"  # for tests and experiments (Timing below)
ENV_QUIET = "C10D_OBSERVER_QUIET"  # 1: no start-up lines (the rank side's own notices)
ENV_PY_SPY = "C10D_OBSERVER_PY_SPY"  # 0: no py-spy dumps
ENV_DEBUG = "C10D_OBSERVER_DEBUG"  # 1: the watchdog says why it exits

DEFAULT_TIMEOUT = 300.0
# on_timeout="abort": the exit code of every rank the observer ends, meaning "a collective hang was found; the
# verdict is in dump_dir"; a rank whose threads hold the GIL ends by SIGTERM (then SIGKILL) instead.  Chosen
# outside the codes others give a meaning: Python's 1 and 2, sysexits.h's 64-78, torch's MultiProcessTestCase
# (10, and 72-89: its subprocesses' "skip" codes; 75 there would make a hung test a skipped one), the
# shell's 124-127 and signals' 128+
HANG_EXIT_CODE = 93
DEFAULT_DIR = "c10d_observer"
DEFAULT_SOURCE = "auto"
ON_TIMEOUT_CHOICES = ("dump", "abort", "raise")

# Signals the watchdog may send.  SIGTERM and SIGINT are how launchers stop jobs, the fatal signals belong
# to faulthandler's crash handler, SIGKILL and SIGSTOP cannot be caught.
_NAMED_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGHUP", "SIGWINCH", "SIGURG", "SIGPWR")
ACCEPTED_SIGNALS = tuple(sorted(
    {int(getattr(_signal, n)) for n in _NAMED_SIGNALS if hasattr(_signal, n)}
    | (set(range(_signal.SIGRTMIN, _signal.SIGRTMAX + 1)) if hasattr(_signal, "SIGRTMIN") else set())))


from ._unset import UNSET  # noqa: F401  (re-exported)

class Timing(NamedTuple):
    """The observer's fixed times, as settings for tests and experiments (``C10D_OBSERVER_TIMING``): users
    keep the defaults (None: the value in the comment), which are measured for real jobs (benchmarks/README.md).
    A test of a promise waits a fraction of a second where a real job's observer waits ten, as torch's
    elastic timer tests run their watchdog at 0.01 s; tests/README.md says which tests keep the defaults.

    ``scale`` multiplies every default below and the fixed parts of the windows (``windows``); a named
    setting then replaces its own value.  The poll interval and the timeout are settings of their own."""
    scale: float = 1.0
    learned_floor: Optional[float] = None  # 10 s: no soft verdict for a call in flight less than this
    phase_gap: Optional[float] = None  # 30 s: a stream quiet this long: its next call is a change of phase
    gather_wait: Optional[float] = None  # 2 s (4 s across nodes): a merge waits at least this for the answers
    frozen_after: Optional[float] = None  # 3 polls + 1 s with no beat of the rank's helper: its Python is frozen
    abort_grace: Optional[float] = None  # 6 s: on_timeout="abort" waits 3 polls and this for the culprit's end
    arrivals_period: Optional[float] = None  # 2 s: a watchdog writes its rank's starts, the node's leader joins them
    relay_period: Optional[float] = None  # 3 s: a node's starts on groups that span nodes go to the store

    def value(self, name, default):
        v = getattr(self, name)
        return default * self.scale if v is None else v

    @property
    def learned_floor_s(self):
        return self.value("learned_floor", 10.0)

    @property
    def phase_gap_s(self):
        return self.value("phase_gap", 30.0)

    @property
    def arrivals_period_s(self):
        return self.value("arrivals_period", 2.0)

    @property
    def relay_period_s(self):
        return self.value("relay_period", 3.0)

    def describe(self):
        """{setting: value} of what differs from the defaults (None where nothing does): for the reports."""
        out = {k: v for k, v in self._asdict().items() if v is not None and not (k == "scale" and v == 1.0)}
        return out or None

    @classmethod
    def parse(cls, raw, name=ENV_TIMING):
        """``scale=0.1,learned_floor=1,gather_wait=0.3`` (durations as the variables take them)."""
        out = {}
        for part in str(raw).split(","):
            part = part.strip()
            if not part:
                continue
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or key not in cls._fields:
                raise ValueError("%s must be comma-separated name=seconds pairs, names among %s; got %r"
                                 % (name, ", ".join(cls._fields), raw))
            if key in out:
                raise ValueError("%s names %s twice: %r" % (name, key, raw))
            out[key] = parse_duration(value, "%s's %s" % (name, key))
        return cls(**out)


DEFAULT_TIMING = Timing()

Config = namedtuple("Config", "timeout poll_interval dump_dir signal source on_timeout soft timing",
                    defaults=(DEFAULT_TIMING,))
Config.__doc__ = """The resolved, validated configuration (immutable).

timeout, poll_interval: seconds (float); dump_dir: an absolute path that exists and is writable;
signal: an int, or None (no signal is sent); source: the requested source name ("auto" or a source);
on_timeout: "dump", "abort" or "raise"; soft: learned (soft) deadlines on or off (the timeout is the hard one);
timing: Timing (from C10D_OBSERVER_TIMING; for tests and experiments).
"""


def _seconds(value, name, allow_timedelta=True):
    if isinstance(value, str):  # "90", "90s", "5m", "1h", as the environment and the command line take them
        return parse_duration(value, name)
    if isinstance(value, bool) or not (isinstance(value, (int, float))
                                       or (allow_timedelta and isinstance(value, datetime.timedelta))):
        raise TypeError("%s must be a number of seconds (int or float)%s or a duration string ('90s', '5m', "
                        "'1h'), got %s %r" % (name, ", datetime.timedelta" if allow_timedelta else "",
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
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("signal must be a signal number or signal.Signals member, or None (send none), got %s %r"
                        % (type(value).__name__, value))
    if int(value) not in ACCEPTED_SIGNALS:
        raise ValueError("signal must be one of %s, a real-time signal or None, got %r"
                         % (", ".join(n for n in _NAMED_SIGNALS if hasattr(_signal, n)), value))
    return int(value)


def parse_signal(raw, name):
    """A signal given as text ('SIGUSR2', 'USR2' or '12', from a variable or the command line); 'none': None."""
    text = str(raw).strip().upper()
    if text == "NONE":
        return None
    if text.isdigit():
        value = int(text)
    else:
        value = getattr(_signal, text if text.startswith("SIG") else "SIG" + text, None)
    if not isinstance(value, int) or int(value) not in ACCEPTED_SIGNALS:
        raise ValueError("%s must be one of %s, a real-time signal number or none, got %r"
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


_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def flag(var, default=False, env=None):
    """The one truth rule of the on/off variables (C10D_OBSERVER_QUIET, _PY_SPY, _DEBUG): 1, true, yes, on are
    on; 0, false, no, off are off; unset, empty or anything else is ``default`` (these variables only quiet the
    observer or make it say more: a value they do not know is no reason to stop a job)."""
    text = (os.environ if env is None else env).get(var, "").strip().lower()
    if not text:
        return default
    if text in _ON or text in _OFF:
        return text in _ON
    return default


def _check_soft(value, name):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _ON or text in _OFF:
        return text in _ON
    raise ValueError("%s must be True or False (1, 0, on, off), got %r" % (name, value))


class SettingError(ValueError):
    """A setting the job did not pass as an argument is bad: a ``C10D_OBSERVER_*`` variable, or a default the
    machine cannot take (``./c10d_observer`` not writable).  Whichever way the observer is enabled
    (``enable()``, ``C10D_OBSERVER=1``, ``run``), it then stays off and says so in one line; the job goes on
    (the job is never harmed by the observer's own faults).  A bad *argument* of ``enable()`` or option of
    ``run`` is the caller's error: ``ValueError``/``TypeError``, exit code 2."""


class _FromEnv(object):
    """Turns the errors of a setting read from the environment (or a default) into SettingError."""

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if kind is not None and issubclass(kind, (ValueError, TypeError)) and not isinstance(e, SettingError):
            raise SettingError(str(e))
        return False


def resolve(timeout=UNSET, poll_interval=UNSET, dump_dir=UNSET, signal=UNSET, source=UNSET,
            on_timeout=UNSET, env=None, check_source=None, soft=UNSET):
    """Merge arguments, environment and defaults into a validated Config.

    ``None`` for poll_interval or dump_dir means "not given" (their documented defaults are None); ``None``
    for timeout is an error.  ``check_source(name, origin)`` raises when this torch cannot run the source;
    ``origin`` is the argument's or the variable's name, for the message.  A bad argument raises
    ValueError/TypeError; a bad variable (or default) SettingError, naming it and what is accepted.
    """
    env = os.environ if env is None else env
    from_env = _FromEnv()

    if timeout is UNSET:
        with from_env:
            timeout = _env_seconds(env, ENV_TIMEOUT)
        timeout = DEFAULT_TIMEOUT if timeout is UNSET else timeout
    else:
        timeout = _seconds(timeout, "timeout")

    if poll_interval is UNSET or poll_interval is None:
        with from_env:
            poll_interval = _env_seconds(env, ENV_POLL_INTERVAL)
        name = ENV_POLL_INTERVAL
        if poll_interval is UNSET:
            poll_interval, name = min(1.0, timeout / 10.0), None
    else:
        poll_interval, name = _seconds(poll_interval, "poll_interval"), "poll_interval"
    if name and poll_interval >= timeout:
        raise (SettingError if name == ENV_POLL_INTERVAL else ValueError)(
            "%s must be < timeout (%g s), got %g" % (name, timeout, poll_interval))

    if signal is UNSET:
        raw = _env_choice(env, ENV_SIGNAL)
        with from_env:
            signal = _signal.SIGUSR1 if raw is UNSET else parse_signal(raw, ENV_SIGNAL)
    signal = _check_signal(signal)

    if source is UNSET:
        source, origin = _env_choice(env, ENV_SOURCE), ENV_SOURCE
        if source is UNSET:
            source, origin = DEFAULT_SOURCE, "source"
    else:
        source, origin = _check_source_type(source, "source"), "source"
    if check_source is not None:
        if origin == ENV_SOURCE:
            with from_env:
                check_source(source, origin)
        else:
            check_source(source, origin)

    if on_timeout is UNSET:
        raw = _env_choice(env, ENV_ON_TIMEOUT)
        with from_env:
            on_timeout = "dump" if raw is UNSET else _check_on_timeout(raw, ENV_ON_TIMEOUT)
    else:
        on_timeout = _check_on_timeout(on_timeout, "on_timeout")

    if dump_dir is UNSET or dump_dir is None:
        raw = env.get(ENV_DIR)
        with from_env:
            if raw:
                dump_dir = _check_dump_dir(raw, ENV_DIR)
            else:
                dump_dir = _check_dump_dir(DEFAULT_DIR, "dump_dir (default ./%s)" % DEFAULT_DIR)
    else:
        dump_dir = _check_dump_dir(dump_dir, "dump_dir")

    if soft is UNSET:
        raw = _env_choice(env, ENV_SOFT)
        with from_env:
            soft = True if raw is UNSET else _check_soft(raw, ENV_SOFT)
    elif not isinstance(soft, bool):
        raise TypeError("soft must be True or False, got %s %r" % (type(soft).__name__, soft))

    raw = _env_choice(env, ENV_TIMING)
    with from_env:
        timing = DEFAULT_TIMING if raw is UNSET else Timing.parse(raw)

    return Config(timeout, poll_interval, dump_dir, signal, source, on_timeout, soft, timing)


def signal_name(signum):
    """'SIGUSR1' for a signal number, 'SIGRTMIN+3' for a real-time one, 'none' for None."""
    if signum is None:
        return "none"
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return "SIGRTMIN+%d" % (signum - _signal.SIGRTMIN) if hasattr(_signal, "SIGRTMIN") else str(signum)


class Windows(NamedTuple):
    """Every time window the observer derives from its poll interval, in seconds: computed here once
    (``windows(poll, nodes)``), read by the rank (tracker, relay, on_hang) and the watchdog alike."""
    poll: float
    helper_answer: float  # the rank's helper thread (it beats every poll) answers a stacks request within this
    frozen_after: float  # no beat for this long: the rank's Python cannot run (a thread holds the GIL, stopped)
    gather_wait: float  # a merge waits this long for every rank's answer ...
    gather_wait_max: float  # ... and on while answers still arrive, at most this long
    gather_quiet: float  # ... until none came for this long
    merge_look: float  # how often a merging watchdog looks at the answers
    settle: float  # an overdue call that ended: how long to wait for its peers' ends to show (peers ended?)
    relay_window: float  # how long a relayed gather stays on (the merge's longest wait and a second)
    relay_fresh: float  # a node's relay whose beat is older than this no longer acts
    on_hang_wait: float  # a rank with a report waits this long for the merged verdict before making one
    abort_verdict: float  # on_timeout="abort": the verdict is waited for this long before the rank is ended
    abort_culprit: float  # ... and the culprits' end this long (the launcher names the first failure; the
    # culprit's watchdog sees the verdict within a poll, waits for its stacks, then ends it)
    abort_stacks: float  # ... and the stack dump until the file stops growing, at most this long
    abort_exit: float  # ... and the rank's own exit with HANG_EXIT_CODE this long, then SIGTERM
    abort_kill_after: float  # SIGKILL this long after SIGTERM
    restart_window: float  # a watchdog that died is started again, at most 3 times in this long


def windows(poll, nodes=1, timing=DEFAULT_TIMING):
    """The windows for a poll interval (seconds) and a job over ``nodes`` nodes.

    One node: the watchdogs meet in dump_dir within a poll, so a gather waits max(2 s, 2.5 polls + 0.5 s).
    Several: the relay adds up to two of its periods (a poll each) on the way out and back, so
    max(4 s, 4 polls + 1 s), and the merge's longest wait grows 20 ms a node (the merging node reads and
    merges about 12 ms of states a node: benchmarks/scale.py, docs/scale.md).  The fixed parts (seconds)
    are ``timing``'s (Timing: for tests and experiments; the defaults are these); the restart window is a
    rate, not a wait, and stays."""
    k = timing.scale
    g = timing.gather_wait
    if nodes > 1:
        gw = max(4.0 * k if g is None else 2 * g, 4 * poll + 1.0 * k)
        gmax = 2 * gw + 0.02 * nodes
    else:
        gw = max(2.0 * k if g is None else g, 2.5 * poll + 0.5 * k)
        gmax = 2 * gw
    frozen = timing.frozen_after if timing.frozen_after is not None else 3 * poll + 1.0 * k
    quiet = max(1.0 * k if g is None else g / 2, 2 * poll)
    grace = timing.value("abort_grace", 6.0)
    return Windows(poll=poll, helper_answer=2 * poll + 0.5 * k, frozen_after=frozen, gather_wait=gw,
                   gather_wait_max=gmax, gather_quiet=quiet, merge_look=0.05,
                   settle=2 * poll + 0.5 * k, relay_window=gmax + 1.0 * k, relay_fresh=3 * poll + 1.0 * k,
                   on_hang_wait=gmax + 2 * poll, abort_verdict=gmax + 1.0 * k, abort_culprit=3 * poll + grace,
                   abort_stacks=grace * 5 / 6.0, abort_exit=2 * poll + 1.5 * k, abort_kill_after=10.0 * k,
                   restart_window=60.0)


class WatchdogConfig(NamedTuple):
    """What the rank hands its watchdog (one JSON line on its stdin), typed.  The watchdog never reads the
    environment: everything it needs is here."""
    rank_pid: int
    dump_dir: str
    stack_path: str
    timeout: float
    poll_interval: float
    nodes: int = 1
    channel: str = ""  # the channel's path (tests), else it comes as an inherited descriptor:
    channel_fd: int = -1
    signal: Optional[int] = None  # sent to the rank when one of its calls is overdue (None: none)
    signal_name: str = "none"
    dump_signal: Optional[int] = None  # faulthandler's all-thread dump, where the helper cannot answer
    on_timeout: str = "dump"
    soft: bool = True  # learned (soft) deadlines beside the timeout (the hard one)
    host: str = ""
    job_id: str = ""
    scheduler: Optional[dict] = None  # the rank's node as its scheduler names it, the job's ids (scheduler.py)
    error_file: str = ""  # torchelastic's error file for this rank (TORCHELASTIC_ERROR_FILE), for abort
    py_spy: Optional[str] = None
    torch_version: Optional[str] = None
    source_in_use: Optional[str] = None
    source_reasons: Optional[dict] = None
    source_plan: Optional[dict] = None
    source_rejected: Optional[dict] = None
    public_config: Optional[dict] = None
    restarts: int = 0  # how many watchdogs this rank had before this one (a restart restores their report)
    timing: Optional[dict] = None  # Timing's settings that differ from the defaults (tests and experiments)

    @property
    def timings(self):
        return Timing(**self.timing) if self.timing else DEFAULT_TIMING

    @property
    def windows(self):
        return windows(self.poll_interval, self.nodes, self.timings)

    def to_json(self):
        return json.dumps(self._asdict(), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        d = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(**{k: v for k, v in d.items() if k in cls._fields})
