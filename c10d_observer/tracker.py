"""Rank side: the groups and streams that calls are recorded on, and the completion of their works.

Sources use the tracker and the streams it hands out (channel_writer.StreamWriter) and nothing else; the
tracker knows neither which source called it nor how the watchdog reads the channel.  Per group it keeps
one stream for collectives and one per direction for point-to-point calls, so that the sequence number of
a call is the same on every rank that takes part.

A call ends when its work completes.  A source puts the work in ``waiting`` (CPU backends: the work's
``wait()`` returning ends it, or the completion poller when ``Work.is_completed()`` says so, which also
covers async works nobody waits on) or hands it to the group's ``gpu`` (GPU backends, where ``wait()``
returns before the GPU has finished: gpu.GpuCompletion, which also follows calls that return no work).

Which source makes a group's events is the plan's decision (sources/table.py), asked once per group
(``native_for``): ``_Group.native`` (collectives), ``native_p2p`` and ``native_functional`` name the
recorder or hook that does, None where the call-path wrappers do.  Sources read them and never write them.

The API that issued a call (``all_gather_object`` issues two all_gathers) is per thread: ``tracker.ctx.api``.
"""
import logging
import threading
import warnings

from . import compat
from . import gpu as _gpu
from . import streams as _streams

log = logging.getLogger("c10d_observer")

# Backends whose wait() returns only once the op is complete.  For the others (nccl and unknown
# backends), completion is when the work reports it, which for NCCL means the GPU has finished.
_WAIT_MEANS_DONE = frozenset(("gloo", "mpi"))
ROOTS_KEPT = 64  # rooted collectives whose root is kept per group (a verdict reads the ones in flight)


class _Untracked(object):
    """Stands in for a stream the channel had no room for: calls on it are not watched."""

    seq = 0
    open = frozenset()

    def start(self, op, t_ns=None):
        return 0

    def done(self, seq):
        pass

    def skip_to(self, seq):
        pass

    def untracked(self, n):
        pass


