"""The shared-memory channel between a rank and its watchdog: one fixed layout, a writer and a reader.

This is the only module that both processes import, and it never imports torch.

Layout (native-endian signed 64-bit words; ``W`` = 8 bytes)::

    header        HEADER_WORDS words      magic, layout version, capacities, counters, rank, world size,
                                          the rank's heartbeat, its main thread's id, and whether the
                                          observer's signal handler is still the one installed
    descriptors   max_streams * DESC_BYTES  one UTF-8 JSON object per stream (NUL padded), written once
    stream heads  max_streams * HEAD_WORDS  last started seq, done hint, overflow count, and the pinned
                                            oldest call in flight (seq_a, op, start_ns, seq_b) when it fell
                                            out of the ring
    rings         max_streams * ring * SLOT_WORDS   one slot per call: seq_a, op, start_ns, seq_b, done_seq

A *stream* is what a sequence number counts: the collectives of one process group, or the point-to-point
calls of one group with one peer.  Sequence numbers start at 1.  A call with sequence number ``s`` lives in
slot ``s % ring`` of its stream's ring.

Writing is lock-free and sends no message: the rank writes a call's start as one ``struct.pack_into`` of
``seq_a, op, start_ns, seq_b`` (one C call, so no other thread of the rank can interleave with it), then
bumps the stream's ``last_started``.  Completion writes ``done_seq = seq`` into the slot, a single word.
Because start and completion touch different words and every word has a single writer at a time, async
work that completes out of order, on another thread, needs no lock.

Reading checks consistency: the reader loads ``seq_b`` first and ``seq_a`` last; equal values mean the
slot was not being rewritten in between (stores become visible in program order on x86 and in the order
of the single C call elsewhere; a torn slot is simply read again at the next poll).  ``done_hint`` is an
optimisation: the rank writes it only when every call up to it is known to be complete, so the reader can
skip finished slots without reading them.

Bursts: a ring holds the last ``ring`` calls of a stream.  When more calls are in flight than that (1,000
async calls issued at once while a peer is away), a new call's slot still holds an older call in flight,
which is then overwritten: the newest calls keep their detail.  But the call that will be overdue first is
the oldest, so the writer keeps it: the oldest call in flight that left the ring (overwritten, or skipped
by ``skip_to``) is *pinned* in its stream's head, and the reader takes it as the oldest.  When it
completes, the next oldest that left the ring is pinned (the writer kept the op and start time of every
overwritten call still in flight).  The head's overflow count says how many calls lost their slot or were
never given one (``untracked``): the report shows it as calls not individually tracked.
"""
import collections
import json
import mmap
import os
import struct
import threading
import time

# The op word (names, codes, bit layout) lives in callword.py; re-exported here for the channel's readers.
from .callword import (API_CODES, APIS, DTYPE_CODES, DTYPES, OP_CODES, OPS, SCALAR_TYPES,  # noqa: F401
                       decode_op, decode_sig, encode_op, encode_sig)

MAGIC = 0x43313044_4F425356  # "C10DOBSV"
LAYOUT_VERSION = 3  # 3: the rank's declared phase in the header

HEADER_WORDS = 32
DESC_BYTES = 1024
HEAD_WORDS = 8
SLOT_WORDS = 5
DEFAULT_MAX_STREAMS = 1024
DEFAULT_RING = 256  # a power of two

# header word indices
(H_MAGIC, H_VERSION, H_MAX_STREAMS, H_RING, H_NSTREAMS, H_RANK, H_WORLD, H_PID, H_DROPPED_STREAMS,
 H_HEARTBEAT, H_MAIN_THREAD, H_HANDLER_REPLACED, H_PHASE_A, H_PHASE_SINCE, H_PHASE_UNTIL, H_PHASE_B) = range(16)
H_PHASE_NAME, PHASE_NAME_BYTES = 16, 128  # words 16-31: the declared phase's name (UTF-8, NUL padded)
# stream head word indices
S_LAST_STARTED, S_DONE_HINT, S_OVERFLOW, S_PIN = range(4)  # S_PIN..S_PIN+3: seq_a, op, start_ns, seq_b

