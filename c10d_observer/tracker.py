"""Rank side: turns "a call on group G started / its work completed" into channel writes.

Sources call the tracker and nothing else; the tracker knows neither which source called it nor how the
watchdog reads the channel.  Per group it keeps one stream for collectives and one per peer for
point-to-point calls, so that the sequence number of a call is the same on every rank that takes part.

A call ends when its work completes: ``work_waited`` (the work's ``wait()`` returned, for CPU backends),
or the completion poller seeing ``Work.is_completed()`` (async works nobody waits on, and every work of a
GPU backend, where ``wait()`` returns before the GPU has finished).
"""
import logging
import threading
import time

from . import channel as _ch
from . import compat

log = logging.getLogger("c10d_observer")

# Backends whose wait() returns only once the op is complete.  For the others (nccl and unknown
# backends), completion is when the work reports it, which for NCCL means the GPU has finished.
_WAIT_MEANS_DONE = frozenset(("gloo", "mpi"))

_monotonic_ns = time.monotonic_ns


class _Stream(object):
    __slots__ = ("writer", "open", "op_api")

    def __init__(self, writer):
        self.writer = writer
        self.open = set()  # seqs in flight whose completion is followed through a work


class _Group(object):
    __slots__ = ("desc", "coll", "p2p", "ranks", "wait_done", "tracker", "pg")

    def __init__(self, tracker, pg, desc):
        self.tracker = tracker
        self.pg = pg
        self.desc = desc
        self.ranks = desc.get("ranks")
        self.wait_done = desc.get("backend") in _WAIT_MEANS_DONE
        self.coll = tracker._stream(dict(desc, kind="collective", stream=desc["group"]))
        self.p2p = {}

    def peer_stream(self, group_peer):
        s = self.p2p.get(group_peer)
        if s is None:
            s = self.p2p[group_peer] = self._make_peer(group_peer)
        return s

    def _make_peer(self, group_peer):
        if group_peer is None:
            peer, pair = None, "any"
        else:
            peer = self.ranks[group_peer] if self.ranks and 0 <= group_peer < len(self.ranks) else group_peer
            me = self.tracker.rank
            pair = "%d-%d" % (min(me, peer), max(me, peer)) if me >= 0 else "?-%d" % peer
        return self.tracker._stream(dict(self.desc, kind="p2p", peer=peer,
                                         stream="%s:p2p:%s" % (self.desc["group"], pair)))


class Tracker(object):
    def __init__(self, writer, completion_period):
        self.channel = writer
        self.groups = {}
        self.pending = {}  # work -> (stream, seq)
        self.api = 0  # API code of the composite call now running (see channel.APIS), 0 for none
        self.rank = -1
        self._lock = threading.Lock()  # guards registration only, never the call path
        self._period = completion_period
        self._stop = threading.Event()
        self._poller = None
        self._untracked = _Stream(None)

    # -- registration (once per group / peer) --------------------------------------------------------
    def group(self, pg):
        g = self.groups.get(pg)
        if g is None:
            with self._lock:
                g = self.groups.get(pg)
                if g is None:
                    self._update_rank()
                    g = self.groups[pg] = _Group(self, pg, compat.describe_group(pg))
        return g

    def _update_rank(self):
        rank, world = compat.rank_and_world()
        if rank >= 0:
            self.rank = rank
            self.channel.set_rank(rank, world)

    def _stream(self, desc):
        idx = self.channel.add_stream(desc)
        if idx < 0:
            log.warning("c10d_observer: channel full; calls on %s are not watched", desc.get("stream"))
            return self._untracked
        return _Stream(self.channel.stream_writer(idx))

    # -- the call path -------------------------------------------------------------------------------
    def start(self, stream, op):
        w = stream.writer
        if w is None:
            return 0
        return w.start(op | self.api << 16, _monotonic_ns())

    def end(self, stream, seq):
        """The call ended on the calling thread (it returned, or raised)."""
        if seq:
            stream.open.discard(seq)
            stream.writer.done(seq, not stream.open)

    def follow(self, stream, seq, work, wait_done):
        """Completion of this call is that of ``work``: by wait() where that means done, else by polling."""
        if not seq:
            return
        stream.open.add(seq)
        self.pending[work] = (stream, seq, wait_done)

    def work_waited(self, work):
        entry = self.pending.get(work)
        if entry is not None and entry[2]:
            if self.pending.pop(work, None) is not None:
                self.end(entry[0], entry[1])

    # -- completion of works that nobody waits on ----------------------------------------------------
    def start_poller(self):
        self._poller = threading.Thread(target=self._poll, name="c10d_observer-completion", daemon=True)
        self._poller.start()

    def _poll(self):
        while not self._stop.wait(self._period):
            try:
                self.poll_once()
            except Exception:  # never let the poller die of one odd work
                log.debug("c10d_observer: completion poll failed", exc_info=True)

    def poll_once(self):
        for work, entry in list(self.pending.items()):
            try:
                completed = work.is_completed()
            except Exception:
                completed = True  # a work that cannot say is a failed one: it is no longer in flight
            if completed and self.pending.pop(work, None) is not None:
                self.end(entry[0], entry[1])

    def stop(self):
        self._stop.set()
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join(timeout=5)
        self.pending.clear()
