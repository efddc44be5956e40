"""The ``flight_recorder`` source: torch's own flight recorders, read from a helper thread (torch 2.5+).

Nothing runs on the call path.  Every ``period`` the reader takes ``pg_status`` (last enqueued and last
completed op per group, a few microseconds) of each recorder it follows and turns it into the channel's
events: a call enqueued and not yet completed is started (at the time the reader first saw it), and
completed once ``last_completed`` reaches it.  Calls that started and completed between two reads are
skipped over; the watchdog never needed them.

Three recorders (``Recorder`` below, one spec each):

* ``gloo``: ``_dump_fr_trace_json`` (2.8+, on by default from 2.11).  Calls are numbered by torch's
  per-group op counter relative to its value at enable().  ``last_completed`` is not a high-water mark:
  gloo runs a group's works on several threads, each of which writes the number of the work it finished,
  so an older async work that finishes last moves it back (seen on 2.13).  p2p and ``monitored_barrier``
  are not recorded (the patch source covers them).
* ``nccl``: the legacy ProcessGroupNCCL's recorder, ``_dump_nccl_trace_json`` (2.5+; off by default until
  2.10, see compat.NCCL_TRACE_ENV).  ``pg_status`` is keyed by the backend's ``uid``, which every group
  announces when it is created (``register_group``), and counts collectives with torch's own collective
  counter: calls carry torch's numbers (the ``SeqNum`` of torch's NCCL timeout messages), so they agree
  across ranks whenever enable() ran, also for groups and calls older than it.  ``last_completed`` is
  written by torch's watchdog thread, which polls every 100 ms: a completion is seen 0-100 ms late.
* ``nccl2``: ProcessGroupNCCL2's FlightRecorderHook (2.14+), ``_dump_fr_trace_json(backend="nccl2")``:
  one counter for every op of a group (p2p too), groups named from the entries.

Groups that carry p2p (a legacy NCCL or NCCL2 group on which a send or recv was seen, by the patch source's
p2p wrappers, or whose ``pg_status`` disagrees with torch's collective counter at enable()): p2p works
write their own numbers into the same ``pg_status`` fields and may complete out of order (another CUDA
stream), so ``last_completed`` says nothing reliable about a collective there.  For those groups the reader
takes the recorder's *active* entries instead (``onlyActive``: about 1.2 ms for a 2,000-entry buffer on an
H100, against 8 us for ``pg_status``): a collective is in flight while its entry is active.

NCCL's ``last_completed`` can also run ahead of the GPU: in the readings recorded on an H100 (torch 2.11,
tests/data/nccl), a coalesced block behind a busy GPU showed as completed in ``pg_status`` 0.5 s after it
was issued while its entry was still active ("scheduled") and the GPU still busy.  So for NCCL a call that
has been in flight for a poll or more is ended only once its entry is no longer active (one read of the
active entries, about 1.2 ms, when such a call completes); a younger one is ended by ``pg_status`` alone.

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
from time import sleep as _sleep  # kept apart from time, which the unit tests replace by a clock

from .. import channel as _ch
from .. import compat
from .. import dumpdir as _dumpdir

log = logging.getLogger("c10d_observer")

NEIGHBOURS = 3  # entries kept either side of a call in flight, per group
HISTORY = 16  # a group's last calls kept while a call is long in flight (the verdict reads their order)
LOOKUP_SOFT_S = 2.5  # with learned deadlines, a call is named once this long in flight (half their floor)
MAX_START = 128  # calls started at once for one group when a read finds more enqueued (a burst): the
# oldest, and the newest MAX_START
FR_BACKENDS = frozenset(("gloo",))
FINAL_READS, FINAL_READ_GAP_S = 50, 0.005  # at disable(), a call still in flight is read again (uninstall)


class Recorder(object):
    """How to read one of torch's recorders.  ``status``/``entries``: names of compat functions (looked up
    at each call, so that tests can stand in for torch).  ``seq_key``: the entry field that numbers a call
    on its stream; ``relative``: numbers count from the group's counter at enable() (else torch's own);
    ``active_only``: ``entries`` returns only works not completed (cheap); ``uid_keyed``: pg_status keys are
    the backend's uid, known from the group object (else a group is named from its entries)."""

    def __init__(self, name, status, entries, seq_key, relative, active_only, uid_keyed, events=True):
        self.name = name
        self._status = status
        self._entries = entries
        self.seq_key = seq_key
        self.relative = relative
        self.active_only = active_only
        self.uid_keyed = uid_keyed
        self.events = events  # False: snapshots for reports only, another source makes the events
        self.active = name == "gloo"  # an NCCL recorder is read once this rank has one of its groups

    def status(self):
        return getattr(compat, self._status)()

    def entries(self):
        return getattr(compat, self._entries)()


