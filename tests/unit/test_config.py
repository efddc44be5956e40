"""config.resolve() and c10d_observer.enable(): precedence, defaults, and every rejected input.

Every error must name the argument or the environment variable and say what is accepted.  enable() must
fail before it starts anything: no watchdog process, no active observer.
"""
import datetime
import glob
import os
import signal

import pytest

import c10d_observer
from c10d_observer import config, observer
from c10d_observer.compat import SOURCES

ALL_ENV = (config.ENV_TIMEOUT, config.ENV_POLL_INTERVAL, config.ENV_DIR, config.ENV_SOURCE,
           config.ENV_ON_TIMEOUT, config.ENV_SIGNAL)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No C10D_OBSERVER_* variable from the caller's shell, and a scratch cwd for the default dump_dir."""
    for var in ALL_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _children():
    """Pids of this process's children, over all its threads (a watchdog would be one of them)."""
    pids = []
    for path in glob.glob("/proc/self/task/*/children"):
        with open(path) as f:
            pids.extend(int(p) for p in f.read().split())
    return sorted(pids)


def _usable_sources():
    caps = c10d_observer.capabilities()
    return [s for s in SOURCES if caps["sources"][s]["usable"]]


def _resolve(**kwargs):
    kwargs.setdefault("env", {})
    return config.resolve(check_source=observer._check_source, **kwargs)


# -- precedence and defaults ---------------------------------------------------------------------------

def test_defaults_apply_when_nothing_is_given(tmp_path):
    cfg = _resolve()
    assert cfg.timeout == config.DEFAULT_TIMEOUT
    assert cfg.poll_interval == min(1.0, config.DEFAULT_TIMEOUT / 10.0)
    assert cfg.dump_dir == str(tmp_path / config.DEFAULT_DIR)
    assert os.path.isdir(cfg.dump_dir)
    assert cfg.signal == signal.SIGUSR1
    assert cfg.source == config.DEFAULT_SOURCE
    assert cfg.on_timeout == "dump"


def test_environment_beats_defaults(tmp_path):
    env = {config.ENV_TIMEOUT: "42.5", config.ENV_POLL_INTERVAL: "2.5", config.ENV_DIR: str(tmp_path / "env"),
           config.ENV_SOURCE: _usable_sources()[0], config.ENV_ON_TIMEOUT: "abort"}
    cfg = _resolve(env=env)
    assert cfg.timeout == 42.5
    assert cfg.poll_interval == 2.5
    assert cfg.dump_dir == str(tmp_path / "env")
    assert cfg.source == _usable_sources()[0]
    assert cfg.on_timeout == "abort"


def test_arguments_beat_environment(tmp_path):
    env = {config.ENV_TIMEOUT: "42.5", config.ENV_POLL_INTERVAL: "2.5", config.ENV_DIR: str(tmp_path / "env"),
           config.ENV_SOURCE: _usable_sources()[0], config.ENV_ON_TIMEOUT: "abort"}
    cfg = _resolve(timeout=7, poll_interval=0.25, dump_dir=tmp_path / "arg", signal=signal.SIGUSR2,
                   source="auto", on_timeout="dump", env=env)
    assert cfg.timeout == 7.0
    assert cfg.poll_interval == 0.25
    assert cfg.dump_dir == str(tmp_path / "arg")
    assert cfg.signal == signal.SIGUSR2
    assert cfg.source == "auto"
    assert cfg.on_timeout == "dump"


def test_explicit_timeout_still_takes_poll_interval_from_environment():
    cfg = _resolve(timeout=60, env={config.ENV_TIMEOUT: "5", config.ENV_POLL_INTERVAL: "3"})
    assert (cfg.timeout, cfg.poll_interval) == (60.0, 3.0)


def test_resolve_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv(config.ENV_TIMEOUT, "12")
    assert config.resolve().timeout == 12.0


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_environment_values_mean_unset(blank):
    env = {config.ENV_TIMEOUT: blank, config.ENV_POLL_INTERVAL: blank, config.ENV_SOURCE: blank,
           config.ENV_ON_TIMEOUT: blank}
    cfg = _resolve(env=env)
    assert cfg.timeout == config.DEFAULT_TIMEOUT
    assert cfg.source == config.DEFAULT_SOURCE
    assert cfg.on_timeout == "dump"


