"""One reader per torch recorder, all stepped by the flight-recorder source's one thread (flight_recorder.py).

``RecorderReader`` is what every recorder shares: each read takes ``pg_status`` (last enqueued and last
completed call per group) and turns it into the channel's events; the entries are read where a call has been
in flight for a while (to name it), where a group is new (to name the group), and at the batch periods (the
exact starts, for the arrivals streams).  ``GlooReader`` adds what gloo's recorder needs: its op ids turned
into collective numbers (``recorder_books._Numbers``), anchored at enable().  The NCCL recorders' readers are
nccl_reader.py's.  A new recorder: a ``Recorder`` spec (recorders.py) and, where it needs more than this, a
reader of its own (``READERS`` in flight_recorder.py).
"""
import logging
import time
from time import perf_counter as _perf_counter  # kept apart from time, which the unit tests replace by a clock

from .. import callword as _cw
from .. import channel as _ch
from .. import compat
from .recorder_books import BUDGET, LADDER, _Batches, _Numbers, _Pg, backfill, queue_starts
from .recorders import _UNKNOWN, _by_pg, _entry_json, _group_name, _op_word, _ops_by_pg, _root_pending, _start_ns

log = logging.getLogger("c10d_observer")

NEIGHBOURS = 3  # entries kept either side of a call in flight, per group
HISTORY = 32  # a group's last calls kept while a call is long in flight (the verdict reads their order; as
# many as a document keeps of a stream, rank_docs.HISTORY: with 16, the newest calls of a rank read only
# through these entries left its document 16 calls a stream and a 3D TP skip undecided)
MAX_START = 128  # calls started at once for one group when a read finds more enqueued (a burst): the
# oldest, and the newest MAX_START


