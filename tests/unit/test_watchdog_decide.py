"""The watchdog's decisions with a fake clock: find_overdue, the Detector and each protocol (stack
collection, the gather, abort) phase by phase, and Watchdog.step over a real channel.

The rank side is a real ChannelWriter in this process; the watchdog side a real ChannelReader on its file.
Time is a number we choose.  ``kill`` is replaced by a recorder: these tests must not signal anything;
signalling real ranks is covered by the integration tests (test_signal_contract.py).
"""
import json
import os
import signal
import time

import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader
from c10d_observer import config, documents, dumpdir
from c10d_observer import procs
from c10d_observer.requests import GatherRequest
from c10d_observer.detector import Detector, find_overdue
from c10d_observer.watchdog import Abort, Action, Gather, StackCollection, Watchdog

TIMEOUT_S = 10.0
TIMEOUT_NS = int(TIMEOUT_S * 1e9)
POLL_NS = int(1e9)
T0 = 50 * 10 ** 9  # an arbitrary monotonic time at which the first call starts
WALL0 = 1.7e9  # the wall clock when the monotonic clock read 0
RANK_PID = 999999  # never signalled: kill is a recorder
DUMP_SIG = 60
ALL_REDUCE = ch.encode_op("all_reduce")
BROADCAST = ch.encode_op("broadcast")
W = config.windows(1.0)


def wall_at(now_ns):
    return WALL0 + now_ns / 1e9


class FakeClock(object):
    def __init__(self):
        self.now_ns = 0

    def __call__(self):
        return self.now_ns

    def wall(self):
        return wall_at(self.now_ns)


class Rig(object):
    """A channel with two group streams, a reader on its file, and a Watchdog with fake time and kill."""

    def __init__(self, tmp_path, on_kill=None, **cfg):
        self.dump_dir = tmp_path / "dump"
        self.dump_dir.mkdir()
        self.writer = ch_writer.ChannelWriter(max_streams=2, ring=8, directory=str(tmp_path))
        self.descs = [
            {"group": "0", "name": "0", "stream": "0", "ranks": [0, 1, 2, 3], "backend": "gloo",
             "kind": "collective"},
            {"group": "1", "name": "1", "stream": "1", "ranks": [1, 3], "backend": "gloo",
             "kind": "collective"},
        ]
        self.streams = [self.writer.stream_writer(self.writer.add_stream(d)) for d in self.descs]
        self.reader = ch_reader.ChannelReader(self.writer.path)
        self.clock = FakeClock()
        self.kills = []
        self.logs = []
        self.on_kill = on_kill
        self.stack_path = str(self.dump_dir / dumpdir.stacks_name(1, RANK_PID))
        base = dict(rank_pid=RANK_PID, dump_dir=str(self.dump_dir), stack_path=self.stack_path, timeout=TIMEOUT_S,
                    poll_interval=POLL_NS / 1e9, channel=self.writer.path, signal=int(signal.SIGUSR1),
                    signal_name="SIGUSR1", dump_signal=DUMP_SIG, host="test-host", torch_version="0.0.0-test",
                    source_in_use="patch", source_reasons={"patch": "test", "hooks": "test"},
                    public_config={"timeout": TIMEOUT_S, "poll_interval": POLL_NS / 1e9,
                                   "dump_dir": str(self.dump_dir), "signal": "SIGUSR1", "source": "auto",
                                   "on_timeout": "dump"})
        base.update(cfg)
        self.cfg = config.WatchdogConfig(**base)
        self.wd = Watchdog(self.cfg, self.reader, clock=self.clock, wall=self.clock.wall, kill=self._kill,
                           log=self.logs.append)

    def _kill(self, pid, sig):
        self.kills.append((pid, sig))
        if self.on_kill is not None:
            self.on_kill(pid, sig)

    def step(self, now_ns):
        self.clock.now_ns = now_ns
        return self.wd.step(now_ns)

    def notified(self):
        return [k for k in self.kills if k[1] == signal.SIGUSR1]

    def until_signal(self, from_ns, limit_s=None):
        """Drive the watchdog as its loop does (a step each poll, a look every 50 ms while busy) from
        ``from_ns`` until the notification went (the hard verdict merged, or none came within
        ``abort_verdict``); returns the time it went, or None."""
        limit_ns = from_ns + int((limit_s if limit_s is not None else W.abort_verdict + 2) * 1e9)
        t, next_poll = from_ns, from_ns + POLL_NS
        while t <= limit_ns:
            if self.notified():
                return t
            t += int(0.05e9)
            self.clock.now_ns = t
            if t >= next_poll:
                next_poll = t + POLL_NS
                self.wd.step(t)
            elif self.wd.busy():
                self.wd.look(t)
        return t if self.notified() else None

    def report_path(self):
        rank = self.reader.rank()[0]
        return str(self.dump_dir / dumpdir.report_name(rank, RANK_PID))

    def report(self):
        with open(self.report_path()) as f:
            return json.load(f)

    def reports_on_disk(self):
        return sorted(n for n in os.listdir(str(self.dump_dir)) if n.startswith("report-"))

    def beats(self):
        self.reader.heartbeat_ns = lambda: self.clock.now_ns  # the helper thread beats

    def close(self):
        self.reader.close()
        self.writer.close()


@pytest.fixture
def rig(tmp_path):
    r = Rig(tmp_path)
    yield r
    r.close()


def kinds(actions):
    return [a.kind for a in actions]


# -- find_overdue ---------------------------------------------------------------------------------------

def test_find_overdue_is_strictly_after_the_timeout(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    snap = rig.reader.snapshot()
    assert find_overdue(snap, T0, TIMEOUT_NS) == []
    assert find_overdue(snap, T0 + TIMEOUT_NS, TIMEOUT_NS) == []
    [o] = find_overdue(snap, T0 + TIMEOUT_NS + 1, TIMEOUT_NS)
    assert (o.stream.desc["stream"], o.seq, o.op, o.start_ns) == ("0", 1, ALL_REDUCE, T0)


def test_find_overdue_looks_at_the_oldest_call_in_flight_only(rig):
    s = rig.streams[0]
    s.start(ALL_REDUCE, T0)
    s.start(BROADCAST, T0 + 1)
    [o] = find_overdue(rig.reader.snapshot(), T0 + 5 * TIMEOUT_NS, TIMEOUT_NS)
    assert (o.seq, o.op) == (1, ALL_REDUCE)


def test_find_overdue_ignores_completed_calls(rig):
    s = rig.streams[0]
    s.done(s.start(ALL_REDUCE, T0))
    assert find_overdue(rig.reader.snapshot(), T0 + 5 * TIMEOUT_NS, TIMEOUT_NS) == []


# -- the detector ---------------------------------------------------------------------------------------

def test_the_detector_decides_nothing_before_or_at_the_timeout(rig):
    d = Detector(TIMEOUT_S, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    for now in range(T0, T0 + TIMEOUT_NS + 1, POLL_NS):
        assert d.tick(rig.reader.snapshot(), now, wall_at(now)) == []


def test_a_call_newly_overdue_is_reported_notified_dumped_and_gathered_once(rig):
    d = Detector(TIMEOUT_S, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    first = d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, wall_at(T0 + TIMEOUT_NS + 1))
    assert kinds(first) == ["report", "notify", "stacks", "gather", "say_overdue"]
    for k in range(1, 30):
        assert d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1 + k * POLL_NS, 0) == []
    assert [(e.seq, e.op, e.in_flight) for e in d.entries] == [(1, "all_reduce", True)]


def test_the_notification_goes_once_per_hang_not_once_per_call(rig):
    d = Detector(TIMEOUT_S, W)
    a, b = rig.streams
    a.start(ALL_REDUCE, T0)
    assert "notify" in kinds(d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, 0))
    b.start(BROADCAST, T0 + 1)  # a second call overdue while the first still is: the same hang
    assert "notify" not in kinds(d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 2, 0))
    a.done(1)
    b.done(1)
    t = T0 + 3 * TIMEOUT_NS
    d.tick(rig.reader.snapshot(), t, 0)
    d.tick(rig.reader.snapshot(), t + int(W.settle * 1e9) + 1, 0)
    a.start(ALL_REDUCE, t)  # a later hang: notified again
    assert "notify" in kinds(d.tick(rig.reader.snapshot(), t + TIMEOUT_NS + 1, 0))


