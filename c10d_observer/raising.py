"""on_timeout="raise": the hard verdict as an exception in the ranks that wait (rank side).

At a hard verdict the watchdog asks each rank with a call past the hard deadline (never the culprit, never
under a held verdict: the ranks the signal goes to) to raise; the rank's helper thread (requests.RaiseRequest,
read every poll or half poll) then

1. schedules ``CollectiveHang`` in the rank's main thread (``PyThreadState_SetAsyncExc``, as
   ``KeyboardInterrupt`` reaches it): Python raises it once the main thread is next in Python, so that the
   job's own ``except``, ``finally``, handlers and checkpoints run with the verdict in hand;
2. ends the stuck calls of the hang's groups where torch can: an NCCL group's communicators are aborted
   (``ProcessGroup.abort()``, else the NCCL backend's ``abort()``; torch marks that API experimental and
   NCCL-only in ``_abort_process_group``'s docstring), after which the waiting synchronisation returns and
   the group can no longer be used.  gloo offers nothing that ends a waiting call (``ProcessGroupGloo``'s
   ``abort()`` returns and leaves the wait, torch 2.13), so a gloo rank raises once its call returns or
   raises (torch's own timeout, a peer that ends); the rank says so in one line, pointing to
   on_timeout="abort", which ends the job at the hard verdict.

The NCCL half has not run on a GPU (tests/unit/test_raising.py stands a recording object in for the NCCL
group; tests/gpu/ has the check for a lent GPU).
"""
import ctypes
import threading

from . import requests as _requests

__all__ = ["CollectiveHang", "RankRaise"]


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
            return "aborted (ProcessGroup.abort): its waiting calls end now"
        import torch
        backend = pg._get_backend(torch.device("cuda"))
        backend.abort()
        return "aborted (the NCCL backend's abort): its waiting calls end now"
    except Exception as e:
        return "not ended: abort raised %r" % (e,)


class RankRaise(object):
    """The rank's half of RaiseRequest, run by its helper thread every poll or half poll: once per gather
    (hang), schedule CollectiveHang in the main thread, end the waits torch can end, say it in one line."""

    def __init__(self, dd, pid, rank, since, say, main_thread_id=None, end=end_waits):
        self.dd, self.pid, self.rank, self.since, self.say = dd, pid, rank, since, say
        self.main_thread_id = main_thread_id if main_thread_id is not None else threading.main_thread().ident
        self.end = end
        self.raised = set()  # gather ids already raised for

    def check(self):
        req = _requests.RaiseRequest.take(self.dd, self.pid)
        if req is None or not isinstance(req.written_at, (int, float)) or req.written_at < self.since:
            return  # none, or an earlier process's with this pid
        if req.gather_id in self.raised:
            return
        self.raised.add(req.gather_id)
        ended = self.end(req.groups or ())
        exc = type("CollectiveHang", (CollectiveHang,), {
            "__module__": CollectiveHang.__module__, "verdict": req.verdict,
            "culprit_ranks": tuple(req.culprit_ranks or ()), "calls": tuple(req.calls or ()),
            "groups": tuple(req.groups or ()), "verdict_path": req.verdict_path,
            "ended": tuple(g for g, _, how in ended if how.startswith("aborted"))})
        scheduled = _async_raise(self.main_thread_id, exc)
        groups = "; ".join("group %s (%s): %s" % e for e in ended) or "no group of this rank's to end"
        if not scheduled:
            self.say("rank %s: on_timeout=raise: could not schedule CollectiveHang in the main thread; %s"
                     % (self.rank, groups))
            return
        aborted_all = bool(ended) and all(how.startswith("aborted") for _, _, how in ended)
        when = "at once" if aborted_all else \
            "once the call returns or raises (torch's own timeout, or a peer that ends); on_timeout=\"abort\" " \
            "ends the job at the hard verdict instead"
        self.say("rank %s: on_timeout=raise: CollectiveHang scheduled in the main thread, raised when it is next "
                 "in Python: %s; %s" % (self.rank, when, groups))