def gloo_recorder(events=True):
    return Recorder("gloo", "fr_status", "fr_entries", "op_id", True, False, False, events)


def nccl_recorder(events=True):
    return Recorder("nccl", "nccl_status", "nccl_active_entries", "collective_seq_id", False, True, True, events)


def nccl2_recorder(events=True):
    return Recorder("nccl2", "nccl2_status", "nccl2_active_entries", "op_id", False, True, False, events)


class _Pg(object):
    """One recorded group: its stream, numbered ``op_id - base`` (base: its counter at enable(), or 0)."""

    __slots__ = ("name", "key_id", "stream", "base", "inflight", "looked", "completed", "group", "p2p_before",
                 "held")

    def __init__(self, name, stream, base, group=None, p2p_before=False, key_id=None):
        self.name = name
        self.key_id = key_id  # torch's pg_id of the group in its recorder
        self.stream = stream  # None when only snapshotting for reports (another source makes the events)
        self.base = base
        self.inflight = {}  # op_id -> monotonic ns when first seen in flight
        self.looked = {}  # op_id -> monotonic ns when its entry was last looked up
        self.completed = base  # the highest completion seen (torch's own value can go back)
        self.group = group  # the tracker's _Group (its p2p streams tell whether it carries p2p)
        self.p2p_before = p2p_before  # it carried p2p before enable()
        self.held = set()  # op_ids pg_status calls completed while their entry is still active

    def mixed(self):
        """p2p numbers share pg_status with collectives on this group: follow its active entries."""
        g = self.group
        return self.p2p_before or (g is not None and bool(g.sends or g.recvs))


