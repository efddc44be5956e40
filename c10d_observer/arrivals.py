"""Who arrives last: each call's start per rank, joined across the ranks of its group, and the rank that
arrives last far more often than its share named a straggler, live.  No torch; nothing on the call path.

Each watchdog keeps the start of the last ``KEEP`` calls of each stream its rank completed (the channel's
slots: the calls the reader passed over since the last poll, read anyway to learn deadlines) and writes
those seen in the last ``RECENT_PERIODS`` periods every ``PERIOD_S`` to ``arrivals-rank<R>-pid<P>.json``:
one small document per rank and period.  The watchdog of the node's
lowest rank joins them per (stream, seq) where every member's start is known: the last arriver and by how
much it was last.  Over a group's last ``WINDOW`` calls, a rank that arrived last at the calls where the ranks
did not arrive together far more often than chance (``straggler``), by a median ``MIN_LAG_S`` or more, is a
straggler; ``stragglers.json`` says so, with since when, and every verdict carries it.

Times: starts are on each rank's monotonic clock, turned into wall time by its watchdog (the two clocks read
together, watchdog.tick); the ranks of one
node share the clock (the join is exact to microseconds there).  The patch, funcol and pg_hooks sources
record each call's start on the call path; a recorder source (torch's flight recorders) puts the starts
torch recorded (``time_created_ns``) on the group's arrivals stream when it reads its buffer in batches
(sources/flight_recorder.py): every call, or, above 2,000 calls per batch period, a sample of them.
"""
import collections
import math

from . import callword as _cw
from . import channel as _ch
from . import dumpdir as _dumpdir
from . import streams as _streams
from .timelines import DEFER, END_SKEW_S, NOT_OWN, UNKNOWN, Timelines, merge_calls

PERIOD_S = 2.0  # how often a watchdog writes its rank's starts, and the node's leader joins them
RECENT_PERIODS = 2.5  # a document carries the starts seen in this many periods, at most KEEP a stream: each
# watchdog writes at its own phase and the leader joins at its own, each a poll late at times, so the leader's
# reads of one rank's documents come up to two writes apart (a period's join skipped while the one before
# runs: more); a document that spans less breaks the rank's timeline there, and a lateness read across the
# break is not known (UNKNOWN).  At 1.5 (3 s) a 4-rank DDP job on a busy 2-core machine lost 22-40 % of its
# calls so, and its straggler went unnamed in its 140 steps in 3 runs of 6; at 2.5, 2-3 % (2026-12-03)
WINDOW = 1000  # calls of a group the rule looks at
KEEP = 2000  # starts a watchdog keeps per stream until it writes them
MIN_CALLS = 50  # calls of a group joined before the rule names anyone
MIN_LAG_S = 0.001  # a lag worth counting: at least this, and a tenth of the time between calls (straggler)
MIN_OFFSET_CALLS = 20  # calls whose bounds agree on a host's clock offset before its starts are joined
WAIT_WALK_S = 15.0  # how long a call waits for the walk of another node's rank (relay_arrivals.NodeWalks) to
# come: the relay's share after the one that brought its start (a round, ARRIVALS_EVERY_S), and the collector's
# reads of that round; past this its last arriver's lateness is not known (UNKNOWN)


# The ops whose members do not leave together (a broadcast's tree, a gather's or scatter's root): the end of
# such a call is not its last member's start for every member (Timelines)
ROOTED_CODES = frozenset(_cw.OP_CODES[op] for op in _cw.ROOTED)


