"""The watchdog's three protocols, each a machine of phases on the injected clock: ``StackCollection`` (the
rank's stacks written, once per ask), ``Gather`` (the cross-rank gather on one node) and ``Abort``
(on_timeout="abort").  Pure: no file, no signal, no clock of their own; each step returns Actions, which
``watchdog.Watchdog.act`` runs.  Moved out of watchdog.py as they were, with their phases made enums (each an ``actions.Machine``).

Each phase is a ``str``-valued enum member (its value is what the phase was called before, so logs and
tests read the same) and each machine has one table of the transitions it allows (``ALLOWED``): a step that
tries any other raises ``ProtocolError`` at once, in the tests, rather than leaving a machine in a state no
rule covers.  The model: NVIDIA resiliency-ext's ``RankMonitorState`` with ``can_transition_to``.  Each kind
of ``Action`` says what it carries (``actions.PAYLOADS``), checked when it is made.
"""
from enum import Enum

from .actions import Action, Machine
from .config import HANG_EXIT_CODE
from .levels import Level



class StackPhase(str, Enum):
    IDLE = "idle"
    ASKED = "asked"
    DUMPING = "dumping"


class GatherPhase(str, Enum):
    IDLE = "idle"
    OWNER = "owner"


class AbortPhase(str, Enum):
    IDLE = "idle"
    VERDICT = "verdict"
    CULPRIT = "culprit"
    STACKS = "stacks"
    EXIT = "exit"
    TERM = "term"
    KILL = "kill"
    DONE = "done"


# -- stack collection -----------------------------------------------------------------------------------
class StackCollection(Machine):
    """Having the rank's stacks written, once per ask.

    IDLE -> ASKED: the helper thread (it beats every poll) was asked by a file; it writes every thread's
    stack with the GIL held, which cannot crash the rank.  ASKED -> IDLE once the stacks file grew;
    ASKED -> DUMPING when it did not within ``helper_answer`` (a thread holds the GIL): the dump signal
    (faulthandler's all-thread dump from C, on a signal of its own).  A rank whose helper is known not to
    beat goes to DUMPING at once.  DUMPING -> IDLE when the file grew, or after ``abort_stacks``."""

    IDLE, ASKED, DUMPING = StackPhase.IDLE, StackPhase.ASKED, StackPhase.DUMPING
    ALLOWED = {
        IDLE: (ASKED, DUMPING, IDLE),  # IDLE -> IDLE: asked, with neither a helper nor a dump signal
        ASKED: (IDLE, DUMPING),  # the helper answered; it did not in time: the dump signal (or none there)
        DUMPING: (IDLE,),
    }

    def __init__(self, windows, has_dump_signal=True):
        self.answer_ns = int(windows.helper_answer * 1e9)
        self.dump_ns = int(windows.abort_stacks * 1e9)
        self.has_dump_signal = has_dump_signal
        self.phase = self.IDLE
        self.since_ns = None
        self.size_before = None  # the stacks file's size when asked: grown past it, the dump is there
        self.reason = None
        self.asked_ns = None  # when the last ask began (the gather does not ask again within its window)
        self.py_spy_due, self.py_spy_hold_ns = False, None  # a py-spy dump wanted, held until then

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

    @property
    def idle(self):
        return self.phase is self.IDLE

    def arrived(self, size_now):
        """The last dump asked for is in the file (or none was asked)."""
        return self.size_before is None or size_now > self.size_before

    # py-spy beside: it stops the rank while it reads it (0.2 to 1 s): started first, it held the helper's dump,
    # and so the verdict, back by as long.  Across nodes the rank's relay thread sends its node's answers to the
    # merge: there py-spy also waits for the gather's verdict (at most ``gather_wait``).
    def want_py_spy(self, hold_until_ns=None):
        """py-spy's dump is wanted once the helper's dump is in (and, ``hold_until_ns``, not before then
        unless the gather's verdict came first)."""
        self.py_spy_due, self.py_spy_hold_ns = True, hold_until_ns

    def py_spy_now(self, now_ns, verdict_in):
        """Whether to start the wanted py-spy dump now (``verdict_in``: the verdict of the gather this rank
        answered is there); once."""
        if not self.py_spy_due or self.phase is self.ASKED:
            return False
        if self.py_spy_hold_ns is not None and now_ns < self.py_spy_hold_ns and not verdict_in:
            return False
        self.py_spy_due, self.py_spy_hold_ns = False, None
        return True