class FlightRecorderSource(object):
    name = "flight_recorder"

    def __init__(self, tracker, period, timeout, dump_dir, recorders=None, soft=False):
        self.tracker = tracker
        self.recorders = list(recorders) if recorders is not None else [gloo_recorder()]
        self.period = period
        # a call long in flight is named (op, size, start) a quarter of the timeout in, or, with learned
        # deadlines (the first at 5 s at the earliest), at half that: a soft verdict names what it found
        self.lookup_after_ns = int(min(timeout / 4.0, LOOKUP_SOFT_S if soft else timeout) * 1e9)
        self.verify_after_ns = int(2 * period * 1e9)  # one watchdog poll
        self.dump_dir = dump_dir
        self.pgs = {}  # (recorder name, pg_id) -> _Pg
        self.ignored = set()  # (recorder name, pg_id) of groups another source covers
        self._baseline = {}
        self._unnamed = {}  # key -> when the entries were last read for it and held none (monotonic ns)
        self._by_uid = {}  # (recorder name, uid) -> (group, torch's collective count, monotonic ns) announced
        self._keep = {}  # recorder name -> {group: entries} last written to fr-*.json
        self._lock = threading.Lock()  # register_group runs on the rank's thread, polls on the reader's
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()
        self.on_not_recorded = None  # callback(pg): a group the recorder does not record after all

    # -- lifecycle ---------------------------------------------------------------------------------------
    def install(self):
        # gloo's numbers count from enable(): everything recorded before is history
        for rec in self.recorders:
            if rec.relative and rec.active:
                self._baseline.update({(rec.name, k): v[0] for k, v in rec.status().items()})
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
                self.poll_once()
            except Exception:
                log.debug("c10d_observer: the last flight-recorder read failed", exc_info=True)
                return
            if not any(p.inflight for p in self.pgs.values()):
                return

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

    def register_group(self, pg):
        """A legacy NCCL group was created or found: the recorder keys it by its backend's uid."""
        uid = compat.nccl_uid(pg)
        if uid is None:
            return False
        with self._lock:
            self._by_uid[("nccl", uid)] = (pg, compat.torch_seq(pg), time.monotonic_ns())
        return True

    # -- one read ----------------------------------------------------------------------------------------
    def poll_once(self):
        now = time.monotonic_ns()
        for rec in self.recorders:
            if not rec.active:
                continue
            try:
                self._poll(rec, now)
            except Exception:  # one recorder failing leaves the others read
                log.debug("c10d_observer: reading the %s flight recorder failed", rec.name, exc_info=True)

    def _poll(self, rec, now):
        status = rec.status()
        lookup = False
        mixed = []
        verify = [] if rec.active_only else None  # (pg, op_id): completed per pg_status after a long flight
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
            if p.stream is not None and p.mixed():
                mixed.append(p)
                continue
            self._advance(p, enq, comp, now, verify)
            lookup = lookup or any(now - p.looked.get(k, t) >= self.lookup_after_ns
                                   for k, t in p.inflight.items())
        if rec.uid_keyed:
            self._check_recording(status, now)
        if not lookup and not mixed and not verify:
            return
        entries = rec.entries()
        by_pg = _by_pg(entries, rec)
        for p in mixed:
            self._advance_active(rec, p, by_pg.get(p.key_id, {}), now)
        for p, op_id in verify or ():
            e = by_pg.get(p.key_id, {}).get(op_id)
            if e is None:
                self._end(p, op_id)
            else:  # the GPU has not finished it: it stays in flight until its entry is no longer active
                p.held.add(op_id)
                self._name(p, op_id, e, now)
        if lookup:
            self._lookup(rec, status, entries, now)

    def _advance(self, p, enq, comp, now, verify=None):
        st = p.stream
        comp = p.completed = max(p.completed, comp)
        for op_id in [k for k in p.inflight if k <= comp]:
            if verify is None or now - p.inflight[op_id] < self.verify_after_ns:
                self._end(p, op_id)
            elif op_id not in p.held:  # long in flight: ended once its entry says so (_poll)
                verify.append((p, op_id))
        if st is None:  # snapshots only: the oldest call in flight is enough to date
            oldest = max(comp, p.base) + 1
            if oldest <= enq and oldest not in p.inflight:
                p.inflight.clear()
                p.looked.clear()
                p.inflight[oldest] = now
            return
        if comp - p.base > st.seq:
            st.skip_to(comp - p.base)  # started and completed between two reads: nothing to watch
        first = st.seq + p.base + 1  # the first number not started yet
        if enq - first + 1 > MAX_START:
            # a burst: the oldest call is kept (it is the one that will be overdue first), then the newest
            # MAX_START; the ones between are counted as not tracked one by one (the channel pins the oldest)
            st.start(_UNKNOWN, now)
            p.inflight[first] = now
            st.skip_to(enq - MAX_START - p.base)
            st.untracked(enq - MAX_START - first)
            first = enq - MAX_START + 1
        for op_id in range(first, enq + 1):
            st.start(_UNKNOWN, now)
            p.inflight[op_id] = now

    def _advance_active(self, rec, p, active, now):
        """A group that carries p2p: its collectives in flight are its active entries ({number: entry})."""
        st = p.stream
        for op_id in [k for k in p.inflight if k not in active]:
            self._end(p, op_id)  # its entry is no longer active: completed
            p.completed = max(p.completed, op_id)
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        for op_id in sorted(active):
            # an entry older than a completed collective never completes: a coalesced collective recorded
            # while a CUDA graph was captured (torch records it and enqueues nothing)
            if op_id <= p.completed or op_id in p.inflight or op_id - p.base <= st.seq:
                continue
            if op_id - p.base - 1 > st.seq:
                st.skip_to(op_id - p.base - 1)
            e = active[op_id]
            st.start(_op_word(e), _start_ns(e, wall_minus_mono, now))
            p.inflight[op_id] = now
            p.looked[op_id] = now

    def _check_recording(self, status, now):
        """A legacy NCCL group whose collectives torch counts but its recorder never lists is not recorded
        (the recorder was off when it was first used): its calls go back to the patch source."""
        wait_ns = int(4 * self.period * 1e9)
        with self._lock:
            late = [(k, v) for k, v in self._by_uid.items()
                    if k[1] not in status and now - v[2] > wait_ns]
        for key, (pg, seq0, _) in late:
            seq = compat.torch_seq(pg)
            if seq is None or seq0 is None or seq <= seq0:
                continue
            with self._lock:
                self._by_uid.pop(key, None)
            self.ignored.add(key)
            log.warning("c10d_observer: torch's NCCL flight recorder does not record group %s (it was off "
                        "when the group was made: set %s=%d before the first NCCL group, or enable() the "
                        "observer before init_process_group); its Python-issued calls are watched by the "
                        "patch source instead, DDP's and functional collectives are not",
                        compat.describe_group(pg).get("group"), compat.NCCL_TRACE_ENV, compat.NCCL_TRACE_SIZE)
            if self.on_not_recorded is not None:
                self.on_not_recorded(pg)

    def _lookup(self, rec, status, entries, now):
        """Name new groups, name and date calls long in flight, end those done, write the entries out."""
        by_pg = _by_pg(entries, rec)
        for pg_id, (enq, comp) in status.items():
            key = (rec.name, pg_id)
            if key in self.pgs or key in self.ignored:
                continue
            named = by_pg.get(pg_id)
            name = (next(iter(named.values())).get("process_group") or [None])[0] if named else None
            if name is not None and self._add_pg(rec, pg_id, name=str(name), enq=enq):
                self._unnamed.pop(key, None)
                self._advance(self.pgs[key], enq, comp, now)
            else:
                self._unnamed[key] = now
        keep = {}
        flying = any(p.inflight for key, p in self.pgs.items() if key[0] == rec.name)
        for key, p in self.pgs.items():
            if key[0] != rec.name or not flying:
                continue
            by_op = by_pg.get(key[1], {})
            recorded_from = min(by_op) if by_op else None
            for op_id in sorted(p.inflight):
                e = by_op.get(op_id)
                if e is None and not rec.active_only and (recorded_from is None or op_id <= recorded_from):
                    continue  # gloo: not recorded yet, or before what the buffer still holds
                if e is None or e.get("retired"):
                    # NCCL: no active entry, completed; gloo: retired (completed, though last_completed went
                    # back past it), or no entry: not a recorded collective (p2p, monitored_barrier)
                    self._end(p, op_id)
                    continue
                self._name(p, op_id, e, now)
            ops = [k for k in sorted(by_op) if k > p.base]
            # the calls in flight and their neighbours, and every group's last HISTORY calls: their ops and
            # sizes (a desync of calls that completed) and their order across groups (an ordering deadlock)
            near = set(ops[-HISTORY:])
            for op_id in p.inflight:
                if op_id in by_op:
                    i = ops.index(op_id) if op_id in ops else 0
                    near.update(ops[max(0, i - NEIGHBOURS):i + NEIGHBOURS + 1])
            if near:
                keep[p.name] = [_entry_json(by_op[k], k in p.inflight, k - p.base) for k in sorted(near)]
        self._keep[rec.name] = keep
        if any(self._keep.values()):
            self._write()

    @staticmethod
    def _name(p, op_id, e, now):
        """At the first look at a call's entry: its op, size signature and creation time go to its slot."""
        first = op_id not in p.looked
        p.looked[op_id] = now
        if first and p.stream is not None:
            wall_minus_mono = time.time_ns() - time.monotonic_ns()
            p.stream.amend(op_id - p.base, _op_word(e), _start_ns(e, wall_minus_mono, p.inflight[op_id]))

    @staticmethod
    def _end(p, op_id):
        del p.inflight[op_id]
        p.looked.pop(op_id, None)
        p.held.discard(op_id)
        if p.stream is not None:
            p.stream.done(op_id - p.base)
        else:  # only the oldest call is followed: the next one starts after it
            p.completed = max(p.completed, op_id)

    def _add_pg(self, rec, pg_id, name=None, pg=None, enq=0, torch_seq=None):
        key = (rec.name, pg_id)
        base = self._baseline.get(key, 0) if rec.relative else 0
        if pg is None:
            pg = compat.find_group(name)
            if pg is None and not name:  # a group outside torch's registry (our own probe's): no user calls
                self.ignored.add(key)
                return False
        g = self.tracker.group(pg) if pg is not None else self.tracker.group_by_name(name, rec.name)
        if rec.events and g.native != rec.name:  # the plan gives this group's events to another source
            self.ignored.add(key)
            return False
        # torch's collective counter disagrees with pg_status: the group's last op was a p2p one
        p2p_before = torch_seq is not None and 0 <= torch_seq != enq
        self.pgs[key] = _Pg(g.desc["group"], g.coll if rec.events else None, base, g, p2p_before, pg_id)
        return True

    def _write(self):
        rank = self.tracker.rank
        groups = {}
        for keep in self._keep.values():
            groups.update(keep)
        doc = {"format": "c10d_observer.flight_recorder", "version": 1, "rank": rank, "pid": self._pid,
               "written_at": time.time(), "groups": groups}
        path = os.path.join(self.dump_dir, _dumpdir.fr_name(rank, self._pid))
        try:
            _dumpdir.write_json(path, doc)
        except OSError:
            log.debug("c10d_observer: cannot write %s", path, exc_info=True)