def test_under_abort_the_detector_starts_the_abort(rig):
    d = Detector(TIMEOUT_S, W, on_timeout="abort")
    rig.streams[0].start(ALL_REDUCE, T0)
    assert kinds(d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, 0))[-1] == "abort"


def test_an_overdue_call_that_ended_is_held_then_decided_resolved(rig):
    d = Detector(TIMEOUT_S, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, wall_at(T0 + TIMEOUT_NS + 1))
    rig.streams[0].done(1)
    seen = T0 + 2 * TIMEOUT_NS
    assert d.tick(rig.reader.snapshot(), seen, wall_at(seen)) == []  # held: peers' ends may still show
    assert d.entries[0].in_flight
    out = d.tick(rig.reader.snapshot(), seen + int(W.settle * 1e9), wall_at(seen + 1))
    assert kinds(out) == ["report", "say"] and "resolved" in out[1].detail
    e = d.entries[0]
    assert (e.in_flight, e.ended, e.completed_at) == (False, "completed", wall_at(seen))
    assert e.resolved_after_s == round(2 * TIMEOUT_S, 1)


def test_an_overdue_call_that_ended_once_its_peers_had_ended_is_not_a_recovery(rig):
    d = Detector(TIMEOUT_S, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, 0)
    rig.streams[0].done(1)
    d.tick(rig.reader.snapshot(), T0 + 2 * TIMEOUT_NS, 0)
    out = d.tick(rig.reader.snapshot(), T0 + 2 * TIMEOUT_NS + int(W.settle * 1e9), 0, dead_peers=lambda e: [2, 3])
    assert d.entries[0].ended == "peers ended" and "once ranks 2, 3 of it had ended: not a recovery" in out[1].detail


def test_calls_in_flight_when_the_rank_is_gone_ended_with_it(rig):
    d = Detector(TIMEOUT_S, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, 0)
    d.rank_ended(123.0)
    assert (d.entries[0].in_flight, d.entries[0].ended, d.entries[0].completed_at) == (False, "rank ended", 123.0)


# -- stack collection, phase by phase --------------------------------------------------------------------

def test_stacks_idle_to_asked_when_the_helper_beats():
    s = StackCollection(W)
    assert kinds(s.ask(0, "why", helper_alive=True, size_now=10)) == ["stack_request"]
    assert s.phase == StackCollection.ASKED and s.size_before == 10


def test_stacks_asked_to_idle_when_the_file_grew():
    s = StackCollection(W)
    s.ask(0, "why", True, 10)
    assert s.step(1, 10) == [] and s.phase == StackCollection.ASKED
    assert s.step(2, 11) == [] and s.phase == StackCollection.IDLE and s.arrived(11)


def test_stacks_asked_to_dumping_when_the_helper_does_not_answer():
    s = StackCollection(W)
    s.ask(0, "why", True, 10)
    assert s.step(int(W.helper_answer * 1e9), 10) == []
    out = s.step(int(W.helper_answer * 1e9) + 1, 10)
    assert kinds(out) == ["withdraw_request", "dump_signal"] and "did not answer" in out[1].detail
    assert s.phase == StackCollection.DUMPING


def test_stacks_idle_to_dumping_at_once_when_the_helper_does_not_beat():
    s = StackCollection(W)
    assert kinds(s.ask(0, "why", helper_alive=False, size_now=0)) == ["dump_signal"]
    assert s.phase == StackCollection.DUMPING


def test_stacks_dumping_to_idle_when_the_dump_came_or_after_its_limit():
    s = StackCollection(W)
    s.ask(0, "why", False, 5)
    s.step(1, 6)
    assert s.phase == StackCollection.IDLE
    s.ask(10, "again", False, 6)
    s.step(10 + int(W.abort_stacks * 1e9) + 1, 6)  # a frozen rank: nothing comes; given up
    assert s.phase == StackCollection.IDLE


def test_stacks_without_a_dump_signal_give_up_instead_of_signalling():
    s = StackCollection(W, has_dump_signal=False)
    assert s.ask(0, "why", False, 0) == [] and s.phase == StackCollection.IDLE


def test_one_dump_at_a_time():
    s = StackCollection(W)
    s.ask(0, "first", True, 0)
    assert s.ask(1, "second", True, 0) == [] and s.reason == "first"


# -- the gather, phase by phase --------------------------------------------------------------------------

def _docs(ranks, gid, **kw):
    return [documents.RankDoc("state", r, gather_id=gid, **kw) for r in ranks]


def test_gather_idle_to_owner_and_back_when_every_rank_answered():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    assert g.phase == Gather.OWNER
    g.count("a", 1, _docs([0, 1], "g1"), "g1")
    assert not g.due(1, 3, lambda w: True)
    g.count("b", 1, _docs([2], "g1"), "g1")
    assert g.due(2, 3, lambda w: True)
    assert g.merged() == ("g1", 0) and g.phase == Gather.IDLE


def test_gather_answers_of_another_request_do_not_count_but_ended_ranks_do():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    g.count("a", 1, _docs([0], "g0") + [documents.RankDoc("end", 1, alive=False)], "g1")
    assert g._answered_n == 0 and not g.due(1, 2, lambda w: True) and g._answered_n == 1


def test_gather_counts_a_rank_whose_observer_ended_as_answered_but_not_an_earlier_incarnations_end():
    """A rank whose observer was disabled (its script ended, or raised and exited cleanly) writes an end
    document, alive, and its watchdog answers no more: the merge waited for it until gather_wait (3 s at a poll
    of 1 s: the fuzzer's real seed 40000214, gloo's error ended five of six ranks).  It counts as answered; an
    end written before this watchdog started (a torchelastic restart's earlier process) does not."""
    g = Gather(W, "", 100.0)
    g.own("g1", 0)
    g.count("a", 1, _docs([0], "g1"), "g1")
    g.count("b", 1, [documents.RankDoc("end", 1, alive=True, written_at=100.5)], "g1")
    g.count("c", 1, [documents.RankDoc("end", 2, alive=True, written_at=100.0 - W.gather_wait - 1.0)], "g1")
    assert not g.due(1, 3, lambda w: True)  # rank 2's end is older than this watchdog: it may still answer
    g.count("c", 2, [documents.RankDoc("end", 2, alive=True, written_at=101.0)], "g1")
    assert g.due(2, 3, lambda w: True)


