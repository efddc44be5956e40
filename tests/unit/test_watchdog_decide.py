"""The watchdog's decision: find_overdue() and Watchdog.tick(now) over a real channel, with a fake clock.

The rank side is a real ChannelWriter in this process; the watchdog side a real ChannelReader on its file.
Time is a number we choose.  ``kill`` is replaced by a recorder: these tests must not signal anything,
and signalling a real rank is covered by the integration tests.
"""
import json
import os
import signal

import pytest

from c10d_observer import channel as ch
from c10d_observer import report
from c10d_observer.watchdog import Watchdog, find_overdue

TIMEOUT_S = 10.0
TIMEOUT_NS = int(TIMEOUT_S * 1e9)
POLL_NS = int(1e9)
T0 = 50 * 10 ** 9  # an arbitrary monotonic time at which the first call starts
WALL0 = 1.7e9  # the wall clock when the monotonic clock read 0
RANK_PID = 999999  # never signalled: kill is a recorder
ALL_REDUCE = ch.encode_op("all_reduce")
BROADCAST = ch.encode_op("broadcast")


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

    def __init__(self, tmp_path, on_kill=None):
        self.dump_dir = tmp_path / "dump"
        self.dump_dir.mkdir()
        self.writer = ch.ChannelWriter(max_streams=2, ring=8, directory=str(tmp_path))
        self.descs = [
            {"group": "0", "name": "0", "stream": "0", "ranks": [0, 1, 2, 3], "backend": "gloo",
             "kind": "collective"},
            {"group": "1", "name": "1", "stream": "1", "ranks": [1, 3], "backend": "gloo",
             "kind": "collective"},
        ]
        self.streams = [self.writer.stream_writer(self.writer.add_stream(d)) for d in self.descs]
        self.reader = ch.ChannelReader(self.writer.path)
        self.clock = FakeClock()
        self.kills = []
        self.logs = []
        self.on_kill = on_kill
        self.stack_path = str(self.dump_dir / report.stacks_name(1, RANK_PID))
        self.cfg = {
            "channel": self.writer.path, "timeout": TIMEOUT_S, "poll_interval": POLL_NS / 1e9,
            "dump_dir": str(self.dump_dir), "signal": int(signal.SIGUSR1), "signal_name": "SIGUSR1",
            "on_timeout": "dump", "rank_pid": RANK_PID, "stack_path": self.stack_path, "host": "test-host",
            "torch_version": "0.0.0-test", "source_in_use": "patch",
            "source_reasons": {"patch": "test", "hooks": "test"},
            "public_config": {"timeout": TIMEOUT_S, "poll_interval": POLL_NS / 1e9,
                              "dump_dir": str(self.dump_dir), "signal": "SIGUSR1", "source": "auto",
                              "on_timeout": "dump"},
        }
        self.wd = Watchdog(self.cfg, self.reader, clock=self.clock, wall=self.clock.wall, kill=self._kill,
                           log=self.logs.append)

    def _kill(self, pid, sig):
        self.kills.append((pid, sig))
        if self.on_kill is not None:
            self.on_kill(pid, sig)

    def tick(self, now_ns):
        self.clock.now_ns = now_ns
        return self.wd.tick(now_ns)

    def report_path(self):
        rank = self.reader.rank()[0]
        return str(self.dump_dir / report.report_name(rank, RANK_PID))

    def report(self):
        with open(self.report_path()) as f:
            return json.load(f)

    def reports_on_disk(self):
        return sorted(n for n in os.listdir(str(self.dump_dir)) if n.startswith("report-"))

    def close(self):
        self.reader.close()
        self.writer.close()


@pytest.fixture
def rig(tmp_path):
    r = Rig(tmp_path)
    yield r
    r.close()


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


# -- tick -----------------------------------------------------------------------------------------------

def test_nothing_fires_before_or_at_the_timeout(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    for now in range(T0, T0 + TIMEOUT_NS + 1, POLL_NS):
        assert rig.tick(now) == []
    assert rig.tick(T0 + TIMEOUT_NS) == []
    assert rig.kills == []
    assert rig.reports_on_disk() == []


def test_fires_once_the_age_exceeds_the_timeout(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    [o] = rig.tick(T0 + TIMEOUT_NS + 1)
    assert o.seq == 1
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)]
    assert rig.reports_on_disk() == [os.path.basename(rig.report_path())]
    assert rig.wd.last_report == rig.report_path()


