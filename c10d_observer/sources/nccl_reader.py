"""The readers of torch's NCCL recorders (recorder_reader.py's ``RecorderReader`` with what NCCL needs):
``NcclReader`` (NCCL2's recorder, and the part both share: completions checked against the active entries,
groups that carry p2p followed by their active entries) and ``LegacyNcclReader`` (ProcessGroupNCCL's: groups
keyed by their backend's uid, and groups the recorder does not record).

Groups that carry p2p (a legacy NCCL or NCCL2 group on which a send or recv was seen, by the patch source's
p2p wrappers, or whose ``pg_status`` disagrees with torch's collective counter at enable()): p2p works
write their own numbers into the same ``pg_status`` fields and may complete out of order (another CUDA
stream), so ``last_completed`` says nothing reliable about a collective there.  For those groups the reader
takes the recorder's *active* entries instead (``onlyActive``: about 1.2 ms for a 2,000-entry buffer on an
H100, against 8 us for ``pg_status``): a collective is in flight while its entry is active.

NCCL's ``last_completed`` can also run ahead of the GPU: a coalesced block behind a busy GPU shows as
completed in ``pg_status`` while its entry is still active ("scheduled") and the GPU still busy (recorded on
an H100, torch 2.11, tests/data/nccl; on an H200 on 2026-11-26 torch's watchdog called it completed before
the reader's next read, 0.1 s, so that a rule ending young calls by ``pg_status`` alone missed the hang).
So for NCCL every completion ``pg_status`` reports is checked against the active entries (one read, about
1.2 ms for a 2,000-entry buffer, at a read where ``last_completed`` moved): a call whose entry is still
active stays in flight (also one that started and completed between two reads: it starts then, dated by
its entry), unless a later call of its group, also completed, is no longer active: the GPU runs a group's
calls in order, so that entry never completes (a collective recorded while a CUDA graph was captured).
"""
import logging
import threading
import time

from .. import compat
from .recorder_reader import _HELD, RecorderReader, _Gap
from .recorders import _op_word, _start_ns

log = logging.getLogger("c10d_observer")


class NcclReader(RecorderReader):
    """An NCCL recorder whose entries a lookup reads only while active (``rec.active_only``)."""

    def _verify(self, p, item, active, now):
        """NCCL: what pg_status called completed, against the active entries ({number: entry}) just read
        (None: they could not be read, and pg_status is taken at its word)."""
        comp = p.completed
        if active is None:
            if isinstance(item, _Gap):
                self._start_through(p, item.enq, item.comp, now)
            elif item is not _HELD and item in p.inflight:
                self._end(p, item)
            return

        def never_completes(number):  # a later call of the group, completed, is no longer active
            return any(m not in active for m in range(number + 1, comp + 1))

        if item is _HELD:
            for number in sorted(p.held):
                if number in p.inflight and never_completes(number):
                    self._end(p, number)
            return
        if isinstance(item, _Gap):
            st = p.stream
            wall_minus_mono = time.time_ns() - time.monotonic_ns()
            for number in sorted(k for k in active if st.seq < k <= item.comp):
                if never_completes(number):
                    continue
                # completed per pg_status, still on the GPU: in flight from its entry's creation
                e = active[number]
                st.skip_to(number - 1)
                st.start(_op_word(e, p.group), _start_ns(e, wall_minus_mono, now))
                p.inflight[number] = now
                p.looked[number] = now
                p.held.add(number)
            self._start_through(p, item.enq, item.comp, now)
            return
        e = active.get(item)
        if item not in p.inflight:
            return
        if e is None or never_completes(item):
            self._end(p, item)
        else:  # the GPU has not finished it: it stays in flight until its entry is no longer active
            p.held.add(item)
            self._name(p, item, e, now)

    def _advance_active(self, p, active, now):
        """A group that carries p2p: its collectives in flight are its active entries ({number: entry})."""
        st = p.stream
        for number in [k for k in p.inflight if k not in active]:
            self._end(p, number)  # its entry is no longer active: completed
            p.completed = max(p.completed, number)
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        for number in sorted(active):
            # an entry older than a completed collective never completes: a coalesced collective recorded
            # while a CUDA graph was captured (torch records it and enqueues nothing)
            if number <= p.completed or number in p.inflight or number <= st.seq:
                continue
            if number - 1 > st.seq:
                st.skip_to(number - 1)
            e = active[number]
            st.start(_op_word(e, p.group), _start_ns(e, wall_minus_mono, now))
            p.inflight[number] = now
            p.looked[number] = now


class LegacyNcclReader(NcclReader):
    """ProcessGroupNCCL's recorder (``recorders.nccl_recorder``): pg_status is keyed by the backend's uid, which
    every group announces when it is created (``register_group``, on the rank's thread)."""

    def __init__(self, src, rec):
        NcclReader.__init__(self, src, rec)
        self._lock = threading.Lock()  # register_group runs on the rank's thread, reads on the source's
        self.by_uid = {}  # uid -> (group, torch's collective count, monotonic ns) announced

    def register_group(self, pg):
        """A legacy NCCL group was created or found: the recorder keys it by its backend's uid."""
        uid = compat.nccl_uid(pg)
        if uid is None:
            return False
        with self._lock:
            self.by_uid[uid] = (pg, compat.torch_seq(pg), time.monotonic_ns())
        return True

    def _known_group(self, pg_id, enq):
        with self._lock:
            known = self.by_uid.pop(pg_id, None)
        if known is not None and self._add_pg(pg_id, pg=known[0], enq=enq, torch_seq=compat.torch_seq(known[0])):
            return self.pgs[pg_id]
        return None

    def _checks(self, status, now):
        """A legacy NCCL group whose collectives torch counts but its recorder never lists is not recorded
        (the recorder was off when it was first used): its calls go back to the patch source."""
        wait_ns = int(4 * self.src.period * 1e9)
        with self._lock:
            late = [(k, v) for k, v in self.by_uid.items() if k not in status and now - v[2] > wait_ns]
        for key, (pg, seq0, _) in late:
            seq = compat.torch_seq(pg)
            if seq is None or seq0 is None or seq <= seq0:
                continue
            with self._lock:
                self.by_uid.pop(key, None)
            self.ignored.add(key)
            log.warning("c10d_observer: torch's NCCL flight recorder does not record group %s (it was off "
                        "when the group was made: set %s=%d before the first NCCL group, or enable() the "
                        "observer before init_process_group); its Python-issued calls are watched by the "
                        "patch source instead, DDP's and functional collectives are not",
                        compat.describe_group(pg).get("group"), compat.NCCL_TRACE_ENV, compat.NCCL_TRACE_SIZE)
            if self.src.on_not_recorded is not None:
                self.src.on_not_recorded(pg)