def test_gather_waits_for_a_rank_whose_helper_fell_silent_to_be_frozen():
    """A rank stopped inside a call every rank entered answers before it reads frozen (no beat for longer than
    its helper answers in, not yet the frozen window): merged then, the verdict says "none is frozen" a moment
    before it is.  Its answer counts once its watchdog answers again, frozen (or with a fresh beat)."""
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    g.count("a", 1, _docs([0, 1], "g1", heartbeat_age_s=0.05), "g1")
    g.count("b", 1, _docs([2], "g1", heartbeat_age_s=W.helper_answer + 0.1), "g1")
    assert not g.due(1, 3, lambda w: True)
    g.count("b", 2, _docs([2], "g1", heartbeat_age_s=W.frozen_after + 0.1, frozen=True), "g1")
    assert g.due(2, 3, lambda w: True)


def test_gather_waits_for_the_stack_dumps_it_asked_for():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    g.count("a", 1, _docs([0], "g1", stack_dump="s", stacks_size_before=5), "g1")
    assert not g.due(1, 1, lambda w: False) and g.due(2, 1, lambda w: True)


def test_gather_missing_answers_waits_past_its_window_while_they_still_arrive():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    wait, quiet, most = W.gather_wait, W.gather_quiet, W.gather_wait_max
    assert (wait, quiet, most) == (3.0, 2.0, 6.0)  # poll 1 s: the defaults
    g.count("a", 1, _docs([1], "g1"), "g1")
    assert not g.due(int((wait - 0.5) * 1e9), 4, lambda w: True)  # rank 1 answered just now
    assert not g.due(int((wait + 0.5) * 1e9), 4, lambda w: True)  # past the window, answered 1 s ago: waits
    g.count("b", 1, _docs([2], "g1"), "g1")
    assert not g.due(int((wait + 1.0) * 1e9), 4, lambda w: True)
    assert not g.due(int((wait + 1.0 + quiet - 0.1) * 1e9), 4, lambda w: True)
    assert g.due(int((wait + 1.0 + quiet + 0.1) * 1e9), 4, lambda w: True)  # nothing new for gather_quiet


def test_gather_hearing_nothing_closes_at_its_window():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    assert not g.due(int((W.gather_wait - 0.1) * 1e9), 4, lambda w: True)
    assert g.due(int((W.gather_wait + 0.1) * 1e9), 4, lambda w: True)


def test_gather_whose_answers_trickle_in_forever_closes_at_its_longest_wait():
    g = Gather(W, "", 0.0)
    g.own("g1", 0)
    for i, at in enumerate((1.0, 2.5, 4.0, 5.5)):  # a new rank every 1.5 s (< gather_quiet)
        g.count(str(i), 1, _docs([1 + i], "g1"), "g1")
        assert not g.due(int(at * 1e9), 8, lambda w: True)
    assert g.due(int((W.gather_wait_max + 0.1) * 1e9), 8, lambda w: True)


def test_gather_superseded_by_another_nodes_request_leaves_the_merge():
    g = Gather(W, "", 0.0)
    g.own("mine", 0)
    g.superseded(GatherRequest(id="theirs", supersedes="mine"))
    assert g.phase == Gather.IDLE and g.owned is None


# -- abort, phase by phase --------------------------------------------------------------------------------

def test_abort_verdict_to_culprit_when_the_verdict_comes():
    a = Abort(W)
    a.start(0)
    assert a.phase == Abort.VERDICT and a.step(1, verdict=None) == []
    a.step(2, verdict={"culprit_ranks": [2]}, culprits_ended=False)
    assert a.phase == Abort.CULPRIT and a.verdict == {"culprit_ranks": [2]}


def test_abort_verdict_to_culprit_without_one_after_its_limit():
    a = Abort(W)
    a.start(0)
    out = a.step(int(W.abort_verdict * 1e9) + 1, verdict=None, culprits_ended=False)
    assert a.phase == Abort.CULPRIT and "no verdict" in out[0].detail


def test_abort_culprit_to_stacks_once_the_culprits_ended_or_after_its_limit():
    a = Abort(W)
    a.start(0)
    a.step(1, {"x": 1}, culprits_ended=False, stacks_done=False)
    assert a.step(2, culprits_ended=False, stacks_done=False) == [] and a.phase == Abort.CULPRIT
    a.step(3, culprits_ended=True, stacks_done=False)
    assert a.phase == Abort.STACKS
    b = Abort(W)
    b.start(0)
    b.step(1, {"x": 1}, culprits_ended=False, stacks_done=False)
    b.step(1 + int(W.abort_culprit * 1e9) + 1, culprits_ended=False, stacks_done=False)
    assert b.phase == Abort.STACKS


def test_abort_of_the_culprit_skips_waiting_for_itself():
    a = Abort(W)
    a.start(0, culprit=True, verdict={"culprit_ranks": [1]})
    assert a.phase == Abort.CULPRIT
    assert kinds(a.step(1, culprits_ended=False, stacks_done=True)) == ["error_file", "exit_request"]
    assert a.phase == Abort.EXIT


def test_abort_asks_the_rank_to_exit_then_terms_then_kills():
    """The error file and the exit request (HANG_EXIT_CODE) first; SIGTERM only once the rank has not
    exited within abort_exit (a thread holds the GIL); SIGKILL abort_kill_after later."""
    a = Abort(W)
    a.start(0, culprit=True)
    assert a.step(1, stacks_done=False) == [] and a.phase == Abort.STACKS
    t = 2 + int(W.abort_stacks * 1e9)
    assert kinds(a.step(t, stacks_done=False)) == ["error_file", "exit_request"]
    assert a.step(t + int(W.abort_exit * 1e9)) == [] and a.phase == Abort.EXIT
    t += int(W.abort_exit * 1e9) + 1
    assert kinds(a.step(t)) == ["term"] and a.phase == Abort.TERM
    assert a.step(t + int(W.abort_kill_after * 1e9)) == []
    assert kinds(a.step(t + int(W.abort_kill_after * 1e9) + 1)) == ["kill"] and a.phase == Abort.KILL


# -- Watchdog.step over a real channel --------------------------------------------------------------------

def test_fires_once_the_age_exceeds_the_timeout(rig):
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    assert [a for a in rig.step(T0 + TIMEOUT_NS) if a.kind != "arrivals"] == []  # (its starts: every 5 s)
    rig.step(T0 + TIMEOUT_NS + 1)
    assert rig.notified() == []  # the signal is the hard verdict's: sent once it is merged
    assert rig.reports_on_disk() == [os.path.basename(rig.report_path())]
    sent = rig.until_signal(T0 + TIMEOUT_NS + 1)
    assert rig.notified() == [(RANK_PID, signal.SIGUSR1)] and sent - (T0 + TIMEOUT_NS) < W.abort_verdict * 1e9
    assert dumpdir.read_json(str(rig.dump_dir / dumpdir.VERDICT_JSON))["level"] == "hard"
    assert rig.wd.last_report == rig.report_path()
    # a console line says the signal went, to whom, and when its handler can run
    said = [m for m in rig.logs if "SIGUSR1 sent to pid %d" % RANK_PID in m]
    assert len(said) == 1 and said[0].startswith("rank 1: ") and "not before that call returns" in said[0], rig.logs