def test_a_call_fires_once_across_many_ticks(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    fired = [rig.tick(T0 + TIMEOUT_NS + 1 + k * POLL_NS) for k in range(50)]
    assert [len(f) for f in fired] == [1] + [0] * 49
    assert len(rig.kills) == 1
    assert len(rig.report()["overdue"]) == 1


def test_a_later_call_on_the_same_stream_fires_again(rig):
    s = rig.streams[0]
    s.start(ALL_REDUCE, T0)
    assert len(rig.tick(T0 + TIMEOUT_NS + 1)) == 1
    s.done(1)
    t1 = T0 + 3 * TIMEOUT_NS
    s.start(BROADCAST, t1)
    assert rig.tick(t1 + TIMEOUT_NS) == []
    [o] = rig.tick(t1 + TIMEOUT_NS + 1)
    assert (o.seq, o.op) == (2, BROADCAST)
    assert len(rig.kills) == 2
    entries = rig.report()["overdue"]
    assert [(e["seq"], e["op"], e["in_flight"]) for e in entries] == [(1, "all_reduce", False),
                                                                      (2, "broadcast", True)]


def test_two_streams_overdue_in_one_tick_give_one_report_and_one_signal(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.streams[1].start(BROADCAST, T0 + 7)
    new = rig.tick(T0 + 2 * TIMEOUT_NS)
    assert sorted((o.stream.desc["stream"], o.seq) for o in new) == [("0", 1), ("1", 1)]
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)]
    assert len(rig.reports_on_disk()) == 1
    entries = rig.report()["overdue"]
    assert sorted((e["group"], e["op"]) for e in entries) == [("0", "all_reduce"), ("1", "broadcast")]


def test_report_contents(rig):
    rig.writer.set_rank(1, 4)
    s = rig.streams[0]
    for t in (T0 - 3, T0 - 2):
        s.done(s.start(ALL_REDUCE, t))
    s.start(ALL_REDUCE, T0)
    now = T0 + TIMEOUT_NS + 5 * 10 ** 8
    rig.tick(now)

    assert os.path.basename(rig.report_path()) == report.report_name(1, RANK_PID)
    rep = rig.report()
    assert (rep["format"], rep["version"]) == (report.FORMAT, report.VERSION)
    assert (rep["rank"], rep["world_size"], rep["pid"]) == (1, 4, RANK_PID)
    assert rep["host"] == "test-host"
    assert rep["torch_version"] == "0.0.0-test"
    assert rep["source"] == "patch"
    assert rep["source_reasons"] == rig.cfg["source_reasons"]
    assert rep["config"] == rig.cfg["public_config"]
    assert rep["stack_dump"] == rig.stack_path
    assert rep["signal"] == "SIGUSR1"
    assert rep["on_timeout"] == "dump"
    assert rep["untracked_streams"] == 0

    [e] = rep["overdue"]
    assert (e["group"], e["stream"], e["group_ranks"], e["kind"], e["backend"]) == (
        "0", "0", [0, 1, 2, 3], "collective", "gloo")
    assert (e["seq"], e["op"], e["api"], e["in_flight"]) == (3, "all_reduce", "", True)
    assert e["detected_at"] == wall_at(now)
    assert e["started_at"] < e["detected_at"]
    assert e["started_at"] == pytest.approx(wall_at(T0), abs=1e-3)
    assert e["age_s"] == pytest.approx((now - T0) / 1e9, abs=1e-3)

    groups = {g["stream"]: g for g in rep["groups"]}
    assert (groups["0"]["last_started"], groups["0"]["last_completed"], groups["0"]["in_flight_seq"]) == (3, 2, 3)
    assert groups["0"]["ranks"] == [0, 1, 2, 3]
    assert (groups["1"]["last_started"], groups["1"]["last_completed"], groups["1"]["in_flight_seq"]) == (0, 0, None)


def test_report_counts_streams_the_channel_could_not_hold(rig):
    assert rig.writer.add_stream({"group": "2", "stream": "2"}) == -1
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + 1)
    assert rig.report()["untracked_streams"] == 1


def test_report_of_a_rank_that_does_not_know_its_rank(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + 1)
    assert os.path.basename(rig.report_path()) == report.report_name(-1, RANK_PID)
    assert rig.report()["rank"] == -1


