"""The call a program puts at a place, as the groups like the stuck one issued it (issue 42).

A desync with no majority (two ranks of a pair group, one in ``all_reduce`` #28, the other in ``broadcast``
#28) names nobody by a count of votes.  But users' jobs make groups by the dozen that run one program: the
tensor-parallel groups of a mesh, the pairs of a pipeline, the data-parallel replicas.  Where other groups of
the same size issued, call for call, what the stuck group issued before the place (the same op and size at
every seq both show, at least ``MIN_SHARED`` of them), went past the place, and all issued one call there,
that call is the program's, and the ranks that issued another left the program.

It decides nothing where fewer than two such groups went past the place, where they disagree there (groups
with one history that part at this call: a pipeline's last stage, a call made on some groups only), or
where the stuck group's own ranks disagree before the place.

Where no such groups went past, the stuck group's own earlier steps may speak (``own_pattern``): where its
calls before the place repeat with one period (each call the one ``period`` seqs before it, over at least
``OWN_REPEATS`` periods), the period puts one call at the place; where some of its ranks issued that call and
every other rank issued a call the period puts 1 to ``period - 1`` places later, those others left calls out.
A call the period does not hold (a new size: a last batch, smaller) decides nothing: either side may be the
one that changed; nor does a period that a group of the same size, of other ranks, breaks with the same calls
in its own record (the program's period is longer than the few calls shown), nor one that the group's own record
shows broken after calls of it (``_broken_before``: a slot that runs every few steps).  Pure: no torch, no files, no
clock.
"""
MIN_SHARED = 4  # seqs two groups must both show, and agree on, before one speaks for the other
MIN_GROUPS = 2  # groups that must agree at the place
MIN_SHARED_EARLY, MIN_GROUPS_EARLY = 2, 3  # in the first steps, as few shared calls where this many groups agree
MIN_REPEATS = 2  # periods a group's own calls must show, unbroken up to the place, before they speak for it
MAX_PERIOD = 16  # calls in one period, at most
# periods a group's own calls must show where they alone decide (own_pattern): two periods of a burst of
# all_reduces and an all_gather could not tell a slot of one more all_reduce first run at the place (the fuzzer's
# async seed 71003166: the rank that kept the program was named)
OWN_REPEATS = 3


def _memo(make):
    """``make(by_rank)`` once per verdict: where ``by_rank`` is the analysis's (verdict.analysis.ByRank, which
    holds its tables in ``memo`` once its documents are final), the table it made first; else made again.  Held
    by the verdict's own documents, so gone with them (a module's cache of the last one kept a merging
    watchdog's every document alive: 16,384 ranks')."""
    def tables(by_rank):
        memo = getattr(by_rank, "memo", None)
        if memo is None:
            return make(by_rank)
        got = memo.get(make)
        if got is None:
            got = memo[make] = make(by_rank)
        return got
    tables.__doc__ = make.__doc__
    return tables


@_memo
def _streams(by_rank):
    """{stream: {"ranks", "calls": {seq: (op, size)}, "done", "clash": seqs whose members disagree}} from
    every rank's document: its collective streams' recent calls and the call in flight."""
    out = {}
    for doc in by_rank.values():
        for g in doc.groups:
            if g.kind != "collective" or not g.ranks:
                continue
            s = out.setdefault(g.stream, {"ranks": tuple(g.ranks), "calls": {}, "done": 0, "clash": set()})
            s["done"] = max(s["done"], g.last_completed or 0)
            for c in g.recent + ((g.in_flight,) if g.in_flight is not None else ()):
                if c.op in (None, "unknown"):
                    continue
                if s["calls"].setdefault(c.seq, (c.op, c.size)) != (c.op, c.size):
                    s["clash"].add(c.seq)
    return out


