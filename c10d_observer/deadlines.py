"""Learned (soft) deadlines: how long a call of this rank may stay in flight before it is worth a look.

No torch, nothing on the call path: the watchdog feeds its ``Learner`` what each poll of the channel shows.

A call's *sample* is the longest age the watchdog saw it at in flight at a poll (0 where it started and
completed between two polls); ages count from the call's start, or from when it reached its stream's front
(a call queued behind others cannot complete before them).  Samples are kept per *signature* (stream, op,
dtype, size within a factor of two), per stream (a group's collectives, or one direction of its
point-to-point messages) and for the whole rank (every stream it has: this rank's view of the job).

The soft deadline of a call is ``margin(n) * q`` from the most specific of those three with any sample,
where ``q`` is the 99.9th percentile of its samples (their largest below 1,000 samples) and ``n`` their
number; at least ``FLOOR_S`` (and three polls), and never at or past the hard deadline (then there is
none).  With no sample at all (the rank's very first calls) the deadline is the floor.  So a job has a soft
deadline from its first step, wide while evidence is thin, narrowing as it grows:

- ``margin(n) = MARGIN_INF + MARGIN_SPREAD / sqrt(n)``: 10 x the one sample there is, 5.3 x the largest of
  9, 4 x the largest of 49, 3.3 x the 99.9th percentile of 1,000 or more (the constants are measured:
  benchmarks/false_alarms.py, "Learned deadlines", and benchmarks/README.md);
- ``FLOOR_S``: no soft verdict for a call in flight less than this.  Healthy jobs wait this long only at a
  change of phase (a checkpoint behind a barrier, a first compile), which is worth a look; pauses of a rank
  (its data loader, a garbage collection, an evaluation on one rank) stay below it in every realistic loop
  measured (benchmarks/false_alarms.py);
- a change of phase is not a sample: the first call of a signature (a first step, a first evaluation, the
  first barrier of a checkpoint: the ranks arrive as their start-up or phase allows), and the first call of
  a stream that had nothing in flight for ``GAP_S`` (an evaluation, a checkpoint between epochs).  Its own
  deadline is the one pooled evidence gives: such a call waiting long gets a soft verdict (informs; never
  acts);
- nor is a call that was found overdue: it is an *incident*, kept apart.  One that completed (the ranks
  caught up: a periodic evaluation or checkpoint behind a barrier, a rank paused 30 s) is evidence for its
  signature: a later call of it is overdue only past ``SLOW_MARGIN`` x the longest such incident (and its
  ordinary deadline), so the next evaluation gets no verdict where it takes up to four times the first (15
  then 60 s; completed within its deadline, it is a sample), and a real stall at the same place is still
  named softly, once it lasts four times what the slow steps took before;
- a slow step's samples (their quantile past the floor) take ``SLOW_MARGIN`` x, not ``margin(n)``: the wide
  margin of thin evidence is for fast calls, where it stays under the floor anyway; 10 x a 53 s evaluation
  put the soft deadline past the hard one, so a stall inside the next evaluation waited for the hard
  deadline (benchmarks/false_alarms.py, slow_eval_stall).  A phase that always takes long can also be
  declared (``c10d_observer.phase``): its calls are held, not timed;
- ages are kept in buckets of ``1 / SUB`` octave (9 % apart): the deadline is at most 9 % above the one
  exact ages would give.
"""
import math

from . import callword as _cw

FLOOR_S = 10.0  # a learned deadline is never shorter (nor shorter than 3 polls)
MARGIN_INF = 3.0  # the margin once evidence is plentiful ...
MARGIN_SPREAD = 7.0  # ... plus this over the square root of the samples: 10 x a single sample
QUANTILE = 0.999  # of the samples, once there are 1 / (1 - QUANTILE) of them; below that, their largest
GAP_S = 30.0  # a stream quiet this long (an evaluation, a checkpoint between epochs): its next call is a change
# of phase, not a sample
SUB = 8  # buckets per octave of milliseconds
BUCKETS = 32 * SUB  # bucket b: ages below 2 ** (b / SUB) ms (b = 0: below 1 ms); 2**32 ms is 50 days
ZERO = 0  # the bucket of an age below a millisecond (and of a call that never was in flight at a poll)
SLOW_MARGIN = 4.0  # a slow step (an incident that resolved, samples past the floor) may take this x its longest


def margin(n):
    """How many times its samples' quantile a call of a signature with ``n`` samples may take."""
    return MARGIN_INF + MARGIN_SPREAD / math.sqrt(max(1, n))


def bucket(age_ns):
    """The bucket of an age: 0 below a millisecond, else ceil(SUB * log2(ms)), at most BUCKETS - 1."""
    ms = age_ns / 1e6
    if ms < 1.0:
        return ZERO
    return min(BUCKETS - 1, max(1, int(math.ceil(SUB * math.log2(ms)))))


def bucket_ns(b):
    """The upper edge of a bucket, in ns: every age in it is at most this."""
    return int(1e6 * 2 ** (b / float(SUB)))


class _Hist(object):
    """Samples of one level: their count and a sparse histogram (bucket -> count)."""

    __slots__ = ("n", "counts")

    def __init__(self):
        self.n = 0
        self.counts = {}

    def add(self, b, k=1):
        self.n += k
        self.counts[b] = self.counts.get(b, 0) + k

    def quantile_ns(self):
        """The upper edge of the bucket of the QUANTILE-th sample (of the largest below 1 / (1 - QUANTILE))."""
        allowed = (1.0 - QUANTILE) * self.n if self.n * (1.0 - QUANTILE) >= 1.0 else 0.0
        above = 0
        for b in sorted(self.counts, reverse=True):
            above += self.counts[b]
            if above > allowed:
                return bucket_ns(b)
        return bucket_ns(ZERO)