class RecorderReader(object):
    """One recorder (``rec``, a recorders.Recorder) as the source's thread reads it.  ``src``: the
    FlightRecorderSource, whose tracker, lookup delay, lock and read counters every reader shares.  Its
    groups: ``pgs`` {pg_id: _Pg}; ``ignored``: pg_ids another source covers."""

    def __init__(self, src, rec):
        self.src = src
        self.rec = rec
        self.pgs = {}
        self.ignored = set()
        self.baseline = {}  # pg_id -> pg_status's last enqueued at install
        self._unnamed = {}  # pg_id -> when the entries were last read for it and held none (monotonic ns)
        self.batches = _Batches()  # when the whole buffer is read next
        self.keep = {}  # group -> the entries last written to fr-*.json

    @property
    def name(self):
        return self.rec.name

    def in_flight(self):
        return any(p.inflight for p in self.pgs.values())

    def install(self):
        """At enable(): where each group's count stands (calls enqueued before are history)."""
        if self.rec.active:
            self.baseline.update({k: v[0] for k, v in self.rec.status().items()})

    def last_batch(self):
        """One last read of the whole buffer, every call since the last batch put on its group's arrivals
        stream: the rank's end document names its last calls.  Without it a rank that ended while others
        hung kept its calls since its last batch period unnamed (up to a minute of them), and a pair's desync
        that the pairs like it would decide (their calls at the place) was "cannot decide" (the fuzzer's
        recorder model, seed 7000945).  Once, at disable(): a read of tens of ms."""
        mine = list(self.pgs.values())
        if not self.rec.active or not self.rec.events or not any(p.arrivals is not None for p in mine):
            return
        self._queue_arrivals(_by_pg(self._read(True), self.rec))
        while any(p.pending for p in mine):
            backfill(mine)

    def _read(self, whole=False):
        """The entries (``whole``: the whole buffer), timed: a read holds the GIL all along."""
        t0 = _perf_counter()
        try:
            return self.rec.all_entries() if whole else self.rec.entries()
        finally:
            self.src.read_s += _perf_counter() - t0
            self.src.reads += 1

    # -- one read ----------------------------------------------------------------------------------------
    def poll(self, now, final=False):
        rec = self.rec
        status = rec.status()
        lookup, mixed, unsure, verify = self._walk(status, now)
        self._checks(status, now)
        batches = self.batches
        wall_now = time.time()
        mine = list(self.pgs.values())
        batch = rec.events and not final and any(p.arrivals is not None for p in mine) and (
            batches.due(wall_now) or batches.stuck(status, now, self.src.lookup_after_ns,
                                                   lambda: any(p.inflight for p in mine) or self.src.tracker.in_a_call()))
        if lookup or mixed or verify or unsure or batch:
            self._read_and_apply(status, now, wall_now, lookup, mixed, unsure, verify, batch)
        backfill(mine)

    def _checks(self, status, now):
        """What a recorder checks at each read beyond pg_status (nccl_reader: whether its groups are recorded)."""

    def _known_group(self, pg_id, enq):
        """A group the reader may follow before its entries name it (nccl_reader: keyed by its backend's uid),
        else None."""
        return None

    def _walk(self, status, now):
        """pg_status, group by group: the calls it starts and ends where it says enough; (whether a lookup is
        due, the groups followed by their active entries, the gloo groups whose op ids need the entries,
        the NCCL completions to check against them)."""
        rec = self.rec
        lookup_after = self.src.lookup_after_ns
        lookup = False
        mixed = []
        unsure = []  # (p, enq, comp): gloo groups whose op ids cannot be numbered without the entries
        verify = [] if rec.active_only else None  # (pg, item): NCCL completions to check against the active entries
        for pg_id, (enq, comp) in status.items():
            p = self.pgs.get(pg_id)
            if p is None and pg_id not in self.ignored:
                p = self._known_group(pg_id, enq)
            if p is None:
                # a new group is named from its entries; one whose entries hold nothing yet (its ops are not
                # recorded, or not yet) is looked for again at most every quarter timeout: a read of all the
                # entries takes tens of ms of the rank's GIL
                lookup = lookup or (pg_id not in self.ignored and enq > self.baseline.get(pg_id, 0) and
                                    now - self._unnamed.get(pg_id, now - lookup_after) >= lookup_after)
                continue
            if p.stream is not None and rec.active_only and p.mixed():
                mixed.append(p)
                continue
            if p.numbers is not None:
                e, c = p.numbers.seq_of(enq), p.numbers.seq_of(comp)
                if e is None or c is None:
                    unsure.append((p, enq, comp))
                    continue
                enq, comp = e - p.base, c - p.base
            self._advance(p, enq, comp, now, verify)
            lookup = lookup or any(now - p.looked.get(k, t) >= lookup_after for k, t in p.inflight.items())
        return lookup, mixed, unsure, verify

    def _read_and_apply(self, status, now, wall_now, lookup, mixed, unsure, verify, batch):
        """One read of the entries (the whole buffer for a batch), and what it decides: numbers, groups
        followed by their active entries, NCCL completions, names, exact starts."""
        rec = self.rec
        whole = batch or not rec.active_only
        t0 = self.src.read_s
        try:
            try:
                entries = self._read(whole)
            except Exception:
                if not batch or not rec.active_only:
                    raise
                # the whole buffer could not be read (a release whose dump differs): no exact starts; the
                # lookups go on with the works not completed
                log.debug("c10d_observer: reading the %s recorder's whole buffer failed", rec.name,
                          exc_info=True)
                self.batches.done(wall_now, LADDER[-1] * BUDGET)
                batch, whole = False, False
                entries = self._read()
        except Exception:
            for p, item in verify or ():  # no entries to check them against: pg_status is taken as it is
                self._verify(p, item, None, now)
            raise
        if whole:
            self.batches.done(wall_now, self.src.read_s - t0)
        every = entries
        if whole and rec.active_only:  # what a lookup reads: the works not completed
            entries = [e for e in entries if not e.get("retired") and e.get("state") != "completed"]
        by_pg = _by_pg(entries, rec)
        self._anchor(entries)
        for p, enq, comp in unsure:
            e, c = p.numbers.seq_of(enq), p.numbers.seq_of(comp)
            if e is not None and c is not None:
                self._advance(p, e - p.base, c - p.base, now, recorded=p.nums(by_pg))
        for p in mixed:
            self._advance_active(p, p.nums(by_pg), now)
        for p, item in verify or ():
            self._verify(p, item, p.nums(by_pg), now)
        if lookup or batch:
            self._lookup(status, entries, by_pg, now, lookup)
        if batch:
            self._queue_arrivals(by_pg if every is entries else _by_pg(every, rec))

    def _anchor(self, entries):
        """The entries were read (GlooReader: where its op ids stand)."""

    def _advance_active(self, p, active, now):  # groups followed by their active entries: NCCL's (nccl_reader)
        raise NotImplementedError

    def _verify(self, p, item, active, now):  # completions checked against the active entries: NCCL's
        raise NotImplementedError

    def _advance(self, p, enq, comp, now, verify=None, recorded=None):
        """``recorded``: {number: entry} just read: numbers below the first recorded one past the stream's last
        were taken by no recorded collective (monitored_barrier's) and are not started."""
        st = p.stream
        moved = comp > p.completed
        comp = p.completed = max(p.completed, comp)
        for number in [k for k in p.inflight if k <= comp]:
            if verify is None:
                self._end(p, number)
            elif number not in p.held:  # NCCL: ended once its entry says so (_poll, _verify)
                verify.append((p, number))
        if verify is not None and moved and p.held:
            verify.append((p, _HELD))  # a held call may be an entry that never completes (_verify)
        if st is None:  # snapshots only: the oldest call in flight is enough to date
            oldest = comp + 1
            if oldest <= enq and oldest not in p.inflight:
                p.inflight.clear()
                p.looked.clear()
                p.inflight[oldest] = now
            return
        if verify is not None and comp > st.seq:
            # NCCL: calls pg_status says started and completed since the last read may still run on the GPU
            # (a coalesced block): the active entries say which; the stream goes on once they are read
            verify.append((p, _Gap(enq, comp)))
            return
        self._start_through(p, enq, comp, now, recorded)

    def _start_through(self, p, enq, comp, now, recorded=None):
        """The calls up to ``enq`` start; those up to ``comp`` are over (skipped, never in flight)."""
        st = p.stream
        if comp > st.seq:
            st.skip_to(comp)  # started and completed between two reads: nothing to watch
        if recorded:
            nxt = min([k for k in recorded if k > st.seq] or [enq + 1])
            if nxt - 1 > st.seq:
                st.skip_to(min(nxt - 1, enq))
        first = st.seq + 1  # the first number not started yet
        if enq - first + 1 > MAX_START:
            # a burst: the oldest call is kept (it is the one that will be overdue first), then the newest
            # MAX_START; the ones between are counted as not tracked one by one (the channel pins the oldest)
            st.start(_UNKNOWN, now)
            p.inflight[first] = now
            st.skip_to(enq - MAX_START)
            st.untracked(enq - MAX_START - first)
            first = enq - MAX_START + 1
        for number in range(first, enq + 1):
            st.start(_UNKNOWN, now)
            p.inflight[number] = now

    def _name_groups(self, status, entries, by_pg, now):
        """The groups pg_status counts that no group of the reader's is yet: named from their entries."""
        for pg_id, (enq, comp) in status.items():
            if pg_id in self.pgs or pg_id in self.ignored:
                continue
            named_pg = by_pg.get(pg_id)
            name = (next(iter(named_pg.values())).get("process_group") or [None])[0] if named_pg else None
            if name is not None and self._add_pg(pg_id, name=str(name), enq=enq, entries=entries):
                self._unnamed.pop(pg_id, None)
                p = self.pgs[pg_id]
                if p.numbers is not None:
                    enq, comp = p.numbers.seq_of(enq), p.numbers.seq_of(comp)
                if enq is not None and comp is not None:
                    self._advance(p, enq - p.base, comp - p.base, now)
            else:
                self._unnamed[pg_id] = now

    def _lookup(self, status, entries, by_pg, now, named=True):
        """Name new groups, name and date the calls in flight, end those done, write the entries out
        (``named``: a call was long in flight; else a batch read, which writes nothing)."""
        self._name_groups(status, entries, by_pg, now)
        keep = {}
        active_only = self.rec.active_only
        flying = self.in_flight()
        for p in self.pgs.values():
            if not flying:
                break
            by_num = p.nums(by_pg)
            recorded_from = min(by_num) if by_num else None
            for number in sorted(p.inflight):
                e = by_num.get(number)
                if e is None and not active_only and (recorded_from is None or number <= recorded_from):
                    continue  # gloo: not recorded yet, or before what the buffer still holds
                if e is None or e.get("retired"):
                    # NCCL: no active entry, completed; gloo: retired (completed, though last_completed went
                    # back past it), or no entry: not a recorded collective (p2p, monitored_barrier)
                    self._end(p, number)
                    continue
                self._name(p, number, e, now)
            if not named:
                continue
            nums = sorted(by_num)
            # the calls in flight and their neighbours, and every group's last HISTORY calls: their ops and
            # sizes (a desync of calls that completed) and their order across groups (an ordering deadlock)
            near = set(nums[-HISTORY:])
            for number in p.inflight:
                if number in by_num:
                    i = nums.index(number)
                    near.update(nums[max(0, i - NEIGHBOURS):i + NEIGHBOURS + 1])
            if near:
                keep[p.name] = [_entry_json(by_num[k], k in p.inflight, k, p.group) for k in sorted(near)]
        if not named:
            return
        self.keep = keep
        self.src.entries_changed()

    # -- exact starts, from the batch reads (recorder_books: queue_starts, backfill) -------------------------
    def _queue_arrivals(self, by_pg):
        queue_starts(list(self.pgs.values()), by_pg, time.time_ns() - time.monotonic_ns())

    @staticmethod
    def _name(p, number, e, now):
        """At the first look at a call's entry: its op, size signature and creation time go to its slot (again
        at a later look where its root was not noted yet: ``rootless``)."""
        first = number not in p.looked or number in p.rootless
        p.looked[number] = now
        if first and p.stream is not None:
            wall_minus_mono = time.time_ns() - time.monotonic_ns()
            word, start = _op_word(e, p.group), _start_ns(e, wall_minus_mono, p.inflight[number])
            p.stream.amend(number, word, start)
            if _root_pending(word, p.group, start):
                p.rootless[number] = (e.get("op_id"), word, start)
            else:
                p.rootless.pop(number, None)

    @staticmethod
    def _end(p, number):
        del p.inflight[number]
        p.looked.pop(number, None)
        p.held.discard(number)
        if p.stream is not None:
            late = p.rootless.pop(number, None)
            if late is not None:  # named before its root was noted, ended before another look: noted since?
                noted = p.group.roots.get(late[0]) if p.group is not None else None
                if noted is not None and noted[0] == late[1] & _cw.OP_MASK:
                    p.stream.amend(number, late[1] | _cw.encode_root(noted[1]), late[2])
            p.stream.done(number)
        else:  # only the oldest call is followed: the next one starts after it
            p.completed = max(p.completed, number)

    def _numbers(self, pg_id, entries):
        """(gloo's _Numbers for a group, the number the observer counts it from), or (None, 0)."""
        return None, 0

    def _add_pg(self, pg_id, name=None, pg=None, enq=0, torch_seq=None, entries=None):
        rec = self.rec
        tracker = self.src.tracker
        if pg is None:
            pg = compat.find_group(name)
            if pg is None and not name:  # a group outside torch's registry (our own probe's): no user calls
                self.ignored.add(pg_id)
                return False
        g = tracker.group(pg) if pg is not None else tracker.group_by_name(name, rec.name)
        if rec.events and g.native != rec.name:  # the plan gives this group's events to another source
            self.ignored.add(pg_id)
            return False
        numbers, base = self._numbers(pg_id, entries)
        if numbers is not None:
            numbers.group = g
        # torch's collective counter disagrees with pg_status: the group's last op was a p2p one (NCCL)
        p2p_before = not rec.maps_ops and torch_seq is not None and 0 <= torch_seq != enq
        arrivals = None
        if rec.events and hasattr(tracker, "_stream"):
            arrivals = tracker._stream(dict(g.desc, kind=_ch.ARRIVALS, stream=g.desc["group"]))
        self.pgs[pg_id] = _Pg(g.desc["group"], g.coll if rec.events else None, base, g, p2p_before, pg_id, numbers,
                              arrivals)
        return True


