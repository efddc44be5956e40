"""Learned (soft) deadlines (issues 26, 31): the Learner's rules (deadlines.py) and the Detector's two levels,
with a fake clock over a real channel.  A call's sample is the longest age the watchdog saw it at a poll (0
between two polls).  Soft verdicts inform; only the hard deadline signals and aborts."""
import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader
from c10d_observer import config
from c10d_observer import deadlines as dl
from c10d_observer.deadlines import FLOOR_S, GAP_S, Learner, margin
from c10d_observer.detector import Detector

POLL = 0.5
POLL_NS = int(POLL * 1e9)
HARD_S = 300.0
W = config.windows(POLL)
AR = ch.encode_op("all_reduce") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1024)
AR_BIG = ch.encode_op("all_reduce") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1 << 20)
BC = ch.encode_op("broadcast") | ch.encode_sig(ch.DTYPE_CODES["float32"], 1024)


class Job(object):
    """Streams of one rank; calls made by hand; the detector polled every POLL by ``poll``."""

    def __init__(self, tmp_path, soft=True, hard_s=HARD_S):
        self.w = ch_writer.ChannelWriter(max_streams=4, ring=64, directory=str(tmp_path))
        self.idx = self.w.add_stream({"group": "0", "stream": "0", "ranks": [0, 1], "kind": "collective"})
        self.idx2 = self.w.add_stream({"group": "1", "stream": "1", "ranks": [0, 1], "kind": "collective"})
        self.s = self.w.stream_writer(self.idx)
        self.s2 = self.w.stream_writer(self.idx2)
        self.r = ch_reader.ChannelReader(self.w.path)
        self.d = Detector(hard_s, W, soft=soft)
        self.now = 10 ** 12
        self.actions = []

    def poll(self):
        self.now += POLL_NS
        out = self.d.tick(self.r.snapshot(passed=True), self.now, self.now / 1e9)
        self.actions.extend(out)
        return out

    def call(self, word=AR, duration_s=0.01, s=None):
        """One call that takes ``duration_s``, polled as it goes."""
        s = s or self.s
        seq = s.start(word, self.now)
        end = self.now + int(duration_s * 1e9)
        while self.now + POLL_NS <= end:
            self.poll()
        s.done(seq)
        self.now = max(self.now, end)
        return seq

    def steps(self, n, word=AR, duration_s=0.01, gap_s=0.2, s=None):
        for _ in range(n):
            self.call(word, duration_s, s)
            self.now += int(gap_s * 1e9)
            self.poll()

    def deadline(self, word=AR, idx=None):
        d = self.d.learner.deadline_ns(self.idx if idx is None else idx, word)
        return None if d is None else d / 1e9

    def stall(self, word=AR, limit_s=600):
        """A call that never completes: polls until the first say_overdue; returns (its entry, seconds)."""
        self.s.start(word, self.now)
        started = self.now
        while self.now - started < limit_s * 1e9:
            fired = [a for a in self.poll() if a.kind == "say_overdue"]
            if fired:
                return fired[0].detail, (self.now - started) / 1e9
        return None, None

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


def edge(age_s):
    """The upper edge of the bucket of an age (s), as the learner keeps it."""
    return dl.bucket_ns(dl.bucket(int(age_s * 1e9))) / 1e9


def test_with_no_sample_at_all_the_deadline_is_the_floor(job):
    assert job.deadline() == FLOOR_S  # the rank's first call: a soft deadline from the start


def test_the_first_call_of_a_signature_is_a_change_of_phase_not_a_sample(job):
    job.call(duration_s=3.0)  # the first step: a first compile, ranks starting at different times
    job.poll()
    assert job.d.learner.evidence(job.idx, AR) == (None, None) and job.deadline() == FLOOR_S
    job.steps(6)  # then steps of 10 ms: a stall at step 7 has a deadline of the floor
    h, which = job.d.learner.evidence(job.idx, AR)
    assert which == "signature" and h.n == 6 and job.deadline() == FLOOR_S


def test_a_stall_in_the_first_steps_is_named_softly_at_the_floor(job):
    """Issue 31: a rank that stops at step 7 of a 0.2 s-step loop was never reported (20 samples needed)."""
    job.call(duration_s=2.0)
    job.steps(6)
    e, after = job.stall()
    assert e.level == "soft" and e.deadline_s == FLOOR_S
    assert FLOOR_S < after <= FLOOR_S + POLL