@pytest.mark.parametrize("timeout", [0.05, 0.5, 5, 10, 30, 300])
def test_default_poll_interval_is_a_tenth_of_timeout_at_most_one_second(timeout):
    assert _resolve(timeout=timeout).poll_interval == min(1.0, timeout / 10.0)
    assert _resolve(env={config.ENV_TIMEOUT: str(timeout)}).poll_interval == min(1.0, timeout / 10.0)


def test_duration_strings_are_accepted_for_timeout_and_poll_interval():
    """Issue 28: enable(timeout="5m") takes the durations the environment and the command line take."""
    cfg = _resolve(timeout="5m", poll_interval="2s")
    assert (cfg.timeout, cfg.poll_interval) == (300.0, 2.0)
    assert _resolve(timeout="90").timeout == 90.0 and _resolve(timeout="1h").timeout == 3600.0


def test_soft_deadlines_are_on_unless_turned_off():
    assert _resolve().soft is True and _resolve(soft=False).soft is False
    assert _resolve(env={"C10D_OBSERVER_SOFT": "0"}).soft is False


def test_timedelta_is_accepted_for_timeout_and_poll_interval():
    cfg = _resolve(timeout=datetime.timedelta(minutes=2), poll_interval=datetime.timedelta(milliseconds=500))
    assert (cfg.timeout, cfg.poll_interval) == (120.0, 0.5)


def test_none_for_poll_interval_and_dump_dir_means_not_given(tmp_path):
    cfg = _resolve(timeout=50, poll_interval=None, dump_dir=None)
    assert cfg.poll_interval == 1.0
    assert cfg.dump_dir == str(tmp_path / config.DEFAULT_DIR)


def test_signal_enum_member_and_realtime_signal_accepted():
    assert _resolve(signal=signal.SIGUSR2).signal == int(signal.SIGUSR2)
    assert _resolve(signal=signal.SIGRTMIN + 1).signal == signal.SIGRTMIN + 1


def test_config_is_immutable():
    cfg = _resolve()
    with pytest.raises(AttributeError):
        cfg.timeout = 1.0


# -- rejected inputs -----------------------------------------------------------------------------------
# (kwargs for resolve/enable, exception, words the message must contain).  Each case is checked through
# config.resolve() and through the public c10d_observer.enable().

def _not_writable_below_a_file(tmp_path):
    f = tmp_path / "plain-file"
    f.write_text("x")
    return f / "sub"


ARG_ERRORS = [
    ("timeout-zero", dict(timeout=0), ValueError, ["timeout", "> 0"]),
    ("timeout-negative", dict(timeout=-5), ValueError, ["timeout", "> 0"]),
    ("timeout-nan", dict(timeout=float("nan")), ValueError, ["timeout", "finite"]),
    ("timeout-inf", dict(timeout=float("inf")), ValueError, ["timeout", "finite"]),
    ("timeout-neg-timedelta", dict(timeout=datetime.timedelta(seconds=-1)), ValueError, ["timeout", "> 0"]),
    ("timeout-str", dict(timeout="soon"), ValueError, ["timeout", "duration", "5m"]),
    ("soft-str", dict(soft="yes please"), TypeError, ["soft", "True or False"]),
    ("timeout-none", dict(timeout=None), TypeError, ["timeout", "number of seconds"]),
    ("timeout-bool", dict(timeout=True), TypeError, ["timeout", "number of seconds"]),
    ("poll-equal", dict(timeout=5, poll_interval=5), ValueError, ["poll_interval", "< timeout"]),
    ("poll-greater", dict(timeout=5, poll_interval=6), ValueError, ["poll_interval", "< timeout"]),
    ("poll-zero", dict(poll_interval=0), ValueError, ["poll_interval", "> 0"]),
    ("poll-str", dict(poll_interval="quickly"), ValueError, ["poll_interval", "duration"]),
    ("on-timeout", dict(on_timeout="explode"), ValueError, ["on_timeout", "'dump'", "'abort'"]),
    ("on-timeout-type", dict(on_timeout=1), ValueError, ["on_timeout", "'dump'", "'abort'"]),
    ("signal-kill", dict(signal=signal.SIGKILL), ValueError, ["signal", "SIGUSR1"]),
    ("signal-term", dict(signal=signal.SIGTERM), ValueError, ["signal", "SIGUSR1"]),
    ("signal-str", dict(signal="SIGUSR1"), TypeError, ["signal", "signal number"]),
    ("signal-bool", dict(signal=True), TypeError, ["signal", "signal number"]),
    ("source-type", dict(source=3), TypeError, ["source", "str"]),
    ("dump-dir-type", dict(dump_dir=3), TypeError, ["dump_dir", "path"]),
]