@_memo
def _p2p_streams(by_rank):
    """{stream: {"ranks": (src, dst), "group", "calls": {seq: size}, "clash", "done"}} of every p2p stream: a
    send and its recv are one call of it; ``done``, the last call both halves completed."""
    out = {}
    for doc in by_rank.values():
        for g in doc.groups:
            if g.kind != "p2p" or g.src is None or g.dst is None:
                continue
            s = out.setdefault(g.stream, {"ranks": (g.src, g.dst), "group": g.group, "calls": {}, "clash": set(),
                                          "done": g.last_completed or 0})
            s["done"] = min(s["done"], g.last_completed or 0)  # both halves completed it: gone past
            for c in g.recent + ((g.in_flight,) if g.in_flight is not None else ()):
                if s["calls"].setdefault(c.seq, c.size) != c.size:
                    s["clash"].add(c.seq)
    return out


def like_p2p(by_rank, stream, min_shared=MIN_SHARED):
    """The p2p streams like ``stream``: of its group, between two other ranks, and of the sizes its ranks
    sent at every seq both show (at least ``min_shared`` of them): the other pairs of an exchange."""
    return _like(_p2p_streams(by_rank), stream, min_shared, lambda h, me: h["group"] == me["group"])


def like(by_rank, stream, min_shared=MIN_SHARED):
    """The collective streams of groups like ``stream``: of its size, other ranks, and issuing what its ranks
    issued at every seq both show (at least ``min_shared`` of them)."""
    return _like(_streams(by_rank), stream, min_shared, lambda h, me: len(h["ranks"]) == len(me["ranks"]))


def _like(streams, stream, min_shared, fits):
    """The streams of ``streams`` that ``fits(theirs, mine)``, of other ranks, with ``stream``'s calls at every
    seq both show (at least ``min_shared``)."""
    me = streams.get(stream)
    if me is None:
        return []
    mine = {s: k for s, k in me["calls"].items() if s not in me["clash"]}
    out = []
    for other, h in streams.items():
        if other == stream or not fits(h, me) or set(h["ranks"]) & set(me["ranks"]):
            continue
        common = [s for s in mine if s in h["calls"] and s not in h["clash"]]
        if len(common) >= min_shared and all(h["calls"][s] == mine[s] for s in common):
            out.append(other)
    return sorted(out, key=_natural)


def program_call(by_rank, stream, seq, min_groups=MIN_GROUPS):
    """``((op, size), streams, (first, last))``: the call that groups like ``stream`` issued at #seq and went
    past (``streams``, at least ``min_groups``), and the seqs before it on which they agree with ``stream``'s
    ranks; None where nothing decides (module docstring)."""
    return _one_call(past_calls(by_rank, stream, seq), min_groups)


def p2p_program_call(by_rank, stream, seq):
    """``(size, streams, (first, last))``: the size that p2p streams like ``stream`` carried at #seq and went
    past, all one, at least ``MIN_GROUPS`` of them: of its group, between two other ranks, with its sizes at every
    seq both show before #seq (at least ``MIN_SHARED``; the other links of a pipeline's replicas, the other
    pairs of an exchange), and the seqs they share; None where nothing decides.  A send and its recv of two
    sizes at #seq: the half that is not the program's size left the program.  Nothing in a stream's first
    calls: links of a p2p job carry the sizes of their own slots, and with no calls to compare any link would
    speak for any other (the fuzzer's ring seed 93000762, a rule tried as ``early_call``'s: a ring of one slot
    named by the links of two others)."""
    return _one_call(_past(_p2p_streams(by_rank), stream, seq, MIN_SHARED,
                           lambda h, me: h["group"] == me["group"] and not set(h["ranks"]) & set(me["ranks"])),
                     MIN_GROUPS)


def _one_call(past, min_groups):
    """(the one call ``past``'s streams voted for, the streams, the seqs they shared), or None where they voted
    for two, or fewer than ``min_groups`` did."""
    votes, shared = past
    if len(votes) != 1:
        return None  # none, or groups like this one issued different calls there
    (call, who), = votes.items()
    if len(who) < min_groups:
        return None
    return call, sorted(who, key=_natural), (min(shared), max(shared))


