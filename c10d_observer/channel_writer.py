"""The rank's half of the channel (channel.py: the layout both halves share): ``ChannelWriter`` makes the shared
memory and its header, ``StreamWriter`` writes one stream's calls (the call path: one ``struct.pack_into`` a
start, one word a completion).  Never imports torch."""
import collections
import mmap
import os
import threading

from .channel import (ChannelError, DEFAULT_MAX_STREAMS, DEFAULT_RING, DESC_BYTES, H_DROPPED_STREAMS,
                       H_HANDLER_REPLACED, H_HEARTBEAT, H_MAGIC, H_MAIN_THREAD, H_MAX_STREAMS, H_NSTREAMS,
                       H_PHASE_A, H_PHASE_B, H_PHASE_NAME, H_PHASE_SINCE, H_PHASE_UNTIL, H_PID, H_RANK, H_RING,
                       H_VERSION, H_WORLD, LAYOUT_VERSION, MAGIC, PHASE_NAME_BYTES, SKIPPED, SLOT_WORDS,
                       S_DONE_HINT, S_LAST_STARTED, S_OVERFLOW, S_PIN, _Layout, _START, _W, _encode_desc,
                       _monotonic_ns, directories)


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
