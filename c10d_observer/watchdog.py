"""The watchdog subprocess: one per rank.  It never imports torch.

``find_overdue(snapshot, now_ns, timeout_ns)`` is the decision: a pure function of the channel contents and
the time.  ``Detector`` keeps what it decided (each overdue call once, and how it ended) and turns each
snapshot into decisions.  Three protocols own their state, each as phases with deadlines on the injected
clock: ``StackCollection`` (the rank's helper thread asked by a file, the dump signal where it does not
answer, py-spy beside), ``Gather`` (the cross-rank gather on one node: request, answers, merge) and
``Abort`` (on_timeout="abort": the verdict, the culprit's end, the stacks, then SIGTERM and SIGKILL).
``Watchdog.tick(now)`` asks each what to do and returns the actions; ``Watchdog.act`` runs one as a
no-throw step (a failure is said once and retried where it matters); ``run`` only waits on its rank and
the clock, calls ``tick`` and acts.  Nothing here sleeps inside ``tick``.

The signal contract (docs/contracts.md, "The signal"): the configured signal (SIGUSR1 by default) goes to the rank
once per hang, when a call of its own becomes overdue, and only where the observer's handler is still the
one installed (it then runs the handler the job had before enable()).  It is never sent for stacks, nor to
a rank with nothing overdue.  The stacks come from the rank's helper thread; the C-level all-thread dump
(faulthandler) is the fallback for a rank whose helper cannot answer, on a signal of its own
(``dump_signal``).

Started as ``python -m c10d_observer.watchdog``: the config (config.WatchdogConfig) arrives as one JSON line
on stdin, the channel as an inherited descriptor, and stdin then stays open as the rank's lifeline: a
"stop" line (disable) or EOF (the rank exited or died) ends the watchdog.  Processes the rank forked
(DataLoader workers) may hold the pipe open after the rank is gone, so each poll also checks that the
rank is still the watchdog's parent.  Readiness is the line ``READY <pid>`` on stdout.
"""
import os
import select
import signal
import socket
import sys
import time
from collections import namedtuple

from . import election as _election
from . import arrivals as _arrivals
from . import channel as _ch
from . import config as _config
from . import deadlines as _deadlines
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import requests as _requests
from . import watchdog_io as _io
from .verdict.types import Level
from .config import HANG_EXIT_CODE
from .text import rank_list, short_clock

from .protocols import Abort, Action, Gather, StackCollection

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


def _log(msg):
    try:
        sys.stderr.write("c10d_observer[watchdog] %s: %s\n" % (short_clock(time.time()), msg))
        sys.stderr.flush()
    except Exception:
        pass


