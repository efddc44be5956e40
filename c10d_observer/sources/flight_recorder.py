"""The ``flight_recorder`` source: torch's flight recorder, read from a helper thread (torch 2.8+).

Nothing runs on the call path.  Every ``period`` the reader takes ``pg_status`` (last enqueued and last
completed op per group, a few microseconds) and turns it into the channel's events: calls are numbered by
torch's own per-group counter (the recorder's ``op_id``), a call enqueued and not yet completed is started
(at the time the reader first saw it), and completed once ``last_completed`` reaches it.  Calls that
started and completed between two reads are skipped over; the watchdog never needed them.

``last_completed`` is not a high-water mark: gloo runs a group's works on several threads, each of which
writes the number of the work it finished, so an older async work that finishes last moves it back (seen
on 2.13 several times in 300 steps of 3 async all_reduces, an all_reduce and a broadcast).  The reader
keeps the highest value it saw, and does not trust a call to be in flight on ``pg_status`` alone.

The recorder's entries (op, sizes, dtypes, creation time, retired) are costly to read (tens of ms for a
full buffer), so they are read only when a call has been in flight for a quarter of the timeout, and again
every quarter of the timeout while it stays so: a retired entry ends its call (the completion that
``last_completed`` lost); the first look names its op, corrects its start time, and writes the entries of
the calls in flight and their neighbours to ``fr-rank<R>-pid<P>.json`` for the report.  An op number with
no entry is not a recorded collective (gloo does not record p2p or ``monitored_barrier``; the patch
source covers those) and is ended.

Which groups: those whose backend the recorder is known to record (gloo, probed in compat.fr_recording);
groups of other backends are left to the patch source (sources.build).
"""
import logging
import os
import threading
import time

from .. import channel as _ch
from .. import compat
from .. import report as _report

log = logging.getLogger("c10d_observer")

NEIGHBOURS = 3  # entries kept either side of a call in flight, per group
FR_BACKENDS = frozenset(("gloo",))


class _Pg(object):
    """One recorded group: its stream, numbered ``op_id - base`` (base: its counter at enable())."""

    __slots__ = ("name", "stream", "base", "inflight", "looked", "completed")

    def __init__(self, name, stream, base):
        self.name = name
        self.stream = stream  # None when only snapshotting for reports (another source makes the events)
        self.base = base
        self.inflight = {}  # op_id -> monotonic ns when first seen in flight
        self.looked = {}  # op_id -> monotonic ns when its entry was last looked up
        self.completed = base  # the highest last_completed seen (torch's own value can go back)