ENV_ERRORS = [
    (config.ENV_TIMEOUT, "abc", ["number of seconds"]),
    (config.ENV_TIMEOUT, "0", ["> 0"]),
    (config.ENV_TIMEOUT, "-3", ["> 0"]),
    (config.ENV_TIMEOUT, "nan", ["finite"]),
    (config.ENV_TIMEOUT, "inf", ["finite"]),
    (config.ENV_POLL_INTERVAL, "fast", ["number of seconds"]),
    (config.ENV_POLL_INTERVAL, "0", ["> 0"]),
    (config.ENV_POLL_INTERVAL, "%g" % config.DEFAULT_TIMEOUT, ["< timeout"]),
    (config.ENV_SOURCE, "no-such-source", ["'auto'"]),
    (config.ENV_ON_TIMEOUT, "explode", ["'dump'", "'abort'"]),
    (config.ENV_TIMING, "learned_floor", ["name=seconds", "learned_floor", "gather_wait"]),
    (config.ENV_TIMING, "floor=1", ["name=seconds", "learned_floor"]),
    (config.ENV_TIMING, "learned_floor=0", ["learned_floor", "> 0"]),
    (config.ENV_TIMING, "scale=0.1,scale=1", ["scale twice"]),
]


def _check_message(excinfo, words):
    msg = str(excinfo.value)
    for w in words:
        assert w in msg, "%r not in error message %r" % (w, msg)


@pytest.mark.parametrize("case,kwargs,exc,words", ARG_ERRORS, ids=[c[0] for c in ARG_ERRORS])
def test_resolve_rejects_bad_argument(case, kwargs, exc, words, tmp_path):
    with pytest.raises(exc) as excinfo:
        _resolve(**kwargs)
    _check_message(excinfo, words)


@pytest.mark.parametrize("var,value,words", ENV_ERRORS, ids=["%s=%s" % e[:2] for e in ENV_ERRORS])
def test_resolve_rejects_malformed_environment_value(var, value, words):
    with pytest.raises(config.SettingError) as excinfo:  # a variable's error, told apart from an argument's
        _resolve(env={var: value})
    _check_message(excinfo, [var] + words)


def test_environment_poll_interval_checked_against_explicit_timeout():
    with pytest.raises(ValueError) as excinfo:
        _resolve(timeout=2, env={config.ENV_POLL_INTERVAL: "2"})
    _check_message(excinfo, [config.ENV_POLL_INTERVAL, "< timeout"])


def test_unknown_source_lists_the_usable_ones():
    with pytest.raises(ValueError) as excinfo:
        _resolve(source="no-such-source")
    _check_message(excinfo, ["source", "'no-such-source'", "'auto'"] + _usable_sources())


@pytest.mark.parametrize("name", [s for s in SOURCES if s != "patch"])
@pytest.mark.parametrize("origin", ["argument", "environment"])
def test_source_this_torch_cannot_offer_gives_the_reason(name, origin):
    caps = c10d_observer.capabilities()
    if caps["sources"][name]["usable"]:
        pytest.skip("this torch offers %s" % name)
    with pytest.raises(ValueError) as excinfo:
        if origin == "argument":
            _resolve(source=name)
        else:
            _resolve(env={config.ENV_SOURCE: name})
    words = ["source" if origin == "argument" else config.ENV_SOURCE, name,
             caps["sources"][name]["reason"]] + _usable_sources()
    _check_message(excinfo, words)