SKIPPED = -1  # the op word of a slot whose number a skip passed over (StreamWriter.skip_to): no call, done
ARRIVALS = "arrivals"  # the kind of a stream that carries only exact starts of calls already read (no detection)

_START = struct.Struct("=4q")
_W = 8
SLOT_BYTES = SLOT_WORDS * _W
_monotonic_ns = time.monotonic_ns


def layout_size(max_streams, ring):
    return _W * (HEADER_WORDS + max_streams * (DESC_BYTES // _W + HEAD_WORDS + ring * SLOT_WORDS))


class _Layout(object):
    """Offsets of one channel, in words, shared by the writer and the reader."""

    def __init__(self, max_streams, ring):
        if ring & (ring - 1):
            raise ValueError("ring must be a power of two, got %r" % (ring,))
        self.max_streams = max_streams
        self.ring = ring
        self.mask = ring - 1
        self.desc_word = HEADER_WORDS
        self.head_word = self.desc_word + max_streams * (DESC_BYTES // _W)
        self.ring_word = self.head_word + max_streams * HEAD_WORDS
        self.size = layout_size(max_streams, ring)

    def head(self, idx):
        return self.head_word + idx * HEAD_WORDS

    def ring_base(self, idx):
        return self.ring_word + idx * self.ring * SLOT_WORDS


class ChannelError(OSError):
    """The channel could not be made (no room anywhere): the observer stays off, the job goes on."""


def default_shm_dir():
    import tempfile
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def directories():
    """Where a channel may be made, in order: /dev/shm (memory), then the temporary directory."""
    import tempfile
    out = []
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        out.append("/dev/shm")
    out.append(tempfile.gettempdir())
    return out


class ChannelWriter(object):
    """Rank side.  Creates the segment and keeps its descriptor (``fd``: a watchdog started again later maps
    the same memory through it); the path is unlinked as soon as the watchdog has mapped it.

    The segment's pages are reserved when it is made (``posix_fallocate``), not when first written: on a
    full tmpfs a write to a mapped page that cannot be backed ends the process with SIGBUS, so a full
    ``/dev/shm`` must be found here, as an OSError, and the next directory tried (``directories``: /dev/shm,
    then the temporary directory)."""

    def __init__(self, max_streams=DEFAULT_MAX_STREAMS, ring=DEFAULT_RING, directory=None):
        self.layout = _Layout(max_streams, ring)
        self.fd = -1
        errors = []
        for d in ([directory] if directory else directories()):
            try:
                self._create(d)
                break
            except OSError as e:
                errors.append("%s: %s" % (d, e.strerror or e))
        else:
            raise ChannelError("no room for the observer's channel (%d bytes) in %s" % (
                self.layout.size, "; ".join(errors)))
        self._mv = memoryview(self._mm).cast("q")
        mv = self._mv
        mv[H_VERSION] = LAYOUT_VERSION
        mv[H_MAX_STREAMS] = max_streams
        mv[H_RING] = ring
        mv[H_RANK] = -1
        mv[H_WORLD] = -1
        mv[H_PID] = os.getpid()
        mv[H_MAGIC] = MAGIC
        self.nstreams = 0

    def _create(self, directory):
        import tempfile
        fd, path = tempfile.mkstemp(prefix="c10d_observer-%d-" % os.getpid(), suffix=".shm", dir=directory)
        try:
            os.ftruncate(fd, self.layout.size)
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, self.layout.size)  # ENOSPC here, never SIGBUS later
            self._mm = mmap.mmap(fd, self.layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.set_inheritable(fd, False)
        self.fd, self.path = fd, path

    def unlink(self):
        """Remove the name; the mappings stay valid.  Safe to call twice."""
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def close(self):
        self.unlink()
        if self._mv is not None:
            self._mv.release()
            self._mv = None
            self._mm.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def set_rank(self, rank, world_size):
        self._mv[H_RANK] = rank
        self._mv[H_WORLD] = world_size

    def set_main_thread(self, ident):
        """The rank's main thread id, which names its block in a faulthandler dump."""
        self._mv[H_MAIN_THREAD] = ident & 0x7FFFFFFFFFFFFFFF

    def heartbeat(self, t_ns=None):
        """Written by a helper thread of the rank: it moves only while the rank's Python can run."""
        self._mv[H_HEARTBEAT] = _monotonic_ns() if t_ns is None else t_ns

    def set_handler_replaced(self, replaced):
        """1 while the observer's signal handler is not the one installed (the watchdog then sends none)."""
        self._mv[H_HANDLER_REPLACED] = 1 if replaced else 0

    def set_phase(self, number, name, since_ns, until_ns):
        """The phase the rank declared (c10d_observer.phase): ``number`` counts phases (0: none), written
        first and last around the rest, so that the reader sees a whole one or none; ``until_ns``
        (monotonic) 0 where it has no limit."""
        mv = self._mv
        mv[H_PHASE_A] = -1  # being rewritten
        data = (name or "").encode("utf-8", "replace")[:PHASE_NAME_BYTES - 1]
        off = H_PHASE_NAME * _W
        self._mm[off:off + PHASE_NAME_BYTES] = data + b"\0" * (PHASE_NAME_BYTES - len(data))
        mv[H_PHASE_SINCE] = since_ns
        mv[H_PHASE_UNTIL] = until_ns
        mv[H_PHASE_B] = number
        mv[H_PHASE_A] = number

    def add_stream(self, desc):
        """Publish a stream's description; returns its index, or -1 when the channel is full."""
        idx = self.nstreams
        if idx >= self.layout.max_streams:
            self._mv[H_DROPPED_STREAMS] += 1
            return -1
        data = _encode_desc(desc)
        off = (self.layout.desc_word + idx * (DESC_BYTES // _W)) * _W
        self._mm[off:off + len(data)] = data
        self.nstreams = idx + 1
        self._mv[H_NSTREAMS] = idx + 1  # published after the descriptor is in place
        return idx

    def stream_writer(self, idx):
        return StreamWriter(self, idx)


def rank_runs(ranks):
    """A list of global ranks as runs [first, count, step]: a group of 1,024 ranks in a few bytes."""
    runs, i, n = [], 0, len(ranks)
    while i < n:
        step = ranks[i + 1] - ranks[i] if i + 1 < n else 1
        j = i + 1
        while j < n and ranks[j] - ranks[j - 1] == step and step > 0:
            j += 1
        if step <= 0:  # not ascending: one rank per run, as given
            j = i + 1
        runs.append([ranks[i], j - i, step if j - i > 1 else 1])
        i = j
    return runs


def expand_runs(runs):
    return [first + k * step for first, count, step in runs for k in range(count)]


def _encode_desc(desc):
    """JSON of at most DESC_BYTES - 1 bytes: the ranks as runs (rank_runs), dropped if still too long,
    then every string shortened."""
    if isinstance(desc.get("ranks"), list) and desc["ranks"] and all(isinstance(r, int) for r in desc["ranks"]):
        desc = dict(desc, ranks=None, ranks_runs=rank_runs(desc["ranks"]))
    data = json.dumps(desc, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if len(data) < DESC_BYTES:
        return data
    short = dict(desc, ranks=None, ranks_runs=None, ranks_truncated=True)
    data = json.dumps(short, separators=(",", ":"), sort_keys=True).encode("utf-8")
    limit = 256
    while len(data) >= DESC_BYTES:
        short = {k: (v[:limit] + "..." if isinstance(v, str) and len(v) > limit else v) for k, v in short.items()
                 if k not in ("ranks", "ranks_runs") or v is None}
        data = json.dumps(short, separators=(",", ":"), sort_keys=True).encode("utf-8")
        limit //= 2
        if limit < 8:
            data = json.dumps({"group": "?", "stream": "?", "ranks_truncated": True}).encode("utf-8")
    return data


class StreamWriter(object):
    """The hot path for one stream.

    ``start`` is one ``pack_into`` and one word; ``done`` one or two words.  ``open`` holds the calls
    started and not done: a call joins it before its sequence number is handed out, so no thread can write
    a done hint past a call that is still open, and the ring overflow is known without reading the segment
    back.  The done word is written even where the hint covers it: two threads ending calls at once may
    write their hints in either order.  Slot offsets are precomputed: every bytecode here runs once per
    collective.
    """

    __slots__ = ("_mm", "_mv", "_offs", "_dones", "_mask", "_size", "_head", "_last", "_hint", "_pack", "seq",
                 "open", "_evicted", "_pin", "_pin_off", "_ring_word", "_lock", "_jumped", "_evq")

    def __init__(self, channel, idx):
        lay = channel.layout
        self._mm = channel._mm
        self._mv = channel._mv
        ring = lay.ring_base(idx)
        self._offs = [(ring + i * SLOT_WORDS) * _W for i in range(lay.ring)]  # byte offset of each slot
        self._dones = [ring + i * SLOT_WORDS + 4 for i in range(lay.ring)]  # word index of each done_seq
        self._mask = lay.mask
        self._size = lay.ring
        self._head = lay.head(idx)
        self._last = self._head + S_LAST_STARTED
        self._hint = self._head + S_DONE_HINT
        self._pack = _START.pack_into
        self.seq = 0  # last sequence number handed out on this stream
        self.open = set()
        self._evicted = {}  # seq -> (op, start_ns) of calls in flight whose slot a newer call took
        self._evq = collections.deque()  # their numbers in the order they were evicted (rising)
        self._pin = 0  # the pinned call's seq (0: none)
        self._pin_off = (self._head + S_PIN) * _W
        self._ring_word = ring
        self._lock = threading.Lock()  # the pin: set on the calling thread, moved on the completing one
        # skip_to jumped while calls were open: one may sit below the window in a slot no call took (else
        # every open call below the window is in _evicted, the oldest first)
        self._jumped = False

    def start(self, op, t_ns=None):
        """Record the start of the next call (now, unless ``t_ns`` is given); returns its sequence number."""
        seq = self.seq + 1
        open_ = self.open
        if open_:  # the call its slot holds (any older seq: skip_to jumps) still in flight: keep it aside
            old = self._mv[self._dones[seq & self._mask] - 4]
            if old in open_:
                self._evict(old)
        open_.add(seq)
        self.seq = seq
        self._pack(self._mm, self._offs[seq & self._mask], seq, op, _monotonic_ns() if t_ns is None else t_ns, seq)
        self._mv[self._last] = seq
        return seq

    def skip_to(self, seq):
        """Number the next call ``seq + 1``: for sources that number calls by torch's own counter and
        learn of calls that already completed (nothing was in flight, or they are not in this stream)."""
        if seq <= self.seq:
            return
        if self.open:
            self._jumped = True
            self._mark_skipped(seq)
        self.seq = seq
        self._mv[self._last] = seq
        if not self.open:
            self._mv[self._hint] = seq
        elif not self._pin or self._pin > min(list(self.open)):
            self._repin()  # a call in flight may have left the reader's window (the last ``ring`` calls)

    def _mark_skipped(self, seq):
        """While calls are open the done hint cannot jump past the numbers a skip passes over: their slots
        in the reader's window (the last ``ring`` numbers) say so instead (op word SKIPPED, done), else the
        reader takes a slot never written for one not visible yet and stops there, blind to every later
        call.  A call still open whose slot a skipped number takes is kept aside first, as start() does."""
        open_, mv, mask = self.open, self._mv, self._mask
        for s in range(max(self.seq + 1, seq - self._size + 1), seq + 1):
            old = mv[self._dones[s & mask] - 4]
            if old in open_:
                self._evict(old)
            self._pack(self._mm, self._offs[s & mask], s, SKIPPED, 0, s)
            mv[self._dones[s & mask]] = s

    def untracked(self, n):
        """``n`` calls of this stream are not recorded one by one (a source skipped them in a burst)."""
        if n > 0:
            self._mv[self._head + S_OVERFLOW] += n

    # -- bursts: the oldest call in flight is never lost (module docstring) ---------------------------
    def _evict(self, old):
        mv = self._mv
        mv[self._head + S_OVERFLOW] += 1
        base = self._ring_word + (old & self._mask) * SLOT_WORDS
        if mv[base] == old:
            with self._lock:
                self._evicted[old] = (mv[base + 1], mv[base + 2])
                q = self._evq
                while q and q[0] not in self._evicted:  # done since: dropped as they come to the front
                    q.popleft()
                q.append(old)
                if not self._pin or old < self._pin:
                    self._set_pin(old, mv[base + 1], mv[base + 2])
                    if old not in self.open:  # completed on another thread meanwhile: its done() may
                        self._repin_locked()  # have looked at the pin before it was set

    def _set_pin(self, seq, op, t):
        self._pin = seq
        self._pack(self._mm, self._pin_off, seq, op, t, seq)

    def _repin(self):
        """Pin the oldest call in flight that is out of the reader's window, or clear the pin."""
        with self._lock:
            self._repin_locked()

    def _repin_locked(self):
        # A call may complete on another thread while this runs: its done() discards it from ``open``, then
        # looks at the pin.  So the pin is checked against ``open`` after it is set, and chosen again if
        # its call completed meanwhile (else a completed call stayed pinned, read as in flight for good).
        lost = set()  # open, yet neither in its slot nor kept aside: never pinned with a made-up start
        while True:
            cand = None if self._jumped else self._oldest_evicted(lost)
            if cand is None:  # every open call looked at: linear in the calls in flight
                below = self.seq - self._size
                open_ = list(self.open)  # one C call: another thread may add to the set meanwhile
                cand = [s for s in open_ if s <= below and s not in lost] + [
                    s for s in list(self._evicted) if s in self.open and s not in lost]
            if not cand:
                self._pin = 0
                self._pack(self._mm, self._pin_off, 0, 0, 0, 0)
                return
            s = min(cand)
            detail = self._evicted.get(s)
            if detail is None:  # skipped over, not overwritten: its slot still holds it
                base = self._ring_word + (s & self._mask) * SLOT_WORDS
                detail = (self._mv[base + 1], self._mv[base + 2]) if self._mv[base] == s else None
            if detail is not None:
                self._set_pin(s, detail[0], detail[1])
                if s in self.open:
                    return
            elif s in self.open:
                lost.add(s)
            # completed meanwhile (its slot and its evicted copy gone), or lost: choose again

    def _oldest_evicted(self, lost):
        """[the oldest open call kept aside], or [] for none.  Calls are evicted in the order of their
        numbers (a slot is taken by the call ``ring`` later) and leave ``_evicted`` when done: the first of
        ``_evq`` still there is the oldest, found without looking at every open call (with 24,000 calls in
        flight, a pinned call's done() took 3.3 ms when it looked at them all)."""
        q, evicted = self._evq, self._evicted
        while q and q[0] not in evicted:  # done since (the lock is held: only done() leaves _evicted)
            q.popleft()
        for s in q:  # normally the first
            if s in evicted and s in self.open and s not in lost:
                return [s]
        return []

    def amend(self, seq, op, t_ns):
        """Rewrite the op and start time of call ``seq`` (still open) once a source has learnt them."""
        if seq in self.open and seq > self.seq - self._size:
            self._pack(self._mm, self._offs[seq & self._mask], seq, op, t_ns, seq)
        if seq in self._evicted:
            self._evicted[seq] = (op, t_ns)
        if seq == self._pin:
            self._set_pin(seq, op, t_ns)

    def done(self, seq):
        """Record the completion of call ``seq``."""
        open_ = self.open
        open_.discard(seq)
        mv = self._mv
        if seq > self.seq - self._size:  # else a later call reuses the slot: leave that one alone
            mv[self._dones[seq & self._mask]] = seq
        if self._evicted:
            self._evicted.pop(seq, None)
        if seq == self._pin:  # the pinned call ended: pin the next oldest that left the ring, if any
            self._repin()  # (one pinned at this moment by start() on another thread is checked there)
        if not open_:  # nothing older is in flight: the reader may skip up to here
            mv[self._hint] = seq
            self._jumped = False


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
            desc["ranks"] = expand_runs(runs)
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