class FlightRecorderSource(object):
    name = "flight_recorder"

    def __init__(self, tracker, period, timeout, dump_dir, events=True):
        self.tracker = tracker
        self.events = events
        self.period = period
        self.lookup_after_ns = int(timeout * 1e9 / 4)
        self.dump_dir = dump_dir
        self.pgs = {}  # pg_id (str) -> _Pg
        self.ignored = set()  # pg_ids of groups another source covers
        self._baseline = {}
        self._unnamed = {}  # pg_id -> when the entries were last read for it and held none (monotonic ns)
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()

    # -- lifecycle ---------------------------------------------------------------------------------------
    def install(self):
        # Everything recorded before enable() is history: count from the counters as they are now.
        self._baseline = {k: v[0] for k, v in compat.fr_status().items()}
        self._thread = threading.Thread(target=self._run, daemon=True, name="c10d_observer-flight-recorder")
        self._thread.start()

    def uninstall(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.poll_once()
            except Exception:
                log.debug("c10d_observer: flight-recorder poll failed", exc_info=True)

    # -- one read ----------------------------------------------------------------------------------------
    def poll_once(self):
        status = compat.fr_status()
        now = time.monotonic_ns()
        lookup = False
        for pg_id, (enq, comp) in status.items():
            p = self.pgs.get(pg_id)
            if p is None:
                # a new group is named from its entries; one whose entries hold nothing yet (its ops are not
                # recorded, or not yet) is looked for again at most every quarter timeout: a read of the
                # entries takes tens of ms of the rank's GIL
                lookup = lookup or (pg_id not in self.ignored and enq > self._baseline.get(pg_id, 0) and
                                    now - self._unnamed.get(pg_id, now - self.lookup_after_ns) >= self.lookup_after_ns)
                continue
            self._advance(p, enq, comp, now)
            lookup = lookup or any(now - p.looked.get(k, t) >= self.lookup_after_ns
                                   for k, t in p.inflight.items())
        if lookup:
            self._lookup(status, now)

    def _advance(self, p, enq, comp, now):
        st = p.stream
        comp = p.completed = max(p.completed, comp)
        for op_id in [k for k in p.inflight if k <= comp]:
            self._end(p, op_id)
        if st is None:  # snapshots only: the oldest call in flight is enough to date
            oldest = max(comp, p.base) + 1
            if oldest <= enq and oldest not in p.inflight:
                p.inflight.clear()
                p.looked.clear()
                p.inflight[oldest] = now
            return
        if comp - p.base > st.seq:
            st.skip_to(comp - p.base)  # started and completed between two reads: nothing to watch
        for op_id in range(st.seq + p.base + 1, enq + 1):
            st.start(_UNKNOWN, now)
            p.inflight[op_id] = now

    def _lookup(self, status, now):
        """Read the entries: name new groups, name and date calls long in flight, write them out."""
        entries = compat.fr_entries()
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        by_pg = {}
        for e in entries:
            by_pg.setdefault(str(e.get("pg_id")), []).append(e)
        for pg_id, (enq, comp) in status.items():
            if pg_id in self.pgs or pg_id in self.ignored:
                continue
            name = (by_pg[pg_id][0].get("process_group") or [None])[0] if pg_id in by_pg else None
            if name is not None and self._add_pg(pg_id, str(name)):
                self._unnamed.pop(pg_id, None)
                self._advance(self.pgs[pg_id], enq, comp, now)
            else:
                self._unnamed[pg_id] = now
        keep = {}
        for pg_id, p in self.pgs.items():
            if not p.inflight:
                continue
            by_op = {int(e.get("op_id", -1)): e for e in by_pg.get(pg_id, ()) if not e.get("is_p2p")}
            recorded_from = min(by_op) if by_op else None
            for op_id in sorted(p.inflight):
                e = by_op.get(op_id)
                if e is None and (recorded_from is None or op_id <= recorded_from):
                    continue  # not recorded yet, or before what the buffer still holds
                if e is None or e.get("retired"):
                    # retired: completed, though last_completed went back past it; no entry: not a
                    # recorded collective (p2p, monitored_barrier), which the patch source watches
                    self._end(p, op_id)
                    continue
                first = op_id not in p.looked
                p.looked[op_id] = now
                if not first or p.stream is None:
                    continue
                t0 = int(e.get("time_created_ns") or 0) - wall_minus_mono
                start = t0 if 0 < t0 <= now else p.inflight[op_id]
                p.stream.amend(op_id - p.base, _op_word(e), start)
            ops = sorted(by_op)
            near = set()
            for op_id in p.inflight:
                if op_id in by_op:
                    i = ops.index(op_id)
                    near.update(ops[max(0, i - NEIGHBOURS):i + NEIGHBOURS + 1])
            if near:
                keep[p.name] = [_entry_json(by_op[k], k in p.inflight, k - p.base)
                                               for k in sorted(near)]
        if keep:
            self._write(keep)

    @staticmethod
    def _end(p, op_id):
        del p.inflight[op_id]
        p.looked.pop(op_id, None)
        if p.stream is not None:
            p.stream.done(op_id - p.base)
        else:  # only the oldest call is followed: the next one starts after it
            p.completed = max(p.completed, op_id)

    def _add_pg(self, pg_id, name):
        if not self.events:
            self.pgs[pg_id] = _Pg(name, None, self._baseline.get(pg_id, 0))
            return True
        pg = compat.find_group(name)
        if pg is None and not name:  # a group outside torch's registry (our own probe's): no user calls
            self.ignored.add(pg_id)
            return False
        g = self.tracker.group(pg) if pg is not None else self.tracker.group_by_name(name, "gloo")
        if g.desc.get("backend") not in FR_BACKENDS:
            self.ignored.add(pg_id)
            return False
        g.native = True
        self.pgs[pg_id] = _Pg(g.desc["group"], g.coll, self._baseline.get(pg_id, 0))
        return True

    def _write(self, keep):
        rank = self.tracker.rank
        doc = {"format": "c10d_observer.flight_recorder", "version": 1, "rank": rank, "pid": self._pid,
               "written_at": time.time(), "groups": keep}
        path = os.path.join(self.dump_dir, _report.fr_name(rank, self._pid))
        try:
            _report.write_atomic(path, doc)
        except OSError:
            log.debug("c10d_observer: cannot write %s", path, exc_info=True)


_UNKNOWN = _ch.OP_CODES["unknown"]
_FIELDS = ("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
           "time_created_ns", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state",
           "retired", "timeout_ms", "is_p2p", "thread_name")


def _op_word(e):
    """The op word of a recorded call: its op and, from the entry's sizes and dtypes, its size signature."""
    op = compat.op_name(e.get("profiling_name", ""))
    word = _ch.OP_CODES.get(op, 0)
    side = compat.SIZE_TENSOR.get(op, (None,))[0]
    if side is not None:
        which = "input" if side == "in" else "output"
        sizes, dtypes = e.get(which + "_sizes") or [], e.get(which + "_dtypes") or []
        if sizes and dtypes:
            numel = 1
            for n in sizes[0]:
                numel *= int(n)
            word |= _ch.encode_sig(_ch.DTYPE_CODES.get(_ch.SCALAR_TYPES.get(dtypes[0]), 0), numel)
    return word


def _entry_json(e, in_flight, seq):
    out = {k: e.get(k) for k in _FIELDS if k in e}
    out["in_flight"] = bool(in_flight)
    out["seq"] = seq  # the observer's number of this call on its stream
    return out