class GlooReader(RecorderReader):
    """gloo's recorder (``recorders.gloo_recorder``): pg_status counts every op of a group by torch's op id,
    which ``_Numbers`` turns into the collectives' numbers, anchored at enable() and at each read of the
    entries."""

    def __init__(self, src, rec):
        RecorderReader.__init__(self, src, rec)
        self._anchors = {}  # pg_id -> _Numbers made at install, for groups named later

    def install(self):
        RecorderReader.install(self)
        if self.rec.active:  # where each group's op ids and collective numbers stand now: one read, at enable()
            self._anchor_at_install()

    def _anchor_at_install(self):
        """Each group's newest recorded collective (op id and number); the ops since, up to torch's op count
        now, were not collectives (p2p), as pg_status shows no later one."""
        try:
            entries = self._read(whole=True)
        except Exception:
            log.debug("c10d_observer: reading the %s flight recorder at enable() failed", self.rec.name,
                      exc_info=True)
            return
        for pg_id, by_op in _ops_by_pg(entries).items():
            top = max(by_op)
            nums = _Numbers(None, top, by_op[top], by_op)
            pg = compat.find_group(_group_name(entries, pg_id))
            now_op = compat.torch_seq(pg) if pg is not None else None
            if now_op is not None and now_op > top:
                nums.op = now_op  # the op ids between were p2p ops: no collective number taken
            self._anchors[pg_id] = nums

    def _anchor(self, entries):
        for pg_id, by_op in _ops_by_pg(entries).items():
            q = self.pgs.get(pg_id)
            if q is not None and q.numbers is not None:
                q.numbers.anchor(by_op)

    def _numbers(self, pg_id, entries):
        numbers = self._anchors.pop(pg_id, None)
        if numbers is not None:  # a group made before enable(): the observer counts from its number then
            return numbers, numbers.seq
        # a group made after enable(): its newest recorded collective is the anchor
        by_op = _ops_by_pg(entries or ()).get(pg_id) or {}
        top = max(by_op) if by_op else 0
        return _Numbers(None, top, by_op.get(top, 0), by_op), 0


_HELD = object()  # a verify item: re-check the calls held in flight


class _Gap(object):
    """A verify item: the calls up to ``comp`` completed per pg_status, ``enq`` the last enqueued."""
    __slots__ = ("enq", "comp")

    def __init__(self, enq, comp):
        self.enq, self.comp = enq, comp