# -- the gather -----------------------------------------------------------------------------------------
class Gather(Machine):
    """The cross-rank gather on one node, through dump_dir (across nodes the relays carry it, relay.py).

    A watchdog that finds a call overdue *requests* (writes gather-request.json) unless a request of the
    same job, younger than the gather window and not merged, is there: then it *joins* it (answers again:
    its state now names its overdue call).  Every watchdog *answers* each new request of its job once (its
    rank's state, and its stacks).  The one that requested is the *owner*: it merges when every rank has
    answered (or ended), else once the window is over and no answer came for ``gather_quiet``, at the
    latest at ``gather_wait_max``.  Phases: IDLE -> OWNER (merging) -> IDLE; ``answered`` is the id of the
    last request answered (the verdict this rank waits for under abort)."""

    IDLE, OWNER = GatherPhase.IDLE, GatherPhase.OWNER
    ALLOWED = {
        IDLE: (OWNER,),
        OWNER: (IDLE, OWNER),  # OWNER -> OWNER: a new request of its own replaces one the window closed on
    }

    def __init__(self, windows, job_id, started_at):
        self.w = windows
        self.job_id = job_id
        self.started_at = started_at
        self.phase = self.IDLE
        self.since_ns = None
        self.owned = None  # (id, asked monotonic ns)
        self.answered = None  # id of the last request answered
        self.seen = None  # (mtime_ns, size) of the request file last looked at
        self.verdict_seen = None  # (mtime_ns, size) of verdict.json last looked at
        self._answers = {}  # file -> ((mtime_ns, size), [(rank, counts, stacks wanted)]): the merge's scan
        self._answered_n = 0
        self._progress_ns = None
        self.regathered = set()  # (stream, seq) of this rank's calls gathered again, left out of a merged verdict

    def fresh(self, req, wall_now):
        """``req`` (a requests.GatherRequest or None) is this job's, not merged, asked within gather_wait."""
        return req is not None and req.valid(self.job_id, now=wall_now, within=self.w.gather_wait, merged_ok=False)

    def mine(self, req):
        return req is not None and req.valid(self.job_id, since=self.started_at - self.w.gather_wait)

    def own(self, gid, now_ns):
        self._to(self.OWNER, now_ns)
        self.owned, self.answered = (gid, now_ns), gid
        self._answers, self._answered_n, self._progress_ns = {None: gid}, 0, now_ns

    def superseded(self, req):
        """Another node's request came first (relay.py wrote it with "supersedes"): its node merges."""
        if self.owned is not None and req is not None and req.supersedes == self.owned[0]:
            self._to(self.IDLE, None)
            self.owned = None

    def overwritten(self, req, wall_now):
        """Two watchdogs of the node found the hang within the same instant (they wake at their calls'
        deadlines), each read no request and each wrote its own: the file holds the later one, which every
        other watchdog answers.  The one whose request was overwritten leaves the merge to it and answers it:
        one gather, one verdict, one record."""
        if self.owned is not None and self.fresh(req, wall_now) and req.id != self.owned[0]:
            self._to(self.IDLE, None)
            self.owned = None
            return True
        return False

    def count(self, path, key, docs, gid):
        """Note one answer file's documents (read when it changed)."""
        entries = []
        for doc in docs:
            # a rank whose helper fell silent (no beat for longer than it answers in) but is not yet frozen
            # counts once its watchdog says which (it answers again when the rank froze): else a rank stopped
            # inside a call every rank entered is merged as "none is frozen" a moment before it is
            silent = (not doc.dead and not doc.frozen and doc.heartbeat_age_s is not None
                      and doc.heartbeat_age_s > self.w.helper_answer)
            # a rank whose observer ended (disable(), its script's end: its end document, alive) answers no more:
            # that document is its answer (the merge waited for it until gather_wait, 3 s at a poll of 1 s, where
            # gloo's error ended the others and one rank still waited: the fuzzer's real seed 40000214); one
            # written before this watchdog started is an earlier incarnation's (torchelastic's restart)
            ended = doc.kind == "end" and (doc.written_at or 0) >= self.started_at - self.w.gather_wait
            counts = doc.dead or ended or (doc.gather_id == gid and not silent)
            wanted = None if doc.dead or doc.frozen or ended else (doc.stack_dump, doc.stacks_size_before)
            entries.append((doc.rank, counts, wanted))
        self._answers[path] = (key, entries)

    def known(self, path, key):
        seen = self._answers.get(path)
        return seen is not None and seen[0] == key

    def due(self, now_ns, world, stacks_arrived):
        """Whether to merge now."""
        if self.phase is not self.OWNER:
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
        self._to(self.IDLE, None)
        gid, asked = self.owned
        self.owned = None
        return gid, asked

    # -- what a verdict asks of this rank (the rules: pure, on what the watchdog read) ---------------------
    def may_join(self):
        """Whether a merged verdict may cover this rank's new detection (``joins``): it answered a gather it
        does not own."""
        return self.answered is not None and self.owned is None

    def joins(self, v, entries, rank):
        """``v`` (verdict.json as read) where it is the verdict merged from the last gather this rank answered
        and already holds every call of this rank in flight past its deadline (``entries``: the detector's),
        with this rank waiting in it (or named its late culprit), at this detection's level and not held;
        else None.  A rank that finds the hang after the gather it answered was merged (its call entered
        later, or its watchdog was slower under load; the culprit itself, late, once it entered the call and
        its peers, starved of CPU, leave it slowly) joins that verdict instead of gathering the same hang
        again: the record says what the console said first (a verdict is a record)."""
        if v is None or not self.may_join() or v.gather_id != self.answered or v.held_until or not v.hangs:
            return None
        hangs = {(str(h.stream), h.seq): h for h in v.hangs}
        mine = [e for e in entries if e.in_flight]
        for e in mine:
            h = hangs.get((str(e.stream), e.seq))
            late = rank in (h.missing_ranks or ()) and rank in (v.culprit_ranks or ()) if h is not None else False
            if (h is None or not (rank in (h.waiting_ranks or ()) or late) or h.held_until
                    or (e.level == Level.HARD and h.level != Level.HARD)):
                return None
        return v if mine else None

    def left_out(self, v, entries):
        """A verdict merged from the gather this rank answered that holds none of this rank's calls found
        overdue and still in flight: its answer naming them came after the merge (it found its call overdue
        during another rank's gather), and no one would gather them.  The level to gather them at, once per
        call; else None."""
        if v.gather_id != self.answered or self.owned is not None or not v.hangs:
            return None
        keys = {(str(h.stream), h.seq) for h in v.hangs}
        left = [e for e in entries if e.in_flight and (str(e.stream), e.seq) not in keys
                and (str(e.stream), e.seq) not in self.regathered]
        if not left:
            return None
        self.regathered.update((str(e.stream), e.seq) for e in left)
        return Level.HARD.value if any(e.level == Level.HARD for e in left) else Level.SOFT.value

    def on_verdict(self, v, entries, rank, on_timeout, aborting):
        """What a new verdict asks of this rank: a gather of its calls the verdict left out; the hold, where
        the verdict of its gather is held (a rank the calls wait for is in a declared phase); under
        on_timeout="abort", a hard verdict of its gather with stuck calls: every rank's error file says it
        before any rank is ended (the launcher then ends the others at once), and the culprit is ended first,
        so that it is the launcher's first failure."""
        out = []
        level = self.left_out(v, entries)
        if level is not None:
            out.append(Action("gather", level))
        mine = v.gather_id == self.answered
        if mine and v.held_until:
            out.append(Action("hold", v))
        if on_timeout == "abort" and v.level in (None, Level.HARD) and mine and v.hangs:
            culprit = rank in (v.culprit_ranks or ())
            out.append(Action("error_file", (v, culprit)))
            out.append(Action("arm", culprit))  # armed already where this rank's call was found overdue
            if culprit and not aborting:
                out.append(Action("abort_culprit", v))
        return out


