"""``enable(on_hang=fn)``: call the user's function in the rank with the verdict, on a helper thread.

The watchdog decides and merges (it has no torch and never runs user code); this thread only looks at
two files every poll: ``verdict.json`` in dump_dir (a merged verdict, newer than enable()) and this
process's own report (its watchdog found one of its calls overdue).  A new verdict with stuck calls is
handed to ``fn`` at once; where the rank has a report but no verdict comes within the gather window
(another node's merge, a merge that failed), ``fn`` gets the verdict made from what dump_dir holds then,
its own report included.  Each set of stuck calls is handed over once.  ``fn`` runs on this thread, never
in a signal handler; what it raises is logged, never raised into training, and a slow ``fn`` delays only
the next call of ``fn``.
"""
import logging
import os
import sys
import threading
import time
import traceback

from . import dumpdir as _dumpdir
from . import report as _report
from . import verdict as _verdict

log = logging.getLogger("c10d_observer")


def load_verdict(dump_dir):
    """The verdict for ``dump_dir`` as ``report DIR --json`` gives it, as a Verdict (verdict/types.py)."""
    from .config import DEFAULT_DIR
    if not isinstance(dump_dir, (str, bytes, os.PathLike)):
        raise TypeError("dump_dir must be a path (str or os.PathLike), got %s" % type(dump_dir).__name__)
    v, problems, read = _verdict.load(os.fspath(dump_dir), DEFAULT_DIR)
    return v.with_extra(unreadable=list(problems), dump_dir=read)


def check_callback(fn):
    if fn is not None and not callable(fn):
        raise TypeError("on_hang must be a callable taking one argument (a c10d_observer.Verdict) or None, "
                        "got %r" % (fn,))
    return fn


class HangCallback(object):
    """The helper thread behind ``on_hang``: ``check()`` is one look; ``start``/``stop`` drive it."""

    def __init__(self, fn, dump_dir, period, wait_s, pid=None, clock=time.monotonic):
        self.fn = fn
        self.dump_dir = dump_dir
        self.period = period
        self.wait_s = wait_s  # how long a rank with a report waits for the merged verdict
        self.pid = os.getpid() if pid is None else pid
        self.clock = clock
        self.started_wall = time.time()
        self.verdict_seen = self._verdict_key()
        self.report_key = None  # this process's report as last seen (it is rewritten as calls go on)
        self.report_due = None  # when to make the verdict from dump_dir if none was merged by then
        self.delivered = set()  # the stuck calls already handed to fn, as frozensets of (stream, seq)
        self.calls = 0
        self._stop = threading.Event()
        self._thread = None

    def _verdict_key(self):
        st = _dumpdir.DumpDir(self.dump_dir).stat(_dumpdir.VERDICT_JSON)
        return (st.st_mtime_ns, st.st_size) if st is not None else None

    def _own_report(self):
        keys = []
        for path in _dumpdir.DumpDir(self.dump_dir).glob(_dumpdir.REPORT % ("*", self.pid)):
            try:
                st = os.stat(path)
                keys.append((st.st_mtime_ns, st.st_size))
            except OSError:
                pass
        return max(keys) if keys else None

    def check(self):
        """One look at dump_dir; calls fn when a new set of stuck calls is known.  Returns the Verdict handed
        to fn, or None."""
        key = self._verdict_key()
        fresh = key is not None and key != self.verdict_seen and key[0] >= int(self.started_wall * 1e9)
        if key is not None:
            self.verdict_seen = key
        if not fresh:  # no new verdict: has this rank's own report changed, and no verdict come since?
            report = self._own_report()
            if report is not None and report != self.report_key:
                self.report_key = report
                self.report_due = self.clock() + self.wait_s
            if self.report_due is None or self.clock() < self.report_due:
                return None
        self.report_due = None  # looked at once per change of the report, not every poll
        try:
            v = load_verdict(self.dump_dir)
        except (_report.ReportError, OSError) as e:
            log.debug("c10d_observer: on_hang: no verdict yet: %s", e)
            return None
        stuck = frozenset((h.stream, h.seq) for h in v.hangs
                          if (h.outcome.state if h.outcome else None) != _verdict.OutcomeState.RESOLVED)
        key = (stuck, v.level or _verdict.Level.HARD)  # a soft verdict, then the hard one on the same calls
        if not stuck or key in self.delivered:
            return None
        self.delivered.add(key)
        self.calls += 1
        try:
            self.fn(v)
        except Exception:  # the user's code: never into training, never the end of this thread
            # on stderr as well as the logger: the library's logger has only a NullHandler unless the job
            # configured logging, and a callback failing in silence is the worst outcome
            msg = "c10d_observer: the on_hang callback %r raised (the job goes on):\n%s" % (
                self.fn, traceback.format_exc())
            log.debug(msg)
            try:
                sys.stderr.write(msg)
                sys.stderr.flush()
            except Exception:
                pass
        return v

    def start(self):
        self._thread = threading.Thread(target=self._run, name="c10d_observer-on-hang", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.check()
            except Exception:
                log.debug("c10d_observer: on_hang check failed", exc_info=True)

    def stop(self):
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