def early_call(by_rank, stream, seq):
    """``((op, size), streams, (first, last) or None)``: in the first calls of ``stream`` (fewer than
    ``MIN_SHARED`` before #seq), the call that ``MIN_GROUPS_EARLY`` groups like it or more issued at #seq and
    went past, all the same, each agreeing with every call before the place that both show and that
    ``stream`` shows (``MIN_SHARED_EARLY`` of them where it shows that many; none at its first call); None
    where nothing decides.  Many groups of its size that went past its first call, all the same way: the
    pairs, the tensor-parallel groups of a job made by one loop over ``new_group``."""
    me = _streams(by_rank).get(stream)
    if me is None:
        return None
    before = [s for s in me["calls"] if s < seq and s not in me["clash"]]
    if len(before) >= MIN_SHARED or len(before) != seq - 1:
        return None  # not its first calls, or some of them not shown
    votes, shared = past_calls(by_rank, stream, seq, min_shared=min(MIN_SHARED_EARLY, len(before)))
    if len(votes) != 1:
        return None
    (call, who), = votes.items()
    if len(who) < MIN_GROUPS_EARLY:
        return None
    return call, sorted(who, key=_natural), (min(shared), max(shared)) if shared else None


def past_calls(by_rank, stream, seq, min_shared=MIN_SHARED):
    """``({(op, size): [streams]}, seqs)``: the calls that groups like ``stream`` issued at #seq and went past,
    and the seqs before it on which they agree with ``stream``'s ranks (at least ``min_shared``)."""
    return _past(_streams(by_rank), stream, seq, min_shared, lambda h, me: len(h["ranks"]) == len(me["ranks"]))


def _past(streams, stream, seq, min_shared, fits):
    """``past_calls`` over ``streams``, of the streams that ``fits(theirs, mine)``."""
    me = streams.get(stream)
    if me is None:
        return {}, []
    mine = {s: k for s, k in me["calls"].items() if s < seq and s not in me["clash"]}
    votes, shared = {}, []
    for other, h in streams.items():
        if other == stream or not fits(h, me):
            continue
        if h["done"] < seq or seq not in h["calls"] or seq in h["clash"]:
            continue  # it has not gone past the place (or its ranks disagree there)
        common = [s for s in mine if s in h["calls"] and s not in h["clash"]]
        if len(common) < min_shared or any(h["calls"][s] != mine[s] for s in common):
            continue  # another program, or too little to tell
        votes.setdefault(h["calls"][seq], []).append(other)
        shared += common
    return votes, shared


