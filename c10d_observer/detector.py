"""The watchdog's detection, torch-free and pure: ``find_overdue(snapshot, now_ns, timeout_ns)`` (which calls are
past the deadline, a function of the channel contents and the time) and ``Detector`` (what it decided: each
overdue call once, at its level, learned or hard, and how it ended; each snapshot turned into Actions).  The
watchdog (watchdog.py) wires it to its effects.
"""
from collections import namedtuple

from . import channel as _ch
from . import config as _config
from . import deadlines as _deadlines
from . import documents as _documents
from .levels import Level
from .protocols import Action
from .text import rank_list

Overdue = namedtuple("Overdue", "stream seq op start_ns")


def find_overdue(snapshot, now_ns, timeout_ns, queued=None):
    """The (stream, seq) whose oldest call in flight has been so for longer than ``timeout_ns``.

    Only a stream's oldest call in flight can be the first overdue one: later calls started later.
    ``queued``: {stream index: (seq, ns)}: a call that waited in a queue behind others of its stream (a
    burst of async calls, perhaps behind a stuck one) counts from the first poll that saw it at the front
    (``ns``), not from when it was issued: a group's calls complete in order, so the calls of a burst
    draining after a hang resolved are not new hangs.
    """
    out = []
    for st in snapshot:
        if st.oldest is None:
            continue
        seq, op, start = st.oldest
        front = queued.get(st.idx) if queued else None
        since = max(start, front[1]) if front is not None and front[0] == seq else start
        if now_ns - since > timeout_ns:
            out.append(Overdue(st, seq, op, start))
    return out


def overdue_entry(o, now_ns, wall_now, level=Level.HARD, deadline_s=None):
    """The documents.Overdue of a call found overdue (past its learned deadline: ``level`` "soft")."""
    desc = o.stream.desc
    op, api = _ch.decode_op(o.op)
    age = (now_ns - o.start_ns) / 1e9
    ranks = desc.get("ranks")
    return _documents.Overdue(str(desc.get("stream")), str(desc.get("group")), o.seq, op, api, _ch.decode_sig(o.op),
                              _ch.ranks_tuple(ranks) if isinstance(ranks, list) else None, desc.get("kind") or "collective",
                              desc.get("peer"), desc.get("backend"), wall_now - age, wall_now, round(age, 3),
                              level=level, deadline_s=deadline_s)


