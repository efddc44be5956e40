"""What Linux's /proc says of a process the watchdog does not own: its state, how it ended (while it is a
zombie), whether it is alive.  No torch, no imports of the package."""
import os
import signal
import time


def pid_state(pid):
    """The process's state letter in /proc (R, S, D, T stopped, t traced, Z...), or None where unreadable."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def exit_status(pid, proc="/proc", wait_s=0.0, clock=time.monotonic, sleep=time.sleep):
    """How a process that ended is ending, in words ("killed by signal 6 (SIGABRT)", "exit code 1"), read from
    its /proc entry while it is a zombie not yet reaped by its parent (field 52, Linux 3.5+); None where it is
    not a zombie or the entry is gone (reaped: a launcher reaps within its monitor interval).  ``wait_s``: how
    long to wait for it to become one: a process closes its files (the watchdog's lifeline) before it is a
    zombie, and one that dumps core on SIGABRT takes a while (no event tells a non-parent: pidfd_open is not in
    Python 3.8; polled every 10 ms)."""
    end = clock() + wait_s
    while True:
        state = pid_state(pid) if proc == "/proc" else None
        if state is None or state in ("Z", "X") or clock() >= end:
            break
        sleep(0.01)
    try:
        with open("%s/%d/stat" % (proc, pid)) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        if rest[0] != "Z" or len(rest) < 50:
            return None
        status = int(rest[49])
    except (OSError, IndexError, ValueError):
        return None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return "killed by signal %d (%s)" % (sig, name)
    return "exit code %d" % os.WEXITSTATUS(status)


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
