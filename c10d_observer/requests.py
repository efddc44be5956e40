"""The request files: small messages through ``dump_dir`` between a rank, its watchdog, the relay and
``watch``, each a versioned type with both halves of its protocol here (as channel.py holds the channel's
writer and reader).  No torch.

The model is torch's elastic timer (``torch/distributed/elastic/timer/file_based_local_timer.py``): its
``FileTimerRequest`` is one small value with ``to_json``, written by one side and read by the other.

============================  =====================  ==================================================
request                       from -> to             says
============================  =====================  ==================================================
``StackRequest``              watchdog -> rank       "write your stacks" (the helper thread answers)
``ExitRequest``               watchdog -> rank       on_timeout=abort: arm, disarm, or end now
``RaiseRequest``              watchdog -> rank       on_timeout=raise: raise the verdict (raising.RankRaise)
``NotifyMark``                watchdog -> rank       "the signal on its way is mine"
``HandlerReplaced``           rank -> watchdog       the observer's handler was replaced: by what
``WatchRequest``              ``watch`` -> watchdog  a live view is open until ``until``
``GatherRequest``             watchdog, relay        the gather now on (every watchdog answers it)
============================  =====================  ==================================================

Every file is written whole (DumpDir.write_json: a temporary name, renamed) and carries
``{"format": "c10d_observer.<kind>", "version": 1}``; a reader takes a file without them (an earlier
release's, a test's) as version 1, keeps keys it does not know (``extra``), and takes a file of another
kind as no request.
"""
import atexit
import enum
import os
import sys

from . import dumpdir as _dumpdir
from .records import Record
from .config import HANG_EXIT_CODE

VERSION = 1

__all__ = ["StackRequest", "ExitRequest", "ExitStage", "RankExit", "RaiseRequest", "NotifyMark", "HandlerReplaced",
           "WatchRequest", "GatherRequest"]


class _Request(Record):
    """A request's fields (``FIELDS``: name -> default), immutable (records.Record); ``extra``: keys this
    release does not know, kept as they were."""

    KIND = None
    FIELDS = {}

    def __init__(self, extra=None, **fields):
        unknown = set(fields) - set(self.FIELDS)
        if unknown:
            raise TypeError("%s has no field %s (it has %s)" % (type(self).__name__, ", ".join(sorted(unknown)),
                                                                 ", ".join(self.FIELDS)))
        for name, default in self.FIELDS.items():
            object.__setattr__(self, name, fields.get(name, default))
        object.__setattr__(self, "extra", dict(extra or {}))

    def written_since(self, since):
        """The rule a rank takes a request of its watchdog by (ExitRequest, RaiseRequest): written
        (``written_at``, a number) at or after ``since``, its process's start; a file another process of the
        same pid left is history."""
        t = _number(getattr(self, "written_at", None))
        return t is not None and t >= since

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.FIELDS
                                                           if getattr(self, k) is not None))

    def _given(self):
        return {k: getattr(self, k) for k in self.FIELDS}

    def to_json(self):
        doc = dict(self.extra)
        doc.update({k: _plain(getattr(self, k)) for k in self.FIELDS if getattr(self, k) is not None})
        doc["format"], doc["version"] = self.KIND, VERSION
        return doc

    @classmethod
    def from_json(cls, doc):
        """The request in ``doc``, or None where it is not one of this kind."""
        if not isinstance(doc, dict) or doc.get("format", cls.KIND) != cls.KIND:
            return None
        known = {k: doc[k] for k in cls.FIELDS if k in doc}
        extra = {k: v for k, v in doc.items() if k not in cls.FIELDS and k not in ("format", "version")}
        return cls(extra=extra, **known)


def _plain(v):
    return v.value if isinstance(v, enum.Enum) else v


def _number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# -- stacks ---------------------------------------------------------------------------------------------
class StackRequest(_Request):
    """"Write your stacks": the rank's helper thread answers with dump_threads (the GIL held), under
    ``header``.  Taken away whole by the rank; withdrawn by the watchdog when it dumps them otherwise."""

    KIND = "c10d_observer.stack_request"
    FIELDS = {"header": None}

    @staticmethod
    def name(pid):
        return _dumpdir.stack_request_name(pid)

    @classmethod
    def ask(cls, dd, pid, header):
        dd.write_json(cls.name(pid), cls(header=header).to_json())

    @classmethod
    def withdraw(cls, dd, pid):
        dd.remove(cls.name(pid))

    @classmethod
    def take(cls, dd, pid):
        """The rank's half: the request, taken away, or None."""
        doc = dd.take(cls.name(pid))
        return None if doc is None else (cls.from_json(doc) or cls())


# -- the rank's end under on_timeout=abort --------------------------------------------------------------
class ExitStage(str, enum.Enum):
    ARM = "arm"  # whatever ends the rank from now on ends it with the code
    DISARM = "disarm"  # the verdict was held (a declared phase): the rank's end is its own again
    NOW = "now"  # end now

    def __str__(self):
        return self.value