# -- the job's signal -----------------------------------------------------------------------------------
class PendingSignal(object):
    """The job's signal at a hard detection (docs/contracts.md, "The signal"): asked for (``ask``), it goes
    once the verdict of the gather this rank answered says the hang is hard and not held, and only where this
    rank is not its culprit (a culprit inside the call, frozen or stopped, is never signalled: its handler is
    for the ranks that wait for it, and a signal it meets once its call ended may meet SIG_DFL) and its hard
    call is still in flight; where no hard verdict came within ``abort_verdict``, while its hard call is still
    in flight.  Dropped where the verdict was held (the hold ends in a hard detection, which asks again)."""

    def __init__(self, windows):
        self.w = windows
        self.pending = None  # (reason, monotonic ns asked)
        self._said = set()  # gather ids whose verdict named this rank: said once

    def ask(self, reason, now_ns):
        if self.pending is None:
            self.pending = (reason, now_ns)

    def step(self, now_ns, v, answered, rank, hard_in_flight, signal_name):
        """Actions: "signal" with its reason, or "say" why none goes; ``v``: the last verdict read,
        ``answered``: the gather this rank answered, ``hard_in_flight()``: its hard call is still in flight."""
        if self.pending is None:
            return []
        reason, since = self.pending
        mine = v is not None and answered is not None and v.gather_id == answered
        if mine and v.held_until:
            self.pending = None
            return []
        if mine and v.level == Level.HARD:
            self.pending = None
            if rank in (v.culprit_ranks or ()):
                if v.gather_id in self._said:
                    return []
                self._said.add(v.gather_id)
                return [Action("say", "no %s sent: the verdict names this rank the culprit" % signal_name)]
            return [Action("signal", reason)] if hard_in_flight() else []
        if now_ns - since > self.w.abort_verdict * 1e9:  # no hard verdict came: this rank's call decides
            self.pending = None
            if hard_in_flight():
                return [Action("signal", reason)]
        return []


