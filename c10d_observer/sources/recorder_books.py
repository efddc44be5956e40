"""What the flight-recorder reader keeps per recorder and group: gloo's op ids turned into collective numbers
(``_Numbers``), one recorded group (``_Pg``), when to read a recorder's whole buffer (``_Batches``), and the
exact starts a batch read found, put on each group's arrivals stream (``queue_starts``, ``backfill``)."""
import bisect
import collections
import math

from .recorders import _op_word, _root_pending, _start_ns

BUDGET = 0.002  # the share of the time the batch reads of a recorder's whole buffer may hold the GIL
LADDER = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)  # their periods (s): the ranks of a job pick the same
BACKFILL = 100  # exact starts put on a group's arrivals stream per read (the watchdog takes 256 a poll)


class _Numbers(object):
    """gloo: which collective a number of pg_status is.  torch counts every op of a group with one op id (a
    send, a recv, monitored_barrier's messages too: different counts on different ranks), records the
    collectives only, and numbers them apart, the same on every rank (``collective_seq_id``).  pg_status
    says the op id of the last collective enqueued and completed; this turns it into the collective's number.

    The anchor is one op id whose number is known (from the entries, at every read of them).  Beyond it, an
    op id is a collective's unless a patch wrapper saw a p2p op take it: the wrappers note torch's op count
    before and after each op the recorder does not record (``_Group.other_ops``).  A p2p op that took one id
    is exact; any other (monitored_barrier, whose messages may also count as collectives; two threads
    issuing at once) leaves the count unknown from there until the next read of the entries (``seq_of`` is
    None: the reader reads them then)."""

    __slots__ = ("group", "op", "seq", "p2p", "unsure_from", "known")

    def __init__(self, group, op_id, seq, known=None):
        self.group = group  # the tracker's _Group (its other_ops), or None
        self.op, self.seq = op_id, seq  # the anchor
        self.p2p = []  # op ids past the anchor that p2p ops took, ascending
        self.unsure_from = None  # the count is unknown past this op id (an op of unknown kind took ids there)
        self.known = known or {}  # op id -> number, from the last read of the entries (ids below the anchor)

    def anchor(self, by_op):
        """The entries were read: {op id: number} of this group's recorded collectives."""
        if not by_op:
            return
        top = max(by_op)
        if top >= self.op:
            self.op, self.seq = top, by_op[top]
            self.p2p = [i for i in self.p2p if i > top]
            if self.unsure_from is not None and self.unsure_from < top:
                self.unsure_from = None
        self.known = by_op

    def _take(self):
        ops = self.group.other_ops if self.group is not None else None
        if not ops:
            return
        n = len(ops)
        for before, after, p2p in ops[:n]:
            if after is None or after <= self.op:
                continue
            if p2p and before is not None and after == before + 1:
                self.p2p.append(after)
            else:
                start = before if before is not None and before >= self.op else self.op
                self.unsure_from = start if self.unsure_from is None else min(self.unsure_from, start)
        del ops[:n]  # appended on the rank's threads meanwhile stay (del of a slice is one step under the GIL)
        self.p2p.sort()

    def seq_of(self, op_id):
        """The number of the collective that took op id ``op_id`` (as pg_status says it), or None (unknown
        until the entries are read).  Below the anchor, where the entries read held no such op, a lower bound:
        pg_status's completions are taken as a high-water mark, for which one is enough."""
        self._take()
        if op_id <= self.op:  # below the anchor: read, else a lower bound (each op id counts one number at most)
            if op_id == self.op:
                return self.seq
            n = self.known.get(op_id)
            return n if n is not None else max(0, self.seq - (self.op - op_id))
        if self.unsure_from is not None and op_id > self.unsure_from:
            return None
        return self.seq + (op_id - self.op) - bisect.bisect_right(self.p2p, op_id)

    def advance(self, op_id):
        """Move the anchor to a completed op id whose number is sure (keeps the p2p list short)."""
        seq = self.seq_of(op_id)
        if seq is not None and op_id > self.op:
            self.op, self.seq = op_id, seq
            self.p2p = [i for i in self.p2p if i > op_id]