def test_completed_entry_marked_not_in_flight_on_the_next_report(rig):
    a, b = rig.streams
    a.start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + 1)
    assert [e["in_flight"] for e in rig.report()["overdue"]] == [True]

    a.done(1)
    b.start(BROADCAST, T0 + TIMEOUT_NS)
    rig.tick(T0 + 2 * TIMEOUT_NS + 1)
    rep = rig.report()
    assert [(e["group"], e["in_flight"]) for e in rep["overdue"]] == [("0", False), ("1", True)]
    assert {g["stream"]: g["last_completed"] for g in rep["groups"]} == {"0": 1, "1": 0}


def test_report_is_rewritten_when_a_reported_call_completes(rig):
    a, _ = rig.streams
    a.start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + 1)
    a.done(1)
    assert rig.tick(T0 + TIMEOUT_NS + 1 + POLL_NS) == []  # nothing new: no signal ...
    rep = rig.report()  # ... but the report now says the call completed
    assert [e["in_flight"] for e in rep["overdue"]] == [False]
    assert rep["groups"][0]["last_completed"] == 1
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)]


def test_log_line_names_the_call_and_where_to_look(rig):
    rig.writer.set_rank(2, 4)
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + 1)
    [line] = rig.logs
    for word in ("rank 2", "all_reduce #1", "group 0", "ranks 0-3", rig.report_path(), rig.stack_path):
        assert word in line


def test_signal_that_cannot_be_sent_is_logged_and_the_report_still_written(tmp_path):
    def gone(pid, sig):
        raise ProcessLookupError(3, "No such process")

    r = Rig(tmp_path, on_kill=gone)
    try:
        r.streams[0].start(ALL_REDUCE, T0)
        assert len(r.tick(T0 + TIMEOUT_NS + 1)) == 1
        assert r.kills == [(RANK_PID, signal.SIGUSR1)]
        assert r.report()["overdue"][0]["seq"] == 1
        assert any("could not signal rank pid %d" % RANK_PID in m for m in r.logs)
        assert any("signal could not be sent" in m for m in r.logs)
    finally:
        r.close()


def test_a_report_that_could_not_be_written_is_retried_next_tick(rig):
    rig.streams[0].start(ALL_REDUCE, T0)
    os.rmdir(str(rig.dump_dir))
    assert len(rig.tick(T0 + TIMEOUT_NS + 1)) == 1
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)]  # the stack dump does not wait for the report
    assert any("could not write the report" in m for m in rig.logs)
    rig.dump_dir.mkdir()
    assert rig.tick(T0 + TIMEOUT_NS + 1 + POLL_NS) == []  # nothing new ...
    assert rig.report()["overdue"][0]["seq"] == 1  # ... but the report is written now
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)]  # and the rank is not signalled twice

# -- stacks: asked of the rank's helper thread, the signal only where it does not answer -----------------

def _request(rig):
    return os.path.join(str(rig.dump_dir), report.stack_request_name(RANK_PID))


def test_a_rank_whose_helper_beats_is_asked_for_its_stacks_by_file_not_by_signal(rig):
    rig.reader.heartbeat_ns = lambda: rig.clock.now_ns  # the helper thread beats
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.tick(T0 + int(TIMEOUT_S * 1e9) + 1)
    assert rig.kills == []  # no signal: nothing of the job's (a chained handler) can run
    with open(_request(rig)) as f:
        assert "all_reduce #1" in json.load(f)["header"]
    with open(rig.stack_path, "a") as f:  # the helper answers (observer._stack_requests)
        f.write("Thread 0x1 (most recent call first):\n")
    rig.tick(T0 + int(TIMEOUT_S * 1e9) + 2 * POLL_NS)
    rig.tick(T0 + int(TIMEOUT_S * 1e9) + 10 * POLL_NS)
    assert rig.kills == [] and rig.wd.pending_request is None


def test_a_helper_that_does_not_answer_gets_the_signal_once(rig):
    beat = T0 + int(TIMEOUT_S * 1e9)  # beat once, then never again (a thread holds the GIL)
    rig.reader.heartbeat_ns = lambda: beat
    rig.streams[0].start(ALL_REDUCE, T0)
    detected = T0 + int(TIMEOUT_S * 1e9) + 1
    rig.tick(detected)
    assert rig.kills == [] and os.path.exists(_request(rig))
    rig.tick(detected + rig.wd.answer_wait_ns - 1)
    assert rig.kills == []
    rig.tick(detected + rig.wd.answer_wait_ns + 1)
    assert rig.kills == [(RANK_PID, signal.SIGUSR1)] and not os.path.exists(_request(rig))
    with open(rig.stack_path) as f:
        assert "its helper thread did not answer" in f.read()
    rig.tick(detected + 3 * rig.wd.answer_wait_ns)
    assert len(rig.kills) == 1