def period_call(by_rank, stream, seq, repeats=MIN_REPEATS, streams=None):
    """``(expected, cycle, (first, last))``: the call the period of ``stream``'s own calls up to #seq puts at
    #seq, the period's calls (``cycle[k]``: the one it puts at #seq + k) and the calls #first-#last that show
    it; None where its calls up to #seq show no period (module docstring).  ``streams``: the table to read
    (``_streams``, the collective streams, by default; ``_p2p_streams``, whose calls are sizes)."""
    me = (_streams(by_rank) if streams is None else streams).get(stream)
    if me is None or any(s < seq for s in me["clash"]):
        return None
    lo = seq
    while lo - 1 in me["calls"]:
        lo -= 1
    history = [me["calls"][s] for s in range(lo, seq)]  # the unbroken run of calls up to the place
    for period in range(2, min(MAX_PERIOD, len(history) // repeats) + 1):
        run = 0  # how far back the period holds, from the place
        while run + period < len(history) and history[-1 - run] == history[-1 - run - period]:
            run += 1
        if run + period >= repeats * period:
            cycle = history[-period:]
            return cycle[0], cycle, (seq - run - period, seq - 1)
    return None


def own_pattern(by_rank, stream, seq, calls):
    """``(expected, period, (first, last), skipped)``: the call the period of ``stream``'s own calls puts at
    #seq (period_call), and ``{rank: calls left out}`` for each rank of ``calls`` (``{rank: (op, size)}``,
    its call at #seq) that issued a call the period puts later; None where nothing decides (module
    docstring)."""
    return _own(_streams(by_rank), by_rank, stream, seq, calls,
                lambda h, me: len(h["ranks"]) == len(me["ranks"]))


def p2p_own_pattern(by_rank, stream, seq, sizes):
    """own_pattern for a p2p stream, whose calls are the sizes its sends and recvs carried (``sizes``: {rank:
    the size its half of #seq carries}): a link that carries two slots' tensors by turns (a ring of small and
    one of large tensors over one pair), whose sender left one out: its next send is the other slot's, a size
    the period puts one place later than the one its receiver posted for.  The period is refuted by another
    link of its group, between two other ranks, that carries the same sizes in another order."""
    return _own(_p2p_streams(by_rank), by_rank, stream, seq, sizes,
                lambda h, me: h["group"] == me["group"])


def _own(streams, by_rank, stream, seq, calls, fits):
    got = period_call(by_rank, stream, seq, repeats=OWN_REPEATS, streams=streams)
    if got is None:
        return None
    expected, cycle, shown = got
    if _period_refuted(streams, stream, cycle, fits) or _broken_before(streams[stream]["calls"], cycle, shown[0]):
        return None
    skipped = {}
    for r, call in calls.items():
        if call != expected:
            later = [k for k in range(1, len(cycle)) if cycle[k] == call]
            if not later:
                return None  # a call the period does not hold: either side may have changed
            skipped[r] = later[0]
    if not skipped or len(skipped) == len(calls):
        return None
    return expected, len(cycle), shown, skipped


def _broken_before(calls, cycle, first):
    """Whether the group's own calls shown before #first (where the period's run begins) held calls of the
    period before the call that breaks it at #first - 1: the program ran its period, then issued a call the period
    does not put there (a slot that runs every few steps), then the period again; that slot's next run may fall
    at the place (the fuzzer's seed 82006376, NCCL model: a pair's all_gather_object every five steps, the
    period of the four calls of the steps between read as the program's, and the rank that kept it named).
    Calls before the period's first (a prologue) break nothing."""
    kinds = set(cycle)
    s = first - 2
    while s in calls:
        if calls[s] in kinds:
            return True
        s -= 1
    return False


def _period_refuted(streams, stream, cycle, fits=None):
    """Whether a group of ``stream``'s size, of other ranks, whose calls in a run of its record are all calls of
    ``cycle`` (over ``MIN_REPEATS`` periods and one more call, or longer), issued them in an order that period
    does not hold: the program's period is another, which the stuck group's own few calls did not show (the
    fuzzer's seed 17002512: pairs issuing a, b each step and b once more every other step; a pair whose record
    held a, b, a, b alone read period 2, and named the rank that issued the second b rather than the one that
    skipped it; the other pairs' records, past the place, held a, b, a, b, b)."""
    me, kinds, p = streams[stream], set(cycle), len(cycle)
    fits = fits or (lambda h, me: len(h["ranks"]) == len(me["ranks"]))
    for other, h in streams.items():
        if other == stream or not fits(h, me) or set(h["ranks"]) & set(me["ranks"]):
            continue
        run = []
        for s in sorted(h["calls"]) + [None]:
            if s is not None and s not in h["clash"] and (not run or s == run[-1] + 1):
                run.append(s)
                continue
            calls = [h["calls"][q] for q in run]
            if (len(calls) > MIN_REPEATS * p and set(calls) <= kinds
                    and any(calls[i] != calls[i - p] for i in range(p, len(calls)))):
                return True
            run = [s] if s is not None and s not in h["clash"] else []
    return False


def _natural(stream):
    s = str(stream)
    return (0, int(s), s) if s.isdigit() else (1, 0, s)