_UNKNOWN = _ch.OP_CODES["unknown"]
_FIELDS = ("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
           "time_created_ns", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state",
           "retired", "timeout_ms", "is_p2p", "thread_name")


def _by_pg(entries, rec):
    """{pg_id: {number: entry}} of the collectives among a recorder's entries (p2p entries are left out:
    the patch source follows p2p, and torch leaves those of a batch_isend_irecv 'scheduled' for ever)."""
    out = {}
    for e in entries:
        if e.get("is_p2p"):
            continue
        try:
            out.setdefault(str(e.get("pg_id")), {})[int(e.get(rec.seq_key, -1))] = e
        except (TypeError, ValueError):
            continue
    return out


def _start_ns(e, wall_minus_mono, fallback):
    """The monotonic time of an entry's creation, or ``fallback`` when it has none or it is in the future."""
    t0 = int(e.get("time_created_ns") or 0) - wall_minus_mono
    return t0 if 0 < t0 <= time.monotonic_ns() else fallback


def _op_word(e):
    """The op word of a recorded call: its op and, from the entry's sizes and dtypes, its size signature."""
    op = compat.entry_op(e)
    word = _ch.OP_CODES.get(op, 0)
    side = compat.SIZE_TENSOR.get(op, (None,))[0]
    tensor = compat.entry_tensor(e, side) if side is not None else None
    if tensor is not None:
        word |= _ch.encode_sig(_ch.DTYPE_CODES.get(tensor[1], 0), tensor[0])
    return word