# -- the merge's window: it waits on while answers still arrive (large jobs), not longer ------------------
def _answer(rig, rank, gid, world=4):
    """A state of another rank answering ``gid`` (as its watchdog writes it; no stacks to wait for)."""
    from c10d_observer import verdict
    doc = {"format": report.FORMAT, "version": report.VERSION, "kind": "state", "rank": rank, "pid": 1000 + rank,
           "world_size": world, "host": "test-host", "job_id": "", "gather_id": gid, "alive": True,
           "written_at": rig.clock.wall(), "groups": [], "stack_dump": None, "stacks_size_before": None}
    report.write_atomic(str(rig.dump_dir / verdict.state_name(rank, 1000 + rank)), doc)


def _hang_and_request(rig, world=4):
    """Rank 0 of ``world`` waits in an all_reduce past the timeout: its watchdog asks for the gather."""
    rig.writer.set_rank(0, world)
    rig.streams[0].start(ALL_REDUCE, T0)
    rig.tick(T0 + TIMEOUT_NS + POLL_NS)
    gid = rig.wd.gather_owned[0]
    with open(rig.stack_path, "a") as f:  # the rank's own stacks arrive
        f.write("Thread 0x1 (most recent call first):\n")
    t = rig.clock.now_ns
    rig.wd.check_gather(t + int(0.05e9))  # the next look, 50 ms on (Watchdog.run while it merges)
    return gid, t


def _verdict_written(rig):
    return os.path.exists(str(rig.dump_dir / "verdict.json"))


def test_a_merge_missing_answers_waits_past_its_window_while_they_still_arrive(rig):
    gid, t = _hang_and_request(rig)
    wait, quiet, most = rig.wd.gather_wait, rig.wd.gather_quiet_ns / 1e9, rig.wd.gather_wait_max
    assert (wait, quiet, most) == (3.0, 2.0, 6.0)  # poll 1 s: the defaults
    rig.wd.check_gather(t + int(0.5e9))
    _answer(rig, 1, gid)
    rig.wd.check_gather(t + int((wait - 0.5) * 1e9))  # rank 1 answered just now
    rig.wd.check_gather(t + int((wait + 0.5) * 1e9))  # past the window, rank 1 answered 1 s ago: waits
    assert not _verdict_written(rig)
    _answer(rig, 2, gid)
    rig.wd.check_gather(t + int((wait + 1.0) * 1e9))  # rank 2 answered: waits on
    rig.wd.check_gather(t + int((wait + 1.0 + quiet - 0.1) * 1e9))
    assert not _verdict_written(rig) and rig.wd.gather_owned is not None
    rig.wd.check_gather(t + int((wait + 1.0 + quiet + 0.1) * 1e9))  # nothing new for gather_quiet: merged
    assert _verdict_written(rig) and rig.wd.gather_owned is None
    with open(str(rig.dump_dir / "verdict.json")) as f:
        v = json.load(f)
    assert v["ranks_silent"] == [3] and v["gather_s"] == pytest.approx(wait + 1.0 + quiet + 0.1, abs=0.01)


def test_a_merge_missing_answers_and_hearing_nothing_closes_at_its_window(rig):
    gid, t = _hang_and_request(rig)
    rig.wd.check_gather(t + int((rig.wd.gather_wait - 0.1) * 1e9))
    assert not _verdict_written(rig)
    rig.wd.check_gather(t + int((rig.wd.gather_wait + 0.1) * 1e9))  # nothing for longer than gather_quiet
    assert _verdict_written(rig)


def test_a_merge_whose_answers_trickle_in_forever_closes_at_its_longest_wait(rig):
    gid, t = _hang_and_request(rig, world=8)
    most = rig.wd.gather_wait_max
    for i, at in enumerate((1.0, 2.5, 4.0, 5.5)):  # a new rank every 1.5 s (< gather_quiet)
        _answer(rig, 1 + i, gid, world=8)
        rig.wd.check_gather(t + int(at * 1e9))
    assert not _verdict_written(rig)  # 5.5 s: past the window, rank 4 answered just now
    rig.wd.check_gather(t + int((most + 0.1) * 1e9))
    assert _verdict_written(rig)


def test_a_merge_with_every_answer_closes_at_once(rig):
    gid, t = _hang_and_request(rig)
    for r in (1, 2, 3):
        _answer(rig, r, gid)
    rig.wd.check_gather(t + int(0.2e9))
    assert _verdict_written(rig)
