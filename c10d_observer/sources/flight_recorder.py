"""The ``flight_recorder`` source: torch's own flight recorders, read from a helper thread (torch 2.5+).

Nothing runs on the call path.  Every ``period`` the reader takes ``pg_status`` (last enqueued and last
completed op per group, a few microseconds) of each recorder it follows and turns it into the channel's
events: a call enqueued and not yet completed is started (at the time the reader first saw it), and
completed once ``last_completed`` reaches it.  Calls that started and completed between two reads are
skipped over; the watchdog never needed them.

The recorders themselves (one spec each, what an entry says) are ``recorders.py``'s; what the reader keeps
per group, ``recorder_books.py``'s; what it does for the NCCL recorders only, ``nccl_checks.py``'s.

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
from time import perf_counter as _perf_counter  # kept apart from time, which the unit tests replace by a clock
from time import sleep as _sleep

from .. import channel as _ch
from .. import compat
from .. import config as _config
from .. import dumpdir as _dumpdir
from .. import requests as _requests
from .base import Source
from .nccl_checks import _HELD, NcclChecks, _Gap
from .recorder_books import BUDGET, LADDER, _Batches, _Numbers, _Pg, backfill, queue_starts
from .recorders import _UNKNOWN, _by_pg, _entry_json, _group_name, _op_word, _ops_by_pg, _start_ns, gloo_recorder

log = logging.getLogger("c10d_observer")

NEIGHBOURS = 3  # entries kept either side of a call in flight, per group
HISTORY = 32  # a group's last calls kept while a call is long in flight (the verdict reads their order; as
# many as a document keeps of a stream, rank_docs.HISTORY: with 16, the newest calls of a rank read only
# through these entries left its document 16 calls a stream and a 3D TP skip undecided)
LOOKUP_SOFT_S = 2.5  # with learned deadlines, a call is named once this long in flight (a quarter of their floor)
WATCHED_S = 0.5  # ... and this long while c10d-observer watch is open
MAX_START = 128  # calls started at once for one group when a read finds more enqueued (a burst): the
# oldest, and the newest MAX_START
FINAL_READS, FINAL_READ_GAP_S = 50, 0.005  # at disable(), a call still in flight is read again (uninstall)


class FlightRecorderSource(NcclChecks, Source):
    name = "flight_recorder"

    def __init__(self, tracker, period, timeout, dump_dir, recorders=None, soft=False, lookup_soft_s=LOOKUP_SOFT_S):
        self.tracker = tracker
        self.recorders = list(recorders) if recorders is not None else [gloo_recorder()]
        self.period = period
        # a call long in flight is named (op, size, start) a quarter of the timeout in, or, with learned
        # deadlines (their floor is 10 s), at LOOKUP_SOFT_S (a quarter of config.Timing's floor where a test set
        # one: ``lookup_soft_s``): a soft verdict names what it found; while a live
        # view is open, at WATCHED_S (c10d-observer watch shows each call's op)
        self.lookup_base_ns = self.lookup_after_ns = int(min(timeout / 4.0, lookup_soft_s if soft else timeout) * 1e9)
        self.dump_dir = dump_dir
        self.pgs = {}  # (recorder name, pg_id) -> _Pg
        self.ignored = set()  # (recorder name, pg_id) of groups another source covers
        self._baseline = {}  # (recorder name, pg_id) -> pg_status's last enqueued at install
        self._unnamed = {}  # key -> when the entries were last read for it and held none (monotonic ns)
        self._by_uid = {}  # (recorder name, uid) -> (group, torch's collective count, monotonic ns) announced
        self._keep = {}  # recorder name -> {group: entries} last written to fr-*.json
        self._batches = {}  # recorder name -> _Batches
        self._anchors = {}  # (recorder name, pg_id) -> _Numbers made at install, for groups named later
        self._watched = (0, False)  # (monotonic ns of the last look for a live view's request, open?)
        self._lock = threading.Lock()  # register_group runs on the rank's thread, polls on the reader's
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()
        self.on_not_recorded = None  # callback(pg): a group the recorder does not record after all
        self.read_s = 0.0  # time spent reading entries (the GIL held), for the benchmarks
        self.reads = 0

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

    # -- lifecycle ---------------------------------------------------------------------------------------
    def install(self):
        for rec in self.recorders:
            if not rec.active:
                continue
            self._baseline.update({(rec.name, k): v[0] for k, v in rec.status().items()})
            if rec.maps_ops:  # where each group's op ids and collective numbers stand now: one read, at enable()
                self._anchor_at_install(rec)
        self._thread = threading.Thread(target=self._run, daemon=True, name="c10d_observer-flight-recorder")
        self._thread.start()

    def _anchor_at_install(self, rec):
        """gloo: each group's newest recorded collective (op id and number); the ops since, up to torch's op
        count now, were not collectives (p2p), as pg_status shows no later one."""
        try:
            entries = self._read(rec, whole=True)
        except Exception:
            log.debug("c10d_observer: reading the %s flight recorder at enable() failed", rec.name, exc_info=True)
            return
        for pg_id, by_op in _ops_by_pg(entries).items():
            top = max(by_op)
            nums = _Numbers(None, top, by_op[top], by_op)
            pg = compat.find_group(_group_name(entries, pg_id))
            now_op = compat.torch_seq(pg) if pg is not None else None
            if now_op is not None and now_op > top:
                nums.op = now_op  # the op ids between were p2p ops: no collective number taken
            self._anchors[(rec.name, pg_id)] = nums

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
            if not any(p.inflight for p in self.pgs.values()):
                break
        self._last_batch()

    def _last_batch(self):
        """One last read of the whole buffer, every call since the last batch put on its group's arrivals
        stream: the rank's end document names its last calls.  Without it a rank that ended while others
        hung kept its calls since its last batch period unnamed (up to a minute of them), and a pair's desync
        that the pairs like it would decide (their calls at the place) was "cannot decide" (the fuzzer's
        recorder model, seed 7000945).  Once, at disable(): a read of tens of ms."""
        for rec in self.recorders:
            mine = [p for k, p in self.pgs.items() if k[0] == rec.name]
            if not rec.active or not rec.events or not any(p.arrivals is not None for p in mine):
                continue
            try:
                self._queue_arrivals(rec, _by_pg(self._read(rec, True), rec))
                while any(p.pending for p in mine):
                    self._backfill(rec)
            except Exception:
                log.debug("c10d_observer: the last batch read of the %s recorder failed", rec.name, exc_info=True)

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
        for rec in self.recorders:
            if not rec.active:
                continue
            try:
                self._poll(rec, now, final)
            except Exception:  # one recorder failing leaves the others read
                log.debug("c10d_observer: reading the %s flight recorder failed", rec.name, exc_info=True)

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

    def _read(self, rec, whole=False):
        """The entries (``whole``: the whole buffer), timed: a read holds the GIL all along."""
        t0 = _perf_counter()
        try:
            return rec.all_entries() if whole else rec.entries()
        finally:
            self.read_s += _perf_counter() - t0
            self.reads += 1

    def _poll(self, rec, now, final=False):
        status = rec.status()
        lookup, mixed, unsure, verify = self._walk(rec, status, now)
        if rec.uid_keyed:
            self._check_recording(status, now)
        batches = self._batches.setdefault(rec.name, _Batches())
        wall_now = time.time()
        mine = [p for k, p in self.pgs.items() if k[0] == rec.name]
        batch = rec.events and not final and any(p.arrivals is not None for p in mine) and (
            batches.due(wall_now) or batches.stuck(status, now, self.lookup_after_ns,
                                                   lambda: any(p.inflight for p in mine) or self.tracker.in_a_call()))
        if lookup or mixed or verify or unsure or batch:
            self._read_and_apply(rec, status, now, batches, wall_now, lookup, mixed, unsure, verify, batch)
        self._backfill(rec)

    def _walk(self, rec, status, now):
        """pg_status, group by group: the calls it starts and ends where it says enough; (whether a lookup is
        due, the groups followed by their active entries, the gloo groups whose op ids need the entries,
        the NCCL completions to check against them)."""
        lookup = False
        mixed = []
        unsure = []  # (p, enq, comp): gloo groups whose op ids cannot be numbered without the entries
        verify = [] if rec.active_only else None  # (pg, item): NCCL completions to check against the active entries
        for pg_id, (enq, comp) in status.items():
            key = (rec.name, pg_id)
            p = self.pgs.get(key)
            if p is None and rec.uid_keyed and key not in self.ignored:
                with self._lock:
                    known = self._by_uid.pop(key, None)
                if known is not None and self._add_pg(rec, pg_id, pg=known[0], enq=enq,
                                                      torch_seq=compat.torch_seq(known[0])):
                    p = self.pgs[key]
            if p is None:
                # a new group is named from its entries; one whose entries hold nothing yet (its ops are not
                # recorded, or not yet) is looked for again at most every quarter timeout: a read of all the
                # entries takes tens of ms of the rank's GIL
                lookup = lookup or (key not in self.ignored and enq > self._baseline.get(key, 0) and
                                    now - self._unnamed.get(key, now - self.lookup_after_ns) >= self.lookup_after_ns)
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
            lookup = lookup or any(now - p.looked.get(k, t) >= self.lookup_after_ns
                                   for k, t in p.inflight.items())
        return lookup, mixed, unsure, verify

    def _read_and_apply(self, rec, status, now, batches, wall_now, lookup, mixed, unsure, verify, batch):
        """One read of the entries (the whole buffer for a batch), and what it decides: numbers, groups
        followed by their active entries, NCCL completions, names, exact starts."""
        whole = batch or not rec.active_only
        t0 = self.read_s
        try:
            try:
                entries = self._read(rec, whole)
            except Exception:
                if not batch or not rec.active_only:
                    raise
                # the whole buffer could not be read (a release whose dump differs): no exact starts; the
                # lookups go on with the works not completed
                log.debug("c10d_observer: reading the %s recorder's whole buffer failed", rec.name,
                          exc_info=True)
                batches.done(wall_now, LADDER[-1] * BUDGET)
                batch, whole = False, False
                entries = self._read(rec)
        except Exception:
            for p, item in verify or ():  # no entries to check them against: pg_status is taken as it is
                self._verify(p, item, None, now)
            raise
        if whole:
            batches.done(wall_now, self.read_s - t0)
        every = entries
        if whole and rec.active_only:  # what a lookup reads: the works not completed
            entries = [e for e in entries if not e.get("retired") and e.get("state") != "completed"]
        by_pg = _by_pg(entries, rec)
        if rec.maps_ops:
            for pg_id, by_op in _ops_by_pg(entries).items():
                q = self.pgs.get((rec.name, pg_id))
                if q is not None and q.numbers is not None:
                    q.numbers.anchor(by_op)
        for p, enq, comp in unsure:
            e, c = p.numbers.seq_of(enq), p.numbers.seq_of(comp)
            if e is not None and c is not None:
                self._advance(p, e - p.base, c - p.base, now, recorded=p.nums(by_pg))
        for p in mixed:
            self._advance_active(rec, p, p.nums(by_pg), now)
        for p, item in verify or ():
            self._verify(p, item, p.nums(by_pg), now)
        if lookup or batch:
            self._lookup(rec, status, entries, by_pg, now, lookup)
        if batch:
            self._queue_arrivals(rec, by_pg if every is entries else _by_pg(every, rec))

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

    def _lookup(self, rec, status, entries, by_pg, now, named=True):
        """Name new groups, name and date the calls in flight, end those done, write the entries out
        (``named``: a call was long in flight; else a batch read, which writes nothing)."""
        for pg_id, (enq, comp) in status.items():
            key = (rec.name, pg_id)
            if key in self.pgs or key in self.ignored:
                continue
            named_pg = by_pg.get(pg_id)
            name = (next(iter(named_pg.values())).get("process_group") or [None])[0] if named_pg else None
            if name is not None and self._add_pg(rec, pg_id, name=str(name), enq=enq, entries=entries):
                self._unnamed.pop(key, None)
                p = self.pgs[key]
                if p.numbers is not None:
                    enq, comp = p.numbers.seq_of(enq), p.numbers.seq_of(comp)
                if enq is not None and comp is not None:
                    self._advance(p, enq - p.base, comp - p.base, now)
            else:
                self._unnamed[key] = now
        keep = {}
        flying = any(p.inflight for key, p in self.pgs.items() if key[0] == rec.name)
        for key, p in self.pgs.items():
            if key[0] != rec.name or not flying:
                continue
            by_num = p.nums(by_pg)
            recorded_from = min(by_num) if by_num else None
            for number in sorted(p.inflight):
                e = by_num.get(number)
                if e is None and not rec.active_only and (recorded_from is None or number <= recorded_from):
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
        self._keep[rec.name] = keep
        if any(self._keep.values()):
            self._write()

    # -- exact starts, from the batch reads (recorder_books: queue_starts, backfill) -------------------------
    def _queue_arrivals(self, rec, by_pg):
        queue_starts([p for k, p in self.pgs.items() if k[0] == rec.name], by_pg, time.time_ns() - time.monotonic_ns())

    def _backfill(self, rec):
        backfill([p for k, p in self.pgs.items() if k[0] == rec.name])

    @staticmethod
    def _name(p, number, e, now):
        """At the first look at a call's entry: its op, size signature and creation time go to its slot."""
        first = number not in p.looked
        p.looked[number] = now
        if first and p.stream is not None:
            wall_minus_mono = time.time_ns() - time.monotonic_ns()
            p.stream.amend(number, _op_word(e, p.group), _start_ns(e, wall_minus_mono, p.inflight[number]))

    @staticmethod
    def _end(p, number):
        del p.inflight[number]
        p.looked.pop(number, None)
        p.held.discard(number)
        if p.stream is not None:
            p.stream.done(number)
        else:  # only the oldest call is followed: the next one starts after it
            p.completed = max(p.completed, number)

    def _add_pg(self, rec, pg_id, name=None, pg=None, enq=0, torch_seq=None, entries=None):
        key = (rec.name, pg_id)
        if pg is None:
            pg = compat.find_group(name)
            if pg is None and not name:  # a group outside torch's registry (our own probe's): no user calls
                self.ignored.add(key)
                return False
        g = self.tracker.group(pg) if pg is not None else self.tracker.group_by_name(name, rec.name)
        if rec.events and g.native != rec.name:  # the plan gives this group's events to another source
            self.ignored.add(key)
            return False
        numbers, base = None, 0
        if rec.maps_ops:
            numbers = self._anchors.pop(key, None)
            if numbers is not None:  # a group made before enable(): the observer counts from its number then
                base = numbers.seq
            else:  # a group made after enable(): its newest recorded collective is the anchor
                by_op = _ops_by_pg(entries or ()).get(pg_id) or {}
                top = max(by_op) if by_op else 0
                numbers = _Numbers(None, top, by_op.get(top, 0), by_op)
            numbers.group = g
        # torch's collective counter disagrees with pg_status: the group's last op was a p2p one (NCCL)
        p2p_before = not rec.maps_ops and torch_seq is not None and 0 <= torch_seq != enq
        arrivals = None
        if rec.events and hasattr(self.tracker, "_stream"):
            arrivals = self.tracker._stream(dict(g.desc, kind=_ch.ARRIVALS, stream=g.desc["group"]))
        self.pgs[key] = _Pg(g.desc["group"], g.coll if rec.events else None, base, g, p2p_before, pg_id, numbers,
                            arrivals)
        return True

    def _write(self):
        rank = self.tracker.rank
        groups = {}
        for keep in self._keep.values():
            groups.update(keep)
        doc = {"format": "c10d_observer.flight_recorder", "version": 1, "rank": rank, "pid": self._pid,
               "written_at": time.time(), "groups": groups}
        name = _dumpdir.fr_name(rank, self._pid)
        try:
            _dumpdir.DumpDir(self.dump_dir).write_json(name, doc)
        except OSError:
            log.debug("c10d_observer: cannot write %s in %s", name, self.dump_dir, exc_info=True)