def _entry_json(e, in_flight, seq):
    out = {k: e.get(k) for k in _FIELDS if k in e}
    out["op"] = compat.entry_op(e)
    out["size"] = compat.entry_size(e)  # what the verdict compares (a desync), also of completed calls
    out["in_flight"] = bool(in_flight)
    out["seq"] = seq  # the observer's number of this call on its stream
    return out


# -- the legacy NCCL recorder's switch: its row's (nccl_recorder) side effect, owned here ----------------
_NCCL_TURNED_ON = [False]  # this process's NCCL recorder was made on by an enable() (it stays so)


def nccl_recorder_on(caps, wanted):
    """Whether torch's legacy NCCL recorder records this process's NCCL groups: "default" (2.11+), "env"
    (the user's TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE > 0), "enable" (off by default, 2.5-2.10:
    this enable() turns it on, which it can only do before the first NCCL group), or False.

    Why enable() turns it on where it can (docs/sources.md, "NCCL"): on an H100 with torch 2.11 the recorder
    costs torch 3-5 us per call and sees every NCCL call (DDP's and functional collectives included), where
    the patch source costs 7-8 us per call (and a completion marker 2.6 us more) and sees only Python's."""
    nplan = caps.get("nccl_plan") or {}
    if not nplan.get("recorder"):
        return False
    if _NCCL_TURNED_ON[0]:
        return "enable"  # an earlier enable() of this process turned it on
    name, value = compat.fr_buffer_env()
    if name is not None and value is not None:
        return "env" if value > 0 else False
    if nplan.get("recorder_on") == "default":
        return "default"
    if nplan.get("recorder_on") != "enable" or not wanted:
        return False
    if any("nccl" in compat.backend_name(pg) for pg in compat.all_groups()):
        log.info("c10d_observer: torch's NCCL flight recorder is off (its default through torch 2.10) and NCCL "
                 "groups exist already: NCCL calls are watched by the patch source (DDP's C++ all-reduce through "
                 "its comm hook; functional collectives through their ops' wrappers).  Call enable() before init_process_group, or "
                 "set %s=%d, to have the recorder", compat.NCCL_TRACE_ENV, compat.NCCL_TRACE_SIZE)
        return False
    return "enable"


