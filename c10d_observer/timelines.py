"""Whose lateness a late arrival is: each rank's recent calls on every stream, read between two calls of a
group (``Timelines``, arrivals.Stragglers's).  A rank held in a call by another rank arrives late at its next
call through no doing of its own; the straggler rule (arrivals.py) counts a call for its last arriver only
where the lateness was its own.  No torch."""
import bisect

from . import streams as _streams

END_SKEW_S = 0.001  # how far apart the members of a collective may see its end (clock offsets between hosts)


def merge_calls(old, new, keep):
    """The calls of ``old`` and ``new`` ({stream: {seq: {rank: start}}}), each stream's last ``keep``."""
    for stream, by_seq in new.items():
        mine = old.setdefault(stream, {})
        for seq, starts in by_seq.items():
            mine.setdefault(seq, {}).update(starts)
        if len(mine) > keep:
            for seq in sorted(mine)[:len(mine) - keep]:
                del mine[seq]
    return old



FIRST = "first"  # Timelines._between: the call is its stream's first
NOT_OWN = None  # last_arrivals: the last arriver's lateness came from the call it waited in before
UNKNOWN = -1  # last_arrivals: whose lateness it was cannot be told (the rule leaves the call out)
DEFER = "defer"  # last_arrivals: not told yet (another node's relay has not walked the rank's calls so far)


def _same_clock(r, t):
    return t


def _no_error(r):
    return 0.0