def test_auto_with_no_usable_source_gives_every_reason(monkeypatch):
    # A torch on which no source is usable cannot be installed here: fake its capabilities record.
    caps = {"torch_version": "0.0.0", "auto": None,
            "sources": {s: {"usable": False, "reason": "reason-for-%s" % s} for s in SOURCES}}
    monkeypatch.setattr(observer, "_caps", [caps])
    with pytest.raises(ValueError) as excinfo:
        _resolve(source="auto")
    reasons = ["reason-for-%s" % s for s in SOURCES]
    _check_message(excinfo, ["source", "auto", "no source is usable"] + reasons)


def test_dump_dir_that_is_a_file(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(ValueError) as excinfo:
        _resolve(dump_dir=f)
    _check_message(excinfo, ["dump_dir", "must be a directory", str(f)])


@pytest.mark.parametrize("where", ["below-a-file", "proc"])
def test_dump_dir_not_writable(where, tmp_path):
    # We run as root, so permission bits stop nothing: use places no one can create files in.
    path = _not_writable_below_a_file(tmp_path) if where == "below-a-file" else "/proc/self"
    with pytest.raises(ValueError) as excinfo:
        _resolve(dump_dir=path)
    _check_message(excinfo, ["dump_dir", "writable directory", str(path)])


def test_dump_dir_from_environment_named_in_error(tmp_path):
    path = _not_writable_below_a_file(tmp_path)
    with pytest.raises(ValueError) as excinfo:
        _resolve(env={config.ENV_DIR: str(path)})
    _check_message(excinfo, [config.ENV_DIR, "writable directory"])


# -- enable() fails before it starts anything ----------------------------------------------------------

@pytest.fixture
def nothing_started():
    """Asserts after the test that enable() left no child process and no active observer."""
    before = _children()
    yield
    assert _children() == before
    assert observer.active() is None


@pytest.mark.parametrize("case,kwargs,exc,words", ARG_ERRORS, ids=[c[0] for c in ARG_ERRORS])
def test_enable_rejects_bad_argument(case, kwargs, exc, words, nothing_started):
    kwargs = dict(kwargs)
    timeout = kwargs.pop("timeout", config.UNSET)
    with pytest.raises(exc) as excinfo:
        c10d_observer.enable(timeout, **kwargs)
    _check_message(excinfo, words)


@pytest.mark.parametrize("var,value,words", ENV_ERRORS, ids=["%s=%s" % e[:2] for e in ENV_ERRORS])
def test_a_malformed_variable_leaves_enable_off_in_one_line_never_raising(var, value, words, monkeypatch, capfd,
                                                                         nothing_started):
    """Issue 32: a bad C10D_OBSERVER_* variable does one thing whichever way the observer is enabled: one line
    naming it and what is accepted, the observer off, the job going on (C10D_OBSERVER=1 and run do the same;
    tests/integration/test_cli.py, test_autostart.py)."""
    monkeypatch.setenv(var, value)
    monkeypatch.setenv("LOCAL_RANK", "0")
    obs = c10d_observer.enable()
    assert obs.active is False and var in obs.off and obs.watchdog_pid is None
    for w in words:
        assert w in obs.off, (w, obs.off)
    err = capfd.readouterr().err
    assert err.count("c10d_observer: not enabled:") == 1 and var in err and "unobserved" in err, err
    c10d_observer.disable()  # nothing to undo


@pytest.mark.parametrize("name", [s for s in SOURCES if s != "patch"])
def test_enable_rejects_unusable_source(name, nothing_started):
    caps = c10d_observer.capabilities()
    if caps["sources"][name]["usable"]:
        pytest.skip("this torch offers %s" % name)
    with pytest.raises(ValueError) as excinfo:
        c10d_observer.enable(source=name)
    _check_message(excinfo, ["source", caps["sources"][name]["reason"]])


@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_enable_rejects_bad_dump_dir(where, tmp_path, nothing_started):
    if where == "file":
        path = tmp_path / "a-file"
        path.write_text("x")
    else:
        path = _not_writable_below_a_file(tmp_path)
    with pytest.raises(ValueError) as excinfo:
        c10d_observer.enable(dump_dir=path)
    _check_message(excinfo, ["dump_dir", str(path)])



@pytest.mark.parametrize("raw", ["SIGUSR2", "usr2", " 12 "])
def test_signal_from_the_environment(raw):
    assert config.resolve(env={config.ENV_SIGNAL: raw}).signal == signal.SIGUSR2


@pytest.mark.parametrize("raw", ["SIGKILL", "SIGTERM", "soon", "9"])
def test_a_bad_signal_variable_is_named_with_what_is_accepted(raw):
    with pytest.raises(ValueError, match="C10D_OBSERVER_SIGNAL must be one of SIGUSR1, SIGUSR2"):
        config.resolve(env={config.ENV_SIGNAL: raw})


def test_the_signal_argument_beats_the_variable():
    assert config.resolve(signal=signal.SIGUSR1, env={config.ENV_SIGNAL: "SIGUSR2"}).signal == signal.SIGUSR1


@pytest.mark.parametrize("raw,seconds", [("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0),
                                         (" 1.5M ", 90.0)])
def test_durations_accept_units(raw, seconds):
    assert config.resolve(env={config.ENV_TIMEOUT: raw}).timeout == seconds


def test_run_options_fail_in_one_line_and_a_bad_variable_leaves_the_script_unobserved(tmp_path):
    """A bad option of run's own is the caller's error: one line, exit 2, the script does not run.  A bad
    variable is a bad setting of the observer's: one line, and the script runs unobserved (issue 32)."""
    import subprocess
    import sys
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    for argv, env, word, rc in (([ "--timeout", "5x"], {}, "--timeout", 2), (["--signal", "KILL"], {}, "--signal", 2),
                                ([], {config.ENV_TIMEOUT: "soon"}, config.ENV_TIMEOUT, 0),
                                ([], {config.ENV_SIGNAL: "TERM"}, config.ENV_SIGNAL, 0)):
        out = subprocess.run([sys.executable, "-m", "c10d_observer", "run"] + argv + [str(script)],
                             env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=120)
        assert out.returncode == rc and ("ran" in out.stdout) == (rc == 0), (argv, env, out)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], out.stderr
        assert lines[0].startswith("c10d-observer: error:" if rc else "c10d_observer: not enabled:"), lines


def test_version():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "--version"], stdout=subprocess.PIPE,
                         universal_newlines=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "c10d-observer %s" % c10d_observer.__version__


