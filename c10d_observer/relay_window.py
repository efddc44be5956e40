"""The relay's gather window, a machine of phases (actions.Machine): which requests of the job count, which one
is merged, and whether this node merges or answers.  Pure: no store, no file, no clock of its own; relay.py
reads the store and dump_dir and asks it.

One merge per job: of the requests seen within the window, the lowest-numbered (the store numbers them) wins.

- IDLE: no request in the window; the relay's one store operation a period (or fewer: relay.idle_read_every).
- MERGING: this node's request is the window's first: its watchdog merges; the relay fetches the other nodes'
  states and sends the verdict out.
- ANSWERING: another node's request is first: this node's states go out, labelled with that request's number,
  and its verdict comes back in.

IDLE -> MERGING (this node's request, published first) or ANSWERING (another node's, read first);
MERGING -> ANSWERING (an earlier-numbered request read after this node published its own; or a second
request of this node's, numbered after its first: the first stays the merge); either -> IDLE once every
request of the window is older than ``window_s``.  Numbers only grow, so ANSWERING never turns MERGING.
"""
from enum import Enum

from .actions import Machine


class RelayPhase(str, Enum):
    IDLE = "idle"
    MERGING = "merging"
    ANSWERING = "answering"


class RelayWindow(Machine):
    """The requests of one gather window: ``active`` {gather id: until when it counts}, ``winner`` (number,
    request) the window's lowest-numbered, ``own`` (number, gather id) this node's newest."""

    IDLE, MERGING, ANSWERING = RelayPhase.IDLE, RelayPhase.MERGING, RelayPhase.ANSWERING
    ALLOWED = {
        IDLE: (MERGING, ANSWERING),
        MERGING: (ANSWERING, IDLE),
        ANSWERING: (IDLE,),
    }

    def __init__(self, window_s):
        self.window_s = window_s
        self.phase = self.IDLE
        self.since_ns = None
        self.active = {}
        self.winner = None
        self.own = None

    def __contains__(self, gid):
        return gid in self.active

    @property
    def open(self):
        return bool(self.active)

    @property
    def merging(self):
        return self.phase is self.MERGING

    @property
    def number(self):
        """The number of the request this node takes for the merge's (its states are labelled with it)."""
        return self.winner[0] if self.winner is not None else None

    def published(self, n, req, now):
        """This node published its request ``req`` as number ``n``.  True where another request stays the
        window's first: the relay writes that one into dump_dir (``supersedes`` this node's)."""
        self.active[req.id] = now + self.window_s
        self.own = (n, req.id)
        if self.winner is None or n < self.winner[0]:
            self.winner = (n, req)
            self._phase()
            return False
        self._phase()
        return True

    def after_first(self, k):
        """Request ``k`` is numbered after the window's first: it loses, and its body is not needed."""
        return self.winner is not None and k > self.winner[0]

    def read(self, k, req, now):
        """Another node's request ``req`` (number ``k``, dated by this node's clock) was read.  True where it is
        the window's first now: the relay writes it into dump_dir."""
        self.active[req.id] = now + self.window_s
        if self.winner is None or k < self.winner[0]:
            self.winner = (k, req)
            self._phase()
            return True
        return False

    def expire(self, now):
        """Drop the requests older than the window.  True where the window ended (IDLE again: the next gather
        starts from nothing)."""
        for gid, until in list(self.active.items()):
            if now > until:
                del self.active[gid]
        if self.active:
            return False
        self.winner = self.own = None
        if self.phase is not self.IDLE:
            self._to(self.IDLE, None)
        return True

    def _phase(self):
        phase = self.MERGING if self.own is not None and self.own[0] == self.winner[0] else self.ANSWERING
        if phase is not self.phase:
            self._to(phase, None)
