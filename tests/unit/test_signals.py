"""The observer's two signals (signals.py), with real signals sent to this process: the notification
(SIGUSR2 here, so nothing else is disturbed), which only passes the signal on to the job's own handler,
and the stack dump on a real-time signal of its own; and the helper's dump in faulthandler's format."""
import os
import signal
import subprocess
import sys
import threading

import pytest

from c10d_observer import stackfile
from c10d_observer import dumpdir
from c10d_observer.signals import DumpSignal, NotifyHandler, describe_handler, dump_threads, free_realtime_signal

SIG = signal.SIGUSR2
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def restore():
    saved = signal.getsignal(SIG)
    yield
    signal.signal(SIG, saved)


def _deliver(sig=SIG):
    """Send the signal to this process.  A C-level dump is written inside the handler, before kill()
    returns; Python-level handlers run at the main thread's next bytecode, before this function returns."""
    os.kill(os.getpid(), sig)


def test_the_notification_without_a_previous_handler_does_nothing_and_does_not_kill(restore):
    signal.signal(SIG, signal.SIG_DFL)  # the default action would end the process
    h = NotifyHandler(SIG)
    h.install()
    try:
        _deliver()
        assert h.received == 1
    finally:
        h.uninstall()
    assert signal.getsignal(SIG) == signal.SIG_DFL


def test_the_handler_the_job_had_before_runs_on_the_notification_and_is_restored(restore):
    calls = []

    def before(signum, frame):
        calls.append((signum, frame is not None))

    signal.signal(SIG, before)
    h = NotifyHandler(SIG)
    h.install()
    assert h.chained
    try:
        _deliver()
        assert calls == [(SIG, True)]
    finally:
        h.uninstall()
    assert signal.getsignal(SIG) is before


def test_an_ignored_signal_stays_ignored(restore):
    signal.signal(SIG, signal.SIG_IGN)
    h = NotifyHandler(SIG)
    h.install()
    try:
        _deliver()
        assert not h.chained and h.received == 1
    finally:
        h.uninstall()
    assert signal.getsignal(SIG) == signal.SIG_IGN


LATER = r"""
import os, signal, sys
from c10d_observer.signals import NotifyHandler
signal.signal(signal.SIGUSR2, signal.SIG_DFL)
h = NotifyHandler(signal.SIGUSR2)
h.install()
signal.signal(signal.SIGUSR2, lambda s, f: print("later handler called"))  # set while enabled
h.uninstall()
os.kill(os.getpid(), signal.SIGUSR2)  # with SIG_DFL back in force, this would end the process
print("alive")
"""


def test_a_handler_installed_after_enable_survives_disable():
    # In a subprocess: if the bug is there, the signal's default action ends the process.
    out = subprocess.run([sys.executable, "-c", LATER], stdout=subprocess.PIPE, universal_newlines=True,
                         env=dict(os.environ, PYTHONPATH=REPO), timeout=60)
    assert out.returncode == 0, "killed by signal %d" % -out.returncode
    assert out.stdout.split() == ["later", "handler", "called", "alive"]


OFF_MAIN = r"""
import os, signal, threading, time
from c10d_observer.signals import NotifyHandler
calls = []
signal.signal(signal.SIGUSR2, lambda s, f: calls.append(s))
h = NotifyHandler(signal.SIGUSR2)
t = threading.Thread(target=h.install)  # enable() called off the main thread
t.start(); t.join()
os.kill(os.getpid(), signal.SIGUSR2)
time.sleep(0.01)
print("via_faulthandler", h.via_faulthandler, "calls", len(calls), "replaced", h.replaced_by())
h.uninstall()
print("restored", signal.getsignal(signal.SIGUSR2) is not signal.SIG_DFL)
"""