def test_timing_defaults_are_what_users_get():
    """C10D_OBSERVER_TIMING (tests and experiments) unset: the observer's fixed times, and the windows derived
    from them, are the documented ones."""
    cfg = _resolve(env={})
    assert cfg.timing == config.DEFAULT_TIMING and cfg.timing.describe() is None
    t = cfg.timing
    assert (t.learned_floor_s, t.phase_gap_s, t.arrivals_period_s, t.relay_period_s) == (10.0, 30.0, 2.0, 3.0)
    w = config.windows(0.1)
    assert (w.gather_wait, w.gather_quiet, w.frozen_after, w.abort_culprit, w.abort_stacks, w.abort_kill_after) \
        == (2.0, 1.0, 1.3, 6.3, 5.0, 10.0)


def test_timing_scales_every_fixed_time_and_a_named_setting_wins():
    t = _resolve(env={config.ENV_TIMING: "scale=0.1, learned_floor=2s,gather_wait=0.3"}).timing
    assert t.describe() == {"scale": 0.1, "learned_floor": 2.0, "gather_wait": 0.3}
    assert t.learned_floor_s == 2.0 and t.phase_gap_s == pytest.approx(3.0)
    w = config.windows(0.05, 1, t)
    assert w.gather_wait == 0.3 and w.gather_wait_max == 0.6 and w.frozen_after == pytest.approx(0.25)
    assert w.abort_culprit == pytest.approx(0.75) and w.restart_window == 60.0  # a rate, not a wait
    across = config.windows(0.05, 4, t)
    assert across.gather_wait == 0.6  # twice the one-node floor across nodes, as 4 s to 2 s


@pytest.mark.parametrize("value,default,want", [
    ("1", False, True), ("on", False, True), ("0", False, False), ("", False, False), ("maybe", False, False),
    ("0", True, False), ("off", True, False), ("", True, True), ("maybe", True, True), (" Yes ", False, True)])
def test_one_truth_rule_for_the_on_off_variables(value, default, want):
    # C10D_OBSERVER_QUIET=0 once meant quiet in _autostart and not quiet in observer: one rule now
    assert config.flag("C10D_OBSERVER_QUIET", default, env={"C10D_OBSERVER_QUIET": value}) is want