# -- abort ----------------------------------------------------------------------------------------------
class Abort(Machine):
    """on_timeout="abort": end the rank so the launcher restarts the job, once the verdict is known.

    VERDICT: the gather this watchdog joined is merged (at most ``abort_verdict``) -> CULPRIT: a rank that
    waited lets the culprits end first, so that the launcher's first failure (torchrun's "Root Cause") is
    the culprit (at most ``abort_culprit``; skipped for the culprit itself) -> STACKS: the stack dump has
    arrived (at most ``abort_stacks``) -> EXIT: the error file written, the rank asked to end itself with
    HANG_EXIT_CODE (its helper thread does, within a poll, unless a thread holds the GIL) -> TERM: SIGTERM,
    once ``abort_exit`` passed with the rank still there -> KILL: SIGKILL once ``abort_kill_after`` passed
    -> DONE."""

    IDLE, VERDICT, CULPRIT, STACKS, EXIT, TERM, KILL, DONE = tuple(AbortPhase)
    ALLOWED = {
        IDLE: (VERDICT, CULPRIT),
        VERDICT: (CULPRIT, IDLE),  # -> IDLE: cancel (the verdict was held)
        CULPRIT: (STACKS, IDLE),
        STACKS: (EXIT, IDLE),
        EXIT: (TERM,),  # asked to exit: from here on the rank is ended, whatever a verdict says
        TERM: (KILL,),
        KILL: (DONE,),
        DONE: (),
    }

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

    @property
    def before_exit(self):
        """Under way, the rank not asked to end yet: a held verdict can still cancel it."""
        return self.phase in (self.VERDICT, self.CULPRIT, self.STACKS)

    @property
    def ending(self):
        """The rank was asked to end (or signalled): its calls end with it."""
        return self.phase in (self.EXIT, self.TERM, self.KILL)

    @property
    def waits_for_verdict(self):
        return self.phase is self.VERDICT

    @property
    def waits_for_culprits(self):
        return self.phase in (self.VERDICT, self.CULPRIT)

    def how_ended(self):
        """How the observer ended the rank, once it asked it to (else None)."""
        if self.phase in (self.EXIT, self.TERM, self.KILL, self.DONE):
            return {self.EXIT: "asked to exit with code %d" % HANG_EXIT_CODE,
                    self.TERM: "SIGTERM"}.get(self.phase, "SIGKILL")
        return None

    def on_step(self, now_ns, v, answered, culprits_ended, stacks_idle):
        """One step, with what the watchdog read: ``v``, verdict.json (None where it was not read: not waiting
        for it, or this rank's watchdog owns the merge), ``answered``, the gather this rank answered,
        ``culprits_ended(verdict)``, whether its culprits are gone, ``stacks_idle``.  A verdict that is held (a
        rank it waits for is in a declared phase) cancels the abort: "disarm"."""
        verdict = None
        if self.waits_for_verdict and v is not None and (answered is None or v.gather_id == answered):
            if v.held_until:
                self.cancel()
                return [Action("disarm", None)]
            verdict = v
        ended = True
        known = verdict or self.verdict
        if self.waits_for_culprits and known:
            # computed before the step: VERDICT goes on to CULPRIT in the same step, and must wait there
            ended = culprits_ended(known)
        return self.step(now_ns, verdict, ended, stacks_idle)

    def ended_why(self, why, armed=False):
        """Why the rank ended, as its end document says: ``why`` (the process's end, as seen), unless the
        observer was ending it (the watchdog is not the rank's parent: it says what it asked for, a launcher
        may have ended it first), had armed its exit code (``armed``: it answered a hard gather with a call in
        flight) or ended it."""
        how = self.how_ended()
        if self.before_exit or (armed and self.phase == self.IDLE):
            return "ended while the observer was ending it (on_timeout=abort, armed to exit with code %d)%s" % (
                HANG_EXIT_CODE, ": it was a culprit of the hang" if self.culprit
                else ": its collective raised once its peers had ended")
        if how is not None:
            return "ended by the observer (on_timeout=abort, %s)%s" % (
                how, ": it was a culprit of the hang" if self.culprit else " after its call was overdue")
        return why

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
                self._to(self.EXIT, now_ns)
                return [Action("error_file", (None, self.culprit)), Action("exit_request", self.culprit)]
        elif self.phase == self.EXIT:
            if waited > self.w.abort_exit:
                self._to(self.TERM, now_ns)
                return [Action("term", None)]
        elif self.phase == self.TERM:
            if waited > self.w.abort_kill_after:
                self._to(self.KILL, now_ns)
                return [Action("kill", None)]
        return []

    def cancel(self):
        """The verdict was held (a rank it waits for is in a declared phase): no abort until it is hard."""
        self._to(self.IDLE, None)
        self.verdict, self.culprit = None, False