class _Group(object):
    """One process group: a stream for its collectives and one per direction for its p2p calls.

    Messages between two ranks match in order per direction, so the n-th send from A to B and the n-th
    recv on B from A carry the same sequence number on stream ``<group>:p2p:A->B``.
    """

    __slots__ = ("desc", "coll", "sends", "recvs", "sides", "ranks", "wait_done", "sink", "gpu", "tracker",
                 "batch", "native", "native_p2p", "native_functional", "other_ops", "roots")

    def __init__(self, tracker, desc, pg=None):
        self.tracker = tracker
        self.desc = desc
        self.ranks = desc.get("ranks")
        self.wait_done = desc.get("backend") in _WAIT_MEANS_DONE
        self.sink = tracker.waiting  # where a CPU backend's works go
        self.gpu = None if self.wait_done else tracker.gpu  # follows a GPU backend's calls
        # the recorder or hook that makes this group's events (the wrappers pass its calls through), or
        # None: the wrappers do
        self.plan(pg)
        self.coll = tracker._stream(dict(desc, kind="collective", stream=desc["group"]))
        if self.native is None and pg is not None:
            # number its collectives after torch's own count of those issued so far (NCCL, torch 2.5+),
            # so that ranks agree also on groups made, and calls issued, before enable()
            base = tracker.seq_base(pg, desc)
            if base:
                self.coll.skip_to(base)
        self.sends = {}
        self.recvs = {}
        self.batch = None  # the calls of an open coalescing block (sources.patch._Batch)
        self.sides = {}
        # gloo, where its recorder makes the collectives' events: (torch's op count before, after, p2p?) of each
        # op the recorder does not record (a send, a recv, monitored_barrier): torch's pg_status counts them
        # with the collectives, which it numbers apart (sources/flight_recorder.py, _Numbers)
        self.other_ops = []
        # gloo, where its recorder makes the collectives' events: {torch's op id: (op code, root)} of the last
        # ROOTS_KEPT rooted collectives (sources.patch._native_rooted), the root its entries lack
        self.roots = {}

    def note_root(self, op_id, op, root):
        """A rooted collective took torch's op id ``op_id`` (the rank's threads; the reader reads ``roots``)."""
        roots = self.roots
        roots[op_id] = (op, root)
        if len(roots) > ROOTS_KEPT:
            roots.pop(next(iter(roots)), None)  # the oldest noted

    def end_call(self, st, seq, work):
        """Where a call ends, decided in one place: a GPU backend's once the GPU has finished it (its work
        says so, or, where torch returned none, a marker recorded behind it on the current stream); a CPU
        backend's when its work completes (wait() returned, or the poller saw it); at once where it returned
        no work.  (The patch source's call path inlines the CPU case with work, gloo's every call;
        tests/unit/test_call_end.py holds that copy to this one.)"""
        if self.gpu is not None:
            if work is None:
                self.gpu.mark(st, seq)
            else:
                self.gpu.follow(work, st, seq)
        elif work is None:
            st.done(seq)
        else:
            self.sink[work] = (st, seq)

    def plan(self, pg):
        """Ask the plan again who makes this group's events (a recorder turned out not to record it)."""
        native_for = self.tracker.native_for
        self.native = native_for(pg, self.desc)
        self.native_p2p = native_for(pg, self.desc, "p2p")
        self.native_functional = native_for(pg, self.desc, "functional")

    def side(self, op_name):
        """A stream of its own for one op a native source does not see (``<group>:monitored_barrier``),
        so that its calls never take numbers from the native source's collective stream."""
        s = self.sides.get(op_name)
        if s is None:
            s = self.sides[op_name] = self.tracker._stream(
                dict(self.desc, kind="collective", stream="%s:%s" % (self.desc["group"], op_name)))
        return s

    def p2p_stream(self, group_peer, is_send):
        table = self.sends if is_send else self.recvs
        s = table.get(group_peer)
        if s is None:
            s = table[group_peer] = self._make_p2p(group_peer, is_send)
        return s

    def _make_p2p(self, group_peer, is_send):
        me = self.tracker.rank
        if group_peer is None:
            peer = None
        elif self.ranks and 0 <= group_peer < len(self.ranks):
            peer = self.ranks[group_peer]
        else:
            peer = group_peer
        src, dst = (me, peer) if is_send else (peer, me)
        name = _streams.p2p_name(self.desc["group"], src, dst)
        return self.tracker._stream(dict(self.desc, kind="p2p", peer=peer, src=src, dst=dst, stream=name))


_UNTRACKED = _Untracked()


class _CallContext(threading.local):
    """What the calling thread is inside of: ``api``, the code of the composite API (``all_gather_object``,
    DDP's gradient all-reduce) whose calls are being issued, 0 for none.  A class attribute, so that a
    thread that never set it reads 0 without an initialiser."""

    api = 0