class ArrivalLog(object):
    """One rank's starts (seq -> (wall time, when seen, rooted)) per stream, from the calls its reader passed
    over (rooted: the call's op is one whose members do not leave together, ROOTED_CODES)."""

    def __init__(self):
        self.starts = {}  # stream name -> OrderedDict(seq -> (wall start, wall time it was seen, rooted))
        self.last = {}  # stream name -> the last seq seen
        self.gap = None  # the latest start after a call not seen (lost to a ring, not read, dropped past KEEP)
        self.until = None  # where a recorder's group has calls not on its arrivals stream yet: the last start put

    def observe(self, snapshot, now_ns, wall_now, exact=()):
        """``snapshot``: the streams' calls passed since the last poll, with their starts; ``exact``: the
        arrivals streams (channel.ARRIVALS) on which a recorder source puts the exact starts of the calls it
        read: their group's own stream has only the times its reader first saw its calls, and is left out.

        What the documents hold whole (``gap``, ``until``: ``document``'s ``since`` and ``until``): a call seen
        after a seq it did not see (a ring overrun between polls, a recorder's entries lost, a watchdog started
        late) leaves the calls before it unknown; a stream's calls dropped past KEEP too; a group whose own
        stream has calls its arrivals stream has not yet (a recorder's read put over several polls) leaves its
        calls after the last put unknown."""
        read_later = {str(st.desc.get("stream")): st for st in exact}
        own = {str(st.desc.get("stream")): st for st in snapshot if st.desc.get("kind") != "arrivals"}
        for st in list(snapshot) + list(exact):
            if not st.passed or (st.desc.get("kind") != "arrivals" and str(st.desc.get("stream")) in read_later):
                continue
            name = str(st.desc.get("stream"))
            d = self.starts.get(name)
            if d is None:
                d = self.starts[name] = collections.OrderedDict()
            want = self.last.get(name, 0) + 1
            for seq, op, t in st.passed:
                at = wall_now - (now_ns - t) / 1e9
                if seq != want:
                    self.gap = at if self.gap is None else max(self.gap, at)
                want = seq + 1
                d[seq] = (at, wall_now, (op & _cw.OP_MASK) in ROOTED_CODES)
            self.last[name] = want - 1
            while len(d) > KEEP:
                _, (at, _, _) = d.popitem(last=False)
                self.gap = at if self.gap is None else max(self.gap, at)
        self.until = None
        for name, st in read_later.items():
            g = own.get(name)
            if g is not None and g.last_started > st.last_started:
                d = self.starts.get(name)
                at = next(reversed(d.values()))[0] if d else 0.0
                self.until = at if self.until is None else min(self.until, at)

    def document(self, rank, pid, job_id, wall_now, members, host=None, period_s=PERIOD_S):
        """The starts seen in the last RECENT_PERIODS periods (the leader joins each call once every member's
        start is in: it keeps what it joined).  ``period_s``: PERIOD_S, else config.Timing's (tests).  A
        group's members over RUNS_OVER ranks go as runs (members_json); ``rooted``: the seqs of each stream's
        calls whose members do not leave together (ROOTED_CODES), where it has any; ``whole``: the span whose
        every call is here or in the rank's documents before, {"since", "until"[, "gap"]}: the calls started
        from ``since`` to ``until``, but none before ``gap`` (a join reads a rank's calls between two of a
        group's as all it issued only over the span its documents cover: Timelines)."""
        since = wall_now - RECENT_PERIODS * period_s
        rooted = {s: [q for q, (t, seen, ro) in d.items() if ro and seen >= since] for s, d in self.starts.items()}
        whole = {"since": self._whole_since(since),
                 "until": wall_now if self.until is None else min(wall_now, self.until)}
        if self.gap is not None:
            whole["gap"] = self.gap
        return {"format": "c10d_observer.arrivals", "version": 2, "rank": rank, "pid": pid, "job_id": job_id,
                "written_at": wall_now, "whole": whole, "members": members_json(members), "host": host,
                "streams": {s: [[q, round(t, 6)] for q, (t, seen, _) in d.items() if seen >= since]
                            for s, d in self.starts.items()},
                "rooted": {s: q for s, q in rooted.items() if q}}

    def _whole_since(self, since):
        """From when a document of the starts seen since ``since`` holds every call its rank started: each stream's
        calls are seen in order, so every call that started after the latest start seen before ``since`` (on any
        stream) was seen since, and is here.  A source that reads its starts late (torch's recorder, read in
        batches seconds after the calls: 10 s on 2.15 in the full tier's DDP job, 2026-12-03) has its documents
        whole from there, where ``since`` would leave the calls started before it out of every document's span
        (a break in the rank's timeline at each one: the lateness at those calls not known).  ``since`` where
        nothing was seen before it."""
        latest = None
        for d in self.starts.values():
            for t, seen, _ in reversed(d.values()):
                if seen < since:
                    latest = t if latest is None else max(latest, t)
                    break
        return since if latest is None else min(since, latest)


