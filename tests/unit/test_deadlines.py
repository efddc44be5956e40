"""Learned deadlines (issue 26): the Learner's rules and the Detector's two levels, with a fake clock over a
real channel.  A call's sample is the longest age the watchdog saw it at a poll (0 between two polls)."""
import pytest

from c10d_observer import channel as ch
from c10d_observer import config
from c10d_observer.watchdog import (SOFT_FLOOR_S, SOFT_GAP_S, SOFT_MIN_SAMPLES, SOFT_WARM_CALLS, Detector, Learner)

POLL = 0.5
POLL_NS = int(POLL * 1e9)
HARD_S = 300.0
W = config.windows(POLL)
AR = ch.encode_op("all_reduce") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1024)
AR_BIG = ch.encode_op("all_reduce") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1 << 20)
BC = ch.encode_op("broadcast") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1024)


class Job(object):
    """One stream of one rank; calls made by hand; the detector polled every POLL by ``run``."""

    def __init__(self, tmp_path, soft=True):
        self.w = ch.ChannelWriter(max_streams=2, ring=64, directory=str(tmp_path))
        self.idx = self.w.add_stream({"group": "0", "stream": "0", "ranks": [0, 1], "kind": "collective"})
        self.s = self.w.stream_writer(self.idx)
        self.r = ch.ChannelReader(self.w.path)
        self.d = Detector(HARD_S, W, soft=soft)
        self.now = 10 ** 12
        self.actions = []

    def poll(self):
        self.now += POLL_NS
        out = self.d.tick(self.r.snapshot(passed=True), self.now, self.now / 1e9)
        self.actions.extend(out)
        return out

    def call(self, word=AR, duration_s=0.01):
        """One call that takes ``duration_s``, polled as it goes."""
        seq = self.s.start(word, self.now)
        end = self.now + int(duration_s * 1e9)
        while self.now + POLL_NS <= end:
            self.poll()
        self.s.done(seq)
        self.now = max(self.now, end)
        return seq

    def steps(self, n, word=AR, duration_s=0.01, gap_s=0.2):
        for _ in range(n):
            self.call(word, duration_s)
            self.now += int(gap_s * 1e9)
            self.poll()

    def deadline(self, word=AR):
        d = self.d.learner.deadline_ns(self.idx, word)
        return None if d is None else d / 1e9

    def close(self):
        self.r.close()
        self.w.close()


@pytest.fixture
def job(tmp_path):
    j = Job(tmp_path)
    yield j
    j.close()


def kinds(actions):
    return [a.kind for a in actions]


def test_no_learned_deadline_before_enough_calls_of_a_signature(job):
    job.steps(SOFT_MIN_SAMPLES - 1)
    assert job.deadline() is None
    job.steps(1)
    assert job.deadline() == max(SOFT_FLOOR_S, 3 * POLL)


def test_the_deadline_is_a_multiple_of_the_longest_calls_at_least_the_floor(job):
    job.steps(SOFT_MIN_SAMPLES)
    assert job.deadline() == SOFT_FLOOR_S  # calls of 10 ms: the floor
    for _ in range(3):
        job.call(duration_s=3.0)  # slow calls of this signature, seen at polls up to ~3 s old
    # 3 of 23 calls are above 2 s: the 99.9th percentile is in the 2.048-4.096 s bucket: 4 x 4.096 s
    assert job.deadline() == pytest.approx(4 * 4.096)


def test_each_op_and_size_learns_its_own_deadline_a_rare_one_takes_its_groups(job):
    job.steps(SOFT_MIN_SAMPLES)
    for _ in range(SOFT_MIN_SAMPLES):
        job.call(AR_BIG, duration_s=3.0)  # big all_reduces of this group take seconds
    assert job.deadline(AR) == SOFT_FLOOR_S and job.deadline(AR_BIG) == pytest.approx(4 * 4.096)
    # a barrier (seen too rarely to learn) waits as long as this group's calls take: the group's deadline
    assert job.deadline(BC) == pytest.approx(4 * 4.096)


