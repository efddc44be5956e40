"""on_timeout="raise": the hard verdict as an exception in the ranks that wait (rank side).

At a hard verdict the watchdog asks each rank with a call past the hard deadline (never the culprit, never
under a held verdict: the ranks the signal goes to) to raise; the rank's helper thread (requests.RaiseRequest,
read every poll or half poll) then

1. has ``CollectiveHang`` raised in the rank's main thread once it is next in Python: by the observer's
   signal handler, after the job's own, where the job's signal goes with the request; else scheduled by the
   helper thread (``PyThreadState_SetAsyncExc``, as ``KeyboardInterrupt`` reaches it); so that the job's own
   ``except``, ``finally``, handlers and checkpoints run with the verdict in hand;
2. then (never before: the wait an abort ends can return before the abort does) ends the stuck calls of the
   hang's groups where torch can: an NCCL group's communicators are aborted (``ProcessGroup.abort()``, else
   the NCCL backend's ``abort()``; torch marks that API experimental and NCCL-only in
   ``_abort_process_group``'s docstring), after which the waiting synchronisation returns and the group can
   no longer be used.  gloo offers nothing that ends a waiting call (``ProcessGroupGloo``'s ``abort()``
   returns and leaves the wait, torch 2.13), so a gloo rank raises once its call returns or raises (torch's
   own timeout, a peer that ends); the rank says so in one line, pointing to on_timeout="abort", which ends
   the job at the hard verdict.

The NCCL half ran on an H200 at world size 1 (tests/gpu/, 2026-11-27: the abort of a real ProcessGroupNCCL
took 7.7 s behind a 10 s sleep kernel; the exception came as the synchronisation returned); a peer's wait
inside NCCL's kernel, which the abort is for, needs two GPUs and has not run.
"""
import ctypes
import threading
import time

from . import config as _config
from . import requests as _requests

__all__ = ["CollectiveHang", "RankRaise"]

HANDLER_WAIT_S = 5.0  # the signal handler waits at most this for the helper's abort before raising without it


class CollectiveHang(RuntimeError):
    """Raised in a rank's main thread under on_timeout="raise" at a hard verdict on a call of its own.

    A ``RuntimeError``, like torch's own collective errors, so that a job's ``except RuntimeError`` around its
    step catches it too.  ``verdict``: the verdict's summary line; ``culprit_ranks``; ``calls``: this rank's
    stuck calls as the console names them; ``groups``: their groups; ``ended``: the groups whose stuck calls
    the observer ended (NCCL), and ``verdict_path``: the verdict's text file (``report DIR`` says more)."""

    verdict = None
    culprit_ranks = ()
    calls = ()
    groups = ()
    ended = ()
    verdict_path = None

    def __init__(self, *args):
        if not args:  # raised by the observer (an exception type, called without arguments)
            args = (self._message(),)
        RuntimeError.__init__(self, *args)

    @classmethod
    def _message(cls):
        culprits = ", ".join(map(str, cls.culprit_ranks)) if cls.culprit_ranks else "none named"
        return "c10d_observer: a collective hang was found (on_timeout=raise): %s; this rank waited in %s; " \
               "culprit ranks: %s; the verdict: %s" % (cls.verdict or "see the verdict",
                                                      "; ".join(cls.calls) or "a call past the hard deadline",
                                                      culprits, cls.verdict_path or "report DUMP_DIR")


def _async_raise(thread_id, exc_type):
    """Have ``exc_type`` raised in thread ``thread_id`` once it is next in Python; True where it was set."""
    set_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
    set_exc.restype = ctypes.c_int
    n = set_exc(thread_id, exc_type)
    if n > 1:  # never expected: undo rather than raise in threads that are not the one asked for
        set_exc(thread_id, None)
        return False
    return n == 1


def end_waits(group_ids, groups=None):
    """End the stuck calls of the groups named ``group_ids`` where torch can: ``[(group id, backend, how)]``,
    ``how`` what was done or why nothing was.  ``groups``: (id, backend, ProcessGroup) of this rank's groups
    (default: every group torch has registered in this process)."""
    if groups is None:
        from . import compat
        groups = []
        for pg in compat.all_groups():
            try:
                groups.append((str(compat.describe_group(pg).get("group")), compat.backend_name(pg), pg))
            except Exception:
                continue
    out = []
    wanted = [str(g) for g in group_ids]
    for gid, backend, pg in groups:
        if gid not in wanted:
            continue
        if "nccl" not in str(backend):
            out.append((gid, backend, "not ended: torch cannot end a waiting %s call from outside it" % backend))
            continue
        out.append((gid, backend, _abort_nccl(pg)))
    return out


def _abort_nccl(pg):
    """Abort an NCCL group's communicators: ProcessGroup.abort() (torch 2.6+), else its NCCL backend's
    abort().  What was done, in words."""
    try:
        if callable(getattr(pg, "abort", None)):
            pg.abort()
            return "aborted (ProcessGroup.abort): its waiting calls end (after the GPU work queued ahead of them)"
        import torch
        backend = pg._get_backend(torch.device("cuda"))
        backend.abort()
        return "aborted (the NCCL backend's abort): its waiting calls end (after the GPU work queued ahead of them)"
    except Exception as e:
        return "not ended: abort raised %r" % (e,)