def members_json(members):
    """{stream: ranks} as an arrivals document carries it: a group over channel.RUNS_OVER ranks as {"runs":
    [[first, count, step], ...]} (channel.rank_runs), as the rank documents carry theirs.  Every rank writes
    its groups every PERIOD_S and a node's leader and relay read them all, other nodes' too: the world of
    16,384 ranks as a list is 104 kB a document, as runs a few bytes."""
    return {s: {"runs": _ch.runs_of(r)} if r is not None and len(r) > _ch.RUNS_OVER else r
            for s, r in members.items()}


def ranks_of(members):
    """A stream's members as an arrivals document holds them (a list, or runs: members_json) -> a list."""
    if not isinstance(members, dict):
        return members
    return list(_ch.ranks_from_runs(members.get("runs") or []))


def spans(members, here):
    """Whether a stream whose members a document holds as ``members`` (members_json) has a rank not ``here``
    (the ranks whose documents this node has): a group across nodes, whose starts go through the relay."""
    return bool(members) and not set(ranks_of(members)) <= here


def columns(pairs):
    """A stream's [[seq, start], ...] (ascending seqs) as a node's relay sends it and the collector's brings
    it (``arrivals-node-<key>.json``; read back by ``pairs_of``): {"seqs": runs, "us": the starts
    in whole microseconds, each but the first as its step from the one before, in one string}.  A node's
    share at 2,048 nodes holds 6,144 starts; as pairs of floats, sending it took 19-22 ms, and taking it in
    (unpacked, written to the collector's dump_dir) 20-25 ms, 50 a second at the collector: more than a core
    (JSON writes and reads floats slowly, and wire walked the pairs item by item)."""
    us = [int(round(t * 1e6)) for _, t in pairs]
    return {"seqs": _ch.rank_runs([q for q, _ in pairs]),
            "us": ",".join(map(str, us[:1] + [b - a for a, b in zip(us, us[1:])]))}


def pairs_of(col):
    """``columns`` back to [[seq, start], ...] (a list of pairs as it is: a share sent so)."""
    if not isinstance(col, dict):
        return col
    us = col.get("us")
    out, t = [], 0
    for q, d in zip(_ch.expand_runs(col.get("seqs") or []), map(int, us.split(",")) if us else ()):
        t += d
        out.append([q, t / 1e6])
    return out


def join(docs):
    """{stream: {seq: {rank: start}}} from every rank's arrivals documents (one list of documents)."""
    out = {}
    for doc in docs:
        r = doc.get("rank")
        for stream, pairs in (doc.get("streams") or {}).items():
            calls = out.setdefault(stream, {})
            for seq, t in pairs:
                calls.setdefault(seq, {})[r] = t
    return out


def walks_of(docs):
    """{stream: {seq: {rank: walk}}} from relayed documents' ``walks`` (relay_arrivals.NodeWalks.column: its
    column beside the stream's seqs, read back by ``walk_column``)."""
    out = {}
    for doc in docs:
        r = doc.get("rank")
        for stream, col in (doc.get("walks") or {}).items():
            pairs = (doc.get("streams") or {}).get(stream) or ()
            by_seq = out.setdefault(stream, {})
            for (seq, t), w in zip(pairs, walk_column(col)):
                by_seq.setdefault(seq, {})[r] = w if w is None or w == DEFER else (t - w[0],) + w[1:]
    return out


WALK_UNIT_S = 1e-5  # a walk's times go in whole units of 10 us: the lags the rule reads are 1 ms or more