def overdue_entry(o, now_ns, wall_now, level="hard", deadline_s=None):
    """The documents.Overdue of a call found overdue (past its learned deadline: ``level`` "soft")."""
    desc = o.stream.desc
    op, api = _ch.decode_op(o.op)
    age = (now_ns - o.start_ns) / 1e9
    ranks = desc.get("ranks")
    return _documents.Overdue(str(desc.get("stream")), str(desc.get("group")), o.seq, op, api, _ch.decode_sig(o.op),
                              tuple(ranks) if isinstance(ranks, list) else None, desc.get("kind") or "collective",
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
        self.notified = any(e.in_flight and e.level == "hard" for e in self.entries)

    def hold(self, until_ns, wall_until=None):
        """A verdict held the hard level (a rank the calls wait for is in a declared phase): the calls in
        flight stay soft until ``until_ns``; the signal, not sent yet, waits for the hard level again."""
        self.notified = False
        for i, e in enumerate(self.entries):
            if e.in_flight:
                self.held[i] = until_ns
                if e.level == "hard":
                    self.entries[i] = e._replace(level="soft", held_until=wall_until)

    def hard_in_flight(self):
        """Whether a hard call is still in flight: not one that left flight and is settling."""
        return any(e.in_flight and e.level == "hard" and i not in self.leaving for i, e in enumerate(self.entries))

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
            if e.in_flight and e.level == "soft" and now_ns >= self.held.get(i, 0):
                self.entries[i] = e._replace(level="hard", detected_at=wall_now, held_until=None,
                                             age_s=round((now_ns - o.start_ns) / 1e9, 3), deadline_s=self.timeout_s)
                upgraded.append(self.entries[i])
        for o in hard:
            if (o.stream.idx, o.seq) not in self.fired:
                found.append(overdue_entry(o, now_ns, wall_now, "hard", self.timeout_s))
                self._fire(o)
        for o, d in self._soft(snapshot, now_ns, hard_keys):
            found.append(overdue_entry(o, now_ns, wall_now, "soft", round(d / 1e9, 3)))
            self._fire(o)
        if not found and not upgraded:
            if not any(e.in_flight for e in self.entries):
                self.in_hang = self.notified = False
            return out
        self.entries.extend(found)
        first = (found or upgraded)[0]
        reason = "%s in flight for %.1f s (%s)" % (first.describe(), first.age_s, self._deadline_text(first))
        out.append(Action("report", None))
        hard = [e for e in found + upgraded if e.level == "hard"]
        if hard and not self.notified:  # soft verdicts inform: the signal is the hard verdict's
            self.notified = True
            out.append(Action("notify", "%s in flight for %.1f s (%s)" % (
                hard[0].describe(), hard[0].age_s, self._deadline_text(hard[0]))))
        self.in_hang = True
        if found:
            out.append(Action("stacks", (reason, True)))
        out.append(Action("gather", "hard" if any(e.level == "hard" for e in found + upgraded) else "soft"))
        for e in found + upgraded:
            out.append(Action("say_overdue", e))
        if self.on_timeout == "abort" and any(e.level == "hard" for e in found + upgraded):
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
                if not (e.in_flight and e.level == "soft"):
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
        if e.level == "soft":
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


LIVE_PERIOD_S = 1.0  # c10d-observer watch redraws every second
REQUEST_LOOK_S = 0.1  # an idle watchdog looks for a gather request (a stat) 4 times a poll, at most this often


# -- the watchdog ---------------------------------------------------------------------------------------
class Watchdog(object):
    """The detector and the protocols, wired to their effects (watchdog_io.py).  ``tick(now)`` decides and
    returns Actions; ``act`` runs one, as a no-throw step; ``run`` waits on the rank and the clock."""

    def __init__(self, cfg, reader, clock=time.monotonic_ns, wall=time.time, kill=os.kill, log=_log):
        if isinstance(cfg, dict):
            cfg = _config.WatchdogConfig.from_json(cfg)
        self.cfg = cfg
        self.w = cfg.windows
        self.reader = reader
        self.clock = clock
        self.wall = wall
        self.log = log
        self.said = set()  # keys of things said once
        dd = self.dd = _dumpdir.DumpDir(cfg.dump_dir, said=self.say_once)
        self.detector = Detector(cfg.timeout, self.w, cfg.on_timeout, soft=cfg.soft, timing=cfg.timings)
        self.arrivals_period_s = cfg.timings.arrivals_period_s
        self.stacks = StackCollection(self.w, has_dump_signal=cfg.dump_signal is not None)
        self.py_spy_due = False  # py-spy waits for the helper's dump: it stops the rank while it reads it
        self.py_spy_hold_ns = None  # across nodes, also for the gather's verdict (the rank's relay carries it)
        self.gather = Gather(self.w, cfg.job_id, wall())
        self.abort = Abort(self.w)
        self.notifier = _io.Notifier(cfg, reader, dd, kill, log)
        self.taker = _io.StackTaker(cfg, reader, dd, kill, log, wall)
        self.docs = _io.RankDocs(cfg, reader, dd, clock, wall, self.gather.started_at, self.notifier, self.taker,
                                 self.stacks)
        self.files = _io.GatherFiles(cfg, reader, dd, wall, log)
        self.ender = _io.Ender(cfg, reader, dd, kill, log, wall)
        self.snap = ()
        self.report_due = False  # a report to write (or to retry: the last write failed)
        self.pending_signal = None  # (reason, monotonic ns): a hard detection's signal, sent at its verdict
        self.verdict_seen = None  # the last verdict.json read (the gather's verdict may come before the signal)
        self.regathered = set()  # (stream, seq) of this rank's calls gathered again, left out of a merged verdict
        self.arrivals = _arrivals.ArrivalLog()  # the starts of this rank's calls, written every period
        self.stragglers = _arrivals.Stragglers()  # the node's join, where this rank's watchdog leads it
        self.arrivals_due = clock() + int(self.arrivals_period_s * 1e9)
        self.live_due = clock()  # a live document each LIVE_PERIOD_S while a view is open (watch-request.json)
        self.run_action = {  # what each action does (the effect's owner), by kind
            "report": self._report, "say": self._say, "say_overdue": self._say_overdue,
            "notify": self._notify, "signal": self._send_signal, "stacks": self._stacks,
            "stack_request": lambda reason, now: self.taker.request(reason),
            "withdraw_request": lambda _, now: self.taker.withdraw(), "dump_signal": self._dump_signal,
            "gather": self._request_gather, "answer": self._answer, "merge": self._merge, "hold": self._hold,
            "abort": self._abort, "abort_culprit": self._abort_culprit,
            "error_file": lambda d, now: self.ender.error_file(*d), "term": lambda _, now: self.ender.term(),
            "exit_request": lambda culprit, now: self.ender.exit_request(culprit),
            "arm": lambda culprit, now: self.ender.arm(culprit),
            "kill": lambda _, now: self.ender.kill_now(), "arrivals": self._arrivals,
            "live": lambda _, now: self.docs.live(self.detector.entries, self.snap, now)}
        if cfg.restarts:  # a watchdog of this rank died: what it reported stays reported
            self.detector.restore(self.docs.reported(), reader.snapshot())

    @property
    def last_report(self):
        return self.docs.last_report

    def say_once(self, text, key=None):
        key = key or text
        if key not in self.said:
            self.said.add(key)
            self.log(text)

    # -- one poll ---------------------------------------------------------------------------------------
    def tick(self, now_ns):
        """What to do now, as Actions: the protocols' steps, then the detector's decisions."""
        self.taker.reap_py_spy()
        out = self._protocols(now_ns, abort=False)
        self.snap = self.reader.snapshot(passed=True)
        self.arrivals.observe(self.snap, now_ns, self.wall(), self.reader.snapshot(passed=True, arrivals=True))
        if now_ns >= self.arrivals_due:
            self.arrivals_due = now_ns + int(self.arrivals_period_s * 1e9)
            out.append(Action("arrivals", None))
        if now_ns >= self.live_due:  # c10d-observer watch: a look for its request, once a second
            self.live_due = now_ns + int(LIVE_PERIOD_S * 1e9)
            if self.docs.watched(self.wall()):
                out.append(Action("live", None))
        ending = self.abort.ending
        out += self.detector.tick(self.snap, now_ns, self.wall(), self.docs.dead_peers, aborting=ending)
        if self.report_due and not any(a.kind == "report" for a in out):
            out.append(Action("report", None))
        if self.abort.active:
            out += self._abort_step(now_ns)
        return out

    def _protocols(self, now_ns, abort=True):
        out = self.stacks.step(now_ns, self.taker.size())
        self._py_spy_step(now_ns)
        out += self._gather_step(now_ns) + self._signal_step(now_ns)
        if abort and self.abort.active:
            out += self._abort_step(now_ns)
        return out

    def step(self, now_ns):
        """tick, then every action; returns the actions."""
        if self.docs.watch_frozen(now_ns, self.wall()):
            gid = self.gather.answered
            v = self.verdict_seen
            if gid is not None and (v is None or v.gather_id != gid):
                # frozen while the gather it answered is open: its answer again, saying so (the merge waits
                # for a rank whose helper fell silent to be frozen or beat again: Gather.due)
                self.docs.state(self.detector.entries, gid)
        actions = self.tick(now_ns)
        for a in actions:
            self.act(a, now_ns)
        return actions

    def busy(self):
        """A protocol is under way (merging, aborting, waiting for stacks): look more often than a poll."""
        return self.gather.owned is not None or self.abort.active or not self.stacks.idle

    def look(self, now_ns):
        """Between polls, while busy: the protocols' steps only, then their actions; returns the actions."""
        actions = self._protocols(now_ns)
        for a in actions:
            self.act(a, now_ns)
        return actions

    def act(self, a, now_ns=None):
        """Run one action; a failure is said once (per kind and error) and never raised."""
        now_ns = self.clock() if now_ns is None else now_ns
        try:
            self.run_action[a.kind](a.detail, now_ns)
            return True
        except Exception as e:
            self.say_once("%s failed (will retry where it matters): %r" % (a.kind.replace("_", " "), e),
                          key=(a.kind, type(e).__name__, getattr(e, "errno", None)))
            return False

    # -- the detector's actions -------------------------------------------------------------------------
    def _report(self, _, now_ns):
        self.report_due = True
        learner = self.detector.learner
        names = {st.idx: str(st.desc.get("stream")) for st in self.snap}
        self.docs.report(self.detector.entries, self.snap, now_ns, learner.view(names) if learner else None)
        self.report_due = False

    def _say(self, text, now_ns):
        self.log("rank %s: %s" % (self.docs.rank(), text))

    def _say_overdue(self, e, now_ns):
        by = self.notifier.withheld_by if self.cfg.signal is not None else None
        self.log("rank %s: %s: %s in flight for %.1f s (%s); report %s; stacks %s%s" % (
            self.docs.rank(), e.level, e.describe(), e.age_s,
            self.detector._deadline_text(e), self.last_report or "not written",
            self.cfg.stack_path, " (no %s sent: its handler was replaced by %s)" % (self.cfg.signal_name, by)
            if by else ""))

    def _notify(self, reason, now_ns):
        """A hard detection: the signal goes once the verdict of the gather this rank is in says the hang is
        hard and not held (a rank it waits for is in a declared phase), or no verdict came in time."""
        if self.pending_signal is not None:
            return
        if self.cfg.on_timeout != "raise":  # under raise the exception goes at the same moment, signal or none
            if self.cfg.signal is None or self.notifier.withheld() is not None:
                return  # none, or its handler was replaced after enable(): no signal, said now (Notifier.withheld)
        self.pending_signal = (reason, now_ns)

    def _send_signal(self, reason, now_ns):
        """The signal, and a console line for it: to whom, when, why, and when its handler can run; under
        on_timeout="raise", the request that the rank raise the verdict (raising.RankRaise)."""
        if self.cfg.on_timeout == "raise":  # first: the rank's handler raises what it finds with the signal
            self._ask_raise(reason, signal_sent=self.cfg.signal is not None and self.notifier.withheld() is None)
        if self.notifier.notify(reason):
            self.log("rank %s: %s sent to pid %s (%s); the job's handler runs once this rank's main thread is "
                     "back in Python: it waits in a call in C++, so not before that call returns (docs/contracts.md, "
                     "\"The signal\")" % (self.docs.rank(), self.cfg.signal_name, self.cfg.rank_pid, reason))

    def _ask_raise(self, reason, signal_sent=False):
        """on_timeout="raise": ask the rank to raise CollectiveHang, carrying the verdict, and to end its hard
        calls' waits where torch can (NCCL).  Once per gather; a request that cannot be written is said.
        ``signal_sent``: the job's signal follows, and the rank's handler raises (raising.RankRaise)."""
        v = self.verdict_seen
        mine = v is not None and self.gather.answered is not None and v.gather_id == self.gather.answered
        hard = [e for e in self.detector.entries if e.in_flight and e.level == "hard"]
        req = _requests.RaiseRequest(
            gather_id=v.gather_id if mine else "no-verdict-%d" % len(self.detector.entries),
            groups=sorted(set(e.group for e in hard)), calls=[e.describe() for e in hard],
            verdict=(v.summary or "").replace("c10d_observer: ", "", 1) if mine else
            "no verdict came within the gather window: %s" % reason,
            culprit_ranks=list(v.culprit_ranks or ()) if mine else [],
            verdict_path=self.dd.path(_dumpdir.VERDICT_TEXT), written_at=self.wall(), signal_sent=signal_sent)
        try:
            req.send(self.dd, self.cfg.rank_pid)
        except OSError as e:
            self.log("rank %s: on_timeout=raise: cannot ask rank pid %s to raise (%s): it goes on"
                     % (self.docs.rank(), self.cfg.rank_pid, e))
            return
        self.log("rank %s: on_timeout=raise: asked rank pid %s to raise CollectiveHang for %s"
                 % (self.docs.rank(), self.cfg.rank_pid, "; ".join(req.calls) or reason))

    def _signal_step(self, now_ns):
        """The pending signal's decision: "signal" at the hard verdict, or, where none came within
        ``abort_verdict``, while this rank's hard call is still in flight; dropped where the verdict was held
        (the hold ends in a hard detection, which asks again)."""
        if self.pending_signal is None:
            return []
        reason, since = self.pending_signal
        v = self.verdict_seen
        mine = v is not None and self.gather.answered is not None and v.gather_id == self.gather.answered
        if mine and v.held_until:
            self.pending_signal = None
            return []
        if mine and v.level == Level.HARD:
            self.pending_signal = None
            rank = self.docs.rank()
            if rank in (v.culprit_ranks or ()):
                # a culprit inside the call (frozen, stopped) is never signalled: its handler is for the ranks
                # that wait for it, and a signal it meets once its call ended may meet SIG_DFL (disable())
                self.say_once("rank %s: no %s sent: the verdict names this rank the culprit" % (
                    rank, self.cfg.signal_name), key=("culprit", v.gather_id))
                return []
            if not self.detector.hard_in_flight():
                return []  # its call left flight before the verdict came: nothing to wake it from
            return [Action("signal", reason)]
        if now_ns - since > self.w.abort_verdict * 1e9:  # no hard verdict came: this rank's call decides
            self.pending_signal = None
            if self.detector.hard_in_flight():
                return [Action("signal", reason)]
        return []

    def _stacks(self, detail, now_ns):
        """The rank's stacks (StackCollection), and where ``py_spy``, py-spy's: once the helper thread has
        written them, or at once where no helper answers (a thread holds the GIL: py-spy shows which).
        py-spy stops the rank while it reads it (0.2 to 1 s): started first, it held the helper's dump,
        and so the verdict, back by as long.  Across nodes the rank's relay thread sends its node's answers
        to the merge: there py-spy also waits for the gather's verdict (at most ``gather_wait``)."""
        reason, py_spy = detail
        helper = self.taker.helper_alive(now_ns)
        for a in self.stacks.ask(now_ns, reason, helper, self.taker.size()):
            self.act(a, now_ns)
        if py_spy:
            self.py_spy_due = True
            self.taker.reserve_py_spy()  # named now: the state this rank answers with names the file
            if self.cfg.nodes > 1 and helper:
                self.py_spy_hold_ns = now_ns + int(self.w.gather_wait * 1e9)
            self._py_spy_step(now_ns)

    def _py_spy_step(self, now_ns):
        if not self.py_spy_due or self.stacks.phase is StackCollection.ASKED:
            return
        if self.py_spy_hold_ns is not None and now_ns < self.py_spy_hold_ns:
            v = self.verdict_seen
            if v is None or self.gather.answered is None or v.gather_id != self.gather.answered:
                return
        self.py_spy_due, self.py_spy_hold_ns = False, None
        self.taker.dump_py_spy()

    def _dump_signal(self, reason, now_ns):
        self.stacks.size_before = max(self.stacks.size_before or 0, self.taker.dump_signal(reason))

    def _abort(self, _, now_ns):
        if self.abort.start(now_ns):
            self.ender.arm(False)
            self.log("rank %s: on_timeout=abort: the rank will be ended once the verdict is merged" % self.docs.rank())

    # -- the gather ---------------------------------------------------------------------------------------
    def _request_gather(self, level, now_ns):
        """Ask every watchdog sharing dump_dir for its rank's state (or join the request already there)."""
        wall_now = self.wall()
        req = self.files.request()
        if self.gather.fresh(req, wall_now):
            if req.id == self.gather.answered:
                self.docs.state(self.detector.entries, req.id)  # answered: again, naming the overdue call
            else:
                self._answer(req, now_ns)
            return
        v = self._merged_for_mine()
        if v is not None:  # the verdict already merged covers it: one hang, one record (its signal below)
            self.verdict_seen = v
            return
        gid = "%s-%d-%d" % (self.cfg.host or socket.gethostname(), os.getpid(), now_ns)
        self.files.ask(gid, wall_now, level)
        self.gather.own(gid, now_ns)
        self.docs.state(self.detector.entries, gid)

    def _left_out_of(self, v):
        """A verdict merged from the gather this rank answered that holds none of this rank's calls found
        overdue and still in flight: its answer naming them came after the merge (it found its call overdue
        during another rank's gather), and no one would gather them.  The level to gather them at, once per
        call; else None."""
        if v.gather_id != self.gather.answered or self.gather.owned is not None or not v.hangs:
            return None
        keys = {(str(h.stream), h.seq) for h in v.hangs}
        left = [e for e in self.detector.entries if e.in_flight and (str(e.stream), e.seq) not in keys
                and (str(e.stream), e.seq) not in self.regathered]
        if not left:
            return None
        self.regathered.update((str(e.stream), e.seq) for e in left)
        return "hard" if any(e.level == "hard" for e in left) else "soft"

    def _merged_for_mine(self):
        """The verdict merged from the last gather this rank answered, where it already holds every call of
        this rank in flight past its deadline, with this rank waiting in it (or named its late culprit), at
        this detection's level and not held; else None.  A rank that finds the hang after the gather it answered
        was merged (its call entered later, or its watchdog was slower under load; the culprit itself, late,
        once it entered the call and its peers, starved of CPU, leave it slowly) joins that verdict instead of
        gathering the same hang again: the record says what the console said first (a verdict is a record)."""
        gid = self.gather.answered
        v = self.files.verdict() if gid is not None and self.gather.owned is None else None
        if v is None or v.gather_id != gid or v.held_until or not v.hangs:
            return None
        rank = self.docs.rank()
        hangs = {(str(h.stream), h.seq): h for h in v.hangs}
        mine = [e for e in self.detector.entries if e.in_flight]
        for e in mine:
            h = hangs.get((str(e.stream), e.seq))
            late = rank in (h.missing_ranks or ()) and rank in (v.culprit_ranks or ()) if h is not None else False
            if (h is None or not (rank in (h.waiting_ranks or ()) or late) or h.held_until
                    or (e.level == "hard" and h.level != Level.HARD)):
                return None
        return v if mine else None

    def _answer(self, req, now_ns):
        self.gather.answered = req.id
        snap = self.reader.snapshot()
        if self.stacks.asked_ns is None or now_ns - self.stacks.asked_ns > self.w.gather_wait * 1e9:
            # the stacks of every rank, not only the waiting ones; py-spy only of a rank in no collective (a
            # suspect: where is it?), not of one that waits, so as not to stop it for nothing
            self._stacks(("the verdict's gather %s, asked by rank %s%s" % (
                req.id, req.by_rank, self.detector.in_flight_text(snap, now_ns, self.wall())),
                not any(st.oldest for st in snap)), now_ns)
        self.docs.state(self.detector.entries, req.id)

    def _gather_step(self, now_ns):
        """Answer a new request; merge the one this watchdog owns when it is due; under abort, take the
        verdict, which every rank's error file carries, and which may name this rank its culprit."""
        out = []
        req = self.files.new_request()
        if req is not None:
            self.gather.superseded(req)
            self.gather.overwritten(req, self.wall())
            if self.gather.mine(req) and req.id != self.gather.answered:
                out.append(Action("answer", req))
        if self.gather.owned is not None:
            self.files.scan(self.gather)
            if self.gather.due(now_ns, self.reader.rank()[1], self.files.stacks_arrived):
                out.append(Action("merge", None))
        v = self.files.new_verdict() if self.gather.answered is not None else None
        if v is not None:
            self.verdict_seen = v
            level = self._left_out_of(v)
            if level is not None:
                out.append(Action("gather", level))
        if v is not None and v.gather_id == self.gather.answered and v.held_until:
            out.append(Action("hold", v))  # a rank the calls wait for is in a declared phase
        if self.cfg.on_timeout == "abort" and v is not None and v.level in (None, Level.HARD):
            if v.gather_id == self.gather.answered and v.hangs:
                # every rank's error file says the verdict before any rank is ended (the launcher then ends
                # the others at once); the culprit is ended first, so that it is the launcher's first failure
                culprit = self.docs.rank() in (v.culprit_ranks or ())
                out.append(Action("error_file", (v, culprit)))
                out.append(Action("arm", culprit))  # armed already where this rank's call was found overdue
                if culprit and not self.abort.active:
                    out.append(Action("abort_culprit", v))
        return out

    def _hold(self, v, now_ns):
        until = v.held_until
        wall_now = self.wall()
        self.detector.hold(now_ns + int(max(0.0, until - wall_now) * 1e9), until)
        if self.abort.before_exit:
            self.abort.cancel()
            self.ender.disarm()
        self.say_once("rank %s: the hard verdict is held until %s: %s" % (
            self.docs.rank(), short_clock(until), v.held_why or "a rank it waits for is in a declared phase"),
            key=("hold", until))

    def _arrivals(self, _, now_ns):
        """Write this rank's starts since the last period; the node's leader (its lowest rank that wrote
        within three periods) joins every rank's and writes stragglers.json."""
        rank = self.docs.rank()
        wall_now = self.wall()
        members = {str(st.desc.get("stream")): st.desc.get("ranks") for st in self.snap
                   if isinstance(st.desc.get("ranks"), list)}
        # the last KEEP starts of each stream, every period: the leader joins the calls every member has
        host = self.cfg.host or socket.gethostname()
        period = self.arrivals_period_s
        self.files.write_arrivals(self.arrivals.document(rank, self.cfg.rank_pid, self.cfg.job_id, wall_now, members,
                                                         host, period))
        docs = self.files.read_arrivals(wall_now - 3 * period)
        local = {d["rank"]: d.get("written_at") for d in docs if not d.get("relayed")}  # this node's ranks
        if local and _election.node_leader(local, wall_now, 3 * period) == rank:
            known = {}
            for d in docs:
                known.update((k, v) for k, v in (d.get("members") or {}).items() if v)
            self.files.write_stragglers(self.stragglers.update(docs, known, wall_now, host))

    def _merge(self, _, now_ns):
        gid, asked = self.gather.merged()
        self.files.merge(gid, (now_ns - asked) / 1e9)
        self.verdict_seen = self.files.verdict()  # the owner's own signal need not wait for its next look

    def _abort_culprit(self, v, now_ns):
        if self.abort.start(now_ns, culprit=True, verdict=v):
            self.ender.arm(True)
            self.log("rank %s: on_timeout=abort: this rank is a culprit of the hang (%s): it is ended first"
                     % (self.docs.rank(), (v.summary or "")[len("c10d_observer: "):]))

    def _abort_step(self, now_ns):
        verdict = None
        if self.abort.waits_for_verdict:
            gid = self.gather.answered
            v = self.files.verdict() if self.gather.owned is None else None
            if v is not None and (gid is None or v.gather_id == gid):
                if v.held_until:  # held: a rank it waits for is in a declared phase
                    self.abort.cancel()
                    self.ender.disarm()
                    return []
                verdict = v
        culprits_ended = True
        known = verdict or self.abort.verdict
        if self.abort.waits_for_culprits and known:
            # computed before the step: VERDICT goes on to CULPRIT in the same step, and must wait there
            culprits_ended = self.ender.culprits_ended(known)
        return self.abort.step(now_ns, verdict, culprits_ended, self.stacks.idle)

    # -- the rank's end ---------------------------------------------------------------------------------
    def finish(self):
        """At disable() (the rank stopped the observer): decide how each reported call ended, bring the
        report up to date and leave this rank's end, so that ``report`` on a job that ran without a hang
        finds every rank and says so (exit 0)."""
        now_ns = self.clock()
        self.snap = self.reader.snapshot()
        if self.detector.entries:
            for a in self.detector.settle(self.snap, now_ns, self.wall(), self.docs.dead_peers):
                if a.kind == "say":
                    self.act(a, now_ns)
            self.act(Action("report", None), now_ns)
        self.docs.end(self.detector.entries, True, "the observer was disabled")

    def gone(self, reason):
        """The rank is gone without disable(): its calls in flight ended with it; say so to the verdict."""
        self.detector.rank_ended(self.wall())
        self.snap = self.reader.snapshot()
        if self.detector.entries:
            self.act(Action("report", None))
        status = _io.exit_status(self.cfg.rank_pid, wait_s=2.0)
        why = "process %d ended without disable() (%s%s)" % (self.cfg.rank_pid, reason,
                                                             "; " + status if status else "")
        how = self.abort.how_ended()
        if self.abort.before_exit:
            # the watchdog is not the rank's parent: it says what it asked for, a launcher may have ended it first
            why = "ended while the observer was ending it (on_timeout=abort, armed to exit with code %d)%s" % (
                HANG_EXIT_CODE, ": it was a culprit of the hang" if self.abort.culprit
                else ": its collective raised once its peers had ended")
        elif how is not None:
            why = "ended by the observer (on_timeout=abort, %s)%s" % (
                how, ": it was a culprit of the hang" if self.abort.culprit else " after its call was overdue")
        self.docs.end(self.detector.entries, False, why)

    # -- the loop ---------------------------------------------------------------------------------------------
    def peek(self, now_ns):
        """Between polls, while idle (four times a poll): whether a gather request came (one stat of its
        file); if so, a poll now, so that this rank's state and stacks reach the merge within a quarter of
        a poll, not a whole one."""
        if _requests.GatherRequest.stamp(self.dd) == self.files.request_key:
            return False
        self.step(now_ns)
        return True

    def run(self, lifeline_fd):
        poll_ns = int(self.cfg.poll_interval * 1e9)
        look_ns = int(self.w.merge_look * 1e9)
        peek_ns = int(max(REQUEST_LOOK_S, self.cfg.poll_interval / 4) * 1e9)  # a wake-up: ~0.35 ms of CPU here
        next_tick = self.clock() + poll_ns
        while True:
            now = self.clock()
            wake = min(next_tick, now + (look_ns if self.busy() else peek_ns))
            wait = max(0.0, wake - now) / 1e9
            try:
                readable, _, _ = select.select([lifeline_fd], [], [], wait)
            except InterruptedError:
                readable = []
            if readable:  # "stop" from disable(), or EOF: the rank exited or died
                return "stop" if os.read(lifeline_fd, 4096) else "the rank closed its end"
            if os.getppid() != self.cfg.rank_pid:
                return "the rank (pid %d) is gone" % self.cfg.rank_pid
            now = self.clock()
            try:
                if now >= next_tick:
                    next_tick = now + poll_ns
                    self.step(now)
                elif self.busy():  # between polls: only the protocols that are under way
                    self.look(now)
                elif self.peek(now):
                    next_tick = now + poll_ns
                due = self.detector.next_deadline_ns(self.snap)
                if due is not None and now < due < next_tick:
                    next_tick = due  # the next poll at the first call's deadline
            except Exception as e:  # never die of our own bugs: say it once, try again next time
                self.say_once("a poll failed (will retry): %r" % (e,), key=("poll", type(e).__name__))


def main():
    # Ctrl-C on the job, and the launcher's SIGTERM to the rank's process group (torchrun 2.2+ ends its
    # workers with killpg), are the rank's business: the watchdog sees its rank end and writes its end
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin_fd = sys.stdin.fileno()
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(stdin_fd, 65536)
        if not chunk:
            return 2
        line += chunk
    cfg = _config.WatchdogConfig.from_json(line.decode("utf-8"))
    reader = _ch.ChannelReader.from_fd(cfg.channel_fd) if cfg.channel_fd >= 0 else _ch.ChannelReader(cfg.channel)
    wd = Watchdog(cfg, reader)
    os.write(sys.stdout.fileno(), ("READY %d\n" % os.getpid()).encode())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    reason = wd.run(stdin_fd)
    wd.taker.reap_py_spy(force=True)
    if reason == "stop":
        try:
            wd.finish()
        except Exception as e:
            _log("could not write the rank's end: %r" % (e,))
    else:  # the rank is gone without disable(): say so to the other ranks' verdicts
        try:
            wd.gone(reason)
        except Exception as e:
            _log("could not record the rank's end: %r" % (e,))
    if _config.flag(_config.ENV_DEBUG):
        _log("exiting: %s" % reason)
    reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