class Timelines(object):
    """Each rank's recent calls on every stream (its groups' and its p2p streams'), to tell whose lateness a
    late arrival is.  A rank held in a call by another rank (on another group, or a recv from a slow stage)
    leaves it late and arrives late at its next call through no doing of its own: in a 2x2 mesh with rank 3
    slow, rank 2 waits for it in their tp all_reduce and is then last at its dp all_reduce with rank 0, every
    step, by rank 3's lateness.  Between two calls of one group, the lag of its last arriver behind its first
    is how much later it left the group's call before, how much longer it was held in the calls it issued in
    between, and how much longer it computed: only the last is its own (``own``).

    A call's end is its last member's start (a collective's members from the join; a p2p call's two ranks from
    its stream's name, ``<group>:p2p:<src>-><dst>``), for each member, but for a call whose members do not
    leave together (a broadcast's tree, a gather's root: ``rooted``), which ended for a member between its own
    start and that; a call whose end came after the rank issued its next call (async) leaves it not known.

    A rank's walk is read only where its timeline holds every call it issued (``complete``): a call it issued
    in between that is not here yet (another stream's starts not in, left out of a join as a group across
    nodes, or a relay's sample that carries some streams only) would read as no call, its wait there as its own
    lateness: the 2x2 mesh's first join, of ranks 0 and 1 only, named rank 1 in its tp group by the lag it
    inherited in dp group [1, 3] (the full tier on torch 1.8.1, 4 runs of 10).  A rank's documents as written
    (every stream; ``whole``: every call started from ``since`` to ``until``, none lost after ``gap``) make it
    complete from the first one's ``since`` while each next one's begins before the last one's end; a relayed
    document (another node's sample) makes it complete only where the rank has no other stream
    (``rank_streams``)."""

    KEEP_CALLS = 1024  # a rank's last calls kept (its calls between two of a group's are found among them)
    KEEP_SEQS = 512  # a stream's last calls kept, to read their ends
    BUDGET = 500000  # starts kept in all, each way (a rank's calls, a stream's calls): past 488 ranks a rank
    # keeps fewer calls and a stream fewer seqs, never under 2 x WALK; a rank's list is cut back to that once it
    # holds half as many again.  (A join of 4,096 ranks held 1.3 GB with none: benchmarks/straggler_join.py
    # --memory.)
    WALK = 64  # calls a rank may issue between two calls of a group for the rule to read them

    def __init__(self):
        self.of_rank = {}  # rank -> [(start, stream, seq)], sorted and its last keep() once read (_calls_of)
        self.dirty = set()  # the ranks whose calls came since they were last sorted
        self.by_call = {}  # stream -> {seq: {rank: start}}, the last KEEP_SEQS (keep() where fewer)
        self.rooted = {}  # stream -> {seq}: its calls whose members do not leave together
        self.ends = {}  # (stream, seq) -> _ended's answer, once known: for one update (the clocks may move)
        self.covered = {}  # rank -> [since, until]: its whole documents' span, unbroken (since None: from its start)
        self.alone = {}  # rank -> its one stream, or None where it has others: a rank known by a relay's sample
        self.seen_to = {}  # stream -> {rank: the highest seq of its starts come}: the streams whose starts come by
        # the relays (groups across nodes), where a call whose starts are not all in yet may be read later (DEFER)
        self.walks = {}  # stream -> {seq: {rank: walk()'s answer, None or DEFER}}: another node's ranks', as its
        # relay sent them (the collector's), until the call is joined (``forget``)

    def add(self, calls, rooted=None, whole=None, alone=None, theirs=None, walks=None, relayed=()):
        """Take the starts of a join ({stream: {seq: {rank: start}}}) and its rooted calls ({stream: {seq}}).
        ``whole``: {rank: {"since", "until", "gap"}} of the ranks whose documents came whole: every call they
        issued started from ``since`` to ``until`` (their own clocks; None: from their start, to now) but none
        before ``gap`` (arrivals.ArrivalLog.document); ``alone``: {rank: its streams} of the ranks known by a
        relay's sample only; ``theirs``: more starts, as ``calls``, for their ranks' timelines only: the
        calls a join leaves out (a group across nodes: their other members' starts never come, and in
        ``by_call`` they would push out the relay's sample, whose ends are known); ``walks``: {stream: {seq: {rank:
        walk}}} of ranks of other nodes, as their relays sent them (``walk``; None: not known; DEFER: not yet);
        ``relayed``: the streams of relayed documents."""
        self.ends = {}
        for stream in relayed:
            top = self.seen_to.setdefault(stream, {})
            for seq, starts in calls.get(stream, {}).items():
                for r in starts:
                    if top.get(r, 0) < seq:
                        top[r] = seq
        for stream, by_seq in (walks or {}).items():
            mine = self.walks.setdefault(stream, {})
            for seq, by_rank in by_seq.items():
                had = mine.setdefault(seq, {})
                for r, w in by_rank.items():
                    if w != DEFER or had.get(r, DEFER) == DEFER:  # a walk once known stays
                        had[r] = w
            if len(mine) > self.KEEP_SEQS:
                for seq in sorted(mine)[:len(mine) - self.KEEP_SEQS]:
                    del mine[seq]
        for r, w in (whole or {}).items():
            since, until, gap = w.get("since"), w.get("until"), w.get("gap")
            c = self.covered.get(r)
            if c is not None and (since is None or c[1] is None or since <= c[1]):
                c[0] = None if since is None else c[0]  # the span goes on unbroken
                c[1] = None if until is None or c[1] is None else max(c[1], until)
            else:  # its first, or one after a document not read: what it issued before is not known whole
                c = self.covered[r] = [since, until]
            if gap is not None and (c[0] is None or gap > c[0]):
                c[0] = gap
        for r, names in (alone or {}).items():
            names = set(names or ())
            self.alone[r] = next(iter(names)) if len(names) == 1 else None
        for stream, seqs in (rooted or {}).items():
            mine = self.rooted.setdefault(stream, set())
            mine.update(seqs)
            if len(mine) > self.KEEP_SEQS:
                self.rooted[stream] = set(sorted(mine)[-self.KEEP_SEQS:])
        keep_calls = self.keep()
        # a document carries a call's start for 1.5 periods: taken once (a start by_call holds already is not
        # new); a rank's calls are sorted only when the rule reads them (_calls_of) or they pile up: at the
        # collector of thousands of nodes, few ranks are ever read (the last and first arrivers of calls apart)
        of_rank, dirty, by_call = self.of_rank, self.dirty, self.by_call
        for stream, by_seq in list(calls.items()) + list((theirs or {}).items()):
            had = by_call.get(stream, {})
            for seq, starts in by_seq.items():
                seen = had.get(seq, ())
                for r, t in starts.items():
                    if r in seen:
                        continue
                    mine = of_rank.get(r)
                    if mine is None:
                        mine = of_rank[r] = []
                    mine.append((t, stream, seq))
                    dirty.add(r)
                    if 2 * len(mine) > 3 * keep_calls:
                        self._calls_of(r)
        merge_calls(self.by_call, calls, min(self.KEEP_SEQS, keep_calls))

    def forget(self, stream, done):
        """The walks of ``stream``'s calls up to #done dropped: joined, they are read no more."""
        mine = self.walks.get(stream)
        if mine:
            for seq in [q for q in mine if q <= done]:
                del mine[seq]

    def keep(self):
        """How many calls a rank keeps, and a stream's seqs at most (KEEP_CALLS, KEEP_SEQS): within BUDGET."""
        return max(2 * self.WALK, min(self.KEEP_CALLS, self.BUDGET // max(1, len(self.of_rank))))

    def _calls_of(self, rank):
        """Rank ``rank``'s kept calls, sorted by start: [(start, stream, seq)], its last KEEP_CALLS."""
        mine = self.of_rank.get(rank)
        if mine is None:
            return ()
        if rank in self.dirty:
            self.dirty.discard(rank)
            mine.sort()
            out = [x for i, x in enumerate(mine) if i == 0 or x != mine[i - 1]]
            mine[:] = out[-self.keep():]
        return mine

    def _ended(self, prev, members, shift, error):
        """(earliest, latest) call ``prev`` = (start, stream, seq) can have ended, in the join's clock: its
        last member's start, give or take the error of each member's clock (``error(rank)``), or (None, None)
        where a member's start is not known; and whether its members leave together."""
        _, stream, seq = prev
        got = self.ends.get((stream, seq))
        if got is not None:
            return got
        starts = self.by_call.get(stream, {}).get(seq) or {}
        if _streams.is_p2p(stream):
            ends = _streams.p2p_ends(stream)
            ranks = list(ends) if ends is not None and ends[0] is not None else None
        else:
            ranks = members.get(stream)
        lo = hi = None
        if ranks and all(r in starts for r in ranks):
            ends = [(shift(r, starts[r]), error(r)) for r in ranks]
            if not any(t is None for t, _ in ends):
                lo, hi = max(t - e for t, e in ends), max(t + e for t, e in ends)
        got = lo, hi, seq not in self.rooted.get(stream, ())
        if lo is not None:
            self.ends[(stream, seq)] = got
        elif stream in self.seen_to and ranks:  # the other nodes' starts come by their relays, a round or two
            top = self.seen_to[stream]  # later, but for a call not in their sample (past it already)
            if any(top.get(r, 0) < seq for r in ranks if r not in starts):
                return DEFER, None, got[2]
        return got

    def _between(self, rank, stream, seq, members, shift, error):
        """What rank ``rank`` went through from the group's call before, (stream, seq - 1), to its start of
        (stream, seq): ((earliest, latest) it left that call, (least, most) it waited in the calls it issued in
        between), in the join's clock; FIRST where (stream, seq) is the stream's first call; None where not
        known (a call not kept, a start not in, a call it had not waited for when it issued the next: async);
        DEFER where its node's relay has not walked it yet (``walks``).  A call whose members leave together
        ended at its last member's start (give or take the clocks' errors) for each; one whose members do not
        (``rooted``) ended for it between its own start and that."""
        calls = self.by_call.get(stream, {})
        t, t0 = calls.get(seq, {}).get(rank), calls.get(seq - 1, {}).get(rank)
        if t is None:
            return None
        if t0 is None:
            return FIRST if seq == 1 else None
        err = error(rank)
        if self.complete(rank, stream, t0, t):
            got = self._walk(rank, stream, seq, t0, t, members, shift, error)
        else:  # another node's rank: the walk its relay made (relay_arrivals.NodeWalks), in the rank's clock
            got = self.walks.get(stream, {}).get(seq, {}).get(rank)
            if got is not None and got != DEFER:
                got = shift(rank, got[0]), None if got[1] is None else [got[1], got[2]]
        if got is None or got == DEFER:
            return got
        nxt, waited = got
        if waited is None or waited == DEFER or nxt is None:
            return waited if waited == DEFER else None
        lo, hi, together = self._ended((t0, stream, seq - 1), members, shift, error)
        at = shift(rank, t0)
        if lo == DEFER:
            return DEFER
        if lo is None or at is None or lo > nxt + END_SKEW_S:
            return None  # not known, or async: it may have waited for it at any time after
        return (lo if together else at - err, min(hi, nxt + err)), waited

    def _walk(self, rank, stream, seq, t0, t, members, shift, error):
        """(its next start after (stream, seq - 1), [least, most] it waited in the calls it issued from then
        to (stream, seq), which started at ``t0`` and ``t``, or None where not known, DEFER where not yet), or
        None where the calls are not kept."""
        mine, err = self._calls_of(rank), error(rank)
        i0, i = bisect.bisect_left(mine, (t0, stream, seq - 1)), bisect.bisect_left(mine, (t, stream, seq))
        if (i >= len(mine) or mine[i][1:] != (stream, seq) or i0 >= i or mine[i0][1:] != (stream, seq - 1)
                or i - i0 > self.WALK):
            return None
        first = shift(rank, mine[i0 + 1][0])
        waited = [0.0, 0.0]
        for k in range(i0 + 1, i):
            lo, hi, together = self._ended(mine[k], members, shift, error)
            at, nxt = shift(rank, mine[k][0]), shift(rank, mine[k + 1][0])
            if lo == DEFER:
                return first, DEFER
            if lo is None or at is None or nxt is None or lo > nxt + END_SKEW_S:
                return first, None  # not known, or async: it may have waited for it at any time after
            waited[1] += max(0.0, min(hi, nxt + err) - (at - err))
            if together:
                waited[0] += max(0.0, lo - (at + err))
        return first, waited

    def walk(self, rank, stream, seq, members):
        """(start of its call after (stream, seq - 1), least, most it waited in the calls it issued from then to
        (stream, seq)), on its own clock (least and most None where not known), or None where not known at
        all: what a node's relay sends with its rank's start of a call on a group across nodes
        (relay_arrivals.NodeWalks), for the collector, which knows when the group's call before ended but not
        the node's own calls in between, to read the rank's lateness (``_between``), and, by the start after
        it, how far the node's clock is from its own (arrivals.clock_offsets).  Only over the span its
        documents cover (``complete``)."""
        calls = self.by_call.get(stream, {})
        t, t0 = calls.get(seq, {}).get(rank), calls.get(seq - 1, {}).get(rank)
        if t is None or t0 is None or not self.complete(rank, stream, t0, t):
            return None
        got = self._walk(rank, stream, seq, t0, t, members, _same_clock, _no_error)
        if got is None:
            return None
        return (got[0], None, None) if got[1] is None or got[1] == DEFER else (got[0], got[1][0], got[1][1])

    def next_start(self, rank, stream, seq, t):
        """The start of rank ``rank``'s call after (stream, seq), which started at ``t``, any stream's, on its
        clock, where its timeline holds it: a synchronous call ended before it (arrivals.clock_offsets), whatever
        calls of the rank's may be missing in between."""
        mine = self._calls_of(rank)
        i = bisect.bisect_left(mine, (t, stream, seq))
        if i + 1 >= len(mine) or mine[i][1:] != (stream, seq):
            return None
        return mine[i + 1][0]

    def complete(self, rank, stream, since, until):
        """Whether rank ``rank``'s timeline holds every call it issued from ``since`` to ``until`` (its clock):
        its whole documents cover that span, or it has no stream but ``stream`` (a rank of another node's
        sample)."""
        c = self.covered.get(rank)
        if c is not None and (c[0] is None or c[0] <= since) and (c[1] is None or until <= c[1]):
            return True
        return self.alone.get(rank) == stream

    def own(self, stream, members, shift, error=lambda r: 0.0):
        """own(seq, starts, last) for last_arrivals: whether the last arriver's lateness at call (stream, seq)
        is its own.  From the group's call before, which the last and the first arriver both left (at its
        end, where its members leave together), the lag is how much later the last one left it, plus how much
        longer it waited in the calls it issued since (held by other ranks: inherited), plus how much longer
        it computed (its own): True where what it inherited is half the lag at most, False where it is more
        for certain, None where the bounds cannot tell (a call whose members do not leave together, a call not
        waited for at once, a start not in).  The stream's first call: True (as before)."""
        def own(seq, starts, last):
            first = min(starts, key=lambda r: (starts[r], r))
            a = self._between(last, stream, seq, members, shift, error)
            b = self._between(first, stream, seq, members, shift, error)
            if a is FIRST or b is FIRST:
                return True
            if a == DEFER or b == DEFER:
                return DEFER
            if a is None or b is None:
                return None
            half = 0.5 * (starts[last] - starts[first])
            if (a[0][1] - b[0][0]) + (a[1][1] - b[1][0]) <= half:
                return True
            if (a[0][0] - b[0][1]) + (a[1][0] - b[1][1]) > half:
                return False
            return None
        return own