# -- detection ------------------------------------------------------------------------------------------
class Detector(object):
    """Which calls of this rank are overdue, each once, and how each ended.  No files, no signals: it
    turns a snapshot and the time into decisions (Actions).

    - a call past its learned deadline (Learner: "soft") or the hard one (the timeout): "report" (the
      report brought up to date), "stacks", "gather", "say_overdue" (one console line per call).  Soft
      verdicts inform, hard verdicts act: only a call past the hard deadline adds "notify" (the configured
      signal, once per hang: the first hard call of this rank's overdue calls; the Watchdog sends it once the
      verdict says the hang is hard and not held) and, under on_timeout="abort", "abort".  A call first found
      soft that reaches the hard deadline is gathered again, at the hard level ("report", "gather",
      "say_overdue", "notify", "abort"), unless a verdict held it (a rank it waits for is in a declared
      phase: ``hold``);
    - a reported call that left flight is held for ``settle`` seconds, then decided: "completed" (the hang
      resolved) unless ``dead_peers(entry)`` names ranks of the call that ended meanwhile ("peers ended":
      torch raised, the hang did not resolve), or this rank is being ended ("rank ended").
    """

    def __init__(self, timeout_s, windows, on_timeout="dump", soft=True, timing=_config.DEFAULT_TIMING):
        self.timeout_ns = int(timeout_s * 1e9)
        self.timeout_s = timeout_s
        self.settle_ns = int(windows.settle * 1e9)
        self.on_timeout = on_timeout
        self.learner = _deadlines.Learner(windows.poll, timeout_s, timing.learned_floor_s,
                                          timing.phase_gap_s) if soft else None
        self.fired = set()  # (stream index, seq)
        self.entries = []  # documents.Overdue, in the order found
        self.keys = []  # (stream index, seq) of each entry
        self.held = {}  # entry index -> monotonic ns until which its hard verdict is held
        self.leaving = {}  # entry index -> (monotonic ns, wall) when first seen out of flight
        self.in_hang = False
        self.notified = False  # "notify" was decided in this hang (at its first hard call)
        self.front = {}  # stream index -> (its front call's seq or None, the tick that saw it: ns)
        self.queued = {}  # stream index -> (seq, ns): the call that reached its stream's front behind others,
        # and the first tick that saw it there (find_overdue counts it from then: Detector._fronts)

    def restore(self, entries, snapshot):
        """Entries a previous watchdog of this rank wrote (a restart): fired already, never again."""
        idx = {}
        for st in snapshot:
            idx.setdefault(str(st.desc.get("stream")), st.idx)
        for e in entries:
            i = idx.get(e.stream)
            if i is not None:
                self.fired.add((i, e.seq))
                self.entries.append(e)
                self.keys.append((i, e.seq))
        self.in_hang = any(e.in_flight for e in self.entries)
        self.notified = any(e.in_flight and e.level == Level.HARD for e in self.entries)

    def hold(self, until_ns, wall_until=None):
        """A verdict held the hard level (a rank the calls wait for is in a declared phase): the calls in
        flight stay soft until ``until_ns``; the signal, not sent yet, waits for the hard level again."""
        self.notified = False
        for i, e in enumerate(self.entries):
            if e.in_flight:
                self.held[i] = until_ns
                if e.level == Level.HARD:
                    self.entries[i] = e._replace(level=Level.SOFT, held_until=wall_until)

    def hard_in_flight(self):
        """Whether a hard call is still in flight: not one that left flight and is settling."""
        return any(e.in_flight and e.level == Level.HARD and i not in self.leaving for i, e in enumerate(self.entries))

    def tick(self, snapshot, now_ns, wall_now, dead_peers=lambda entry: (), aborting=False):
        out = []
        self._fronts(snapshot, now_ns)
        if self.learner is not None:
            self.learner.observe(snapshot, now_ns, self.queued, self.fired)
        flying = {(st.idx, st.oldest[0]) for st in snapshot if st.oldest is not None}
        for i, (key, e) in enumerate(zip(self.keys, self.entries)):
            if not e.in_flight:
                continue
            if key in flying:
                self.leaving.pop(i, None)
                continue
            seen = self.leaving.setdefault(i, (now_ns, wall_now))
            if aborting or now_ns - seen[0] >= self.settle_ns:
                del self.leaving[i]
                self.held.pop(i, None)
                out.extend(self._ended(i, e, seen[1], () if aborting else tuple(dead_peers(e)), aborting))
        hard = find_overdue(snapshot, now_ns, self.timeout_ns, self.queued)
        hard_keys = {(o.stream.idx, o.seq) for o in hard}
        found, upgraded = [], []
        for o in hard:
            key = (o.stream.idx, o.seq)
            if key not in self.fired:
                continue
            i = self.keys.index(key)
            e = self.entries[i]
            if e.in_flight and e.level == Level.SOFT and now_ns >= self.held.get(i, 0):
                self.entries[i] = e._replace(level=Level.HARD, detected_at=wall_now, held_until=None,
                                             age_s=round((now_ns - o.start_ns) / 1e9, 3), deadline_s=self.timeout_s)
                upgraded.append(self.entries[i])
        for o in hard:
            if (o.stream.idx, o.seq) not in self.fired:
                found.append(overdue_entry(o, now_ns, wall_now, Level.HARD, self.timeout_s))
                self._fire(o)
        for o, d in self._soft(snapshot, now_ns, hard_keys):
            found.append(overdue_entry(o, now_ns, wall_now, Level.SOFT, round(d / 1e9, 3)))
            self._fire(o)
        if not found and not upgraded:
            if not any(e.in_flight for e in self.entries):
                self.in_hang = self.notified = False
            return out
        self.entries.extend(found)
        first = (found or upgraded)[0]
        reason = "%s in flight for %.1f s (%s)" % (first.describe(), first.age_s, self._deadline_text(first))
        out.append(Action("report", None))
        hard = [e for e in found + upgraded if e.level == Level.HARD]
        if hard and not self.notified:  # soft verdicts inform: the signal is the hard verdict's
            self.notified = True
            out.append(Action("notify", "%s in flight for %.1f s (%s)" % (
                hard[0].describe(), hard[0].age_s, self._deadline_text(hard[0]))))
        self.in_hang = True
        if found:
            out.append(Action("stacks", (reason, True)))
        out.append(Action("gather", Level.HARD if any(e.level == Level.HARD for e in found + upgraded) else Level.SOFT))
        for e in found + upgraded:
            out.append(Action("say_overdue", e))
        if self.on_timeout == "abort" and any(e.level == Level.HARD for e in found + upgraded):
            out.append(Action("abort", None))
        return out

    def _fire(self, o):
        self.fired.add((o.stream.idx, o.seq))
        self.keys.append((o.stream.idx, o.seq))

    def _soft(self, snapshot, now_ns, hard_keys):
        """(call, its deadline ns) of the front calls past their learned deadline, not fired yet."""
        if self.learner is None:
            return []
        out = []
        for st in snapshot:
            if st.oldest is None:
                continue
            seq, word, start = st.oldest
            if (st.idx, seq) in self.fired or (st.idx, seq) in hard_keys:
                continue
            d = self.learner.deadline_ns(st.idx, word)
            q = self.queued.get(st.idx)
            since = max(start, q[1]) if q is not None and q[0] == seq else start
            if d is not None and now_ns - since > d:
                out.append((Overdue(st, seq, word, start), d))
        return out

    def next_deadline_ns(self, snapshot):
        """When the first front call in ``snapshot`` passes a deadline it has not passed yet (its learned
        one, the hard one, or the hard one of a call found soft), in monotonic ns; None where none is in
        flight.  The watchdog wakes then instead of at its next poll: a hang is found at its deadline, not
        up to a poll after it."""
        best = None
        for st in snapshot:
            if st.oldest is None:
                continue
            seq, word, start = st.oldest
            q = self.queued.get(st.idx)
            since = max(start, q[1]) if q is not None and q[0] == seq else start
            key = (st.idx, seq)
            if key in self.fired:
                i = self.keys.index(key)
                e = self.entries[i]
                if not (e.in_flight and e.level == Level.SOFT):
                    continue
                t = max(since + self.timeout_ns, self.held.get(i, 0))
            else:
                t = since + self.timeout_ns
                d = self.learner.deadline_ns(st.idx, word) if self.learner is not None else None
                if d is not None:
                    t = min(t, since + d)
            best = t if best is None else min(best, t)
        return None if best is None else best + 1  # overdue once strictly past it

    def _deadline_text(self, e):
        if e.level == Level.SOFT:
            return "past its learned deadline of %g s; the hard one is %g s" % (e.deadline_s, self.timeout_s)
        return "timeout %g s" % self.timeout_s

    def _fronts(self, snapshot, now_ns):
        """Note when each stream's front call got there: a group's calls complete in order, so a call behind
        others (a burst of async calls, perhaps behind a stuck one) can only hang once it is at the front.
        It got there between the last poll that saw an earlier call there and this one; it counts from this
        one.  A call at the front as long as the timeout is found at most a poll later; counting from the
        earlier poll would turn the watchdog's own gap between two polls (a merge, a loaded machine that
        starved it for seconds while a burst drained) into time at the front: a hang that never was."""
        for st in snapshot:
            seq = st.oldest[0] if st.oldest is not None else None
            prev = self.front.get(st.idx)
            if seq is not None and prev is not None and prev[0] is not None and prev[0] < seq:
                self.queued[st.idx] = (seq, now_ns)
            self.front[st.idx] = (seq, now_ns)

    def _ended(self, i, e, wall_seen, dead, aborting):
        after = round(wall_seen - (e.started_at or wall_seen), 1)
        if aborting:
            how, text = "rank ended", "this rank was ended by the observer (on_timeout=abort) while in it"
        elif dead:
            how, text = "peers ended", "it ended once %s of it had ended: not a recovery" % rank_list(dead)
        else:
            how, text = "completed", "completed after %.1f s in flight (it was overdue): resolved" % after
        self.entries[i] = e._replace(in_flight=False, ended=how, completed_at=wall_seen, resolved_after_s=after)
        return [Action("report", None), Action("say", "%s %s" % (e.describe(), text))]

    def settle(self, snapshot, now_ns, wall_now, dead_peers=lambda entry: ()):
        """At disable(): every reported call that is no longer in flight is decided now (no settle window:
        the rank stopped the observer, so its peers' ends are there by now or will not come)."""
        out = []
        flying = {(st.idx, st.oldest[0]) for st in snapshot if st.oldest is not None}
        for i, (key, e) in enumerate(zip(self.keys, self.entries)):
            if e.in_flight and key not in flying:
                seen = self.leaving.pop(i, (now_ns, wall_now))
                out.extend(self._ended(i, e, seen[1], tuple(dead_peers(e)), False))
        return out

    def rank_ended(self, wall_now):
        """The rank is gone: its calls still in flight ended with it."""
        for i, e in enumerate(self.entries):
            if e.in_flight:
                self.entries[i] = e._replace(in_flight=False, ended="rank ended", completed_at=wall_now,
                                             resolved_after_s=round(wall_now - (e.started_at or wall_now), 1))

    def in_flight_text(self, snapshot, now_ns, wall_now):
        """'; <call> in flight for N s' for this rank's oldest call in flight, or '' (for a dump's header)."""
        flying = find_overdue(snapshot, now_ns, -1)
        if not flying:
            return ""
        o = min(flying, key=lambda o: o.start_ns)
        return "; %s in flight for %.1f s" % (overdue_entry(o, now_ns, wall_now).describe(), (now_ns - o.start_ns) / 1e9)
