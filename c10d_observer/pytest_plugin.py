"""A pytest plugin for distributed tests: a hung collective fails the test fast, with the verdict.

Off unless asked: ``pytest --c10d-observer[=TIMEOUT]`` (every test) or ``@pytest.mark.c10d_observer(timeout=S)``
(one test).  For such a test the plugin sets ``C10D_OBSERVER=1`` and the ``C10D_OBSERVER_*`` settings
(a dump_dir of the test's own) in the environment, so the ranks the test starts (torch's
``MultiProcessTestCase``, ``mp.spawn``, torchrun subprocesses) are observed through the package's .pth
(_autostart.py).  A thread in the pytest process watches that dump_dir: once a verdict names a stuck call,
it ends every rank of the job on this host (SIGTERM, SIGKILL 3 s later), so the test fails within the
timeout and a few seconds instead of hanging for the suite's own timeout, and the report carries the
verdict.  Nothing is left running.  Needs the package installed from its wheel (the .pth); without it
the plugin says so once and does nothing.
"""
import os
import shutil
import signal
import socket
import tempfile
import threading
import time

import pytest

from . import _autostart
from . import config as _config
from .levels import Level

DEFAULT_TIMEOUT = 30.0
_KEYS = (_autostart.ENV, _config.ENV_TIMEOUT, _config.ENV_POLL_INTERVAL, _config.ENV_DIR,
         _config.ENV_ON_TIMEOUT, "C10D_OBSERVER_QUIET")
_STASH = "_c10d_observer_watch"


def pytest_addoption(parser):
    group = parser.getgroup("c10d-observer")
    group.addoption("--c10d-observer", nargs="?", const=str(DEFAULT_TIMEOUT), default=None, metavar="TIMEOUT",
                    dest="c10d_observer",
                    help="fail a test whose ranks hang in a collective for TIMEOUT (90, 90s, 5m; default %g s), "
                         "with the verdict that names the rank that never arrived" % DEFAULT_TIMEOUT)


def pytest_configure(config):
    config.addinivalue_line("markers", "c10d_observer(timeout=%g): fail this test if its ranks hang in a "
                                       "collective for timeout seconds, with the verdict" % DEFAULT_TIMEOUT)
    value = config.getoption("c10d_observer", None)
    if value is not None:
        _config.parse_duration(value, "--c10d-observer")  # a bad value fails the run at once, naming it


def _timeout(item):
    mark = item.get_closest_marker("c10d_observer")
    if mark is not None:
        value = mark.kwargs.get("timeout", mark.args[0] if mark.args else DEFAULT_TIMEOUT)
        return _config.parse_duration(value, "@pytest.mark.c10d_observer(timeout=...)")
    value = item.config.getoption("c10d_observer", None)
    return None if value is None else _config.parse_duration(value, "--c10d-observer")


class _Watch(object):
    """The test's dump_dir, watched for a verdict with a stuck call; ends the job's ranks when one comes."""

    def __init__(self, dump_dir, period):
        self.dump_dir = dump_dir
        self.period = period
        self.verdict = None
        self.ended = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="c10d_observer-pytest", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self):
        from .dumpdir import VERDICT_JSON, DumpDir
        dd = DumpDir(self.dump_dir)
        while not self._stop.wait(self.period):
            if not dd.exists(VERDICT_JSON):
                continue
            try:
                v = _autostart_load(self.dump_dir)
            except Exception:
                continue
            if v.exit_code == 1 and v.level in (None, Level.HARD):  # stuck past the hard deadline
                self.verdict = v
                self._end_ranks(v)
                return

    def _end_ranks(self, v):
        host = socket.gethostname()
        pids = []
        for info in (v.hosts or {}).values():
            pid = info.pid if info is not None else None
            if pid and pid != os.getpid() and (info.host in (None, host)):
                pids.append(pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + 3.0
            while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(0.05)
        self.ended = pids


def _autostart_load(dump_dir):
    from .on_hang import load_verdict
    return load_verdict(dump_dir)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    timeout = _timeout(item)
    if timeout is None:
        yield
        return
    if not _autostart.pth_installed():
        if not getattr(item.config, "_c10d_observer_said", False):
            item.config._c10d_observer_said = True
            item.warn(pytest.PytestWarning(
                "c10d-observer: c10d_observer.pth is not installed (a source checkout or an editable install): "
                "the ranks tests start cannot be observed; install the package from its wheel"))
        yield
        return
    dump = tempfile.mkdtemp(prefix="c10d-observer-")
    saved = {k: os.environ.get(k) for k in _KEYS}
    os.environ.update({_autostart.ENV: "1", _config.ENV_TIMEOUT: repr(timeout), _config.ENV_DIR: dump,
                       _config.ENV_POLL_INTERVAL: repr(min(1.0, timeout / 10.0)), _config.ENV_ON_TIMEOUT: "dump",
                       "C10D_OBSERVER_QUIET": "1"})
    watch = _Watch(dump, min(0.5, timeout / 10.0))
    watch.start()
    try:
        yield
    finally:
        watch.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        setattr(item, _STASH, watch)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    watch = getattr(item, _STASH, None)
    if call.when != "call" or watch is None:
        return
    rep = outcome.get_result()
    v = watch.verdict
    if v is not None:
        if rep.passed:
            rep.outcome = "failed"
        head = "%s; ranks ended: %s; files: %s" % (v.summary, ", ".join(str(p) for p in watch.ended) or "none",
                                                  watch.dump_dir)
        rep.longrepr = "%s\n\n%s\n\n(the test's own failure, if any: %s)" % (
            head, v.text, _short(rep.longrepr)) if rep.longrepr is not None else "%s\n\n%s" % (head, v.text)
    else:
        shutil.rmtree(watch.dump_dir, ignore_errors=True)  # nothing hung: leave nothing behind


def _short(longrepr):
    text = str(longrepr)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else text[:300]