class Learner(object):
    """Deadlines learned from the call stream (module docstring): per signature, stream and rank."""

    def __init__(self, poll_s, hard_s, floor_s=FLOOR_S, gap_s=GAP_S):
        self.floor_ns = int(max(floor_s, 3 * poll_s) * 1e9)  # floor_s, gap_s: config.Timing (tests; FLOOR_S, GAP_S)
        self.gap_ns = int(gap_s * 1e9)
        self.hard_ns = int(hard_s * 1e9)
        self.hist = {}  # (stream index, op, dtype, size bucket), (stream index,) and () -> _Hist
        self.seen = {}  # stream index -> (front seq, its op word, its age ns) at the last poll
        self.idle_since = {}  # stream index -> ns of the first poll that saw it with nothing in flight, since
        self.completed = {}  # stream index -> its last completed seq at the last poll
        self.phase_change = set()  # stream indices whose next completed call is a change of phase
        self.known = set()  # signatures seen: the first call of one is a change of phase
        self.incidents = {}  # signature -> the longest age (ns) of its calls found overdue that completed

    @staticmethod
    def key(idx, word):
        return (idx,) + _cw.signature(word)

    def observe(self, snapshot, now_ns, queued, reported=()):
        """One poll: the calls that completed since the last (st.passed) are samples; note each front.  Calls
        that completed and left no slot (a recorder source skips those that started and ended between two of
        its reads; a burst wider than the ring) are samples of age 0 of the stream's unnamed signature, where
        a recorder's calls also sit until it names them.  ``reported``: the (stream index, seq) of calls
        found overdue: not samples (one incident never widens the deadline of the calls after it)."""
        for st in snapshot:
            idx = st.idx
            prev = self.seen.get(idx)
            before = self.completed.get(idx)  # first sight: every call it completed so far
            done = st.last_completed - (before if before is not None else 0)
            self.completed[idx] = st.last_completed
            if done > 0 or st.oldest is not None:
                idle = self.idle_since.pop(idx, None)
                if idle is not None and now_ns - idle >= self.gap_ns:
                    self.phase_change.add(idx)  # quiet for GAP_S: its next call is a change of phase
            if done > 0:
                for seq, word, _ in st.passed:
                    age = prev[2] if prev is not None and prev[0] == seq else 0
                    if (idx, seq) not in reported:
                        self.sample(idx, word, age)
                    else:  # an incident that resolved: evidence for its signature, never a sample
                        key = self.key(idx, word)
                        self.incidents[key] = max(self.incidents.get(key, 0), age)
                skipped = min(done - len(st.passed), 1 << 16)
                if skipped > 0:
                    self.sample(idx, 0, 0, skipped)
            if st.oldest is None:
                self.idle_since.setdefault(idx, now_ns)
                self.seen.pop(idx, None)
                continue
            seq, word, start = st.oldest
            q = queued.get(idx)
            since = max(start, q[1]) if q is not None and q[0] == seq else start
            self.seen[idx] = (seq, word, now_ns - since)

    def sample(self, idx, word, age_ns, k=1):
        """``k`` calls of this signature on stream ``idx`` completed, the longest seen at ``age_ns``."""
        key = self.key(idx, word)
        if key not in self.known or idx in self.phase_change:  # a change of phase, not a sample
            self.known.add(key)
            self.phase_change.discard(idx)
            k -= 1
            if k <= 0:
                return
        b = bucket(age_ns)
        for level in (key, key[:1], ()):
            h = self.hist.get(level)
            if h is None:
                h = self.hist[level] = _Hist()
            h.add(b, k)

    def evidence(self, idx, word):
        """The level a call's deadline comes from: (its _Hist, which: "signature", "stream", "rank"), or
        (None, None) where there is no sample at all."""
        for level, which in ((self.key(idx, word), "signature"), ((idx,), "stream"), ((), "rank")):
            h = self.hist.get(level)
            if h is not None and h.n:
                return h, which
        return None, None

    def deadline_ns(self, idx, word):
        """The soft deadline (ns) of a call of this signature on stream ``idx`` now, or None (at or past the
        hard deadline)."""
        h, _ = self.evidence(idx, word)
        if h is None:
            d = self.floor_ns
        else:
            q = h.quantile_ns()
            m = margin(h.n) if q < self.floor_ns else min(margin(h.n), SLOW_MARGIN)
            d = max(self.floor_ns, int(m * q))
        d = max(d, int(SLOW_MARGIN * self.incidents.get(self.key(idx, word), 0)))
        return d if d < self.hard_ns else None

    def view(self, names):
        """The learned deadlines, for the documents: [{stream, op, size bucket, calls, deadline_s}]."""
        out = []
        for key, h in sorted(self.hist.items()):
            if len(key) != 4:
                continue
            idx, op, dtype, bucket_ = key
            word = op | (dtype << _cw.DTYPE_SHIFT | ((1 << bucket_) >> 1)) << _cw.SIG_SHIFT if dtype else op
            d = self.deadline_ns(idx, word)
            out.append({"stream": names.get(idx), "op": _cw.OPS[op] if op < len(_cw.OPS) else "unknown",
                        "size": _cw.decode_sig(word), "calls": h.n,
                        "deadline_s": round(d / 1e9, 3) if d is not None else None})
        return out