def walk_column(col):
    """A relayed stream's walks (``walks_column``) as [(before its start, least, most waited) or None or DEFER]."""
    out = []
    u = WALK_UNIT_S
    for x in (col or "").split(","):
        if x == "?":
            out.append(DEFER)
        elif not x:
            out.append(None)
        else:
            f = x.split(":")
            d = int(f[0]) * u
            if len(f) == 1:
                out.append((d, 0.0, 0.0))
            elif len(f) == 2:
                out.append((d, int(f[1]) * u, (int(f[1]) + 1) * u))
            else:
                out.append((d, int(f[1]) * u if f[1] else None, int(f[2]) * u if f[2] else None))
    return out


def walks_column(starts, walks):
    """``walks`` ([Timelines.walk's (next start, least, most) or None or DEFER], one per start of ``starts``, a
    stream's starts of the same calls) as a relay sends them: "d:lo:hi" in whole WALK_UNIT_S, ``d`` how long
    before the call's start the rank's call after the group's call before started, "d:w" where the least and
    the most are within [w, w + 1] (most often: one, known to the microsecond), "d" where both are none (no call
    came in between: "0"), "d::" where only ``d`` is known, "" not
    known, "?" not yet; comma-separated.  Each rounded the safe way: ``d`` and ``lo`` down, ``hi`` up (the
    share at 20 calls a second: 28 kB a node with "d:lo:hi" in microseconds, against 7.7 kB of starts;
    benchmarks/node_walks.py)."""
    out = []
    u = WALK_UNIT_S
    for t, w in zip(starts, walks):
        if w == DEFER:
            out.append("?")
        elif w is None:
            out.append("")
        else:
            d = max(0, int(math.floor((t - w[0]) / u + 1e-6)))
            if w[1] is None:  # the walk not known, the start after the call before known
                out.append("%d::" % d)
                continue
            lo, hi = max(0, int(math.floor(w[1] / u + 1e-6))), int(math.ceil(w[2] / u - 1e-6))
            out.append("%d" % d if hi == 0 else "%d:%d" % (d, lo) if hi - lo <= 1 else "%d:%d:%d" % (d, lo, hi))
    return ",".join(out)


def rooted(docs):
    """{stream: {seq}}: the calls whose members do not leave together, as the documents say (``rooted``)."""
    out = {}
    for doc in docs:
        for stream, seqs in (doc.get("rooted") or {}).items():
            out.setdefault(stream, set()).update(seqs)
    return out