class ExitRequest(_Request):
    """on_timeout="abort": the watchdog asks the rank to end itself with ``code`` (HANG_EXIT_CODE), so that
    a launcher tells a hang from a crash by the code.  In the file as it always was: ``now`` (bool),
    ``disarm`` (bool), ``culprit``, ``code``, ``written_at``; ``stage`` reads them."""

    KIND = "c10d_observer.exit_request"
    FIELDS = {"code": HANG_EXIT_CODE, "now": False, "disarm": None, "culprit": None, "written_at": None}

    @property
    def stage(self):
        return ExitStage.DISARM if self.disarm else ExitStage.NOW if self.now else ExitStage.ARM

    @staticmethod
    def name(pid):
        return _dumpdir.exit_request_name(pid)

    @classmethod
    def send(cls, dd, pid, stage, wall, culprit=False, code=HANG_EXIT_CODE):
        """The watchdog's half (one writer for the three stages).  Raises OSError where it cannot."""
        stage = ExitStage(stage)
        req = cls(code=code, now=stage is ExitStage.NOW, written_at=wall,
                  **({"disarm": True} if stage is ExitStage.DISARM else {"culprit": bool(culprit)}))
        dd.write_json(cls.name(pid), req.to_json())


class RankExit(object):
    """The rank's half of ExitRequest, run by its helper thread every poll or half poll.

    *armed* (at the hard detection): from now on whatever ends this process ends it with the code (under gloo
    the culprit's end makes the collective raise in the ranks that wait, before their own turn): the job's
    exit handlers run, then ``os._exit``.  *now*: the main thread waits in a collective with the GIL
    released, and this thread ends the process; where a thread holds the GIL this never runs, and the
    watchdog's SIGTERM follows.  ``os._exit``: the stuck call would never let atexit handlers or finally
    blocks finish.  ``say``: the one line; ``also_unregister``: atexit functions that must not run at an
    armed end (``disable``: the watchdog says how the rank ended, not "disabled")."""

    def __init__(self, dd, pid, rank, since, say, also_unregister=(), exit_=os._exit):
        self.dd, self.pid, self.rank, self.since = dd, pid, rank, since
        self.say, self.also_unregister, self._exit = say, tuple(also_unregister), exit_
        self.armed = False

    def check(self):
        doc = self.dd.take(ExitRequest.name(self.pid))  # whole: a request written meanwhile is never lost
        req = ExitRequest.from_json(doc) if doc is not None else None
        if req is None:
            return
        if not req.written_since(self.since):
            return  # an earlier process's with this pid
        code = req.code if isinstance(req.code, int) else HANG_EXIT_CODE
        stage = req.stage
        if stage is ExitStage.DISARM:
            if self.armed:
                self.armed = False
                atexit.unregister(self._at_exit)
        elif stage is ExitStage.ARM:
            if not self.armed:  # kept past disable(): the rank is being ended
                self.armed = True
                self._code = code
                atexit.register(self._at_exit)
        else:
            self.end(code, "a collective hang was found%s" % (" and this rank is its culprit" if req.culprit else ""))

    def last_look(self):
        """At the process's end (an atexit function from enable() under on_timeout="abort", run before
        disable()): the request a poll of the helper thread would have read next.  Under gloo the culprit's end
        makes this rank's collective raise, possibly before its helper read the arm its watchdog wrote when it
        answered the gather (before the merge, so before any culprit was ended): the end is the hang's all
        the same."""
        self.check()
        if self.armed:
            self._at_exit()

    def _at_exit(self):
        try:  # the job's own exit handlers first (they ran already where the process is ending normally)
            atexit.unregister(self._at_exit)
            atexit.unregister(self.last_look)
            for fn in self.also_unregister:
                atexit.unregister(fn)
            atexit._run_exitfuncs()
        finally:
            self.end(self._code, "a collective hang was found and this rank was being ended for it")

    def end(self, code, why):
        self.say("rank %s: %s; ending this rank with exit code %d (on_timeout=abort); the verdict: %s"
                 % (self.rank, why, code, self.dd.path(_dumpdir.VERDICT_TEXT)))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        self._exit(code)


# -- the rank's exception under on_timeout=raise -----------------------------------------------------------
class RaiseRequest(_Request):
    """on_timeout="raise": at the hard verdict, the watchdog asks a rank with a call past the hard deadline
    to raise ``CollectiveHang`` in its main thread and to end the stuck calls of ``groups`` where torch can
    (raising.RankRaise, the rank's half, in its helper thread; once per ``gather_id``).  ``verdict``: the
    summary line; ``calls``: the rank's stuck calls as the console names them; ``signal_sent``: the job's signal
    goes to the rank with this request (written first), so the observer's handler raises it, after the job's."""

    KIND = "c10d_observer.raise_request"
    FIELDS = {"gather_id": None, "groups": None, "calls": None, "verdict": None, "culprit_ranks": None,
              "verdict_path": None, "written_at": None, "signal_sent": False}

    @staticmethod
    def name(pid):
        return _dumpdir.raise_request_name(pid)

    def send(self, dd, pid):
        """The watchdog's half.  Raises OSError where it cannot."""
        dd.write_json(self.name(pid), self.to_json())

    @classmethod
    def take(cls, dd, pid):
        """The rank's half: the request, taken away, or None."""
        doc = dd.take(cls.name(pid))
        return None if doc is None else cls.from_json(doc)

    @classmethod
    def read(cls, dd, pid):
        """The request, left in place, or None."""
        doc = dd.read_json(cls.name(pid))
        return cls.from_json(doc) if isinstance(doc, dict) else None