class Tracker(object):
    def __init__(self, writer, completion_period):
        self.channel = writer
        self.groups = {}
        self.waiting = {}  # work -> (stream, seq): CPU backends, done when wait() returns or polled done
        self.gpu = _gpu.GpuCompletion()  # GPU backends: done when the GPU has finished
        self.polling = self.gpu.works
        self.native_for = lambda pg, desc, kind="collective": None  # set by the plan (sources.Dispatch)
        self.seq_base = lambda pg, desc: None  # torch's count of a group's calls before we saw it (Dispatch)
        self.check_handler = lambda: None  # is the observer's signal handler still in place (observer.py)
        self.pollers = []  # more completion checks run by the poller (sources.funcol)
        self.ctx = _CallContext()  # per thread: the API code of the composite call running (callword.APIS)
        # ids of the threads inside a composite call now: the call path reads ``ctx`` (a thread-local
        # lookup, ~400 instructions) only while this is not empty; set.add/discard are atomic under the GIL
        self.inside = set()
        self.rank = -1
        try:
            self.dtype_codes = compat.dtype_codes()  # for the calls' size signatures (channel.encode_sig)
        except ImportError:  # the channel benchmark runs without torch
            self.dtype_codes = {}
        self.timeout = None  # the observer's timeout: a group whose torch timeout is not longer is warned of
        self._warned = set()
        self._lock = threading.Lock()  # guards registration only, never the call path
        self._period = completion_period
        self._stop = threading.Event()
        self._poller = None

    # -- registration (once per group / peer) --------------------------------------------------------
    def group(self, pg):
        return self.groups.get(pg) or self._register(pg, lambda: compat.describe_group(pg), pg)

    def group_by_name(self, name, backend="unknown"):
        """A group known only by the name torch gave it (a native source reports names, not objects)."""
        pg = compat.find_group(name)
        if pg is not None:
            return self.group(pg)
        key = ("name", name)
        return self.groups.get(key) or self._register(
            key, lambda: {"group": str(name), "name": str(name), "ranks": None, "backend": backend})

    def replan(self, pg):
        """A group's sources changed (a recorder does not record it): its next calls go where the plan says."""
        g = self.groups.get(pg)
        if g is not None:
            g.plan(pg)

    def _register(self, key, describe, pg=None):
        with self._lock:
            g = self.groups.get(key)
            if g is None:
                self._update_rank()
                try:
                    desc = describe()
                except Exception:  # an odd group must not break the collective
                    log.debug("c10d_observer: cannot describe %r", key, exc_info=True)
                    desc = {"group": "unknown-%d" % len(self.groups), "ranks": None, "backend": "unknown"}
                g = self.groups[key] = _Group(self, desc, pg)
                self.check_torch_timeout(desc)
        return g

    def check_torch_timeout(self, desc):
        """Warn once per group when torch would end its collectives before the observer reports them."""
        t = desc.get("torch_timeout_s")
        if t is None or self.timeout is None or self.timeout < t or desc.get("group") in self._warned:
            return
        self._warned.add(desc.get("group"))
        msg = ("c10d_observer: timeout=%g s is not below torch's own timeout of group %s (%g s): torch will "
               "abort a hung collective there before the observer reports it; pass a smaller timeout "
               "(or a larger timeout= to init_process_group / new_group)" % (self.timeout, desc.get("group"), t))
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning)

    def in_a_call(self):
        """Whether a call the wrappers write (p2p, a side stream, a group no source records) is in flight on
        this rank: a recorder source reads its buffer once the rank has waited in one for a while."""
        for g in list(self.groups.values()):
            for s in [g.coll] + list(g.sends.values()) + list(g.recvs.values()) + list(g.sides.values()):
                if getattr(s, "open", None):
                    return True
        return False

    def _update_rank(self):
        rank, world = compat.rank_and_world()
        if rank >= 0:
            self.rank = rank
            self.channel.set_rank(rank, world)

    def _stream(self, desc):
        idx = self.channel.add_stream(desc)
        if idx < 0:
            log.warning("c10d_observer: channel full; calls on %s are not watched", desc.get("stream"))
            return _UNTRACKED
        return self.channel.stream_writer(idx)

    # -- completion of works that nobody waits on ----------------------------------------------------
    def start_poller(self):
        self._poller = threading.Thread(target=self._poll, name="c10d_observer-completion", daemon=True)
        self._poller.start()

    def _poll(self):
        self.channel.heartbeat()
        # Half the watchdog's poll while works are pending (a completion is then seen well within one
        # poll), the whole poll while nothing is: with gloo, wait() ends almost every call itself.
        while not self._stop.wait(self._period / 2.0 if self.waiting or self.gpu.pending() else self._period):
            self.channel.heartbeat()  # the watchdog tells a rank whose Python cannot run by this
            try:
                self.check_handler()
                self.poll_once()
            except Exception:  # never let the poller die of one odd work
                log.debug("c10d_observer: completion poll failed", exc_info=True)

    def poll_once(self):
        table = self.waiting
        for work, entry in list(table.items()):
            try:
                completed = work.is_completed()
            except Exception:
                completed = True  # a work that cannot say is a failed one: no longer in flight
            if completed and table.pop(work, None) is not None:
                entry[0].done(entry[1])
        self.gpu.poll()
        for poll in self.pollers:
            poll()

    def stop(self):
        self._stop.set()
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join(timeout=5)
        try:  # one last look, so that the watchdog's final state (disable()) has every completion
            self.poll_once()
        except Exception:
            log.debug("c10d_observer: the last completion poll failed", exc_info=True)
        self.waiting.clear()
        self.gpu.clear()
