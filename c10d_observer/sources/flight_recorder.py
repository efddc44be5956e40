"""The ``flight_recorder`` source: torch's own flight recorders, read from a helper thread (torch 2.5+).

Nothing runs on the call path.  Every ``period`` the reader takes ``pg_status`` (last enqueued and last
completed op per group, a few microseconds) of each recorder it follows and turns it into the channel's
events: a call enqueued and not yet completed is started (at the time the reader first saw it), and
completed once ``last_completed`` reaches it.  Calls that started and completed between two reads are
skipped over; the watchdog never needed them.

This is the thread and what the recorders share; each recorder has a reader of its own
(``READERS``: recorder_reader.py's ``GlooReader``, nccl_reader.py's ``NcclReader`` and ``LegacyNcclReader``).
The recorders themselves (one spec each, what an entry says) are ``recorders.py``'s; what a reader keeps per
group, ``recorder_books.py``'s.

The entries (op, sizes, dtypes, creation time) are read only when a call has been in flight for a quarter
of the timeout, and again every quarter of the timeout while it stays so: the first look names its op and
size, corrects its start time, and writes the entries of the calls in flight and their neighbours to
``fr-rank<R>-pid<P>.json`` for the report.  A call that has no entry any more is over (NCCL: only active
entries are read; gloo: a retired entry, or a number with no entry, which is not a recorded collective).

Which groups get their events from here is the plan's decision (sources.Dispatch: ``_Group.native`` names
the recorder); the others are snapshotted only, for the report.
"""
import logging
import os
import threading
import time
from time import sleep as _sleep

from .. import compat
from .. import config as _config
from .. import dumpdir as _dumpdir
from .. import requests as _requests
from .base import Source
from .nccl_reader import LegacyNcclReader, NcclReader
from .recorder_reader import GlooReader
from .recorders import gloo_recorder

log = logging.getLogger("c10d_observer")

LOOKUP_SOFT_S = 2.5  # with learned deadlines, a call is named once this long in flight (a quarter of their floor)
WATCHED_S = 0.5  # ... and this long while c10d-observer watch is open
FINAL_READS, FINAL_READ_GAP_S = 50, 0.005  # at disable(), a call still in flight is read again (uninstall)


READERS = {"gloo": GlooReader, "nccl": LegacyNcclReader, "nccl2": NcclReader}  # recorder name -> its reader


