"""The watchdog process and its supervisor, on the rank side: start it with a readiness handshake (its
configuration on stdin, ``READY <pid>`` back on stdout, the channel as an inherited descriptor), start it
again when it ends on its own (at most 3 times a restart window), stop it on disable().

Moved out of observer.py as it was; the observer holds one ``Supervisor`` and asks it for the pid.
"""
import logging
import os
import select
import subprocess
import sys
import threading
import time
import warnings

log = logging.getLogger("c10d_observer")

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


class StartError(Exception):
    """The watchdog could not be started or did not report ready: the observer stays off."""


class Supervisor(object):
    """One rank's watchdog process.  ``make_config(restarts)`` gives the WatchdogConfig to send; ``say``
    writes one line to the rank's stderr; ``restart_window`` is config.windows(...).restart_window."""

    def __init__(self, make_config, restart_window, say):
        self.make_config = make_config
        self.restart_window = restart_window
        self.say = say
        self.proc = None
        self.pid = None
        self._restarts = []  # when watchdogs ended on their own (monotonic s)
        self._restart_count = 0
        self.stopping = False

    def start(self, chan_fd, restarts=0):
        """Start the watchdog with a readiness handshake; the channel goes to it as an inherited descriptor."""
        wcfg = self.make_config(restarts)
        env = dict(os.environ)
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.Popen([sys.executable, "-m", "c10d_observer.watchdog"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env, close_fds=True, pass_fds=(chan_fd,))
        except OSError as e:
            raise StartError("the watchdog could not be started (%s)" % e)
        try:
            proc.stdin.write((wcfg.to_json() + "\n").encode("utf-8"))
            proc.stdin.flush()
            line = _read_line(proc.stdout.fileno(), READY_TIMEOUT)
        except OSError as e:
            line = "error: %s" % e
        if not line.startswith("READY "):
            rc = proc.poll()
            if rc is None:
                proc.kill()
                proc.wait()
            raise StartError("the watchdog subprocess did not report ready within %g s (%s; got %r); see its "
                             "messages above" % (READY_TIMEOUT, "exit code %s" % rc if rc is not None else "killed",
                                                 line))
        proc.stdout.close()
        self.proc = proc
        self.pid = proc.pid
        t = threading.Thread(target=self._watch, args=(proc, chan_fd), name="c10d_observer-watchdog-health",
                             daemon=True)
        t.start()

    def _watch(self, proc, chan_fd):
        """The watchdog ended on its own (the OOM killer, a kill -9): start another at once, said in one line;
        at most 3 times a minute (then the rank goes on unwatched, said once)."""
        rc = proc.wait()
        if self.stopping or proc is not self.proc:
            return
        try:
            proc.stdin.close()  # the lifeline of a watchdog that is gone
        except OSError:
            pass
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < self.restart_window] + [now]
        if len(self._restarts) <= 3:
            try:
                self.start(chan_fd, restarts=self._restart_count + 1)
                self._restart_count += 1
                self.say("the watchdog (pid %d) exited with code %s; started again (pid %d): collectives on this "
                         "rank are watched as before" % (proc.pid, rc, self.pid))
                return
            except Exception as e:
                why = "it could not be started again (%s)" % e
        else:
            why = "it exited %d times within %g s" % (len(self._restarts), self.restart_window)
        msg = ("c10d_observer: the watchdog (pid %d) exited with code %s and %s; collectives on this rank are no "
               "longer watched, training goes on" % (proc.pid, rc, why))
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning)

    def stop(self):
        self.stopping = True
        proc = self.proc
        if proc is None:
            return
        try:  # "stop" rather than EOF alone: forked children (DataLoader workers) share the pipe
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
        except (OSError, ValueError):
            pass
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()


def _read_line(fd, timeout):
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            break
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()