def test_enabled_off_the_main_thread_the_notification_still_runs_the_jobs_handler():
    out = subprocess.run([sys.executable, "-c", OFF_MAIN], stdout=subprocess.PIPE, universal_newlines=True,
                         env=dict(os.environ, PYTHONPATH=REPO), timeout=60)
    assert out.returncode == 0, out.stdout
    assert out.stdout.split() == ["via_faulthandler", "True", "calls", "1", "replaced", "None", "restored", "True"]


def test_a_handler_installed_after_ours_is_seen_and_named(restore):
    signal.signal(SIG, signal.SIG_DFL)
    h = NotifyHandler(SIG)
    h.install()
    try:
        assert h.replaced_by() is None

        def _slurm_requeue(signum, frame):
            pass

        signal.signal(SIG, _slurm_requeue)  # as PyTorch Lightning does for SLURM requeue
        by = h.replaced_by()
        assert "_slurm_requeue" in by and "test_signals.py" in by
        signal.signal(SIG, signal.SIG_DFL)
        assert "SIG_DFL" in h.replaced_by()
        signal.signal(SIG, signal.SIG_IGN)
        assert "SIG_IGN" in h.replaced_by()
    finally:
        h.uninstall()
    assert describe_handler(None) == "a handler installed from C"


def test_the_dump_signal_is_a_free_realtime_signal_and_dumps_every_thread(tmp_path):
    path = str(tmp_path / "stacks.txt")
    d = DumpSignal(path, avoid=(SIG,))
    assert d.signum is not None and signal.SIGRTMIN < d.signum < signal.SIGRTMAX
    assert signal.getsignal(d.signum) == signal.SIG_DFL
    d.install()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="a-job-thread")
    t.start()
    try:
        _deliver(d.signum)
        with open(path) as f:
            text = f.read()
        assert "test_the_dump_signal_is_a_free_realtime_signal_and_dumps_every_thread" in text
        assert text.count("Thread 0x") + text.count("Current thread 0x") >= 2
    finally:
        stop.set()
        t.join()
        d.uninstall()
    assert free_realtime_signal(avoid=(d.signum,)) != d.signum


def test_an_empty_dump_file_is_removed_on_uninstall(tmp_path):
    path = str(tmp_path / "stacks.txt")
    d = DumpSignal(path)
    d.install()
    d.note("# c10d_observer: the observer's own threads ...\n")
    assert os.path.exists(path)
    d.uninstall()
    assert not os.path.exists(path)


def test_the_helpers_dump_is_in_faulthandlers_format_and_names_the_main_thread(tmp_path):
    path = str(tmp_path / "stacks.txt")
    dump_threads(path, "stacks of rank 0 (pid 1) at 12:00:00.000: asked")
    with open(path) as f:
        text = f.read()
    assert "=== c10d_observer: stacks of rank 0 (pid 1) at 12:00:00.000: asked ===" in text
    frames = stackfile.thread_frames(text, threading.main_thread().ident)
    assert frames and frames[0][2] == "dump_threads"
    assert any(f[2] == "test_the_helpers_dump_is_in_faulthandlers_format_and_names_the_main_thread" for f in frames)


def test_the_helpers_dump_goes_to_the_spill_directory_when_dump_dir_is_full(tmp_path, monkeypatch):
    dd = dumpdir.DumpDir(str(tmp_path / "dump"))
    os.makedirs(dd.root)
    said = []
    dd._said = said.append
    real_open = open

    def full(path, mode="r", *a, **kw):  # dump_dir on a full filesystem (the real test: integration)
        if str(path).startswith(dd.root) and "a" in mode:
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", full)
    try:
        where = dump_threads(os.path.join(dd.root, "stacks-rank0-pid1.txt"), "asked", dd)
    finally:
        monkeypatch.undo()
    try:
        assert where.startswith(dd.spill) and len(said) == 1 and "is full" in said[0]
        assert dd.path("stacks-rank0-pid1.txt") == where
    finally:
        import shutil
        shutil.rmtree(dd.spill, ignore_errors=True)