def test_the_margin_narrows_as_evidence_grows(job):
    job.call()  # the signature's first call: a change of phase
    job.call(duration_s=4.0)  # one sample of ~4 s: 10 x it
    job.poll()
    assert margin(1) == 10.0
    assert job.deadline() == pytest.approx(margin(1) * edge(4.0), rel=1e-6)
    for n in (4, 49):
        while job.d.learner.evidence(job.idx, AR)[0].n < n:
            job.call(duration_s=4.0)
            job.poll()
        assert job.deadline() == pytest.approx(margin(n) * edge(4.0), rel=1e-6)
    assert margin(4) == 6.5 and margin(49) == 4.0 and margin(10 ** 6) == pytest.approx(3.007, abs=1e-3)


def test_the_resolution_is_finer_than_powers_of_two():
    """Ages are kept in buckets of 1/8 octave: a deadline is at most 9 % above what exact ages give (the old
    log2 buckets made 2.1 s samples a 4.096 s quantile and 3 s ones an 16.4 s deadline)."""
    for age in (0.3, 1.5, 2.1, 3.0, 7.7, 60.0):
        assert age <= edge(age) <= age * 2 ** (1 / 8.0) + 1e-9


def test_from_a_thousand_samples_the_quantile_leaves_out_the_top_tenth_of_a_percent(tmp_path):
    lrn = Learner(POLL, HARD_S)
    for _ in range(1999):
        lrn.sample(0, AR, int(3e9))
    lrn.sample(0, AR, int(60e9))  # one long wait in 2,000 (the signature's first call was its phase change)
    lrn.sample(0, AR, int(60e9))
    h, _ = lrn.evidence(0, AR)
    assert h.n == 2000 and h.quantile_ns() / 1e9 == pytest.approx(edge(3.0))
    lrn.sample(0, AR, int(60e9))  # a third: more than 0.1 % of the samples
    assert lrn.evidence(0, AR)[0].quantile_ns() / 1e9 == pytest.approx(edge(60.0))


def test_a_signature_with_no_samples_takes_its_streams_and_a_new_stream_the_ranks(job):
    job.call(AR_BIG)  # first: a change of phase
    for _ in range(9):
        job.call(AR_BIG, duration_s=4.0)  # the group's big all_reduces take seconds
        job.poll()
    stream = margin(9) * edge(4.0)
    assert job.deadline(AR_BIG) == pytest.approx(stream, rel=1e-6)
    assert job.d.learner.evidence(job.idx, BC)[1] == "stream"
    assert job.deadline(BC) == pytest.approx(stream, rel=1e-6)  # a barrier no rank of it issued before
    assert job.d.learner.evidence(job.idx2, AR)[1] == "rank"
    assert job.deadline(AR, idx=job.idx2) == pytest.approx(stream, rel=1e-6)  # another group: the rank's


def test_a_call_found_overdue_is_not_a_sample_and_once_resolved_widens_only_its_signature(job):
    """A rank paused 30 s (an evaluation behind the next all_reduce), then caught up: its soft verdict
    informs; it is no sample (never 10 x 30 s from one incident), but an incident that resolved: calls of its
    signature may now take 4 x 30 s; another signature keeps its deadline."""
    job.steps(10)
    job.steps(10, word=BC)
    e, _ = job.stall()
    assert e.level == "soft"
    started = job.now
    while job.now - started < 20e9:  # the pause resolves after ~30 s in all
        job.poll()
    job.s.done(job.s.seq)
    job.steps(3)
    # the incident's age: the last poll's before it completed, ~30 s
    assert dl.SLOW_MARGIN * 29.0 <= job.deadline() <= dl.SLOW_MARGIN * 31.0, job.deadline()
    assert job.deadline(BC) == FLOOR_S