def clock_offsets(calls, members, host_of, ref, after=None, rooted=None):
    """How far each other host's clock is from ``ref``'s, from the calls their ranks share: {host: {"offset_s",
    "error_s", "calls"}} (a start on ``host`` is ``offset_s`` ahead of the same instant on ``ref``), for the
    hosts whose calls say it clearly.

    A collective ends at nearly the same instant on every member.  On each host it ends after the last of its
    ranks started it and before the first of them started the next call of the stream (calls issued one after
    the other): in ``ref``'s clock within [lo_ref, hi_ref], in the host's within [lo_h, hi_h], so the offset
    is within [lo_h - hi_ref, hi_h - lo_ref], widened by END_SKEW_S (the members do not see the end at
    exactly the same instant).  Calls issued back to back (a step's second call) make that interval narrow;
    the estimate is the middle of the range inside the most intervals, and is kept only where at least half
    of them (and MIN_OFFSET_CALLS) agree on it: a call issued before the previous one ended (async) gives a
    wrong interval, outvoted.  ``error_s`` is half that range: the estimate is within it of the offset the
    intervals allow.  {stream: {seq: {rank: start}}}, members {stream: ranks}, host_of {rank: host}.

    ``after(rank, stream, seq, start)``: the start of the rank's next call of any stream, where known (its
    timeline; another node's, as its relay sent it: NodeWalks), which bounds the end too: a mesh's dp call of
    one a step, followed at once by a tp call, ends within microseconds of that, where the next dp call comes a
    step later (2 nodes: errors of 13-180 ms, against lags of a few ms, with the same stream's next call only;
    the fuzzer's meshes).  ``rooted``: {stream: {seq}}, calls whose members do not leave together (a broadcast's
    root leaves before its last member arrives), which bound nothing: with the next call on any stream, a world
    broadcast's root's next start made a wrong interval at every step, and the offset it won named a rank of the
    joining node (the fuzzer's seed 8000531, three nodes)."""
    intervals = collections.defaultdict(list)
    for stream, by_seq in calls.items():
        ranks = [r for r in members.get(stream) or () if r in host_of]
        hosts = collections.defaultdict(list)
        for r in ranks:
            hosts[host_of[r]].append(r)
        if ref not in hosts or len(hosts) < 2 or len(ranks) != len(members.get(stream) or ()):
            continue
        skip = (rooted or {}).get(stream, ())
        for seq in sorted(by_seq):
            cur, nxt = by_seq[seq], by_seq.get(seq + 1) or {}
            if seq in skip or not all(r in cur for r in ranks):
                continue

            def bound(r):  # the earliest start after the call, of the stream's next or another's
                a = after(r, stream, seq, cur[r]) if after is not None else None
                b = nxt.get(r)
                return b if a is None else a if b is None else min(a, b)
            lo0, hi0 = max(cur[r] for r in hosts[ref]), _least(bound(r) for r in hosts[ref])
            if hi0 is None or hi0 < lo0:
                continue  # the next call was issued before this one ended on ref: no bound from it
            for h, hr in hosts.items():
                if h == ref:
                    continue
                lo, hi = max(cur[r] for r in hr), _least(bound(r) for r in hr)
                if hi is not None and hi >= lo:
                    intervals[h].append((lo - hi0 - END_SKEW_S, hi - lo0 + END_SKEW_S))
    out = {}
    for h, iv in intervals.items():
        iv = iv[-WINDOW:]
        events = sorted([(a, 0) for a, b in iv] + [(b, 1) for a, b in iv])  # opens before closes at a tie
        count = best = 0
        region = None
        for i, (x, closes) in enumerate(events):
            if closes:
                count -= 1
                continue
            count += 1
            if count > best:
                best, region = count, (x, events[i + 1][0] if i + 1 < len(events) else x)
        if region is None or best < max(MIN_OFFSET_CALLS, 0.5 * len(iv)):
            continue
        out[h] = {"offset_s": round((region[0] + region[1]) / 2.0, 6), "error_s": round((region[1] - region[0]) / 2.0, 6),
                  "calls": best}
    return out


def _least(values):
    """The least of ``values``, or None where one is None (not known)."""
    out = None
    for v in values:
        if v is None:
            return None
        out = v if out is None or v < out else out
    return out


def last_arrivals(calls, members, own=None, wait_since=None):
    """[(seq, last rank, lag s, first start)] for the calls every member's start is known of, in seq order.
    ``own(seq, starts, last)``: whether the last arriver's lateness is its own (``Timelines.own``); where it is
    not, the call is still one the ranks did not arrive together at, and its last rank is NOT_OWN (None);
    where that cannot be told, UNKNOWN (the rule leaves the call out); where it cannot be told yet (DEFER:
    another node's relay sends its rank's walk a round after its start), the list ends before the call, for
    the next join, unless its first start is before ``wait_since`` (then UNKNOWN)."""
    out = []
    need = set(members)
    for seq in sorted(calls):
        starts = calls[seq]
        if not need or not need <= set(starts):
            continue
        first = min(starts[r] for r in need)
        last = max(need, key=lambda r: (starts[r], r))
        lag = starts[last] - first
        if own is not None and lag >= MIN_LAG_S:
            mine = own(seq, starts, last)
            if mine == DEFER:
                if wait_since is None or first >= wait_since:
                    break
                mine = None
            if mine is not True:
                last = NOT_OWN if mine is False else UNKNOWN
        out.append((seq, last, lag, first))
    return out


