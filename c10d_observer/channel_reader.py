"""The watchdog's half of the channel (channel.py: the layout both halves share): ``ChannelReader`` maps it and
reads each stream's state (``StreamState``) at a poll, checking each slot for consistency.  Never imports
torch."""
import json
import mmap
import os

from .channel import (ARRIVALS, DESC_BYTES, HEADER_WORDS, H_DROPPED_STREAMS, H_HANDLER_REPLACED, H_HEARTBEAT,
                       H_MAGIC, H_MAIN_THREAD, H_MAX_STREAMS, H_NSTREAMS, H_PHASE_A, H_PHASE_B, H_PHASE_NAME,
                       H_PHASE_SINCE, H_PHASE_UNTIL, H_RANK, H_RING, H_VERSION, H_WORLD, LAYOUT_VERSION, MAGIC,
                       PHASE_NAME_BYTES, SKIPPED, SLOT_WORDS, S_DONE_HINT, S_LAST_STARTED, S_OVERFLOW, S_PIN,
                       _Layout, _W, members_list)


class ChannelReader(object):
    """Watchdog side: maps the segment and turns it into snapshots."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            self._map(fd, path)
        finally:
            os.close(fd)

    @classmethod
    def from_fd(cls, fd):
        """A reader over an inherited descriptor of the channel (the watchdog's way: the name may be gone)."""
        self = cls.__new__(cls)
        try:
            self._map(fd, "channel descriptor %d" % fd)
        finally:
            os.close(fd)
        return self

    def _map(self, fd, name):
        size = os.fstat(fd).st_size
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        self._attach(mm, name, owns=True)

    @classmethod
    def attach(cls, writer):
        """A reader over a writer's own mapping (same process): for tests and introspection."""
        self = cls.__new__(cls)
        self._attach(writer._mm, writer.path, owns=False)
        return self

    def _attach(self, mm, name, owns):
        self._mm = mm
        self._owns = owns
        self._mv = None
        try:
            if len(mm) < HEADER_WORDS * _W or len(mm) % _W:
                raise ValueError("%s is not a c10d-observer channel (size %d)" % (name, len(mm)))
            self._mv = mv = memoryview(mm).cast("q")
            if mv[H_MAGIC] != MAGIC or mv[H_VERSION] != LAYOUT_VERSION:
                raise ValueError("%s is not a c10d-observer channel of layout version %d"
                                 % (name, LAYOUT_VERSION))
            ring = mv[H_RING]
            if mv[H_MAX_STREAMS] <= 0 or ring <= 0 or ring & (ring - 1):
                raise ValueError("%s has a corrupt channel header" % (name,))
            self.layout = _Layout(mv[H_MAX_STREAMS], ring)
            if self.layout.size > len(mm):
                raise ValueError("%s is smaller than its layout says" % (name,))
        except BaseException:
            if self._mv is not None:
                self._mv.release()
            if owns:
                mm.close()
            raise
        self._descs = []
        self._cursor = []

    def close(self):
        self._mv.release()
        if self._owns:
            self._mm.close()

    def slot(self, idx, seq):
        """(seq_a, op word, start_ns, seq_b, done_seq) of the slot that holds ``seq`` of stream ``idx``."""
        base = self.layout.ring_base(idx) + (seq & self.layout.mask) * SLOT_WORDS
        return tuple(self._mv[base:base + SLOT_WORDS].tolist())

    def rank(self):
        return self._mv[H_RANK], self._mv[H_WORLD]

    def dropped_streams(self):
        return self._mv[H_DROPPED_STREAMS]

    def heartbeat_ns(self):
        """monotonic_ns of the rank's last heartbeat (0: none yet)."""
        return self._mv[H_HEARTBEAT]

    def main_thread(self):
        return self._mv[H_MAIN_THREAD]

    def handler_replaced(self):
        return bool(self._mv[H_HANDLER_REPLACED])

    def phase(self):
        """(name, since_ns, until_ns or 0) of the phase the rank declared, or None (none, or being written)."""
        mv = self._mv
        b = mv[H_PHASE_B]
        since, until = mv[H_PHASE_SINCE], mv[H_PHASE_UNTIL]
        off = H_PHASE_NAME * _W
        name = bytes(self._mm[off:off + PHASE_NAME_BYTES]).split(b"\0", 1)[0].decode("utf-8", "replace")
        a = mv[H_PHASE_A]
        if a <= 0 or a != b:
            return None
        return name, since, until

    def _desc(self, idx):
        off = (self.layout.desc_word + idx * (DESC_BYTES // _W)) * _W
        raw = bytes(self._mm[off:off + DESC_BYTES]).split(b"\0", 1)[0]
        try:
            desc = json.loads(raw.decode("utf-8"))
        except ValueError:
            return {"group": "?", "corrupt_descriptor": True}
        runs = desc.pop("ranks_runs", None)
        if runs:
            desc["ranks"] = members_list(runs)
        return desc

    def snapshot(self, passed=False, arrivals=False):
        """One consistent-per-stream view: a list of StreamState, one per published stream.  ``passed``:
        each StreamState also lists the calls that completed since the last snapshot and are still in the
        ring, as (seq, op word, start_ns) (the watchdog learns deadlines from them; the done hint would
        otherwise skip them unread).  ``arrivals``: the streams of kind "arrivals" instead, on which a
        recorder source puts its calls' exact starts once it has read them (never calls in flight)."""
        mv = self._mv
        n = min(mv[H_NSTREAMS], self.layout.max_streams)
        while len(self._descs) < n:
            self._descs.append(self._desc(len(self._descs)))
            self._cursor.append(1)
        out = []
        lay = self.layout
        for idx in range(n):
            if (self._descs[idx].get("kind") == ARRIVALS) != arrivals:
                continue
            head = lay.head(idx)
            last = mv[head + S_LAST_STARTED]
            hint = mv[head + S_DONE_HINT]
            ring = lay.ring_base(idx)
            gone = []
            if passed:  # the calls the hint lets the reader skip: read them, where their slots still hold them
                s = max(self._cursor[idx], last - lay.ring + 1, 1)
                while s <= min(hint, last):
                    base = ring + (s & lay.mask) * SLOT_WORDS
                    b, op, t, a = mv[base + 3], mv[base + 1], mv[base + 2], mv[base]
                    if a == b == s and op != SKIPPED:
                        gone.append((s, op, t))
                    s += 1
            seq = max(self._cursor[idx], hint + 1, last - lay.ring + 1, 1)
            oldest = None
            while seq <= last:
                base = ring + (seq & lay.mask) * SLOT_WORDS
                b = mv[base + 3]
                op = mv[base + 1]
                t = mv[base + 2]
                a = mv[base]
                d = mv[base + 4]
                if a != b or a < seq:
                    break  # being rewritten, or not visible yet: look again next time
                if a > seq or d == seq or op == SKIPPED:
                    if passed and a == seq and op != SKIPPED:
                        gone.append((seq, op, t))
                    seq += 1  # completed (or lost to an overflow, or skipped over)
                    continue
                oldest = (seq, op, t)
                break
            self._cursor[idx] = seq
            completed = seq - 1
            pb = mv[head + S_PIN + 3]  # the pinned oldest call in flight, out of the ring: b first, a last
            pop, pt = mv[head + S_PIN + 1], mv[head + S_PIN + 2]
            pa = mv[head + S_PIN]
            if pa == pb and 0 < pa <= last and (oldest is None or pa < oldest[0]):
                oldest = (pa, pop, pt)
                completed = min(completed, pa - 1)
            st = StreamState(idx, self._descs[idx], last, completed, oldest, mv[head + S_OVERFLOW])
            st.passed = gone
            out.append(st)
        return out


class StreamState(object):
    """What the watchdog knows of one stream at one instant."""

    __slots__ = ("idx", "desc", "last_started", "last_completed", "oldest", "overflow", "passed")

    def __init__(self, idx, desc, last_started, last_completed, oldest, overflow):
        self.idx = idx
        self.desc = desc
        self.last_started = last_started
        self.last_completed = last_completed
        self.oldest = oldest  # (seq, op word, start monotonic ns) of the oldest call in flight, or None
        self.overflow = overflow
        self.passed = ()  # snapshot(passed=True): (seq, op word, start ns) of the calls completed since

    def __repr__(self):
        return "StreamState(%r, last_started=%r, last_completed=%r, oldest=%r)" % (
            self.desc.get("group"), self.last_started, self.last_completed, self.oldest)