def test_the_second_slow_eval_gets_no_verdict_and_a_stall_inside_the_third_still_does(job):
    """Rank 0 evaluates every 30 steps while the others wait in the next all_reduce (no phase() declared),
    15 s, then 50 s: the first eval is a soft verdict; the second, within 4 x the first, gets none (and is a
    sample); a rank that stalls forever inside the third is named softly, at about 4 x the evals (the
    signature's margin, 3.7 x its 91 samples' largest, here), never waiting for the hard deadline."""
    job.steps(30)
    e, at = job.stall()
    assert e.level == "soft" and FLOOR_S <= at < FLOOR_S + 1
    started = job.now - int(at * 1e9)
    while job.now - started < 15e9:
        job.poll()
    job.s.done(job.s.seq)
    job.steps(30)
    job.call(duration_s=50.0)  # the second eval: no verdict
    assert len([a for a in job.actions if a.kind == "say_overdue"]) == 1, job.actions
    job.steps(30)
    e3, at3 = job.stall()  # the third eval never ends
    assert e3 is not None and e3.level == "soft" and 3.5 * 50 <= at3 <= dl.SLOW_MARGIN * edge(50.0) + 1, (e3, at3)


def test_a_slow_steps_few_samples_take_four_times_not_the_margin_of_thin_evidence(tmp_path):
    """Two evaluations of 53 s behind a barrier, no other barrier: margin(2) = 8.9 x put the soft deadline past
    the hard 300 s, and a stall inside the next evaluation waited for the hard one (slow_eval_stall).  Past
    the floor, samples take SLOW_MARGIN x; fast calls keep margin(n) (under the floor anyway)."""
    learner = Learner(POLL, HARD_S)
    learner.sample(0, BC, int(1e6))  # the signature's first call: a change of phase, not a sample
    for _ in range(2):
        learner.sample(0, BC, int(53e9))
    d = learner.deadline_ns(0, BC) / 1e9
    assert d == pytest.approx(dl.SLOW_MARGIN * edge(53.0), rel=1e-6) and d < HARD_S, d
    for _ in range(2):
        learner.sample(0, AR, int(2e6))
    assert learner.deadline_ns(0, AR) / 1e9 == FLOOR_S  # margin(n) x 2 ms: the floor


def test_after_a_quiet_gap_the_next_call_is_a_change_of_phase(job):
    job.steps(5)
    n = job.d.learner.evidence(job.idx, AR)[0].n
    job.now += int((GAP_S + 1) * 1e9)
    job.poll()
    job.call(duration_s=6.0)  # the first call after an evaluation: the ranks come back at their own pace
    job.poll()
    assert job.d.learner.evidence(job.idx, AR)[0].n == n and job.deadline() == FLOOR_S
    job.call(duration_s=6.0)  # the next one is a sample
    job.poll()
    assert job.d.learner.evidence(job.idx, AR)[0].n == n + 1 and job.deadline() > FLOOR_S


def test_a_soft_verdict_never_signals_nor_aborts(tmp_path):
    j = Job(tmp_path)
    j.d.on_timeout = "abort"
    try:
        j.steps(20)
        e, after = j.stall(limit_s=HARD_S - 10)
        assert e.level == "soft" and e.deadline_s == FLOOR_S and FLOOR_S < after <= FLOOR_S + POLL
        started = j.now
        while j.now - started < 60e9:
            j.poll()
        assert "notify" not in kinds(j.actions) and "abort" not in kinds(j.actions)
        assert [a.detail for a in j.actions if a.kind == "gather"] == ["soft"]
    finally:
        j.close()


def test_a_soft_verdict_that_becomes_hard_signals_once_at_the_hard_deadline(tmp_path):
    j = Job(tmp_path)
    j.d.on_timeout = "abort"
    try:
        j.steps(20)
        j.s.start(AR, j.now)
        started = j.now
        notified_at = None
        while j.now - started < (HARD_S + 20) * 1e9:
            if "notify" in kinds(j.poll()) and notified_at is None:
                notified_at = (j.now - started) / 1e9
        says = [a.detail for a in j.actions if a.kind == "say_overdue"]
        assert [e.level for e in says] == ["soft", "hard"]
        assert kinds(j.actions).count("notify") == 1 and HARD_S < notified_at <= HARD_S + POLL
        assert kinds(j.actions).count("abort") == 1
        assert [a.detail for a in j.actions if a.kind == "gather"] == ["soft", "hard"]
        assert j.d.entries[0].level == "hard" and len(j.d.entries) == 1
    finally:
        j.close()