def test_a_call_fires_once_across_many_ticks(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    for k in range(50):
        rig.step(T0 + TIMEOUT_NS + 1 + k * POLL_NS)
    assert len(rig.notified()) == 1
    assert len(rig.report()["overdue"]) == 1


def test_report_contents(rig):
    rig.writer.set_rank(1, 4)
    s = rig.streams[0]
    for t in (T0 - 3, T0 - 2):
        s.done(s.start(ALL_REDUCE, t))
    s.start(ALL_REDUCE, T0)
    now = T0 + TIMEOUT_NS + 5 * 10 ** 8
    rig.step(now)
    assert os.path.basename(rig.report_path()) == dumpdir.report_name(1, RANK_PID)
    rep = rig.report()
    assert (rep["format"], rep["version"], rep["kind"]) == (documents.FORMAT, documents.VERSION, "report")
    assert (rep["rank"], rep["world_size"], rep["pid"]) == (1, 4, RANK_PID)
    assert rep["host"] == "test-host" and rep["torch_version"] == "0.0.0-test" and rep["source"] == "patch"
    assert rep["source_reasons"] == rig.cfg.source_reasons and rep["config"] == rig.cfg.public_config
    assert rep["stack_dump"] == rig.stack_path and rep["signal"] == "SIGUSR1" and rep["on_timeout"] == "dump"
    assert rep["untracked_streams"] == 0
    [e] = rep["overdue"]
    assert (e["group"], e["stream"], e["group_ranks"], e["kind"], e["backend"]) == (
        "0", "0", [0, 1, 2, 3], "collective", "gloo")
    assert (e["seq"], e["op"], e["api"], e["in_flight"]) == (3, "all_reduce", "", True)
    assert e["detected_at"] == wall_at(now)
    assert e["started_at"] == pytest.approx(wall_at(T0), abs=1e-3)
    assert e["age_s"] == pytest.approx((now - T0) / 1e9, abs=1e-3)
    groups = {g["stream"]: g for g in rep["groups"]}
    assert (groups["0"]["last_started"], groups["0"]["last_completed"], groups["0"]["in_flight_seq"]) == (3, 2, 3)
    # each call of the stream, with its start time: the verdict reads the order of calls across groups
    assert [r[0] for r in groups["0"]["recent_ops"]] == [1, 2, 3]
    assert groups["0"]["recent_ops"][2][3] == pytest.approx(wall_at(T0), abs=1e-3)
    assert (groups["1"]["last_started"], groups["1"]["last_completed"], groups["1"]["in_flight_seq"]) == (0, 0, None)


def test_report_counts_streams_the_channel_could_not_hold(rig):
    assert rig.writer.add_stream({"group": "2", "stream": "2"}) == -1
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    assert rig.report()["untracked_streams"] == 1


def test_report_of_a_rank_that_does_not_know_its_rank(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    assert os.path.basename(rig.report_path()) == dumpdir.report_name(-1, RANK_PID)
    assert rig.report()["rank"] == -1


def test_log_line_names_the_call_and_where_to_look(rig):
    rig.writer.set_rank(2, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    [line] = [m for m in rig.logs if "in flight for" in m]
    for word in ("rank 2", "all_reduce #1", "group 0", "ranks 0-3", rig.report_path(), rig.stack_path):
        assert word in line


def test_a_report_that_could_not_be_written_is_said_once_and_retried(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    os.rmdir(str(rig.dump_dir))
    rig.step(T0 + TIMEOUT_NS + 1)
    rig.step(T0 + TIMEOUT_NS + 1 + POLL_NS)
    assert len([m for m in rig.logs if m.startswith("report failed")]) == 1
    # no verdict can be merged without dump_dir: the signal goes anyway once abort_verdict passed
    sent = rig.until_signal(T0 + TIMEOUT_NS + 1 + POLL_NS)
    assert rig.notified() == [(RANK_PID, signal.SIGUSR1)], rig.logs
    assert sent - (T0 + TIMEOUT_NS) <= (W.abort_verdict + 1.1) * 1e9
    rig.dump_dir.mkdir()
    rig.step(sent + POLL_NS)
    assert rig.report()["overdue"][0]["seq"] == 1  # written now
    assert len(rig.notified()) == 1  # and the rank is not signalled twice


def test_a_signal_that_cannot_be_sent_is_said_and_the_report_still_written(tmp_path):
    def gone(pid, sig):
        raise ProcessLookupError(3, "No such process")

    r = Rig(tmp_path, on_kill=gone)
    try:
        r.streams[0].start(ALL_REDUCE, T0)
        r.step(T0 + TIMEOUT_NS + 1)
        assert r.report()["overdue"][0]["seq"] == 1
        r.until_signal(T0 + TIMEOUT_NS + 1)
        assert any(m.startswith("signal failed") and "No such process" in m for m in r.logs), r.logs
    finally:
        r.close()


def test_with_no_signal_configured_none_is_sent(tmp_path):
    r = Rig(tmp_path, signal=None, signal_name="none")
    try:
        r.beats()
        r.streams[0].start(ALL_REDUCE, T0)
        r.step(T0 + TIMEOUT_NS + 1)
        r.until_signal(T0 + TIMEOUT_NS + 1)
        assert r.notified() == [] and r.report()["overdue"][0]["seq"] == 1
    finally:
        r.close()


def test_a_replaced_handler_is_never_signalled(rig):
    rig.beats()
    rig.writer.set_handler_replaced(True)
    dumpdir.write_json(str(rig.dump_dir / dumpdir.handler_name(-1, RANK_PID)), {"replaced_by": "lightning (x.py:1)"})
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    rig.until_signal(T0 + TIMEOUT_NS + 1)
    assert rig.notified() == []
    assert any("no SIGUSR1 sent: its handler was replaced after enable() by lightning (x.py:1)" in m for m in rig.logs)


def _request(rig):
    return str(rig.dump_dir / dumpdir.stack_request_name(RANK_PID))


def test_the_stacks_of_a_rank_whose_helper_beats_are_asked_by_file(rig):
    rig.beats()
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    with open(_request(rig)) as f:
        assert "all_reduce #1" in json.load(f)["header"]
    with open(rig.stack_path, "a") as f:  # the helper answers (observer._stack_requests)
        f.write("Thread 0x1 (most recent call first):\n")
    sent = rig.until_signal(T0 + TIMEOUT_NS + 1)
    for k in range(1, 10):
        rig.step(sent + k * POLL_NS)
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)] and rig.wd.stacks.phase == StackCollection.IDLE  # no dump signal


def test_a_helper_that_does_not_answer_gets_the_dump_signal_once_never_the_notification_again(rig):
    beat = T0 + TIMEOUT_NS  # beat once, then never again (a thread holds the GIL)
    rig.reader.heartbeat_ns = lambda: beat
    rig.streams[0].start(ALL_REDUCE, T0)
    detected = T0 + TIMEOUT_NS + 1
    rig.step(detected)
    assert os.path.exists(_request(rig))
    rig.step(detected + int(W.helper_answer * 1e9) - 1)
    assert DUMP_SIG not in [k[1] for k in rig.kills]
    rig.step(detected + int(W.helper_answer * 1e9) + 1)
    assert (RANK_PID, DUMP_SIG) in rig.kills and not os.path.exists(_request(rig))
    with open(rig.stack_path) as f:
        assert "its helper thread did not answer" in f.read()
    sent = rig.until_signal(detected + int(W.helper_answer * 1e9) + 1)
    rig.step(sent + 30 * POLL_NS)
    assert sorted(rig.kills) == sorted([(RANK_PID, signal.SIGUSR1), (RANK_PID, DUMP_SIG)])  # each once


def test_a_stopped_rank_gets_no_dump_signal_and_its_stacks_file_says_why(tmp_path):
    """A rank stopped (SIGSTOP, a debugger) cannot answer: the dump signal would wait for its resume and run
    among threads starting and ending again (a rank died of SIGSEGV so, torch 1.8).  None is sent; the stacks
    file says the rank is stopped.  A real process stands for the rank (it is stopped, then killed)."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while procs.pid_state(proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        r = Rig(tmp_path, rank_pid=proc.pid)
        try:
            r.reader.heartbeat_ns = lambda: T0  # no beat since: the helper cannot answer
            r.streams[0].start(ALL_REDUCE, T0)
            detected = T0 + TIMEOUT_NS + 1
            r.step(detected)
            r.step(detected + int(W.helper_answer * 1e9) + 1)
            assert DUMP_SIG not in [k[1] for k in r.kills], r.kills
            with open(r.stack_path) as f:
                text = f.read()
            assert "the rank is stopped (state T" in text, text
            assert r.wd.stacks.arrived(r.wd.taker.size())  # the line is this dump: nothing waits for another
        finally:
            r.close()
    finally:
        proc.kill()
        proc.wait()


def test_a_rank_with_nothing_overdue_answering_a_gather_is_never_notified(rig):
    """The culprit: its watchdog answers the gather with its state and its stacks, no signal."""
    rig.beats()
    rig.writer.set_rank(1, 2)
    dumpdir.write_json(str(rig.dump_dir / dumpdir.GATHER), {"id": "g1", "job_id": "", "by_rank": 0,
                                                             "requested_at": wall_at(T0)})
    rig.step(T0)
    state = dumpdir.read_json(str(rig.dump_dir / dumpdir.state_name(1, RANK_PID)))
    assert state["gather_id"] == "g1" and os.path.exists(_request(rig))
    assert rig.kills == []


def test_the_end_of_a_rank_never_overwrites_its_answer_to_a_gather(rig):
    rig.writer.set_rank(1, 2)
    rig.wd.docs.state((), "g1")
    rig.wd.gone("the rank closed its end")
    state = dumpdir.read_json(str(rig.dump_dir / dumpdir.state_name(1, RANK_PID)))
    end = dumpdir.read_json(str(rig.dump_dir / dumpdir.end_name(1, RANK_PID)))
    assert state["gather_id"] == "g1" and state["alive"] is True
    assert end["kind"] == "end" and end["alive"] is False and "ended without disable()" in end["exit_reason"]


def test_a_restarted_watchdog_does_not_report_again_what_its_predecessor_reported(tmp_path):
    r = Rig(tmp_path)
    try:
        r.streams[0].start(ALL_REDUCE, T0)
        r.step(T0 + TIMEOUT_NS + 1)
        sent = r.until_signal(T0 + TIMEOUT_NS + 1)
        assert len(r.notified()) == 1
        again = Watchdog(r.cfg._replace(restarts=1), r.reader, clock=r.clock, wall=r.clock.wall, kill=r._kill,
                         log=r.logs.append)
        r.wd = again
        for k in range(2, 20):
            again.step(sent + k * POLL_NS)
        assert len(r.notified()) == 1 and [e.seq for e in again.detector.entries] == [1]
        r.streams[0].done(1)  # that hang ends; a later one is notified again
        again.step(T0 + 5 * TIMEOUT_NS)
        again.step(T0 + 6 * TIMEOUT_NS)
        r.streams[1].start(BROADCAST, T0 + 7 * TIMEOUT_NS)
        again.step(T0 + 8 * TIMEOUT_NS + 1)
        t, limit = T0 + 8 * TIMEOUT_NS + 1, T0 + 8 * TIMEOUT_NS + int((W.abort_verdict + 2) * 1e9)
        while len(r.notified()) < 2 and t < limit:
            t += POLL_NS
            again.step(t)
        assert len(r.notified()) == 2 and [e.seq for e in again.detector.entries] == [1, 1]
    finally:
        r.close()


def test_an_action_that_fails_is_said_once_and_never_raised(rig):
    boom = Action("merge", None)  # no gather owned: merging raises
    assert rig.wd.act(boom) is False and rig.wd.act(boom) is False
    assert len([m for m in rig.logs if m.startswith("merge failed")]) == 1


def test_calls_queued_behind_an_overdue_call_count_from_when_they_reach_the_front(rig):
    """A burst of async calls behind the stuck one: once it completes, each call of the burst is older than
    the timeout, yet none is a hang: it reached the front of its stream only then (within a poll)."""
    d = Detector(TIMEOUT_S, W)
    s = rig.streams[0]
    for k in range(4):
        s.start(ALL_REDUCE, T0 + k)  # issued together
    t = T0 + TIMEOUT_NS + 1
    found = d.tick(rig.reader.snapshot(), t, 0)
    assert [e.seq for e in d.entries] == [1] and "notify" in kinds(found)
    while t < T0 + 5 * TIMEOUT_NS:  # the late rank is away: polls
        t += POLL_NS
        d.tick(rig.reader.snapshot(), t, 0)
    s.done(1)  # it arrives: the queue drains
    t += POLL_NS
    front_seen = t  # the first poll that sees #2 at the front
    while t < front_seen + TIMEOUT_NS:
        assert "say_overdue" not in kinds(d.tick(rig.reader.snapshot(), t, 0)), t
        t += POLL_NS
    found = d.tick(rig.reader.snapshot(), front_seen + TIMEOUT_NS + 1, 0)  # #2 at the front a whole timeout
    assert [e.seq for e in d.entries] == [1, 2] and "say_overdue" in kinds(found)


def test_a_watchdog_gap_between_two_polls_is_not_time_at_the_front(rig):
    """CI, torch 2.13: a burst drained behind a resolved hang while the watchdog did not poll for longer
    than the timeout (a merge on a loaded machine); the next poll saw a call of the burst at the front and
    counted the gap as its time there: a hard verdict on a call that waited at the front for milliseconds.
    A call reached the front no later than the first poll that saw it there: it counts from that poll."""
    d = Detector(TIMEOUT_S, W)
    s = rig.streams[0]
    for k in range(4):
        s.start(ALL_REDUCE, T0 + k)
    t = T0 + TIMEOUT_NS + 1
    d.tick(rig.reader.snapshot(), t, 0)
    assert [e.seq for e in d.entries] == [1]
    s.done(1)
    s.done(2)  # the burst drains while the watchdog is away for three timeouts
    t += 3 * TIMEOUT_NS
    assert "say_overdue" not in kinds(d.tick(rig.reader.snapshot(), t, 0))  # #3 seen at the front only now
    assert "say_overdue" not in kinds(d.tick(rig.reader.snapshot(), t + TIMEOUT_NS, 0))
    found = d.tick(rig.reader.snapshot(), t + TIMEOUT_NS + 1, 0)  # then a whole timeout there: a hang
    assert [e.seq for e in d.entries] == [1, 3] and "say_overdue" in kinds(found)


def test_a_call_issued_after_an_overdue_one_completed_counts_from_its_own_start(rig):
    d = Detector(TIMEOUT_S, W)
    s = rig.streams[0]
    s.start(ALL_REDUCE, T0)
    d.tick(rig.reader.snapshot(), T0 + TIMEOUT_NS + 1, 0)
    s.done(1)
    t = T0 + 3 * TIMEOUT_NS
    d.tick(rig.reader.snapshot(), t, 0)
    s.start(ALL_REDUCE, t)
    assert "say_overdue" in kinds(d.tick(rig.reader.snapshot(), t + TIMEOUT_NS + 1, 0))


def test_every_kind_of_action_has_one_effect_and_every_effect_a_kind(rig):
    from c10d_observer.actions import PAYLOADS
    assert set(rig.wd.run_action) == set(PAYLOADS)


def test_an_action_with_a_payload_its_kind_does_not_take_fails_where_it_is_made():
    from c10d_observer.actions import ProtocolError
    with pytest.raises(ProtocolError, match="action arm carries whether this rank is a culprit"):
        Action("arm", "yes")
    with pytest.raises(ProtocolError, match="no action 'nap'"):
        Action("nap", None)
    assert Action("stacks", ("why", True)).detail == ("why", True)


def _merged_verdict(rig, gid, waiting, missing, level="hard", culprits=None):
    """verdict.json as the owner of gather ``gid`` merges it: all_reduce #1 on group 0 stuck."""
    dumpdir.write_json(str(rig.dump_dir / dumpdir.VERDICT_JSON), {
        "version": 1, "gather_id": gid, "level": level, "verdict_at": wall_at(T0),
        "culprit_ranks": list(missing if culprits is None else culprits),
        "hangs": [{"group": "0", "stream": "0", "seq": 1, "op": "all_reduce", "level": level, "root": True,
                   "waiting_ranks": list(waiting), "missing_ranks": list(missing)}]})


def _answered_then_overdue(rig, waiting, missing, level="hard", culprits=None):
    """Rank 1 answers rank 0's gather g1 while its all_reduce is young; g1 is merged; then the call passes
    the timeout on rank 1 (its call entered later, or its watchdog was slower): the request left there."""
    rig.beats()
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    GatherRequest(id="g1", job_id="", by_rank=0, world_size=4, requested_at=wall_at(T0), level="hard").write(
        dumpdir.DumpDir(str(rig.dump_dir)))
    rig.step(T0 + POLL_NS)
    assert rig.wd.gather.answered == "g1"
    _merged_verdict(rig, "g1", waiting, missing, level, culprits)
    rig.step(T0 + TIMEOUT_NS + 1)
    return GatherRequest.read(dumpdir.DumpDir(str(rig.dump_dir)))


def test_a_rank_overdue_after_the_gather_it_answered_was_merged_joins_that_verdict(rig):
    """One hang, one record: the verdict merged with this rank waiting in the call already says it, so
    the rank asks no second gather (which would replace verdict.json and the record's gather id), and its
    signal goes on that hard verdict."""
    req = _answered_then_overdue(rig, waiting=[0, 1, 2], missing=[3])
    assert req.id == "g1"
    assert rig.until_signal(T0 + TIMEOUT_NS + 1, limit_s=1.0) is not None
    assert GatherRequest.read(dumpdir.DumpDir(str(rig.dump_dir))).id == "g1"


def test_a_rank_the_hard_verdict_names_its_culprit_is_never_signalled(rig):
    """A rank frozen inside a call every rank entered is the culprit while its call is in flight: the
    signal is for the ranks that wait for it (it met SIG_DFL in CI once the thawed rank's disable() ran)."""
    req = _answered_then_overdue(rig, waiting=[0, 1, 2, 3], missing=[], culprits=[1])
    assert req.id == "g1"  # it joined the merged verdict
    assert rig.until_signal(T0 + TIMEOUT_NS + 1) is None
    assert [m for m in rig.logs if "no SIGUSR1 sent: the verdict names this rank the culprit" in m], rig.logs


def test_a_rank_whose_call_completed_before_the_hard_verdict_came_is_not_signalled(rig):
    """The late rank caught up before the merge: nothing is left to wake it from (its handler may
    checkpoint and exit), and the verdict's record says the hang resolved."""
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)  # overdue: it asks the gather, which waits for the three other ranks
    rig.streams[0].done(1)
    assert rig.until_signal(T0 + TIMEOUT_NS + 1) is None
    v = dumpdir.read_json(str(rig.dump_dir / dumpdir.VERDICT_JSON))
    assert v["level"] == "hard" and v["gather_id"] == rig.wd.gather.answered  # the verdict did come


@pytest.mark.parametrize("waiting,missing,level", [([0, 2], [1, 3], "hard"), ([0, 1, 2], [3], "soft")],
                         ids=["it-was-missing-then-and-not-named", "that-verdict-was-soft"])
def test_a_rank_overdue_after_a_verdict_that_does_not_hold_its_call_gathers_again(rig, waiting, missing, level):
    """Where the merged verdict had this rank outside the call and named nobody (it arrived since: the hang
    changed) or was soft while this call is now hard, the rank gathers anew."""
    req = _answered_then_overdue(rig, waiting, missing, level, culprits=[] if level == "hard" else None)
    assert req.id != "g1" and req.by_rank == 1


def test_the_late_culprit_that_caught_up_joins_the_verdict_that_named_it(rig):
    """The verdict named rank 1, missing; rank 1 entered the call late, and its peers, starved of CPU, left it
    past the timeout: the same hang, not a new one.  A second gather then saw every rank in the call and one
    whose Python had not run for 1.7 s, "frozen": a second culprit, printed live (the quick tier with a
    second job beside it, 2026-11-27).  It joins g1, and, the culprit, gets no signal."""
    req = _answered_then_overdue(rig, waiting=[0, 2, 3], missing=[1])
    assert req.id == "g1"
    assert rig.until_signal(T0 + TIMEOUT_NS + 1) is None


def test_the_watchdog_wakes_at_the_first_hard_deadline_not_a_poll_after_it(rig):
    d = Detector(TIMEOUT_S, W, soft=False)
    assert d.next_deadline_ns(rig.reader.snapshot()) is None  # nothing in flight: the poll decides
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.streams[1].start(BROADCAST, T0 + 5)
    due = d.next_deadline_ns(rig.reader.snapshot())
    assert due == T0 + TIMEOUT_NS + 1
    assert d.tick(rig.reader.snapshot(), due - 1, 0) == []  # not overdue a nanosecond before
    assert "notify" in kinds(d.tick(rig.reader.snapshot(), due, wall_at(due)))  # found at it
    assert d.next_deadline_ns(rig.reader.snapshot()) == T0 + 5 + TIMEOUT_NS + 1  # then the other call's


def test_a_call_found_soft_wakes_the_watchdog_again_at_its_hard_deadline(rig):
    hard_ns = 6 * TIMEOUT_NS  # above the learned deadline's floor (10 s)
    d = Detector(hard_ns / 1e9, W)
    rig.streams[0].start(ALL_REDUCE, T0)
    soft = d.next_deadline_ns(rig.reader.snapshot())
    assert T0 < soft < T0 + hard_ns  # the learned deadline (its floor: nothing learned yet)
    assert d.tick(rig.reader.snapshot(), soft - 1, wall_at(soft)) == []
    assert kinds(d.tick(rig.reader.snapshot(), soft, wall_at(soft)))[:1] == ["report"]
    assert d.entries[0].level == "soft"
    assert d.next_deadline_ns(rig.reader.snapshot()) == T0 + hard_ns + 1


def test_an_idle_watchdog_answers_a_request_at_its_next_peek_not_its_next_poll(rig):
    rig.beats()
    rig.writer.set_rank(1, 2)
    rig.step(T0)
    assert rig.wd.peek(T0 + POLL_NS // 10) is False  # no request: one stat, nothing else
    GatherRequest(id="g1", job_id="", by_rank=0, world_size=2, requested_at=wall_at(T0), level="hard").write(
        dumpdir.DumpDir(str(rig.dump_dir)))
    assert rig.wd.peek(T0 + POLL_NS // 5) is True
    state = dumpdir.read_json(str(rig.dump_dir / dumpdir.state_name(1, RANK_PID)))
    assert state["gather_id"] == "g1"
    assert rig.wd.peek(T0 + POLL_NS // 4) is False  # answered once


def test_py_spy_waits_for_the_helpers_dump_and_goes_at_once_where_no_helper_answers(rig):
    """py-spy stops the rank while it reads it: started before the helper wrote the stacks, it held them
    (and the merge that waits for them) back by its whole run (0.8 s seen in the fault matrix)."""
    started = []
    rig.wd.taker.dump_py_spy = lambda: started.append(rig.clock.now_ns)
    rig.beats()
    rig.streams[0].start(ALL_REDUCE, T0)
    detected = T0 + TIMEOUT_NS + 1
    rig.step(detected)
    rig.wd.look(detected + int(0.05e9))
    assert started == [] and rig.wd.stacks.phase == StackCollection.ASKED
    with open(rig.stack_path, "a") as f:  # the helper answers
        f.write("Thread 0x1 (most recent call first):\n")
    rig.clock.now_ns = detected + int(0.1e9)
    rig.wd.look(rig.clock.now_ns)
    assert started == [detected + int(0.1e9)]


def test_py_spy_goes_when_the_helper_does_not_answer(rig):
    r = rig
    started = []
    r.wd.taker.dump_py_spy = lambda: started.append(r.clock.now_ns)
    beat = T0 + TIMEOUT_NS  # beat once, then never again (a thread holds the GIL)
    r.reader.heartbeat_ns = lambda: beat
    r.streams[0].start(ALL_REDUCE, T0)
    detected = T0 + TIMEOUT_NS + 1
    r.step(detected)
    assert started == []
    r.step(detected + int(W.helper_answer * 1e9) + 1)
    assert started == [detected + int(W.helper_answer * 1e9) + 1]  # with the dump signal: py-spy shows the GIL's holder


def test_across_nodes_py_spy_also_waits_for_the_gathers_verdict(tmp_path):
    """The rank's relay thread carries its node's answers to the merge, and py-spy would stop it too."""
    r = Rig(tmp_path, nodes=2)
    try:
        started = []
        r.wd.taker.dump_py_spy = lambda: started.append(r.clock.now_ns)
        r.beats()
        r.writer.set_rank(1, 4)
        GatherRequest(id="g1", job_id="", by_rank=0, world_size=4, requested_at=wall_at(T0), level="hard").write(
            dumpdir.DumpDir(str(r.dump_dir)))
        r.step(T0)  # the culprit: in no collective, asked for its stacks and py-spy's
        assert r.wd.gather.answered == "g1" and r.wd.stacks.phase == StackCollection.ASKED
        with open(r.stack_path, "a") as f:
            f.write("Thread 0x1 (most recent call first):\n")
        r.step(T0 + POLL_NS)
        assert started == [] and r.wd.stacks.idle
        _merged_verdict(r, "g1", waiting=[0, 2, 3], missing=[1])
        r.step(T0 + 2 * POLL_NS)  # the verdict seen at this poll
        r.step(T0 + 3 * POLL_NS)
        assert started and started[0] <= T0 + 3 * POLL_NS
    finally:
        r.close()


def test_gather_whose_request_another_watchdog_overwrote_leaves_the_merge_to_it():
    """Two watchdogs woke at the same deadline, each found no request and wrote its own (CI's 2.13 run:
    1.5 ms apart, two merges, the record's gather id not the one read live): the overwritten one yields."""
    g = Gather(W, "job", 0.0)
    g.own("mine", 0)
    assert not g.overwritten(GatherRequest(id="mine", job_id="job", requested_at=10.0), 10.1)  # its own
    assert not g.overwritten(GatherRequest(id="old", job_id="job", requested_at=1.0), 10.1)  # stale
    assert not g.overwritten(GatherRequest(id="x", job_id="other", requested_at=10.0), 10.1)  # another job's
    assert g.owned is not None
    assert g.overwritten(GatherRequest(id="theirs", job_id="job", requested_at=10.0), 10.1)
    assert g.phase == Gather.IDLE and g.owned is None


def test_a_watchdog_whose_request_was_overwritten_answers_the_other_and_never_merges(rig):
    rig.beats()
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    detected = T0 + TIMEOUT_NS + 1
    rig.step(detected)
    assert rig.wd.gather.owned is not None
    dd = dumpdir.DumpDir(str(rig.dump_dir))
    GatherRequest(id="theirs", job_id="", by_rank=2, world_size=4, requested_at=wall_at(detected),
                  level="hard").write(dd)
    rig.wd.look(detected + int(0.05e9))
    assert rig.wd.gather.owned is None and rig.wd.gather.answered == "theirs"
    state = dumpdir.read_json(str(rig.dump_dir / dumpdir.state_name(1, RANK_PID)))
    assert state["gather_id"] == "theirs"
    for k in range(1, 12):
        rig.step(detected + k * POLL_NS)
    assert not os.path.exists(str(rig.dump_dir / dumpdir.VERDICT_JSON))  # the other watchdog merges, not this one


def test_a_verdict_merged_after_the_jobs_first_is_said_as_what_happened_after(rig):
    """A framework's SIGTERM handler (or teardown) makes calls after the first hang's verdict; a later merge
    is what happened after: its console line says the first stays the job's verdict (report leads with it)."""
    from c10d_observer.verdict import files
    files.write(dumpdir.DumpDir(str(rig.dump_dir)), {
        "version": 1, "gather_id": "g0", "level": "hard", "verdict_at": wall_at(T0) - 5.0, "culprit_ranks": [3],
        "summary": "c10d_observer: all_reduce #1 on group 0: rank 3 never arrived",
        "hangs": [{"group": "0", "stream": "0", "seq": 1, "op": "all_reduce", "level": "hard", "root": True,
                   "waiting_ranks": [0, 1, 2], "missing_ranks": [3],
                   "missing": {"3": {"state": "no_collective", "text": "it is in no collective"}}}]})
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.step(T0 + TIMEOUT_NS + 1)
    rig.until_signal(T0 + TIMEOUT_NS + 1)
    assert rig.wd.gather.answered != "g0" and os.path.exists(
        str(rig.dump_dir / dumpdir.record_name(rig.wd.gather.answered)))  # a later verdict was merged
    said = [m for m in rig.logs if "which stays the job's verdict (culprit ranks: 3)" in m]
    assert len(said) == 1 and said[0].startswith("after the verdict of "), rig.logs
    assert files.main_record(str(rig.dump_dir)).gather_id == "g0"


def test_a_call_left_out_of_the_verdict_of_the_gather_this_rank_answered_is_gathered_again(rig):
    """Rank 1 found its call overdue while rank 0's gather was open and answered it naming the call, but
    the merge came first: the verdict holds another group's call only (the cascade's root), and nobody
    gathered this rank's call (2.15 quick tier, test_cascade_names_the_root, once).  It gathers again, once."""
    rig.beats()
    rig.writer.set_rank(1, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    t = T0 + TIMEOUT_NS - 2 * POLL_NS
    GatherRequest(id="g1", job_id="", by_rank=0, world_size=4, requested_at=wall_at(t), level="hard").write(
        dumpdir.DumpDir(str(rig.dump_dir)))
    rig.step(t + POLL_NS)
    assert rig.wd.gather.answered == "g1"
    rig.step(T0 + TIMEOUT_NS + 1)  # overdue while g1 is open: it answers g1 again, naming the call
    assert GatherRequest.read(dumpdir.DumpDir(str(rig.dump_dir))).id == "g1"
    dumpdir.write_json(str(rig.dump_dir / dumpdir.VERDICT_JSON), {
        "version": 1, "gather_id": "g1", "level": "hard", "verdict_at": wall_at(T0 + TIMEOUT_NS),
        "culprit_ranks": [3], "hangs": [{"group": "9", "stream": "9", "seq": 1, "op": "all_reduce", "level": "hard",
                                         "root": True, "waiting_ranks": [2], "missing_ranks": [3]}]})
    req = GatherRequest.read(dumpdir.DumpDir(str(rig.dump_dir)))
    req.replace(merged_at=wall_at(T0 + TIMEOUT_NS)).write(dumpdir.DumpDir(str(rig.dump_dir)))
    for k in range(1, 4):
        rig.step(T0 + TIMEOUT_NS + 1 + k * POLL_NS)
    again = GatherRequest.read(dumpdir.DumpDir(str(rig.dump_dir)))
    assert again.id != "g1" and again.by_rank == 1, again


def test_the_exit_status_of_a_rank_not_yet_reaped_says_how_it_ended():
    """procs.exit_status: a rank gone but not reaped by its launcher (a zombie) says how it ended, read
    from /proc (a real child process that aborts, one that exits 3); a live process or a reaped one: None."""
    import subprocess
    import sys
    from c10d_observer import procs
    for code, words in (("import os; os.abort()", "killed by signal 6 (SIGABRT)"),
                        ("import sys; sys.exit(3)", "exit code 3")):
        p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
        assert procs.exit_status(p.pid, wait_s=60) == words  # it waits until the child is a zombie
        p.wait()
        assert procs.exit_status(p.pid) is None  # reaped
    import os
    assert procs.exit_status(os.getpid()) is None  # alive


def test_a_start_is_put_in_wall_time_by_clocks_read_together_not_by_the_polls_start(rig):
    """A poll's protocols (stacks, gathers, a py-spy reaped) can take a scheduler's slice on a busy machine
    (beside a 4-rank mesh on a loaded 2-core machine, 4 of 8 watchdogs read the wall clock 2.5 to 9.4 ms after
    the poll's ``now_ns`` at one of their ~140 polls; the median 0.2 ms): the starts the
    poll sees are put in wall time with the two clocks read together, not with the poll's ``now_ns`` and a wall
    time read later (every start of that poll was put that much late: one rank's, not its peers')."""
    rig.writer.set_rank(1, 4)
    rig.streams[0].done(rig.streams[0].start(ALL_REDUCE, T0))
    real = rig.reader.snapshot

    def slow(*a, **k):  # the poll's work before the starts are read: the clock moves on 7 ms
        rig.clock.now_ns = T0 + POLL_NS + 7000000
        return real(*a, **k)

    rig.reader.snapshot = slow
    rig.wd.step(T0 + POLL_NS)
    (seq, (wall, _, _)), = rig.wd.arrivals.log.starts["0"].items()
    assert seq == 1 and abs(wall - wall_at(T0)) < 1e-6, (wall - wall_at(T0))


def test_the_nodes_join_runs_beside_the_polls_and_one_at_a_time(rig):
    """The node leader's join of every rank's starts (arrivals.Stragglers.update) takes seconds a period on the
    collecting node of thousands of ranks (benchmarks/straggler_join.py).  A join held on an event stands in for
    such a one: while it runs, the watchdog polls on and reports its rank's overdue call; a period meanwhile
    starts no second join; its stragglers.json comes once it ends; a join that fails is said once, on the loop."""
    import threading
    rig.writer.set_rank(1, 4)
    release, entered, joins = threading.Event(), threading.Event(), []
    real = rig.wd.arrivals.stragglers.update

    def held(*a, **k):
        joins.append(a)
        entered.set()
        assert release.wait(60)
        return real(*a, **k)

    rig.wd.arrivals.stragglers.update = held
    period = int(rig.cfg.timings.arrivals_period_s * 1e9)
    straggler_json = rig.dump_dir / dumpdir.STRAGGLERS
    try:
        rig.streams[0].start(ALL_REDUCE, T0)
        assert "arrivals" in [a.kind for a in rig.step(period)]
        assert entered.wait(30) and rig.wd.arrivals.joining.is_alive()
        assert not straggler_json.exists()
        t = period
        while t < T0 + TIMEOUT_NS:  # every poll runs, periods pass, the join still held
            t += POLL_NS
            rig.step(t)
        rig.step(T0 + TIMEOUT_NS + 1)
        assert rig.reports_on_disk() == [os.path.basename(rig.report_path())]
        assert len(joins) == 1 and rig.wd.arrivals.joining.is_alive()
    finally:
        release.set()
    rig.wd.arrivals.joining.join(30)
    assert dumpdir.read_json(str(straggler_json))["format"] == "c10d_observer.stragglers"

    def broken(*a, **k):
        raise ValueError("a join that fails")

    rig.wd.arrivals.stragglers.update = broken
    t = T0 + TIMEOUT_NS + 1
    for _ in range(3):  # a join that fails, then the period after it says so
        t += period
        rig.step(t)
        rig.wd.arrivals.joining.join(30)
    said = [m for m in rig.logs if "a join that fails" in m]
    assert len(said) == 1 and said[0].startswith("arrivals failed"), rig.logs


def test_the_merge_reads_and_judges_without_the_collector_and_gives_it_back(rig, monkeypatch):
    """The merging watchdog reads every rank's answer and judges them with the cyclic collector off (at
    16,384 ranks it walked the growing heap of documents again and again: 0.8 s of a 2.3 s merge), and turns
    it on again after; the job's process is another process (here one: the test's own collector)."""
    import gc
    from c10d_observer import watchdog_io, verdict
    seen = []
    load, analyze = watchdog_io._documents.load, verdict.analyze

    def loading(path):
        seen.append(("load", gc.isenabled()))
        return load(path)

    def judging(*args, **kwargs):
        seen.append(("analyze", gc.isenabled()))
        return analyze(*args, **kwargs)

    monkeypatch.setattr(watchdog_io._documents, "load", loading)
    monkeypatch.setattr(watchdog_io._verdict, "analyze", judging)
    was = gc.isenabled()
    gc.enable()
    try:
        rig.writer.set_rank(1, 4)
        rig.streams[0].start(ALL_REDUCE, T0)
        rig.step(T0 + TIMEOUT_NS + 1)
        assert rig.until_signal(T0 + TIMEOUT_NS + 1) is not None  # the hard verdict merged
        assert ("load", False) in seen and ("analyze", False) in seen, seen
        assert all(not on for _, on in seen), seen
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()