def straggler(window, n, clock_error=0.0):
    """The rule, over a group's recent (seq, last rank, lag, first start) of n ranks: {"rank", "share",
    "median_lag_s", "calls", "apart"} of the rank that arrives last far more often than chance, by a lag
    worth naming, or None.  ``clock_error``: how far two members' starts may be off where the group spans
    hosts (twice the largest error of their clocks' offsets): a call whose lag is within it is no call the
    ranks arrived apart at, and a median lag within it names nobody.

    Only the calls at which the ranks did not arrive together count (``apart``: the last came MIN_LAG_S, and
    a tenth of the median time between the group's calls, or more after the first): after a straggler's late
    arrival at a step's first call, the ranks leave that call together, and who is last at the step's other
    calls is chance (a rank 50 ms late every step of three ranks was last at 66 % of all calls, and at every
    call of those its lateness decided), or the small regular lag a machine gives some rank: in a job of two
    torchrun agents on one 2-core machine, rank 1 started each step's back-to-back second call about 2 ms after
    the others, every step, so was last there as often as the straggler (40 ms late) was at the step's first
    call, and the rule named nobody in 300 s.  The cost: a straggler late at one call of each step is named
    after MIN_CALLS steps of the join, where the calls of 1 ms counted before (the full tier's DDP tests of a
    straggler late at one call of two a step, "within 100 steps", named theirs after 116 on the loaded
    machine, twice; alone, well within).  Counting MIN_CALLS among the calls of 1 ms again, with the share at
    the floor, named a wrong rank in the fuzzer (seed 11000185: rank 0 of a subgroup last by a few ms at 39
    of its 43 calls at the floor): not done.  Among them, a rank is named where it was last at a share of at
    least max(0.5, 1/n + 5 standard deviations of a fair draw: sqrt((1/n)(1 - 1/n) / calls)), over at least
    MIN_CALLS of them.  Under the fair draw of a balanced
    job the share reaches that bound with odds below 1 in 3 million, at any world size.  And it must be last 5
    standard deviations more often than the rank last next most often, as a fair draw between those two
    (the bound above, for two ranks): two ranks late alike every step (the two of a subgroup that issue extra
    calls each step) are each last about half the time, and one of them reached the share by chance."""
    if n < 2:
        return None
    gaps = sorted(b[3] - a[3] for a, b in zip(window, window[1:]) if b[0] == a[0] + 1)
    between = gaps[len(gaps) // 2] if gaps else 0.0  # the median: a job's slow first steps, a pause, count little
    floor = max(MIN_LAG_S, clock_error, 0.1 * between)
    apart = [w for w in window if w[2] >= floor and w[1] != UNKNOWN]
    if len(apart) < MIN_CALLS:
        return None
    counts = collections.Counter(w[1] for w in apart if w[1] is not NOT_OWN)
    if not counts:
        return None
    top = counts.most_common(2)
    rank, c = top[0]
    runner_up = top[1][1] if len(top) > 1 else 0
    if c - runner_up < 5.0 * math.sqrt(c + runner_up):
        return None  # two ranks late alike (a subgroup's extra calls): last by a coin's toss between them
    share = c / float(len(apart))
    fair = 1.0 / n
    need = max(0.5, fair + 5.0 * math.sqrt(fair * (1.0 - fair) / len(apart)))
    lags = sorted(w[2] for w in apart if w[1] == rank)
    median = lags[len(lags) // 2]
    if share < need or median <= clock_error:
        return None
    return {"rank": rank, "share": round(share, 3), "median_lag_s": round(median, 4), "calls": len(apart),
            "of_calls": len(window)}


class Stragglers(object):
    """The node leader's join: per group, its last WINDOW joined calls, and the straggler named, if any."""

    def __init__(self):
        self.windows = {}  # stream -> deque of (seq, last rank, lag, first start)
        self.done = {}  # stream -> the highest seq joined
        self.named = {}  # stream -> (rank, since wall)
        self.clock_calls = {}  # the calls of groups that span hosts, kept to estimate the hosts' clocks
        self.clock_after = {}  # stream -> {seq: {rank: its next call's start}}: other nodes' ranks', by their
        # relays' walks (a bound of the call's end on their clock: clock_offsets)
        self.pending = {}  # stream -> {seq: {rank: start}}: calls not joined yet (a member's start not in)
        self.hosts = {}  # rank -> its host (whose clock its starts are on)
        self.timelines = Timelines()  # each rank's recent calls: whose lateness a late arrival is

    def update(self, docs, members, wall_now, host=None, whole=None):
        """Join the documents; returns the stragglers document.  Calls wait in ``pending`` until every member's
        start is in (another node's come by its relay, later).  Starts of ranks on other hosts are joined in
        ``host``'s clock, once ``clock_offsets`` knows how far each other host's is; until then their calls
        wait.  ``whole``: this node's ranks' documents as written, where ``docs`` holds them with some streams
        left out of the join (watchdog_io.join_node): each rank's timeline takes every call it issued.  A
        document marked ``relayed`` is another node's sample (relay_arrivals); any other is whole over the span
        its ``whole`` says (ArrivalLog.document; from its rank's start to now where it says none: a test's)."""
        for d in docs:
            self.hosts[d.get("rank")] = d.get("host") or host
        calls = join(docs)
        seen = docs if whole is None else list(whole) + [d for d in docs if d.get("relayed")]
        walks = walks_of(d for d in docs if d.get("relayed"))
        # every stream's: a rank's calls between two of a group's, over the span its documents cover
        ro = rooted(seen)
        self.timelines.add(calls, ro, {d["rank"]: d.get("whole") or {} for d in seen if not d.get("relayed")},
                           {d["rank"]: d.get("rank_streams") for d in seen if d.get("relayed")},
                           None if whole is None else join(whole), walks,
                           {st for d in docs if d.get("relayed") for st in d.get("streams") or ()})
        calls = {st: c for st, c in calls.items() if not _streams.is_p2p(st)}  # a p2p stream is no group to
        merge_calls(self.pending, calls, KEEP)  # join (its documents give it its group's members)
        clocks = {}
        multi = host is not None and len(set(self.hosts.values())) > 1
        if multi:
            merge_calls(self.clock_calls, {st: {q: c for q, c in by_seq.items() if q not in ro.get(st, ())}
                                           for st, by_seq in calls.items()}, KEEP)  # a rooted call bounds nothing
            merge_calls(self.clock_after, {st: {q - 1: {r: w[0] for r, w in by_rank.items()
                                                        if w is not None and w != DEFER}
                                                for q, by_rank in by_seq.items()}
                                           for st, by_seq in walks.items()}, KEEP)
            clocks = clock_offsets(self.clock_calls, members, self.hosts, host, self._after(host),
                                   self.timelines.rooted)

        def shift(r, t):  # a start in this host's clock, or None where its host's offset is not known yet
            h = self.hosts.get(r, host)
            if not multi or h == host:
                return t
            return t - clocks[h]["offset_s"] if h in clocks else None

        def error(r):  # how far a start put in this host's clock may be off
            h = self.hosts.get(r, host)
            return clocks[h]["error_s"] if multi and h != host and h in clocks else 0.0
        groups = []
        for stream in sorted(set(self.pending) | set(self.windows)):  # a group quiet of late keeps what was joined
            ranks = members.get(stream)
            if not ranks or len(ranks) < 2:
                continue
            by_seq = self.pending.get(stream, {})
            done = self.done.get(stream, 0)
            complete = {}
            for q, starts in by_seq.items():
                if q <= done or not all(r in starts for r in ranks):
                    continue
                shifted = {r: shift(r, starts[r]) for r in ranks}
                if None not in shifted.values():
                    complete[q] = shifted
            w = self.windows.setdefault(stream, collections.deque(maxlen=WINDOW))
            for item in last_arrivals(complete, ranks, self.timelines.own(stream, members, shift, error),
                                      wall_now - WAIT_WALK_S):
                w.append(item)
                self.done[stream] = item[0]
            self.timelines.forget(stream, self.done.get(stream, 0))
            for q in [q for q in by_seq if q <= self.done.get(stream, 0)]:
                del by_seq[q]
            errors = [clocks[h]["error_s"] for h in {self.hosts.get(r, host) for r in ranks} if h in clocks]
            found = straggler(list(w), len(ranks), 2.0 * max(errors) if errors else 0.0)
            prev = self.named.get(stream)
            if found is None:
                self.named.pop(stream, None)
            else:
                since = prev[1] if prev is not None and prev[0] == found["rank"] else wall_now
                self.named[stream] = (found["rank"], since)
                found["since"] = since
            counts = collections.Counter(x[1] for x in w if x[1] is not NOT_OWN and x[1] != UNKNOWN)
            groups.append({"stream": stream, "ranks": list(ranks), "calls": len(w),
                           "last_share": {str(r): round(c / float(len(w)), 3) for r, c in sorted(counts.items())}
                           if w else {}, "straggler": found})
        out = {"format": "c10d_observer.stragglers", "version": 1, "written_at": wall_now, "groups": groups}
        if multi:  # how far each other host's clock is from this one's, as the calls say it (None: not yet)
            out["clocks"] = {h: clocks.get(h) for h in sorted(set(self.hosts.values()) - {host}, key=str)}
        return out

    def _after(self, host):
        """clock_offsets's ``after``: another node's rank's next start after a call, as its relay's walk said;
        one of this host's, from its timeline."""
        def after(r, stream, seq, start):
            got = self.clock_after.get(stream, {}).get(seq, {}).get(r)
            if got is None and self.hosts.get(r, host) == host:
                got = self.timelines.next_start(r, stream, seq, start)
            return got
        return after


def named(doc):
    """The stragglers a document names, one per group that has one: its straggler's fields with the group's
    ``stream`` and ``ranks`` (the verdict's Straggler)."""
    return [dict(g["straggler"], stream=g["stream"], ranks=g["ranks"])
            for g in (doc or {}).get("groups") or () if g.get("straggler")]


def lines(doc, now=None):
    """The stragglers a document names, as a person reads them, with since when."""
    from .text import clock
    out = []
    for g in (doc or {}).get("groups") or ():
        s = g.get("straggler")
        if not s:
            continue
        text = ("rank %d arrived last at %.0f %% of the last %d calls on group %s at which the ranks did not arrive "
                "together, median %.0f ms after the first" % (s["rank"], 100 * s["share"], s["calls"], g["stream"],
                                                             1000 * s["median_lag_s"]))
        if s.get("since") is not None:
            text += "; the straggler since %s" % clock(s["since"], ms=False)
            if now is not None and now - s["since"] >= 60 and not g.get("joined_on"):
                text += " (%.0f min)" % ((now - s["since"]) / 60.0)
        if g.get("joined_on"):  # another node's join: its times are on that node's clock
            text += " (joined on %s, whose clock the time is on)" % g["joined_on"]
        out.append(text)
    return out


def read(directory):
    """The node's stragglers document, or None.  ``directory``: a path or a DumpDir.  ``stragglers.json`` is the
    join of this node's leader; a group that spans nodes is joined on one node only (the one that collects the
    arrivals, relay.py), whose join the relay brings here (``stragglers-relayed.json``): its groups stand in
    for those this node could not join (no call, or none of them here), each marked ``joined_on`` that node."""
    dd = directory if isinstance(directory, _dumpdir.DumpDir) else _dumpdir.DumpDir(directory)
    doc = _stragglers(dd.read_json(_dumpdir.STRAGGLERS))
    relayed = _stragglers(dd.read_json(_dumpdir.STRAGGLERS_RELAYED))
    if relayed is None:
        return doc
    mine = {g.get("stream"): g for g in (doc or {}).get("groups") or () if g.get("calls")}
    theirs = [dict(g, joined_on=relayed.get("host")) for g in relayed.get("groups") or ()
              if g.get("calls") and g.get("stream") not in mine]
    if not theirs:
        return doc
    out = dict(doc or relayed)
    out["groups"] = sorted(list(mine.values()) + theirs, key=lambda g: str(g.get("stream")))
    return out


def _stragglers(doc):
    return doc if isinstance(doc, dict) and doc.get("format") == "c10d_observer.stragglers" else None
