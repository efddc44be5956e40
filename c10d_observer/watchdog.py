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

The signal contract (README, "The signal"): the configured signal (SIGUSR1 by default) goes to the rank
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
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import namedtuple

from . import channel as _ch
from . import config as _config
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import verdict as _verdict
from .text import rank_list, short_clock

HISTORY = 16  # calls kept per stream in a document (the verdict reads ops, sizes and the order of calls)
PY_SPY_EVERY_S = 60.0
PY_SPY_LIMIT_S = 30.0

Overdue = namedtuple("Overdue", "stream seq op start_ns")
Action = namedtuple("Action", "kind detail")  # what tick() decided; Watchdog.act runs it


def find_overdue(snapshot, now_ns, timeout_ns, queued=None):
    """The (stream, seq) whose oldest call in flight has been so for longer than ``timeout_ns``.

    Only a stream's oldest call in flight can be the first overdue one: later calls started later.
    ``queued``: {stream index: (seq, ns)}: a call that waited in a queue behind others of its stream (a
    burst of async calls, perhaps behind a stuck one) counts from when it reached the front (``ns``), not
    from when it was issued: a group's calls complete in order, so the calls of a burst draining after a
    hang resolved are not new hangs.
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


def overdue_entry(o, now_ns, wall_now):
    """The documents.Overdue of a call found overdue."""
    desc = o.stream.desc
    op, api = _ch.decode_op(o.op)
    age = (now_ns - o.start_ns) / 1e9
    ranks = desc.get("ranks")
    return _documents.Overdue(str(desc.get("stream")), str(desc.get("group")), o.seq, op, api, _ch.decode_sig(o.op),
                              tuple(ranks) if isinstance(ranks, list) else None, desc.get("kind") or "collective",
                              desc.get("peer"), desc.get("backend"), wall_now - age, wall_now, round(age, 3))


# -- detection ------------------------------------------------------------------------------------------
class Detector(object):
    """Which calls of this rank are overdue, each once, and how each ended.  No files, no signals: it
    turns a snapshot and the time into decisions (Actions).

    - a call newly overdue: "report" (the report brought up to date), "notify" (the configured signal, once
      per hang: only when the rank had no overdue call in flight before), "stacks", "gather", "say" (one
      console line per call) and, under on_timeout="abort", "abort";
    - a reported call that left flight is held for ``settle`` seconds, then decided: "completed" (the hang
      resolved) unless ``dead_peers(entry)`` names ranks of the call that ended meanwhile ("peers ended":
      torch raised, the hang did not resolve), or this rank is being ended ("rank ended").
    """

    def __init__(self, timeout_s, windows, on_timeout="dump"):
        self.timeout_ns = int(timeout_s * 1e9)
        self.timeout_s = timeout_s
        self.settle_ns = int(windows.settle * 1e9)
        self.on_timeout = on_timeout
        self.fired = set()  # (stream index, seq)
        self.entries = []  # documents.Overdue, in the order found
        self.keys = []  # (stream index, seq) of each entry
        self.leaving = {}  # entry index -> (monotonic ns, wall) when first seen out of flight
        self.in_hang = False
        self.front = {}  # stream index -> (its front call's seq or None, the tick that saw it: ns)
        self.queued = {}  # stream index -> (seq, ns): the call that reached its stream's front behind others,
        # and the earliest it can have got there (find_overdue counts it from then)

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

    def tick(self, snapshot, now_ns, wall_now, dead_peers=lambda entry: (), aborting=False):
        out = []
        self._fronts(snapshot, now_ns)
        overdue = find_overdue(snapshot, now_ns, self.timeout_ns, self.queued)
        flying = {(o.stream.idx, o.seq) for o in overdue}
        for i, (key, e) in enumerate(zip(self.keys, self.entries)):
            if not e.in_flight:
                continue
            if key in flying:
                self.leaving.pop(i, None)
                continue
            seen = self.leaving.setdefault(i, (now_ns, wall_now))
            if aborting or now_ns - seen[0] >= self.settle_ns:
                del self.leaving[i]
                out.extend(self._ended(i, e, seen[1], () if aborting else tuple(dead_peers(e)), aborting))
        new = [o for o in overdue if (o.stream.idx, o.seq) not in self.fired]
        if not new:
            if not any(e.in_flight for e in self.entries):
                self.in_hang = False
            return out
        found = []
        for o in new:
            self.fired.add((o.stream.idx, o.seq))
            e = overdue_entry(o, now_ns, wall_now)
            self.entries.append(e)
            self.keys.append((o.stream.idx, o.seq))
            found.append(e)
        first = found[0]
        reason = "%s in flight for %.1f s (timeout %g s)" % (first.describe(), first.age_s, self.timeout_s)
        out.append(Action("report", None))
        if not self.in_hang:
            out.append(Action("notify", reason))
        self.in_hang = True
        out.append(Action("stacks", (reason, True)))
        out.append(Action("gather", None))
        for e in found:
            out.append(Action("say_overdue", e))
        if self.on_timeout == "abort":
            out.append(Action("abort", None))
        return out

    def _fronts(self, snapshot, now_ns):
        """Note when each stream's front call got there: a group's calls complete in order, so a call behind
        others (a burst of async calls, perhaps behind a stuck one) can only hang once it is at the front,
        which it reached no earlier than the last poll that saw an earlier call there."""
        for st in snapshot:
            seq = st.oldest[0] if st.oldest is not None else None
            prev = self.front.get(st.idx)
            if seq is not None and prev is not None and prev[0] is not None and prev[0] < seq:
                self.queued[st.idx] = (seq, prev[1])
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


# -- stack collection -----------------------------------------------------------------------------------
class StackCollection(object):
    """Having the rank's stacks written, once per ask.

    IDLE -> ASKED: the helper thread (it beats every poll) was asked by a file; it writes every thread's
    stack with the GIL held, which cannot crash the rank.  ASKED -> IDLE once the stacks file grew;
    ASKED -> DUMPING when it did not within ``helper_answer`` (a thread holds the GIL): the dump signal
    (faulthandler's all-thread dump from C, on a signal of its own).  A rank whose helper is known not to
    beat goes to DUMPING at once.  DUMPING -> IDLE when the file grew, or after ``abort_stacks``."""

    IDLE, ASKED, DUMPING = "idle", "asked", "dumping"

    def __init__(self, windows, has_dump_signal=True):
        self.answer_ns = int(windows.helper_answer * 1e9)
        self.dump_ns = int(windows.abort_stacks * 1e9)
        self.has_dump_signal = has_dump_signal
        self.phase = self.IDLE
        self.since_ns = None
        self.size_before = None  # the stacks file's size when asked: grown past it, the dump is there
        self.reason = None
        self.asked_ns = None  # when the last ask began (the gather does not ask again within its window)

    def ask(self, now_ns, reason, helper_alive, size_now):
        """Returns the actions: "stack_request" (a header for the helper's dump) or "dump_signal"."""
        if self.phase != self.IDLE:
            return []  # one dump at a time: the one on its way answers this ask too
        self.reason, self.size_before, self.asked_ns = reason, max(size_now, 0), now_ns
        if helper_alive:
            self._to(self.ASKED, now_ns)
            return [Action("stack_request", reason)]
        return self._dump(now_ns, reason)

    def _dump(self, now_ns, reason):
        if not self.has_dump_signal:
            self._to(self.IDLE, now_ns)
            return []
        self._to(self.DUMPING, now_ns)
        return [Action("dump_signal", reason)]

    def step(self, now_ns, size_now):
        if self.phase == self.IDLE:
            return []
        if size_now > self.size_before:
            self._to(self.IDLE, now_ns)
            return []
        if self.phase == self.ASKED and now_ns - self.since_ns > self.answer_ns:
            return [Action("withdraw_request", None)] + self._dump(
                now_ns, "%s (its helper thread did not answer within %.1f s)" % (self.reason, self.answer_ns / 1e9))
        if self.phase == self.DUMPING and now_ns - self.since_ns > self.dump_ns:
            self._to(self.IDLE, now_ns)
        return []

    def _to(self, phase, now_ns):
        self.phase, self.since_ns = phase, now_ns

    def arrived(self, size_now):
        """The last dump asked for is in the file (or none was asked)."""
        return self.size_before is None or size_now > self.size_before


# -- the gather -----------------------------------------------------------------------------------------
class Gather(object):
    """The cross-rank gather on one node, through dump_dir (across nodes the relays carry it, relay.py).

    A watchdog that finds a call overdue *requests* (writes gather-request.json) unless a request of the
    same job, younger than the gather window and not merged, is there: then it *joins* it (answers again:
    its state now names its overdue call).  Every watchdog *answers* each new request of its job once (its
    rank's state, and its stacks).  The one that requested is the *owner*: it merges when every rank has
    answered (or ended), else once the window is over and no answer came for ``gather_quiet``, at the
    latest at ``gather_wait_max``.  Phases: IDLE -> OWNER (merging) -> IDLE; ``answered`` is the id of the
    last request answered (the verdict this rank waits for under abort)."""

    IDLE, OWNER = "idle", "owner"

    def __init__(self, windows, job_id, started_at):
        self.w = windows
        self.job_id = job_id
        self.started_at = started_at
        self.phase = self.IDLE
        self.owned = None  # (id, asked monotonic ns)
        self.answered = None  # id of the last request answered
        self.seen = None  # (mtime_ns, size) of the request file last looked at
        self.verdict_seen = None  # (mtime_ns, size) of verdict.json last looked at
        self._answers = {}  # file -> ((mtime_ns, size), [(rank, counts, stacks wanted)]): the merge's scan
        self._answered_n = 0
        self._progress_ns = None

    def fresh(self, req, wall_now):
        return (isinstance(req, dict) and req.get("id") and req.get("job_id") == self.job_id
                and not req.get("merged_at") and wall_now - (req.get("requested_at") or 0) < self.w.gather_wait)

    def mine(self, req):
        return (isinstance(req, dict) and req.get("id") and req.get("job_id") == self.job_id
                and (req.get("requested_at") or 0) >= self.started_at - self.w.gather_wait)

    def own(self, gid, now_ns):
        self.owned, self.answered, self.phase = (gid, now_ns), gid, self.OWNER
        self._answers, self._answered_n, self._progress_ns = {None: gid}, 0, now_ns

    def superseded(self, req):
        """Another node's request came first (relay.py wrote it with "supersedes"): its node merges."""
        if self.owned is not None and isinstance(req, dict) and req.get("supersedes") == self.owned[0]:
            self.owned, self.phase = None, self.IDLE

    def count(self, path, key, docs, gid):
        """Note one answer file's documents (read when it changed)."""
        entries = []
        for doc in docs:
            counts = doc.dead or doc.gather_id == gid
            wanted = None if doc.dead or doc.frozen else (doc.stack_dump, doc.stacks_size_before)
            entries.append((doc.rank, counts, wanted))
        self._answers[path] = (key, entries)

    def known(self, path, key):
        seen = self._answers.get(path)
        return seen is not None and seen[0] == key

    def due(self, now_ns, world, stacks_arrived):
        """Whether to merge now."""
        if self.owned is None:
            return False
        have = {rank for k, v in self._answers.items() if k is not None for rank, counts, wanted in v[1]
                if counts and (wanted is None or stacks_arrived(wanted))}
        if len(have) > self._answered_n:
            self._answered_n, self._progress_ns = len(have), now_ns
        waited = now_ns - self.owned[1]
        complete = world > 0 and have >= set(range(world))
        return complete or waited > self.w.gather_wait_max * 1e9 or (
            waited > self.w.gather_wait * 1e9 and now_ns - self._progress_ns > self.w.gather_quiet * 1e9)

    def merged(self):
        gid, asked = self.owned
        self.owned, self.phase = None, self.IDLE
        return gid, asked


# -- abort ----------------------------------------------------------------------------------------------
class Abort(object):
    """on_timeout="abort": end the rank so the launcher restarts the job, once the verdict is known.

    VERDICT: the gather this watchdog joined is merged (at most ``abort_verdict``) -> CULPRIT: a rank that
    waited lets the culprits end first, so that the launcher's first failure (torchrun's "Root Cause") is
    the culprit (at most ``abort_culprit``; skipped for the culprit itself) -> STACKS: the stack dump has
    arrived (at most ``abort_stacks``) -> TERM: the error file written, SIGTERM sent -> KILL: SIGKILL once
    ``abort_kill_after`` passed with the rank still there -> DONE."""

    IDLE, VERDICT, CULPRIT, STACKS, TERM, KILL, DONE = "idle", "verdict", "culprit", "stacks", "term", "kill", "done"

    def __init__(self, windows):
        self.w = windows
        self.phase = self.IDLE
        self.since_ns = None
        self.culprit = False  # this rank is a culprit of the verdict (it is ended first)
        self.verdict = None  # the verdict the rank is ended for (its summary goes to the error file)

    def start(self, now_ns, culprit=False, verdict=None):
        if self.phase != self.IDLE:
            return False
        self.culprit, self.verdict = culprit, verdict
        self._to(self.CULPRIT if culprit else self.VERDICT, now_ns)
        return True

    @property
    def active(self):
        return self.phase not in (self.IDLE, self.DONE)

    def step(self, now_ns, verdict=None, culprits_ended=True, stacks_done=True):
        """``verdict``: the merged verdict of the gather this rank answered, once there; ``culprits_ended``:
        its culprits are gone (or none is on this node); ``stacks_done``: no stack dump is on its way."""
        waited = (now_ns - self.since_ns) / 1e9 if self.since_ns is not None else 0.0
        if self.phase == self.VERDICT:
            if verdict is not None or waited > self.w.abort_verdict:
                self.verdict = verdict
                self._to(self.CULPRIT, now_ns)
                out = [] if verdict is not None else [Action("say", "on_timeout=abort: no verdict within %.1f s; "
                                                                    "ending the rank anyway" % self.w.abort_verdict)]
                return out + self.step(now_ns, verdict, culprits_ended, stacks_done)
        elif self.phase == self.CULPRIT:
            if self.culprit or culprits_ended or waited > self.w.abort_culprit:
                self._to(self.STACKS, now_ns)
                return self.step(now_ns, verdict, culprits_ended, stacks_done)
        elif self.phase == self.STACKS:
            if stacks_done or waited > self.w.abort_stacks:
                self._to(self.TERM, now_ns)
                return [Action("error_file", (None, self.culprit)), Action("term", None)]
        elif self.phase == self.TERM:
            if waited > self.w.abort_kill_after:
                self._to(self.KILL, now_ns)
                return [Action("kill", None)]
        return []

    def _to(self, phase, now_ns):
        self.phase, self.since_ns = phase, now_ns


# -- the watchdog ---------------------------------------------------------------------------------------
class Watchdog(object):
    def __init__(self, cfg, reader, clock=time.monotonic_ns, wall=time.time, kill=os.kill, log=_log):
        if isinstance(cfg, dict):
            cfg = _config.WatchdogConfig.from_json(cfg)
        self.cfg = cfg
        self.w = cfg.windows
        self.reader = reader
        self.clock = clock
        self.wall = wall
        self.kill = kill
        self.log = log
        self.rank_pid = cfg.rank_pid
        self.dd = _dumpdir.DumpDir(cfg.dump_dir, said=self.say_once)
        self.started_at = wall()
        self.detector = Detector(cfg.timeout, self.w, cfg.on_timeout)
        self.stacks = StackCollection(self.w, has_dump_signal=cfg.dump_signal is not None)
        self.gather = Gather(self.w, cfg.job_id, self.started_at)
        self.abort = Abort(self.w)
        self.last_report = None
        self.report_due = False  # a report to write (or to retry: the last write failed)
        self.said = set()  # keys of things said once
        self.withheld_by = None  # the handler that replaced the observer's, when the signal was last withheld
        self.py_spy = cfg.py_spy  # its path where installed: native + Python stacks, taken from outside
        self.py_spy_proc = None
        self.py_spy_started = None
        self.exit_reason = None
        self.error_written = False  # this rank's torchelastic error file holds the verdict
        if cfg.restarts:
            self._restore()

    # -- helpers ----------------------------------------------------------------------------------------
    def say_once(self, text, key=None):
        key = key or text
        if key not in self.said:
            self.said.add(key)
            self.log(text)

    def _rank(self):
        return self.reader.rank()[0]

    def _name(self, fmt):
        return fmt(self._rank(), self.rank_pid)

    def stacks_size(self):
        return _dumpdir.size(self.dd.path(os.path.basename(self.cfg.stack_path)))

    def helper_alive(self, now_ns):
        """The rank's helper thread beat within ``helper_answer``: it can write the stacks itself."""
        beat = self.reader.heartbeat_ns()
        return bool(beat) and now_ns - beat < self.w.helper_answer * 1e9

    def _restore(self):
        doc = self.dd.read_json(self._name(_dumpdir.report_name))
        try:
            entries = _documents.RankDoc.from_json(doc).overdue if doc else ()
        except _documents.DocumentError:
            entries = ()
        self.detector.restore(entries, self.reader.snapshot())

    # -- one poll ---------------------------------------------------------------------------------------
    def tick(self, now_ns):
        """What to do now, as Actions: the protocols' steps, then the detector's decisions."""
        self.reap_py_spy()
        size = self.stacks_size()
        out = self.stacks.step(now_ns, size)
        out += self._gather_step(now_ns)
        snap = self.reader.snapshot()
        self.snap = snap
        out += self.detector.tick(snap, now_ns, self.wall(), self._dead_peers, aborting=self.abort.active
                                  and self.abort.phase in (Abort.TERM, Abort.KILL))
        if self.report_due and not any(a.kind == "report" for a in out):
            out.append(Action("report", None))
        if self.abort.active:
            out += self._abort_step(now_ns)
        return out

    def step(self, now_ns):
        """tick, then every action; returns the actions."""
        actions = self.tick(now_ns)
        for a in actions:
            self.act(a, now_ns)
        return actions

    def busy(self):
        """A protocol is under way (merging, aborting, waiting for stacks): look more often than a poll."""
        return self.gather.owned is not None or self.abort.active or self.stacks.phase != StackCollection.IDLE

    def look(self, now_ns):
        """Between polls, while busy: the protocols' steps only, then their actions; returns the actions."""
        actions = self.stacks.step(now_ns, self.stacks_size()) + self._gather_step(now_ns)
        if self.abort.active:
            actions += self._abort_step(now_ns)
        for a in actions:
            self.act(a, now_ns)
        return actions

    def act(self, a, now_ns=None):
        """Run one action; a failure is said once (per kind and error) and never raised."""
        now_ns = self.clock() if now_ns is None else now_ns
        try:
            getattr(self, "_do_" + a.kind)(a.detail, now_ns)
            return True
        except Exception as e:
            self.say_once("%s failed (will retry where it matters): %r" % (a.kind.replace("_", " "), e),
                          key=(a.kind, type(e).__name__, getattr(e, "errno", None)))
            return False

    # -- the detector's actions -------------------------------------------------------------------------
    def _do_report(self, _, now_ns):
        self.report_due = True
        self.write_report(self.snap, now_ns)
        self.report_due = False

    def _do_say(self, text, now_ns):
        self.log("rank %s: %s" % (self._rank(), text))

    def _do_say_overdue(self, e, now_ns):
        self.log("rank %s: %s in flight for %.1f s (timeout %g s); report %s; stacks %s%s" % (
            self._rank(), e.describe(), e.age_s, self.cfg.timeout, self.last_report or "not written",
            self.cfg.stack_path, "" if self.cfg.signal is None or self.withheld_by is None else
            " (no %s sent: its handler was replaced by %s)" % (self.cfg.signal_name, self.withheld_by)))

    def _do_notify(self, reason, now_ns):
        """The configured signal, to this rank, whose call is overdue (once per hang): it runs the handler
        the job had before enable(); never where a handler installed later replaced the observer's."""
        if self.cfg.signal is None:
            return
        by = self._say_withheld()
        if by is not None:
            return
        self.kill(self.rank_pid, self.cfg.signal)

    def _say_withheld(self):
        """Once per handler: the job replaced the observer's handler after enable(), so the signal is never
        sent (it would run theirs); how to have both."""
        by = self.replaced_by()
        if by is not None and by != self.withheld_by:
            self.withheld_by = by
            self.log("rank %s: no %s sent: its handler was replaced after enable() by %s (the signal would run "
                     "it); stacks come from the rank's helper thread%s.  To have both, choose another signal: "
                     "enable(signal=signal.SIGUSR2), C10D_OBSERVER_SIGNAL=SIGUSR2 or run --signal SIGUSR2"
                     % (self._rank(), self.cfg.signal_name, by, " and py-spy" if self.py_spy else ""))
        return by

    def replaced_by(self):
        """None while the rank says the observer's handler is the one installed; else what replaced it."""
        if not self.reader.handler_replaced():
            return None
        doc = self.dd.read_json(self._name(_dumpdir.handler_name))
        return (doc or {}).get("replaced_by") or "another handler (not named)"

    def _do_stacks(self, detail, now_ns):
        reason, py_spy = detail
        if py_spy:
            self.dump_py_spy()
        for a in self.stacks.ask(now_ns, reason, self.helper_alive(now_ns), self.stacks_size()):
            self.act(a, now_ns)

    def _header(self, reason):
        return "stacks of rank %s (pid %d) at %s: %s" % (self._rank(), self.rank_pid,
                                                         short_clock(self.wall()), reason or "asked")

    def _do_stack_request(self, reason, now_ns):
        self.dd.write_json(_dumpdir.stack_request_name(self.rank_pid), {"header": self._header(reason)})

    def _do_withdraw_request(self, _, now_ns):
        self.dd.remove(_dumpdir.stack_request_name(self.rank_pid))

    def _do_dump_signal(self, reason, now_ns):
        """faulthandler's dump from C, on the observer's own signal (never the job's): a thread holds the
        GIL, so the helper cannot answer.  The header first, then the signal."""
        try:
            self.dd.append_text(os.path.basename(self.cfg.stack_path), _dumpdir.HEADER % self._header(reason))
        except OSError:
            pass
        self.stacks.size_before = max(self.stacks.size_before or 0, self.stacks_size())
        self.kill(self.rank_pid, self.cfg.dump_signal)

    def _do_abort(self, _, now_ns):
        if self.abort.start(now_ns):
            self.log("rank %s: on_timeout=abort: the rank will be ended once the verdict is merged" % self._rank())

    # -- documents --------------------------------------------------------------------------------------
    def positions(self, snap, now_ns, wall_now):
        out = []
        for st in snap:
            d = st.desc
            recent = []
            for seq in range(max(1, st.last_started - HISTORY + 1), st.last_started + 1):
                a, op, t, b, _ = self.reader.slot(st.idx, seq)
                if a == b == seq:
                    name, api = _ch.decode_op(op)
                    recent.append(_documents.Call(seq, name, _ch.decode_sig(op), wall_now - (now_ns - t) / 1e9, api))
            fly = None
            if st.oldest:
                seq, op, t = st.oldest
                name, api = _ch.decode_op(op)
                fly = _documents.Call(seq, name, _ch.decode_sig(op), wall_now - (now_ns - t) / 1e9, api)
            ranks = d.get("ranks")
            out.append(_documents.Position(
                str(d.get("stream")), str(d.get("group")), d.get("kind") or "collective",
                tuple(ranks) if isinstance(ranks, list) else None, d.get("backend"), d.get("peer"), d.get("src"),
                d.get("dst"), d.get("torch_timeout_s"), st.last_started, st.last_completed, fly, tuple(recent),
                st.overflow))
        return tuple(out)

    def document(self, kind, snap=None, now_ns=None, **fields):
        """A RankDoc of this rank now: who, where in every group, and how alive."""
        rank, world = self.reader.rank()
        now_ns = self.clock() if now_ns is None else now_ns
        wall_now = self.wall()
        snap = self.reader.snapshot() if snap is None else snap
        beat = self.reader.heartbeat_ns()
        age = (now_ns - beat) / 1e9 if beat else None
        spied = self.py_spy and self.py_spy_started is not None
        c = self.cfg
        doc = _documents.RankDoc(
            kind, rank, world, c.host or socket.gethostname(), self.rank_pid, c.job_id, wall_now, self.started_at,
            True, None, bool(beat) and age > self.w.frozen_after, None if age is None else round(age, 3),
            self.reader.main_thread(), self.dd.path(os.path.basename(c.stack_path)), None,
            self.dd.path(self._name(_dumpdir.py_spy_name)) if spied else None, None,
            self.stacks.size_before if self.stacks.asked_ns is not None else None,
            self.positions(snap, now_ns, wall_now), tuple(self.detector.entries), self._fr_entries(rank),
            c.public_config, self._handler_state())
        return doc._replace(**fields) if fields else doc

    def _handler_state(self):
        by = self.replaced_by()
        return {"signal": self.cfg.signal_name, "ours": by is None, "replaced_by": by,
                "signal_withheld": self.withheld_by is not None, "dump_signal": _config.signal_name(self.cfg.dump_signal)}

    def write_report(self, snap, now_ns):
        c = self.cfg
        doc = self.document("report", snap, now_ns, extra={
            "watchdog_pid": os.getpid(), "torch_version": c.torch_version, "source": c.source_in_use,
            "source_reasons": c.source_reasons, "source_plan": c.source_plan, "source_rejected": c.source_rejected,
            "untracked_streams": self.reader.dropped_streams(), "signal": c.signal_name,
            "on_timeout": c.on_timeout, "watchdog_restarts": c.restarts})
        self.last_report = self.dd.write_json(self._name(_dumpdir.report_name), doc.to_json())
        return self.last_report

    def write_state(self, gather_id):
        """state-rank<R>-pid<P>.json: this rank's position in every group, answering gather ``gather_id``."""
        return self.dd.write_json(self._name(_dumpdir.state_name), self.document("state", gather_id=gather_id).to_json())

    def write_end(self, alive, exit_reason):
        """end-rank<R>-pid<P>.json: the rank ended (disable(), or its process is gone).  A state the verdict
        was built from is never overwritten by it."""
        doc = self.document("end", alive=alive, exit_reason=exit_reason)
        if not alive:
            doc = doc._replace(frozen=False)
        return self.dd.write_json(self._name(_dumpdir.end_name), doc.to_json())

    def _fr_entries(self, rank):
        """The flight-recorder entries the rank converted to JSON (calls in flight and neighbours), if any."""
        doc = self.dd.read_json(_dumpdir.fr_name(rank, self.rank_pid))
        return doc.get("groups") if isinstance(doc, dict) else None

    def _dead_peers(self, entry):
        """Ranks of ``entry``'s call whose process ended (their watchdogs' end documents) since it started."""
        out = []
        me = self._rank()
        for path in self.dd.glob(_dumpdir.END_GLOB):
            try:
                docs = _documents.load(path)
            except (_documents.DocumentError, OSError):
                continue
            for d in docs:
                if (d.dead and d.rank != me and d.rank in (entry.group_ranks or ()) and d.job_id == self.cfg.job_id
                        and (d.written_at or 0) >= (entry.started_at or 0)):
                    out.append(d.rank)
        return sorted(set(out))

    def finish(self):
        """At disable() (the rank stopped the observer): bring the report up to date and leave this rank's
        end, so that ``report`` on a job that ran without a hang finds every rank and says so (exit 0)."""
        now_ns = self.clock()
        self.snap = self.reader.snapshot()
        if self.detector.entries:
            for a in self.detector.tick(self.snap, now_ns + self.detector.settle_ns, self.wall(), self._dead_peers):
                if a.kind == "report":
                    self.report_due = True
            for a in self.detector.tick(self.snap, now_ns + 2 * self.detector.settle_ns + 1, self.wall(),
                                        self._dead_peers):
                if a.kind == "say":
                    self.act(a, now_ns)
            self.act(Action("report", None), now_ns)
        self.write_end(True, "the observer was disabled")

    def gone(self, reason):
        """The rank is gone without disable(): its calls in flight ended with it; say so to the verdict."""
        self.detector.rank_ended(self.wall())
        self.snap = self.reader.snapshot()
        if self.detector.entries:
            self.act(Action("report", None))
        why = "process %d ended without disable() (%s)" % (self.rank_pid, reason)
        if self.abort.phase in (Abort.TERM, Abort.KILL, Abort.DONE):
            why = "ended by the observer (on_timeout=abort)%s" % (
                ": it was a culprit of the hang" if self.abort.culprit else " after its call was overdue")
        self.write_end(False, why)

    # -- the gather ---------------------------------------------------------------------------------------
    def _do_gather(self, _, now_ns):
        """Ask every watchdog sharing dump_dir for its rank's state (or join the request already there)."""
        wall_now = self.wall()
        req = self.dd.read_json(_dumpdir.GATHER)
        if self.gather.fresh(req, wall_now):
            if req.get("id") == self.gather.answered:
                self.write_state(req["id"])  # answered already: again, now naming the overdue call
            else:
                self._answer(req, now_ns)
            return
        rank, world = self.reader.rank()
        gid = "%s-%d-%d" % (self.cfg.host or socket.gethostname(), os.getpid(), now_ns)
        self.dd.write_json(_dumpdir.GATHER, {"id": gid, "job_id": self.cfg.job_id, "by_rank": rank,
                                             "world_size": world, "requested_at": wall_now})
        self.gather.own(gid, now_ns)
        self.write_state(gid)

    def _answer(self, req, now_ns):
        self.gather.answered = req["id"]
        snap = self.reader.snapshot()
        if self.stacks.asked_ns is None or now_ns - self.stacks.asked_ns > self.w.gather_wait * 1e9:
            # the stacks of every rank, not only the waiting ones; py-spy only of a rank in no collective (a
            # suspect: where is it?), not of one that waits, so as not to stop it for nothing
            self._do_stacks(("the verdict's gather %s, asked by rank %s%s" % (
                req["id"], req.get("by_rank"), self.detector.in_flight_text(snap, now_ns, self.wall())),
                not any(st.oldest for st in snap)), now_ns)
        self.write_state(req["id"])

    def _gather_step(self, now_ns):
        """Answer a new request; merge the one this watchdog owns when it is due; under abort, take the
        verdict that names this rank a culprit."""
        out = []
        try:
            st = os.stat(self.dd.path(_dumpdir.GATHER))
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if key is not None and key != self.gather.seen:
            self.gather.seen = key
            req = self.dd.read_json(_dumpdir.GATHER)
            self.gather.superseded(req)
            if self.gather.mine(req) and req.get("id") != self.gather.answered:
                out.append(Action("answer", req))
        if self.gather.owned is not None:
            self._scan_answers()
            if self.gather.due(now_ns, self.reader.rank()[1], self._stacks_arrived):
                out.append(Action("merge", None))
        if self.cfg.on_timeout == "abort" and self.gather.answered is not None:
            v = self._new_verdict()
            if v is not None and v.get("gather_id") == self.gather.answered and v.get("hangs"):
                # every rank's error file says the verdict before any rank is ended (the launcher then ends
                # the others at once); the culprit is ended first, so that it is the launcher's first failure
                out.append(Action("error_file", (v, self._rank() in (v.get("culprit_ranks") or ()))))
                if self._rank() in (v.get("culprit_ranks") or ()) and not self.abort.active:
                    out.append(Action("abort_culprit", v))
        return out

    def _do_answer(self, req, now_ns):
        self._answer(req, now_ns)

    def _do_abort_culprit(self, v, now_ns):
        if self.abort.start(now_ns, culprit=True, verdict=v):
            self.log("rank %s: on_timeout=abort: this rank is a culprit of the hang (%s): it is ended first"
                     % (self._rank(), v.get("summary", "")[len("c10d_observer: "):]))

    def _new_verdict(self):
        try:
            st = os.stat(self.dd.path(_dumpdir.VERDICT_JSON))
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        if key == self.gather.verdict_seen:
            return None
        self.gather.verdict_seen = key
        return self.dd.read_json(_dumpdir.VERDICT_JSON)

    def _stacks_arrived(self, wanted):
        stack_dump, before = wanted
        return before is None or _dumpdir.size(stack_dump) > before

    def _scan_answers(self):
        """Read the answer files that changed since the last look (a merge across nodes looks at up to one
        file per rank every 50 ms)."""
        gid = self.gather.owned[0]
        for p in self.dd.glob(_dumpdir.STATE_GLOB) + self.dd.glob(_dumpdir.END_GLOB) + self.dd.glob(_dumpdir.NODE_GLOB):
            try:
                st = os.stat(p)
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            if self.gather.known(p, key):
                continue
            try:
                docs = _documents.load(p)
            except (_documents.DocumentError, OSError):
                docs = ()  # written atomically: never half a file; read again if it changes
            self.gather.count(p, key, [d for d in docs if d.job_id == self.cfg.job_id], gid)

    def _do_merge(self, _, now_ns):
        gid, asked = self.gather.merged()
        docs, _ = _verdict.load_docs(self.cfg.dump_dir, gather_id=gid)
        v = _verdict.analyze(docs, world_size=self.reader.rank()[1] or None)
        v["gather_id"] = gid
        v["gather_s"] = round((now_ns - asked) / 1e9, 3)
        v["verdict_at"] = self.wall()
        _verdict.write(self.dd, v, docs)
        req = self.dd.read_json(_dumpdir.GATHER)
        if req and req.get("id") == gid:  # a later detection starts a new gather rather than join this one
            req["merged_at"] = v["verdict_at"]
            self.dd.write_json(_dumpdir.GATHER, req)
        self.log("%s (verdict: %s)" % (v["summary"][len("c10d_observer: "):], self.dd.path(_dumpdir.VERDICT_TEXT)))

    # -- abort --------------------------------------------------------------------------------------------
    def _abort_step(self, now_ns):
        verdict = None
        if self.abort.phase == Abort.VERDICT:
            gid = self.gather.answered
            v = self.dd.read_json(_dumpdir.VERDICT_JSON) if self.gather.owned is None else None
            if v is not None and (gid is None or v.get("gather_id") == gid):
                verdict = v
        culprits_ended = True
        if self.abort.phase == Abort.CULPRIT and self.abort.verdict:
            culprits_ended = self._culprits_ended(self.abort.verdict)
        return self.abort.step(now_ns, verdict, culprits_ended, self.stacks.phase == StackCollection.IDLE)

    def _culprits_ended(self, v):
        """The verdict's culprits on this host are gone (their pids), or it names none here."""
        host = self.cfg.host or socket.gethostname()
        for r in v.get("culprit_ranks") or ():
            h = (v.get("hosts") or {}).get(str(r)) or {}
            if h.get("host") in (None, host) and h.get("pid") and _pid_alive(h["pid"]):
                return False
        return True

    def _do_error_file(self, detail, now_ns):
        """torchelastic's error file of this rank (TORCHELASTIC_ERROR_FILE): what torchrun's summary shows for
        it.  The culprit's says it never arrived; a waiting rank's names the culprit; both name the verdict."""
        verdict, culprit = detail
        if not self.cfg.error_file or (self.error_written and verdict is None):
            return
        write_error_file(self.cfg.error_file, verdict, self._rank(), culprit, self.dd.path(_dumpdir.VERDICT_TEXT),
                         self.wall(), old_format=str(self.cfg.torch_version or "").startswith("1.9"))
        self.error_written = True

    def _do_term(self, _, now_ns):
        self.log("rank %s: on_timeout=abort: sending SIGTERM to rank pid %d" % (self._rank(), self.rank_pid))
        self.kill(self.rank_pid, signal.SIGTERM)

    def _do_kill(self, _, now_ns):
        self.log("rank %s: rank pid %d still alive %g s after SIGTERM: sending SIGKILL"
                 % (self._rank(), self.rank_pid, self.w.abort_kill_after))
        self.kill(self.rank_pid, signal.SIGKILL)

    # -- py-spy ---------------------------------------------------------------------------------------------
    def dump_py_spy(self):
        """Start ``py-spy dump --native`` of the rank (not waited for: the next polls reap it).  py-spy stops
        the rank while it reads it (about 0.25 s): at most once per PY_SPY_EVERY_S."""
        if not self.py_spy or self.py_spy_proc is not None or (
                self.py_spy_started is not None and time.monotonic() - self.py_spy_started < PY_SPY_EVERY_S):
            return
        path = self.dd.join(self._name(_dumpdir.py_spy_name))
        try:
            with open(path, "w") as out:
                self.py_spy_proc = subprocess.Popen([self.py_spy, "dump", "--native", "--pid", str(self.rank_pid)],
                                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                    close_fds=True)
            self.py_spy_started = time.monotonic()
        except OSError as e:
            self.py_spy = None
            self.log("py-spy could not run (%s); not used again" % (e,))

    def reap_py_spy(self, force=False):
        p = self.py_spy_proc
        if p is None:
            return
        if p.poll() is None:
            if not force and time.monotonic() - self.py_spy_started < PY_SPY_LIMIT_S:
                return
            p.kill()  # a stopped or unreadable rank: do not let it hang around
            p.wait()
        self.py_spy_proc = None

    # -- the loop ---------------------------------------------------------------------------------------------
    def run(self, lifeline_fd):
        poll_ns = int(self.cfg.poll_interval * 1e9)
        look_ns = int(self.w.merge_look * 1e9)
        next_tick = self.clock() + poll_ns
        while True:
            now = self.clock()
            wait = max(0.0, (min(next_tick, now + look_ns) if self.busy() else next_tick) - now) / 1e9
            try:
                readable, _, _ = select.select([lifeline_fd], [], [], wait)
            except InterruptedError:
                readable = []
            if readable:  # "stop" from disable(), or EOF: the rank exited or died
                return "stop" if os.read(lifeline_fd, 4096) else "the rank closed its end"
            if os.getppid() != self.rank_pid:
                return "the rank (pid %d) is gone" % self.rank_pid
            now = self.clock()
            try:
                if now >= next_tick:
                    next_tick = now + poll_ns
                    self.step(now)
                else:  # between polls: only the protocols that are under way
                    self.look(now)
            except Exception as e:  # never die of our own bugs: say it once, try again next time
                self.say_once("a poll failed (will retry): %r" % (e,), key=("poll", type(e).__name__))


def write_error_file(path, verdict, rank, culprit, verdict_path, wall_now, old_format=False):
    """torchelastic's error file, in the format its ``ErrorHandler`` writes, atomically (a partial file
    crashes torchrun's summary): torchrun prints its text for this rank, and names the failure with the
    smallest ``timestamp`` (whole seconds) its Root Cause.  The culprit's is dated when the stuck call
    began; the others' a second later at least.  torch 1.9 prints the dict form as a repr: the string form
    there (``old_format``)."""
    v = verdict or {}
    summary = v.get("summary") or "no verdict was merged"
    if summary.startswith("c10d_observer: "):
        summary = summary[len("c10d_observer: "):]
    began = min([h.get("started_at") for h in v.get("hangs") or () if h.get("started_at")] or [wall_now])
    if culprit:
        head = "c10d_observer: collective hang: rank %s (this rank) is its culprit; ended by on_timeout=abort" % rank
        stamp = int(began)
    else:
        head = "c10d_observer: collective hang: rank %s (this rank) was ended by on_timeout=abort; culprit: %s" % (
            rank, rank_list(v.get("culprit_ranks"), "unknown"))
        stamp = max(int(wall_now), int(began) + 1)
    message = "%s. %s (verdict: %s)" % (head, summary, verdict_path)
    if old_format:
        doc = {"message": "%s\n%s" % (message, _verdict_text(verdict_path)), "timestamp": stamp}
    else:
        doc = {"message": {"message": message, "extraInfo": {
            "py_callstack": "%s\n\n%s" % (message, _verdict_text(verdict_path)), "timestamp": str(stamp)}}}
    _dumpdir.write_text(path, json.dumps(doc))


def _verdict_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


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
    wd.reap_py_spy(force=True)
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
    if os.environ.get("C10D_OBSERVER_DEBUG"):
        _log("exiting: %s" % reason)
    reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