class _Pg(object):
    """One recorded group: its stream, numbered by torch's own collective numbers less ``base`` (``numbers``
    maps gloo's op ids to them), and the stream its calls' exact starts go to (``arrivals``), from the batch
    reads.  ``nums(by_pg)``: a read's entries of this group by the observer's numbers."""

    __slots__ = ("name", "key_id", "stream", "base", "inflight", "looked", "completed", "group", "p2p_before",
                 "held", "numbers", "arrivals", "backfilled", "pending", "rootless")

    def __init__(self, name, stream, base=0, group=None, p2p_before=False, key_id=None, numbers=None, arrivals=None):
        self.name = name
        self.key_id = key_id  # torch's pg_id of the group in its recorder
        self.stream = stream  # None when only snapshotting for reports (another source makes the events)
        self.base = base  # gloo: its collective number at enable() (the observer counts from there), else 0
        self.inflight = {}  # number -> monotonic ns when first seen in flight
        self.looked = {}  # number -> monotonic ns when its entry was last looked up
        self.completed = 0  # the highest completion seen (torch's own value can go back)
        self.group = group  # the tracker's _Group (its p2p streams tell whether it carries p2p)
        self.p2p_before = p2p_before  # it carried p2p before enable()
        self.held = set()  # numbers pg_status calls completed while their entry is still active
        self.numbers = numbers  # gloo: _Numbers (pg_status's op ids to collective numbers), else None
        self.arrivals = arrivals  # the stream of exact starts (kind "arrivals"), or None
        self.backfilled = 0  # the highest number put on it
        self.pending = collections.deque()  # (number, op word, start ns) read, not yet put on it
        # gloo: number -> (torch's op id, op word, start ns) of a rooted call named before the patch wrapper noted
        # its root (recorders._root_pending): named again at the next look, or at its end from the root noted since
        self.rootless = {}

    def nums(self, by_pg):
        by_num = by_pg.get(self.key_id) or {}
        if not self.base:
            return by_num
        return {k - self.base: e for k, e in by_num.items() if k > self.base}

    def mixed(self):
        """NCCL: p2p numbers share pg_status with collectives on this group: follow its active entries."""
        g = self.group
        return self.p2p_before or (g is not None and bool(g.sends or g.recvs))


class _Batches(object):
    """When to read a recorder's whole buffer for the calls' exact starts (arrivals), off the call path.

    A read holds the rank's GIL while torch builds the dump (measured on torch 2.13, gloo, 2,000 entries: 25-30
    ms, then 9 ms to load it; benchmarks/fr_reads.py): reads are spaced so that they take at most ``BUDGET``
    of the time, ``period = cost / BUDGET`` rounded up on ``LADDER``, and fall on multiples of the period on
    the wall clock, so that the ranks of a job (who read alike) read the same calls.  A buffer holds its last
    2,000 calls: below 2,000 / period calls a second every call is read; above, a sample of them."""

    def __init__(self):
        self.cost_s = None  # the last whole read's duration
        self.period = LADDER[0]
        self.next_at = 0.0  # wall time of the next read
        self.still = (None, 0, True)  # (pg_status, monotonic ns it has held since, read once since)

    def due(self, wall_now):
        return wall_now >= self.next_at

    def stuck(self, status, now_ns, after_ns, waiting):
        """Whether to read now, off the periods: pg_status has not moved for ``after_ns``, the rank waits in
        a call (``waiting()``: one its recorder records, or one the wrappers write, gloo's p2p), and the buffer
        was not read since it went still.  Its last calls reach its document only through a read: with
        periods of up to a minute between reads, the stage-0 ranks of the 3D job (waiting in a pipeline
        recv) sent documents with 0-3 of their last 32 calls a group, and a skip was "cannot decide" (2.13,
        timeout 5 s).  Once per still spell, and only while the rank waits: its GIL is free, so the read
        costs the job nothing (a rank computing for long, in no call, is not read off the periods)."""
        seen, since, read = self.still
        if status != seen:
            self.still = (dict(status), now_ns, False)
            return False
        if read or now_ns - since < after_ns or not waiting():
            return False
        self.still = (seen, since, True)
        return True

    def done(self, wall_now, cost_s):
        self.cost_s = cost_s
        want = cost_s / BUDGET
        self.period = next((p for p in LADDER if p >= want), LADDER[-1])
        self.next_at = (math.floor(wall_now / self.period) + 1) * self.period


def queue_starts(pgs, by_pg, wall_minus_mono):
    """The calls a batch read found (``by_pg``), past those put on their group's arrivals stream already, queued
    on each of ``pgs`` (one recorder's groups)."""
    for p in pgs:
        if p.arrivals is None:
            continue
        last = p.pending[-1][0] if p.pending else p.backfilled
        by_num = p.nums(by_pg)
        for number in sorted(n for n in by_num if n > last):
            e = by_num[number]
            t = _start_ns(e, wall_minus_mono, None)
            if t is not None:
                word = _op_word(e, p.group)
                if _root_pending(word, p.group, t):
                    break  # the next read puts it (and those after it) on the stream, with its root
                p.pending.append((number, word, t))


def backfill(pgs):
    """Put up to BACKFILL queued starts of each of ``pgs`` on its arrivals stream (the watchdog reads a stream's
    last 256 calls each poll: a batch of 2,000 goes over several reads, none lost)."""
    for p in pgs:
        if not p.pending:
            continue
        st = p.arrivals
        for _ in range(min(BACKFILL, len(p.pending))):
            number, word, t = p.pending.popleft()
            if number <= st.seq:
                continue
            if number - 1 > st.seq:
                st.skip_to(number - 1)
            st.done(st.start(word, t))
            p.backfilled = number
