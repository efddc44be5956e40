"""The watchdog subprocess: one per rank.  It never imports torch.

The detection is detector.py's: ``find_overdue(snapshot, now_ns, timeout_ns)``, a pure function of the
channel contents and the time, and ``Detector``, which keeps what it decided (each overdue call once, and how
it ended) and turns each snapshot into decisions.  The protocols (protocols.py) own their state and their
rules, each as phases with deadlines on the injected clock: ``StackCollection`` (the rank's helper thread
asked by a file, the dump signal where it does not answer, py-spy beside), ``Gather`` (the cross-rank gather
on one node: request, answers, merge, and what its verdict asks of this rank), ``Abort`` (on_timeout="abort":
the verdict, the culprit's end, the stacks, then SIGTERM and SIGKILL) and ``PendingSignal`` (the job's signal
at the hard verdict).  ``Watchdog.tick(now)`` asks each what to do and returns the actions;
``Watchdog.act`` runs one (``EFFECTS``, the effects being watchdog_io.py's) as a no-throw step (a failure is
said once and retried where it matters); ``GatherWiring`` wires the gather the same way; ``run`` only waits
on the rank and the clock, calls ``tick`` and acts.  Nothing here sleeps inside ``tick``.

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

from . import channel_reader as _ch_reader
from . import config as _config
from . import dumpdir as _dumpdir
from . import requests as _requests
from . import procs as _procs
from . import rank_docs as _docs
from . import watchdog_end as _end
from . import watchdog_io as _io
from .text import short_clock

from .detector import Detector
from .levels import Level
from .protocols import Abort, Action, Gather, PendingSignal, StackCollection

LIVE_PERIOD_S = 1.0  # c10d-observer watch redraws every second
REQUEST_LOOK_S = 0.1  # an idle watchdog looks for a gather request (a stat) 4 times a poll, at most this often

def _log(msg):
    try:
        sys.stderr.write("c10d_observer[watchdog] %s: %s\n" % (short_clock(time.time()), msg))
        sys.stderr.flush()
    except Exception:
        pass



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
        self.stacks = StackCollection(self.w, has_dump_signal=cfg.dump_signal is not None)
        self.gather = Gather(self.w, cfg.job_id, wall())
        self.abort = Abort(self.w)
        self.notifier = _io.Notifier(cfg, reader, dd, kill, log, wall)
        self.taker = _io.StackTaker(cfg, reader, dd, kill, log, wall)
        self.docs = _docs.RankDocs(cfg, reader, dd, clock, wall, self.gather.started_at, self.notifier, self.taker,
                                 self.stacks)
        self.files = _io.GatherFiles(cfg, reader, dd, wall, log)
        self.ender = _end.Ender(cfg, reader, dd, kill, log, wall)
        self.snap = ()
        self.report_due = False  # a report to write (or to retry: the last write failed)
        self.signal = PendingSignal(self.w)  # a hard detection's signal, sent at its verdict
        self.verdict_seen = None  # the last verdict.json read (the gather's verdict may come before the signal)
        self.gathering = GatherWiring(self)
        self.arrivals = _io.Arrivals(cfg, self.files, clock() + int(cfg.timings.arrivals_period_s * 1e9))
        self.live_due = clock()  # a live document each LIVE_PERIOD_S while a view is open (watch-request.json)
        if cfg.restarts:  # a watchdog of this rank died: what it reported stays reported
            self.detector.restore(self.docs.reported(), reader.snapshot())

    @property
    def run_action(self):
        """What each kind of action does (EFFECTS)."""
        return EFFECTS

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
        exact = self.reader.snapshot(passed=True, arrivals=True)
        # the two clocks read together: a start's wall time is the wall now less how long ago it was on the
        # monotonic clock; the poll's ``now_ns`` was read before its protocols ran (a scheduler's slice late on a
        # busy machine: every start of the poll put that much late, one rank's and not its peers')
        mono, wall_now = self.clock(), self.wall()
        if self.arrivals.observe(self.snap, mono, wall_now, exact):
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
        out += self.gathering.step(now_ns) + self._signal_step(now_ns)
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
            EFFECTS[a.kind](self, a.detail, now_ns)
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
        self.notifier.say_overdue(e, self.detector._deadline_text(e), self.last_report)

    def _notify(self, reason, now_ns):
        """A hard detection: the signal goes once the verdict of the gather this rank is in says the hang is
        hard and not held (a rank it waits for is in a declared phase), or no verdict came in time."""
        if self.signal.pending is not None:
            return
        if self.cfg.on_timeout != "raise":  # under raise the exception goes at the same moment, signal or none
            if self.cfg.signal is None or self.notifier.withheld() is not None:
                return  # none, or its handler was replaced after enable(): no signal, said now (Notifier.withheld)
        self.signal.ask(reason, now_ns)

    def _send_signal(self, reason, now_ns):
        self.notifier.send(reason, self.verdict_seen, self.gather.answered, self.detector.entries)

    def _signal_step(self, now_ns):
        return self.signal.step(now_ns, self.verdict_seen, self.gather.answered, self.docs.rank(),
                                self.detector.hard_in_flight, self.cfg.signal_name)

    def _stacks(self, detail, now_ns):
        """The rank's stacks (StackCollection), and where ``py_spy``, py-spy's: once the helper thread has
        written them, or at once where no helper answers (a thread holds the GIL: py-spy shows which)."""
        reason, py_spy = detail
        helper = self.taker.helper_alive(now_ns)
        for a in self.stacks.ask(now_ns, reason, helper, self.taker.size()):
            self.act(a, now_ns)
        if py_spy:
            self.taker.reserve_py_spy()  # named now: the state this rank answers with names the file
            self.stacks.want_py_spy(now_ns + int(self.w.gather_wait * 1e9) if self.cfg.nodes > 1 and helper else None)
            self._py_spy_step(now_ns)

    def _py_spy_step(self, now_ns):
        v, gid = self.verdict_seen, self.gather.answered
        if self.stacks.py_spy_now(now_ns, v is not None and gid is not None and v.gather_id == gid):
            self.taker.dump_py_spy()

    def _dump_signal(self, reason, now_ns):
        self.stacks.size_before = max(self.stacks.size_before or 0, self.taker.dump_signal(reason))

    def _abort(self, _, now_ns):
        if self.abort.start(now_ns):
            self.ender.arm(False)
            self.log("rank %s: on_timeout=abort: the rank will be ended once the verdict is merged" % self.docs.rank())

    # -- the gather ---------------------------------------------------------------------------------------
    def _abort_culprit(self, v, now_ns):
        if self.abort.start(now_ns, culprit=True, verdict=v):
            self.ender.arm(True)
            self.log("rank %s: on_timeout=abort: this rank is a culprit of the hang (%s): it is ended first"
                     % (self.docs.rank(), (v.summary or "")[len("c10d_observer: "):]))

    def _abort_step(self, now_ns):
        v = self.files.verdict() if self.abort.waits_for_verdict and self.gather.owned is None else None
        return self.abort.on_step(now_ns, v, self.gather.answered, self.ender.culprits_ended, self.stacks.idle)

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
        status = _procs.exit_status(self.cfg.rank_pid, wait_s=2.0)
        why = "process %d ended without disable() (%s%s)" % (self.cfg.rank_pid, reason,
                                                             "; " + status if status else "")
        why = self.abort.ended_why(why, self.ender.armed)
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


class GatherWiring(object):
    """The gather's wiring for one watchdog (``wd``): its request, its answers (the rank's state and stacks),
    the merge it owns, and what the verdict it reads asks (Gather's rules); the watchdog's effects
    "gather", "answer", "merge" and "hold"."""

    def __init__(self, wd):
        self.wd = wd

    def request(self, level, now_ns):
        """Ask every watchdog sharing dump_dir for its rank's state (or join the request already there)."""
        wd = self.wd
        wall_now = wd.wall()
        req = wd.files.request()
        if wd.gather.fresh(req, wall_now):
            if req.id == wd.gather.answered:
                wd.docs.state(wd.detector.entries, req.id)  # answered: again, naming the overdue call
            else:
                self.answer(req, now_ns)
            return
        v = wd.gather.joins(wd.files.verdict() if wd.gather.may_join() else None, wd.detector.entries,
                            wd.docs.rank())
        if v is not None:  # the verdict already merged covers it: one hang, one record (its signal below)
            wd.verdict_seen = v
            return
        gid = "%s-%d-%d" % (wd.cfg.host or socket.gethostname(), os.getpid(), now_ns)
        wd.files.ask(gid, wall_now, level)
        wd.gather.own(gid, now_ns)
        wd.docs.state(wd.detector.entries, gid)

    def answer(self, req, now_ns):
        wd = self.wd
        wd.gather.answered = req.id
        snap = wd.reader.snapshot()
        if wd.stacks.asked_ns is None or now_ns - wd.stacks.asked_ns > wd.w.gather_wait * 1e9:
            # the stacks of every rank, not only the waiting ones; py-spy only of a rank in no collective (a
            # suspect: where is it?), not of one that waits, so as not to stop it for nothing
            wd._stacks(("the verdict's gather %s, asked by rank %s%s" % (
                req.id, req.by_rank, wd.detector.in_flight_text(snap, now_ns, wd.wall())),
                not any(st.oldest for st in snap)), now_ns)
        if wd.cfg.on_timeout == "abort" and req.level == Level.HARD and any(st.oldest for st in snap):
            # under gloo the culprit's end makes this rank's call raise, maybe before its own detection: armed
            # now, before the merge (which waits for this answer), so before any culprit is ended
            wd.ender.arm(False)
        wd.docs.state(wd.detector.entries, req.id)

    def step(self, now_ns):
        """Answer a new request; merge the one this watchdog owns when it is due; under abort, take the
        verdict, which every rank's error file carries, and which may name this rank its culprit."""
        wd = self.wd
        out = []
        req = wd.files.new_request()
        if req is not None:
            wd.gather.superseded(req)
            wd.gather.overwritten(req, wd.wall())
            if wd.gather.mine(req) and req.id != wd.gather.answered:
                out.append(Action("answer", req))
        if wd.gather.owned is not None:
            wd.files.scan(wd.gather)
            if wd.gather.due(now_ns, wd.reader.rank()[1], wd.files.stacks_arrived):
                out.append(Action("merge", None))
        v = wd.files.new_verdict() if wd.gather.answered is not None else None
        if v is not None:
            wd.verdict_seen = v
            out += wd.gather.on_verdict(v, wd.detector.entries, wd.docs.rank(), wd.cfg.on_timeout,
                                          wd.abort.active)
        return out

    def hold(self, v, now_ns):
        wd = self.wd
        until = v.held_until
        wall_now = wd.wall()
        wd.detector.hold(now_ns + int(max(0.0, until - wall_now) * 1e9), until)
        if wd.abort.before_exit:
            wd.abort.cancel()
        if not wd.abort.ending:  # armed by its own detection, or by answering the gather
            wd.ender.disarm()
        wd.say_once("rank %s: the hard verdict is held until %s: %s" % (
            wd.docs.rank(), short_clock(until), v.held_why or "a rank it waits for is in a declared phase"),
            key=("hold", until))

    def merge(self, _, now_ns):
        wd = self.wd
        gid, asked = wd.gather.merged()
        wd.files.merge(gid, (now_ns - asked) / 1e9)
        wd.verdict_seen = wd.files.verdict()  # the owner's own signal need not wait for its next look


# What each kind of action does (the effect's owner): Watchdog.act runs EFFECTS[kind](watchdog, detail, now_ns).
EFFECTS = {
    "report": Watchdog._report, "say": Watchdog._say, "say_overdue": Watchdog._say_overdue,
    "notify": Watchdog._notify, "signal": Watchdog._send_signal, "stacks": Watchdog._stacks,
    "stack_request": lambda wd, reason, now: wd.taker.request(reason),
    "withdraw_request": lambda wd, _, now: wd.taker.withdraw(), "dump_signal": Watchdog._dump_signal,
    "gather": lambda wd, level, now: wd.gathering.request(level, now),
    "answer": lambda wd, req, now: wd.gathering.answer(req, now),
    "merge": lambda wd, _, now: wd.gathering.merge(None, now), "hold": lambda wd, v, now: wd.gathering.hold(v, now),
    "abort": Watchdog._abort, "abort_culprit": Watchdog._abort_culprit,
    "error_file": lambda wd, d, now: wd.ender.error_file(*d), "term": lambda wd, _, now: wd.ender.term(),
    "exit_request": lambda wd, culprit, now: wd.ender.exit_request(culprit),
    "arm": lambda wd, culprit, now: wd.ender.arm(culprit), "disarm": lambda wd, _, now: wd.ender.disarm(),
    "kill": lambda wd, _, now: wd.ender.kill_now(),
    "arrivals": lambda wd, _, now: wd.arrivals.write(wd.snap, wd.docs.rank(), wd.wall()),
    "live": lambda wd, _, now: wd.docs.live(wd.detector.entries, wd.snap, now)}


def run(wd, lifeline_fd):
    """Wait on the rank (its lifeline) and the clock; poll, look or peek as due.  Returns why it ended."""
    poll_ns = int(wd.cfg.poll_interval * 1e9)
    look_ns = int(wd.w.merge_look * 1e9)
    peek_ns = int(max(REQUEST_LOOK_S, wd.cfg.poll_interval / 4) * 1e9)  # a wake-up: ~0.35 ms of CPU here
    next_tick = wd.clock() + poll_ns
    while True:
        now = wd.clock()
        wake = min(next_tick, now + (look_ns if wd.busy() else peek_ns))
        wait = max(0.0, wake - now) / 1e9
        try:
            readable, _, _ = select.select([lifeline_fd], [], [], wait)
        except InterruptedError:
            readable = []
        if readable:  # "stop" from disable(), or EOF: the rank exited or died
            return "stop" if os.read(lifeline_fd, 4096) else "the rank closed its end"
        if os.getppid() != wd.cfg.rank_pid:
            return "the rank (pid %d) is gone" % wd.cfg.rank_pid
        now = wd.clock()
        try:
            if now >= next_tick:
                next_tick = now + poll_ns
                wd.step(now)
            elif wd.busy():  # between polls: only the protocols that are under way
                wd.look(now)
            elif wd.peek(now):
                next_tick = now + poll_ns
            due = wd.detector.next_deadline_ns(wd.snap)
            if due is not None and now < due < next_tick:
                next_tick = due  # the next poll at the first call's deadline
        except Exception as e:  # never die of our own bugs: say it once, try again next time
            wd.say_once("a poll failed (will retry): %r" % (e,), key=("poll", type(e).__name__))


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
    reader = _ch_reader.ChannelReader.from_fd(cfg.channel_fd) if cfg.channel_fd >= 0 else _ch_reader.ChannelReader(cfg.channel)
    wd = Watchdog(cfg, reader)
    os.write(sys.stdout.fileno(), ("READY %d\n" % os.getpid()).encode())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    reason = run(wd, stdin_fd)
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
