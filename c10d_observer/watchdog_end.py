"""The rank's end under on_timeout="abort" (the watchdog's Abort protocol decides when): torchelastic's error
file, the exit request, SIGTERM, then SIGKILL.  No torch."""
import json
import signal
import socket

from . import dumpdir as _dumpdir
from . import procs as _procs
from . import requests as _requests
from .config import HANG_EXIT_CODE
from .text import rank_list
from .watchdog_io import _Part


class Ender(_Part):
    """on_timeout="abort": the rank's torchelastic error file, then SIGTERM, then SIGKILL."""

    def __init__(self, cfg, reader, dd, kill, log, wall):
        _Part.__init__(self, cfg, reader, dd, log, wall, kill)
        self.error_written = False  # this rank's error file holds the verdict
        self.armed = False

    def error_file(self, verdict, culprit):
        """What torchrun's summary shows for this rank: the culprit's says it is the culprit; a waiting
        rank's names the culprit; both name the verdict."""
        if not self.cfg.error_file or (self.error_written and verdict is None):
            return
        write_error_file(self.cfg.error_file, verdict, self.reader.rank()[0], culprit,
                         self.dd.path(_dumpdir.VERDICT_TEXT), self.wall(),
                         old_format=str(self.cfg.torch_version or "").startswith("1.9"))
        self.error_written = True

    def arm(self, culprit):
        """At the hard detection: from now on, the rank's end (a collective that raised once the culprit
        ended, under gloo) is with HANG_EXIT_CODE; again when the verdict comes (where this rank's own
        detection came late).  Once."""
        if self.armed:
            return
        self.armed = True
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.ARM, self.wall(), culprit)
        except OSError:
            pass  # the exit request itself is written again; SIGTERM follows where it cannot be

    def disarm(self):
        """The verdict was held (a declared phase): the rank's end is its own again, until a hard one."""
        if not self.armed:
            return
        self.armed = False
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.DISARM, self.wall())
        except OSError:
            self.log("rank %s: cannot disarm the rank's exit code %d: if it ends now, it ends with it"
                     % (self.reader.rank()[0], HANG_EXIT_CODE))

    def exit_request(self, culprit):
        """Ask the rank to end itself with HANG_EXIT_CODE (its helper thread reads the file within a poll):
        a launcher then tells a hang from a crash by the code; SIGTERM follows where it cannot."""
        rank = self.reader.rank()[0]
        self.log("rank %s: on_timeout=abort: asking rank pid %d to exit with code %d (a collective hang was "
                 "found%s; the verdict is in %s)" % (rank, self.cfg.rank_pid, HANG_EXIT_CODE,
                                                     ", this rank is its culprit" if culprit else "", self.cfg.dump_dir))
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.NOW, self.wall(), culprit)
        except OSError as e:
            self.log("rank %s: cannot ask the rank to exit (%s): SIGTERM follows" % (rank, e))

    def term(self):
        self.log("rank %s: on_timeout=abort: rank pid %d did not exit within %g s (a thread holds the GIL?): "
                 "sending SIGTERM" % (self.reader.rank()[0], self.cfg.rank_pid, self.cfg.windows.abort_exit))
        self.kill(self.cfg.rank_pid, signal.SIGTERM)

    def kill_now(self):
        self.log("rank %s: rank pid %d still alive %g s after SIGTERM: sending SIGKILL"
                 % (self.reader.rank()[0], self.cfg.rank_pid, self.cfg.windows.abort_kill_after))
        self.kill(self.cfg.rank_pid, signal.SIGKILL)

    def culprits_ended(self, v):
        """The verdict's culprits on this host are gone (their pids), or it names none here."""
        host = self.cfg.host or socket.gethostname()
        for r in v.culprit_ranks or ():
            h = (v.hosts or {}).get(str(r))
            if h is not None and h.host in (None, host) and h.pid and _procs.pid_alive(h.pid):
                return False
        return True


def write_error_file(path, verdict, rank, culprit, verdict_path, wall_now, old_format=False):
    """torchelastic's error file, in the format its ``ErrorHandler`` writes, atomically (a partial file
    crashes torchrun's summary): torchrun prints its text for this rank, and names the failure with the
    smallest ``timestamp`` (whole seconds) its Root Cause.  The culprit's is dated when the stuck call
    began; the others' a second later at least.  torch 1.9 prints the dict form as a repr: the string form
    there (``old_format``)."""
    v = verdict
    summary = (v.summary if v is not None else None) or "no verdict was merged"
    if summary.startswith("c10d_observer: "):
        summary = summary[len("c10d_observer: "):]
    began = min([h.started_at for h in (v.hangs if v is not None else ()) if h.started_at] or [wall_now])
    if culprit:
        head = "c10d_observer: collective hang: rank %s (this rank) is its culprit; ended by on_timeout=abort" % rank
        stamp = int(began)
    else:
        head = "c10d_observer: collective hang: rank %s (this rank) was ended by on_timeout=abort; culprit: %s" % (
            rank, rank_list(v.culprit_ranks if v is not None else None, "unknown"))
        stamp = max(int(wall_now), int(began) + 1)
    message = "%s. %s (verdict: %s)" % (head, summary, verdict_path)
    if old_format:
        doc = {"message": "%s\n%s" % (message, _read(verdict_path)), "timestamp": stamp}
    else:
        doc = {"message": {"message": message, "extraInfo": {
            "py_callstack": "%s\n\n%s" % (message, _read(verdict_path)), "timestamp": str(stamp)}}}
    _dumpdir.write_text(path, json.dumps(doc))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