def test_a_call_past_its_learned_deadline_is_a_soft_verdict_and_never_an_abort(tmp_path):
    j = Job(tmp_path)
    j.d.on_timeout = "abort"
    try:
        j.steps(SOFT_MIN_SAMPLES)
        j.s.start(AR, j.now)  # a rank stops arriving
        started = j.now
        fired = []
        while not fired and j.now - started < 60e9:
            fired = [a for a in j.poll() if a.kind == "say_overdue"]
        e = fired[0].detail
        assert e.level == "soft" and e.deadline_s == SOFT_FLOOR_S
        assert SOFT_FLOOR_S < (j.now - started) / 1e9 <= SOFT_FLOOR_S + POLL
        assert "notify" in kinds(j.actions) and "abort" not in kinds(j.actions)
        assert [a.detail for a in j.actions if a.kind == "gather"] == ["soft"]
    finally:
        j.close()


def test_a_soft_verdict_becomes_hard_at_the_timeout_once_and_without_a_second_signal(tmp_path):
    j = Job(tmp_path)
    j.d.on_timeout = "abort"
    try:
        j.steps(SOFT_MIN_SAMPLES)
        j.s.start(AR, j.now)
        started = j.now
        while j.now - started < (HARD_S + 2) * 1e9:
            j.poll()
        says = [a.detail for a in j.actions if a.kind == "say_overdue"]
        assert [e.level for e in says] == ["soft", "hard"]
        assert kinds(j.actions).count("notify") == 1 and kinds(j.actions).count("abort") == 1
        assert [a.detail for a in j.actions if a.kind == "gather"] == ["soft", "hard"]
        assert j.d.entries[0].level == "hard" and len(j.d.entries) == 1
    finally:
        j.close()


def test_a_held_verdict_stays_soft_until_the_phase_limit(tmp_path):
    j = Job(tmp_path)
    try:
        j.steps(SOFT_MIN_SAMPLES)
        j.s.start(AR, j.now)
        started = j.now
        while j.now - started < (SOFT_FLOOR_S + 1) * 1e9:
            j.poll()
        j.d.hold(started + int((HARD_S + 100) * 1e9))  # the rank it waits for is in a phase up to then
        while j.now - started < (HARD_S + 50) * 1e9:
            j.poll()
        assert [e.level for e in (a.detail for a in j.actions if a.kind == "say_overdue")] == ["soft"]
        while j.now - started < (HARD_S + 101) * 1e9:
            j.poll()
        assert [e.level for e in (a.detail for a in j.actions if a.kind == "say_overdue")] == ["soft", "hard"]
    finally:
        j.close()


def test_after_a_quiet_gap_the_next_calls_have_no_learned_deadline(job):
    """A change of phase (an evaluation, a checkpoint between epochs): the stream was quiet, then calls
    come again; the first few get no soft verdict from what was learned before."""
    job.steps(SOFT_MIN_SAMPLES)
    assert job.deadline() is not None
    job.now += int((SOFT_GAP_S + 1) * 1e9)
    job.poll()
    job.call()
    job.poll()
    assert job.deadline() is None
    job.steps(SOFT_WARM_CALLS)
    assert job.deadline() is not None


def test_with_soft_deadlines_off_only_the_timeout_speaks(tmp_path):
    j = Job(tmp_path, soft=False)
    try:
        j.steps(SOFT_MIN_SAMPLES * 2)
        j.s.start(AR, j.now)
        started = j.now
        while j.now - started < 60e9:
            j.poll()
        assert "say_overdue" not in kinds(j.actions) and j.d.learner is None
    finally:
        j.close()


def test_a_learned_deadline_is_never_at_or_past_the_hard_one(tmp_path):
    j = Job(tmp_path)
    j.d.learner = Learner(POLL, 4.0)  # a hard deadline of 4 s: below the 5 s floor
    try:
        j.steps(SOFT_MIN_SAMPLES)
        assert j.deadline() is None
    finally:
        j.close()


def test_a_recorder_sources_skipped_calls_teach_the_streams_unnamed_signature(job):
    """The flight-recorder source puts in the channel only the calls it sees in flight at a read, unnamed
    (op unknown) until long in flight: the calls it skipped count as samples of that signature."""
    for n in range(1, 40):
        job.s.skip_to(n)  # started and completed between two reads
        job.poll()
    unnamed = ch.encode_op("unknown")
    assert job.deadline(unnamed) == SOFT_FLOOR_S == job.deadline(AR)  # the stream's, for any op
    job.s.start(unnamed, job.now)  # a call the reader sees in flight, and that stays so
    started = job.now
    while not any(a.kind == "say_overdue" for a in job.actions) and job.now - started < 60e9:
        job.poll()
    assert SOFT_FLOOR_S < (job.now - started) / 1e9 <= SOFT_FLOOR_S + POLL