class FlightRecorderSource(Source):
    name = "flight_recorder"

    def __init__(self, tracker, period, timeout, dump_dir, recorders=None, soft=False, lookup_soft_s=LOOKUP_SOFT_S):
        self.tracker = tracker
        self.recorders = list(recorders) if recorders is not None else [gloo_recorder()]
        self.readers = [READERS[rec.name](self, rec) for rec in self.recorders]
        self.period = period
        # a call long in flight is named (op, size, start) a quarter of the timeout in, or, with learned
        # deadlines (their floor is 10 s), at LOOKUP_SOFT_S (a quarter of config.Timing's floor where a test set
        # one: ``lookup_soft_s``): a soft verdict names what it found; while a live
        # view is open, at WATCHED_S (c10d-observer watch shows each call's op)
        self.lookup_base_ns = self.lookup_after_ns = int(min(timeout / 4.0, lookup_soft_s if soft else timeout) * 1e9)
        self.dump_dir = dump_dir
        self._watched = (0, False)  # (monotonic ns of the last look for a live view's request, open?)
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()
        self.on_not_recorded = None  # callback(pg): a group the recorder does not record after all
        self.read_s = 0.0  # time spent reading entries (the GIL held), for the benchmarks
        self.reads = 0

    def reader(self, name):
        """The reader of recorder ``name`` ("gloo", "nccl", "nccl2"), or None."""
        for r in self.readers:
            if r.name == name:
                return r
        return None

    @classmethod
    def build(cls, ctx):
        """The reader of the recorders the plan follows (sources.Dispatch.recorders), or None: it hears of
        each group first (an NCCL recorder is read once this rank has a group it records), and a group its
        recorder turns out not to record goes to the next row of its cell."""
        recorders = ctx.dispatch.recorders(ctx.caps)
        if not recorders:
            return None
        cfg = ctx.cfg
        timing = getattr(cfg, "timing", _config.DEFAULT_TIMING)
        reader = cls(ctx.tracker, cfg.poll_interval / 2.0, cfg.timeout, cfg.dump_dir, recorders,
                     soft=getattr(cfg, "soft", False), lookup_soft_s=timing.learned_floor_s / 4)
        others = list(ctx.on_group)  # what a group gone back to the table's next row is announced to

        def not_recorded(pg):
            ctx.dispatch.unrecorded.add(id(pg))
            ctx.tracker.replan(pg)
            for fn in others:
                fn(pg)

        reader.on_not_recorded = not_recorded
        ctx.on_group.insert(0, reader.announce)
        return reader

    def announce(self, pg):
        """A group appeared: an NCCL recorder is read from its first group on; a legacy NCCL group is keyed
        by its backend's uid."""
        kind = compat.nccl_kind(pg)
        if kind is not None:
            self.activate(kind)
        if kind == "nccl":
            self.register_group(pg)

    def register_group(self, pg):
        """A legacy NCCL group was created or found (nccl_reader.LegacyNcclReader keys it by its uid)."""
        reader = self.reader("nccl")
        return reader.register_group(pg) if reader is not None else False

    # -- lifecycle ---------------------------------------------------------------------------------------
    def install(self):
        for reader in self.readers:
            reader.install()
        self._thread = threading.Thread(target=self._run, daemon=True, name="c10d_observer-flight-recorder")
        self._thread.start()

    def uninstall(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        # one last read, so that the watchdog's final state (disable()) has every completion.  gloo writes a
        # call's completion into the recorder on its own thread, just after wait() has returned (on 2.13, one
        # read in five right after a synchronous all_reduce still showed it in flight): a call still in flight
        # is read again for up to a quarter second before it is left so
        for i in range(FINAL_READS):
            if i:
                _sleep(FINAL_READ_GAP_S)
            try:
                self.poll_once(final=True)
            except Exception:
                log.debug("c10d_observer: the last flight-recorder read failed", exc_info=True)
                break
            if not any(r.in_flight() for r in self.readers):
                break
        for reader in self.readers:  # the whole buffer once more: the rank's end document names its last calls
            try:
                reader.last_batch()
            except Exception:
                log.debug("c10d_observer: the last batch read of the %s recorder failed", reader.name,
                          exc_info=True)

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.poll_once()
            except Exception:
                log.debug("c10d_observer: flight-recorder poll failed", exc_info=True)

    def activate(self, name):
        for rec in self.recorders:
            if rec.name == name:
                rec.active = True

    # -- one read ----------------------------------------------------------------------------------------
    def poll_once(self, final=False):
        now = time.monotonic_ns()
        self._look_for_a_view(now)
        for reader in self.readers:
            if not reader.rec.active:
                continue
            try:
                reader.poll(now, final)
            except Exception:  # one recorder failing leaves the others read
                log.debug("c10d_observer: reading the %s flight recorder failed", reader.name, exc_info=True)

    def _look_for_a_view(self, now):
        """While ``c10d-observer watch`` is open (its request in dump_dir), calls in flight are named sooner."""
        last, open_ = self._watched
        if now - last < 1e9:
            return
        try:
            open_ = _requests.WatchRequest.present(_dumpdir.DumpDir(self.dump_dir))
        except (OSError, AttributeError):
            open_ = False
        self._watched = (now, open_)
        self.lookup_after_ns = min(self.lookup_base_ns, int(WATCHED_S * 1e9)) if open_ else self.lookup_base_ns

    def entries_changed(self):
        """A reader named calls long in flight: the entries of every reader go to fr-rank<R>-pid<P>.json, for
        the report (where any reader keeps some)."""
        if any(r.keep for r in self.readers):
            self._write()

    def _write(self):
        rank = self.tracker.rank
        groups = {}
        for reader in self.readers:
            groups.update(reader.keep)
        doc = {"format": "c10d_observer.flight_recorder", "version": 1, "rank": rank, "pid": self._pid,
               "written_at": time.time(), "groups": groups}
        name = _dumpdir.fr_name(rank, self._pid)
        try:
            _dumpdir.DumpDir(self.dump_dir).write_json(name, doc)
        except OSError:
            log.debug("c10d_observer: cannot write %s in %s", name, self.dump_dir, exc_info=True)