def _turn_nccl_recorder_on():
    """Set the legacy NCCL recorder's buffer size before the first NCCL group (torch reads it once, when the
    recorder is first used, so it stays on for the process); the undo removes the variable again."""
    if not _NCCL_TURNED_ON[0]:
        os.environ[compat.NCCL_TRACE_ENV] = str(compat.NCCL_TRACE_SIZE)
        log.info("c10d_observer: set %s=%d: torch's NCCL flight recorder (off by default before torch 2.11) "
                 "reports NCCL calls at no cost per call to the observer; torch records every NCCL call in a "
                 "buffer of that many entries, as it does by default from 2.11 (on 2.8-2.10 gloo's recorder "
                 "reads the same variable; docs/sources.md, NCCL groups)",
                 compat.NCCL_TRACE_ENV, compat.NCCL_TRACE_SIZE)
        try:
            compat.nccl_status()  # torch creates the recorder now, with that size
        except Exception:
            log.debug("c10d_observer: reading the NCCL recorder failed", exc_info=True)
        _NCCL_TURNED_ON[0] = True

    def undo():
        if os.environ.get(compat.NCCL_TRACE_ENV) == str(compat.NCCL_TRACE_SIZE):
            del os.environ[compat.NCCL_TRACE_ENV]

    return undo


class NcclRecorderSwitch(object):
    """The nccl_recorder row's part: where this enable() turns the legacy NCCL recorder on (2.5-2.10, off
    by default), the variable is set at install and taken back at uninstall."""

    def __init__(self):
        self._undo = None

    def install(self):
        self._undo = _turn_nccl_recorder_on()

    def uninstall(self):
        if self._undo is not None:
            self._undo()
            self._undo = None