# -- the signal -----------------------------------------------------------------------------------------
class NotifyMark(_Request):
    """Written by the watchdog just before it sends the configured signal: the rank's handler tells the
    observer's signal from one a scheduler sent by this mark (taken away as the handler runs)."""

    KIND = "c10d_observer.notify"
    FIELDS = {"written_at": None}

    @staticmethod
    def name(pid):
        return _dumpdir.notify_name(pid)

    @classmethod
    def mark(cls, dd, pid, wall):
        dd.write_json(cls.name(pid), cls(written_at=wall).to_json())

    @classmethod
    def taken(cls, dd, pid):
        """The rank's half, in its signal handler: was there a mark (now taken away)?"""
        return dd.take(cls.name(pid)) is not None


class HandlerReplaced(_Request):
    """Written by the rank when code replaced the observer's signal handler after enable(): by what.  The
    rank also says so in the channel, which the watchdog reads before each signal; this file names it."""

    KIND = "c10d_observer.handler_replaced"
    FIELDS = {"signal": None, "replaced_by": None, "detected_at": None}

    @staticmethod
    def name(rank, pid):
        return _dumpdir.handler_name(rank, pid)

    @classmethod
    def write(cls, dd, rank, pid, signal, replaced_by, wall):
        dd.write_json(cls.name(rank, pid), cls(signal=signal, replaced_by=replaced_by, detected_at=wall).to_json())

    @classmethod
    def read(cls, dd, rank, pid):
        return cls.from_json(dd.read_json(cls.name(rank, pid)))


# -- watch ----------------------------------------------------------------------------------------------
class WatchRequest(_Request):
    """``c10d-observer watch`` is open on dump_dir until ``until`` (it rewrites the request every second):
    watchdogs write live documents, flight-recorder sources name calls in flight sooner."""

    KIND = "c10d_observer.watch_request"
    FIELDS = {"until": None, "pid": None, "written_at": None}
    FOR_S = 5.0  # the request's life past each refresh

    @classmethod
    def ask(cls, dd, now, pid=None):
        dd.write_json(_dumpdir.WATCH_REQUEST, cls(until=now + cls.FOR_S, pid=pid if pid is not None else os.getpid(),
                                                  written_at=now).to_json())

    @classmethod
    def withdraw(cls, dd, pid=None):
        """Remove the request, where it is this process's (another view may have taken over)."""
        req = cls.from_json(dd.read_json(_dumpdir.WATCH_REQUEST))
        if req is not None and req.pid == (pid if pid is not None else os.getpid()):
            dd.remove(_dumpdir.WATCH_REQUEST)

    @classmethod
    def is_open(cls, dd, wall_now):
        req = cls.from_json(dd.read_json(_dumpdir.WATCH_REQUEST))
        return req is not None and _number(req.until) is not None and req.until >= wall_now

    @staticmethod
    def present(dd):
        """A request is there (one stat: the flight-recorder source looks once a second on the rank)."""
        return dd.exists(_dumpdir.WATCH_REQUEST)


# -- the gather -----------------------------------------------------------------------------------------
class GatherRequest(_Request):
    """The gather now on: every watchdog of the job answers ``id`` with its rank's state; the watchdog that
    asked (``by_rank``) merges.  The relay brings another node's (``relayed``; dated by this node's clock,
    the origin's date in ``requested_at_origin``; ``supersedes``: this node's own request, which loses); the
    merging watchdog adds ``merged_at``."""

    KIND = "c10d_observer.gather_request"
    FIELDS = {"id": None, "job_id": None, "by_rank": None, "world_size": None, "requested_at": None,
              "level": None, "merged_at": None, "relayed": None, "supersedes": None, "requested_at_origin": None}

    @classmethod
    def read(cls, dd):
        return cls.from_json(dd.read_json(_dumpdir.GATHER))

    def write(self, dd):
        dd.write_json(_dumpdir.GATHER, self.to_json())

    @staticmethod
    def stamp(dd):
        """(mtime_ns, size) of the request file, or None: a change shows without reading it."""
        st = dd.stat(_dumpdir.GATHER)
        return None if st is None else (st.st_mtime_ns, st.st_size)

    @property
    def at(self):
        return _number(self.requested_at) or 0

    def valid(self, job_id, now=None, within=None, since=None, merged_ok=True):
        """The one rule a reader takes a gather request by (the watchdog's Gather, the relay): it names a gather
        (``id``) of job ``job_id``; asked within ``within`` seconds before ``now`` (where given: the window it
        counts in); not before ``since`` (where given: a request of an earlier run in this dump_dir is
        history); and, unless ``merged_ok``, not merged yet."""
        at = self.at
        return (bool(self.id) and self.job_id == job_id and (merged_ok or not self.merged_at)
                and (within is None or now - at < within) and (since is None or at >= since))