def test_a_hard_detection_signals_at_once_and_once_per_hang(tmp_path):
    j = Job(tmp_path, soft=False, hard_s=3.0)
    try:
        j.steps(3)
        e, _ = j.stall(limit_s=10)
        assert e.level == "hard" and kinds(j.actions).count("notify") == 1
        j.s2.start(AR, j.now)  # another call of this rank overdue in the same hang: no second signal
        started = j.now
        while j.now - started < 5e9:
            j.poll()
        assert len(j.d.entries) == 2 and kinds(j.actions).count("notify") == 1
        j.s.done(1 + 3)
        j.s2.done(1)
        for _ in range(10):
            j.poll()
        e, _ = j.stall(limit_s=10)  # a new hang: signalled again
        assert kinds(j.actions).count("notify") == 2
    finally:
        j.close()


def test_a_held_verdict_stays_soft_and_silent_until_the_phase_limit(tmp_path):
    j = Job(tmp_path)
    try:
        j.steps(20)
        j.s.start(AR, j.now)
        started = j.now
        while j.now - started < (FLOOR_S + 1) * 1e9:
            j.poll()
        j.d.hold(started + int((HARD_S + 100) * 1e9))  # the rank it waits for is in a phase up to then
        while j.now - started < (HARD_S + 50) * 1e9:
            j.poll()
        assert [e.level for e in (a.detail for a in j.actions if a.kind == "say_overdue")] == ["soft"]
        assert "notify" not in kinds(j.actions)
        while j.now - started < (HARD_S + 101) * 1e9:
            j.poll()
        assert [e.level for e in (a.detail for a in j.actions if a.kind == "say_overdue")] == ["soft", "hard"]
        assert kinds(j.actions).count("notify") == 1  # the phase is over: the hard verdict acts
    finally:
        j.close()


def test_with_soft_deadlines_off_only_the_timeout_speaks(tmp_path):
    j = Job(tmp_path, soft=False)
    try:
        j.steps(40)
        j.s.start(AR, j.now)
        started = j.now
        while j.now - started < 60e9:
            j.poll()
        assert "say_overdue" not in kinds(j.actions) and j.d.learner is None
    finally:
        j.close()


def test_a_learned_deadline_is_never_at_or_past_the_hard_one(tmp_path):
    j = Job(tmp_path, hard_s=8.0)  # a hard deadline below the floor: no soft one
    try:
        j.steps(20)
        assert j.deadline() is None
        e, after = j.stall(limit_s=20)
        assert e.level == "hard" and 8.0 < after <= 8.0 + POLL
    finally:
        j.close()


def test_a_recorder_sources_skipped_calls_teach_the_streams_unnamed_signature(job):
    """The flight-recorder source puts in the channel only the calls it sees in flight at a read, unnamed
    (op unknown) until named: the calls it skipped count as samples of age 0 of that signature."""
    for n in range(1, 40):
        job.s.skip_to(n)  # started and completed between two reads
        job.poll()
    unnamed = ch.encode_op("unknown")
    h, which = job.d.learner.evidence(job.idx, unnamed)
    assert which == "signature" and h.n == 38  # the first was the signature's change of phase
    assert job.deadline(unnamed) == FLOOR_S == job.deadline(AR)  # the stream's, for any op
    e, after = job.stall(unnamed)
    assert e.level == "soft" and FLOOR_S < after <= FLOOR_S + POLL


def test_a_tests_timing_sets_the_floor_and_the_phase_gap(tmp_path):
    """config.Timing (C10D_OBSERVER_TIMING, for tests and experiments) reaches the Detector's learner: the
    floor a call with no evidence gets, and the quiet time after which a stream's next call is a new phase."""
    t = config.Timing(learned_floor=1.0, phase_gap=3.0)
    d = Detector(HARD_S, config.windows(0.1, 1, t), soft=True, timing=t)
    assert d.learner.deadline_ns(0, AR) == int(1.0 * 1e9)  # and never below three polls
    assert d.learner.gap_ns == int(3.0 * 1e9)
    assert Detector(HARD_S, W, soft=True).learner.deadline_ns(0, AR) == int(FLOOR_S * 1e9)
    assert Learner(POLL, HARD_S).gap_ns == int(GAP_S * 1e9)
