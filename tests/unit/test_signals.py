"""The stack-dump handler, with real signals sent to this process (SIGUSR2, so nothing else is disturbed)."""
import os
import signal
import subprocess
import sys

import pytest

from c10d_observer.signals import StackDumpHandler

SIG = signal.SIGUSR2


@pytest.fixture
def handler_path(tmp_path):
    saved = signal.getsignal(SIG)
    yield str(tmp_path / "stacks.txt")
    signal.signal(SIG, saved)


def _deliver():
    """Send the signal to this process.  The C-level dump is written inside the handler, before kill()
    returns; Python-level handlers run at the main thread's next bytecode, before this function returns."""
    os.kill(os.getpid(), SIG)


def test_dump_without_a_previous_handler_does_not_kill_the_process(handler_path):
    signal.signal(SIG, signal.SIG_DFL)  # the default action would end the process
    h = StackDumpHandler(SIG, handler_path)
    h.install()
    try:
        _deliver()
        with open(handler_path) as f:
            text = f.read()
        assert "test_dump_without_a_previous_handler_does_not_kill_the_process" in text
    finally:
        h.uninstall()
    assert signal.getsignal(SIG) == signal.SIG_DFL


def test_a_handler_installed_before_is_chained_and_restored(handler_path):
    calls = []

    def before(signum, frame):
        calls.append(signum)

    signal.signal(SIG, before)
    h = StackDumpHandler(SIG, handler_path)
    h.install()
    try:
        _deliver()
        assert calls == [SIG]
        assert os.path.getsize(handler_path) > 0
    finally:
        h.uninstall()
    assert signal.getsignal(SIG) is before


LATER = r"""
import os, signal, sys
from c10d_observer.signals import StackDumpHandler
signal.signal(signal.SIGUSR2, signal.SIG_DFL)
h = StackDumpHandler(signal.SIGUSR2, sys.argv[1])
h.install()
signal.signal(signal.SIGUSR2, lambda s, f: print("later handler called"))  # set while enabled
h.uninstall()
os.kill(os.getpid(), signal.SIGUSR2)  # with SIG_DFL back in force, this would end the process
print("alive")
"""


def test_a_handler_installed_after_enable_survives_disable(tmp_path):
    # In a subprocess: if the bug is there, the signal's default action ends the process.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", LATER, str(tmp_path / "stacks.txt")], stdout=subprocess.PIPE,
                         universal_newlines=True, env=dict(os.environ, PYTHONPATH=repo), timeout=60)
    assert out.returncode == 0, "killed by signal %d" % -out.returncode
    assert out.stdout.split() == ["later", "handler", "called", "alive"]


def test_an_empty_dump_file_is_removed_on_uninstall(handler_path):
    h = StackDumpHandler(SIG, handler_path)
    h.install()
    assert os.path.exists(handler_path)
    h.uninstall()
    assert not os.path.exists(handler_path)


def test_a_handler_installed_after_ours_is_seen_and_named(handler_path):
    from c10d_observer.signals import describe_handler
    signal.signal(SIG, signal.SIG_DFL)
    h = StackDumpHandler(SIG, handler_path)
    h.install()
    try:
        assert h.replaced_by() is None

        def _slurm_requeue(signum, frame):
            pass

        signal.signal(SIG, _slurm_requeue)  # as PyTorch Lightning does for SLURM requeue
        by = h.replaced_by()
        assert "_slurm_requeue" in by and "test_signals.py" in by
        # put back the Python-level value it had before enable(): the kernel now runs the default action
        # (the process would end), not faulthandler's dump
        signal.signal(SIG, signal.SIG_DFL)
        assert "SIG_DFL" in h.replaced_by()
        signal.signal(SIG, signal.SIG_IGN)
        assert "SIG_IGN" in h.replaced_by()
    finally:
        h.uninstall()
    assert describe_handler(None) == "a handler installed from C"