class RankRaise(object):
    """The rank's half of RaiseRequest: once per gather (hang), CollectiveHang in the main thread, the waits
    torch can end ended, one line said.

    Two ways in, chosen per request.  Where the watchdog sent the job's signal with it (``signal_sent``) and the
    observer's Python handler is the one installed, the handler raises it (``from_signal``), after the job's
    own handler: an exception scheduled from another thread would be raised at the first bytecode the main
    thread runs, which is the signal handler's own first line, and the job's handler would never run.  Else
    the helper thread schedules it (``PyThreadState_SetAsyncExc``).  Either way the helper thread (``check``,
    every poll or half poll) ends the waits: the main thread is in C until they end."""

    def __init__(self, dd, pid, rank, since, say, main_thread_id=None, end=end_waits, handler=None):
        self.dd, self.pid, self.rank, self.since, self.say = dd, pid, rank, since, say
        self.main_thread_id = main_thread_id if main_thread_id is not None else threading.main_thread().ident
        self.end = end
        self.handler = handler  # signals.NotifyHandler, or None
        self.raised = set()  # gather ids raised for
        self.ended = {}  # gather id -> [(group, backend, how)]: the waits ended for it
        self._lock = threading.Lock()  # the helper's check and the signal handler's from_signal

    def _fresh(self, req):
        return req is not None and req.written_since(self.since)

    def _by_signal(self, req):
        h = self.handler
        return bool(req.signal_sent) and h is not None and h.installed and not h.via_faulthandler \
            and h.replaced_by() is None

    def check(self):
        """The helper thread's half."""
        req = _requests.RaiseRequest.read(self.dd, self.pid)
        if not self._fresh(req):
            return  # none, or an earlier process's with this pid
        with self._lock:
            if req.gather_id in self.ended:
                return
            by_signal = self._by_signal(req)
            exc = None
            if not by_signal:
                if _requests.RaiseRequest.take(self.dd, self.pid) is None:
                    return  # taken meanwhile
                if req.gather_id in self.raised:
                    return
                self.raised.add(req.gather_id)
                # scheduled before the abort: the wait an abort ends can return before the abort does, and
                # the job would run on past it with a broken group and no verdict in hand
                exc = self._exception(req)
                scheduled = _async_raise(self.main_thread_id, exc)
            ended, took = self._end(req)
            if exc is not None:
                exc.ended = _aborted(ended)  # read as e.ended: the class's, whenever the job reads it
        groups = self._groups_text(ended, took)
        if by_signal:
            self.say("rank %s: on_timeout=raise: CollectiveHang is raised by the observer's %s handler in the "
                     "main thread, after the job's own handler, once it is back in Python: %s; %s"
                     % (self.rank, _config.signal_name(self.handler.signum), self._when(ended), groups))
        elif not scheduled:
            self.say("rank %s: on_timeout=raise: could not schedule CollectiveHang in the main thread; %s"
                     % (self.rank, groups))
        else:
            self.say("rank %s: on_timeout=raise: CollectiveHang scheduled in the main thread, raised when it is "
                     "next in Python: %s; %s" % (self.rank, self._when(ended), groups))

    def from_signal(self):
        """The signal handler's half, in the main thread after the job's own handler: raise the verdict asked
        for with this signal, if any (the waits are ended first where the helper has not yet).  Nothing else
        ever leaves it: a fault of the observer's here is said in one line and the job goes on."""
        try:
            exc, said = self._from_signal()
        except Exception as e:
            self.say("rank %s: on_timeout=raise: the signal's handler could not raise the verdict (%r); the job "
                     "goes on" % (self.rank, e))
            return
        if said:
            self.say(said)
        if exc is not None:
            raise exc

    def _from_signal(self):
        req = _requests.RaiseRequest.read(self.dd, self.pid)
        if not self._fresh(req) or not req.signal_sent:
            return None, None
        # the helper may hold the lock in a long abort: never wait on it for long in the main thread
        locked = self._lock.acquire(timeout=HANDLER_WAIT_S)
        try:
            if _requests.RaiseRequest.take(self.dd, self.pid) is None or req.gather_id in self.raised:
                return None, None
            self.raised.add(req.gather_id)
            said = None
            if req.gather_id not in self.ended and locked:  # before the helper thread saw the request
                ended, took = self._end(req)
                said = ("rank %s: on_timeout=raise: CollectiveHang raised by the observer's %s handler in the main "
                        "thread, after the job's own handler; %s" % (
                            self.rank, _config.signal_name(self.handler.signum), self._groups_text(ended, took)))
            exc = self._exception(req)
            exc.ended = _aborted(self.ended.get(req.gather_id, ()))
            return exc, said
        finally:
            if locked:
                self._lock.release()

    def _end(self, req):
        t0 = time.monotonic()
        ended = self.ended[req.gather_id] = list(self.end(req.groups or ()))
        return ended, time.monotonic() - t0

    @staticmethod
    def _exception(req):
        return type("CollectiveHang", (CollectiveHang,), {
            "__module__": CollectiveHang.__module__, "verdict": req.verdict,
            "culprit_ranks": tuple(req.culprit_ranks or ()), "calls": tuple(req.calls or ()),
            "groups": tuple(req.groups or ()), "verdict_path": req.verdict_path, "ended": ()})

    @staticmethod
    def _groups_text(ended, took):
        text = "; ".join("group %s (%s): %s" % e for e in ended) or "no group of this rank's to end"
        if _aborted(ended) and took >= 0.1:
            text += " (the abort took %.1f s)" % took
        return text

    @staticmethod
    def _when(ended):
        if ended and all(how.startswith("aborted") for _, _, how in ended):
            return "as the aborted calls end"
        return "once the call returns or raises (torch's own timeout, or a peer that ends); on_timeout=\"abort\" " \
               "ends the job at the hard verdict instead"


def _aborted(ended):
    return tuple(g for g, _, how in ended if how.startswith("aborted"))

