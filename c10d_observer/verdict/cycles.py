"""Stuck calls that wait on each other (an ordering deadlock across groups): who broke the order, from the ranks'
histories (ordering.py, shifts.py, analogs.py, left_out.py)."""
import collections

from .. import analogs as _analogs
from .. import left_out as _left_out
from .. import ordering as _ordering
from .. import shifts as _shifts
from .. import streams as _streams
from ..levels import Where
from ..text import describe
from .fields import Draft
from .types import Ordering, Whereabouts


def _reaches(hangs, a, b):
    """Whether hang ``b`` is reached from hang ``a`` along caused_by (in one step or more)."""
    seen, todo = set(), list(hangs[a].caused_by)
    while todo:
        k = todo.pop()
        if k == b:
            return True
        if k not in seen:
            seen.add(k)
            todo.extend(hangs[k].caused_by)
    return False


def _many_like(by_rank, like, cyc):
    """``like``, and where a stream has none by it, the groups like it by fewer shared calls (the first steps:
    MIN_SHARED_EARLY) where they are MIN_GROUPS or more, each with a step of the stream's program on record
    (analogs.alike_in_a_step): groups that agree on every call they show; and the p2p streams of ``cyc`` likewise, three
    or more (analogs.like_p2p: the other pairs of an exchange).  MIN_GROUPS_EARLY (three) until 2026-12-05: the fuzzer's
    seed 7000451, a mesh of dp pairs whose two like pairs, three calls each, went past the world's all_gather that the
    stuck pair's rank 0 skipped at step 2; with two, seeds 7 (exact, NCCL), stages 95 and 264 (NCCL): 0 wrong, 26
    undecided now exact.  A p2p call's other links: three still (two named the rank at a link's first step, where the
    twin of an op more on it leaves the same documents: recorder seed 272095939)."""
    out = dict(like)
    colls = [c[0] for c in cyc if not _streams.is_p2p(c[0])]
    for s, seq in {c[0]: c[1] for c in cyc}.items():
        p2p = _streams.is_p2p(s)
        if out.get(s) and not p2p:
            # groups like it speak for its program only where a step of it is on record (analogs.alike_in_a_step)
            out[s] = [o for o in out[s] if _analogs.alike_in_a_step(by_rank, s, o, seq)]
            continue
        found = _analogs.like_p2p(by_rank, s) if p2p else []
        if len(found) < _analogs.MIN_GROUPS:
            found = _analogs.like_p2p(by_rank, s, min_shared=_analogs.MIN_SHARED_EARLY) if p2p else _early_like(
                by_rank, s, seq)
            # (two groups where a step of the stream is on record; a p2p stream's links need three: at a link's
            # first step two links alike may still run its ops in another order, the fuzzer's recorder seed
            # 272095939)
            found = found if len(found) >= (_analogs.MIN_GROUPS_EARLY if p2p else _analogs.MIN_GROUPS) else []
        if p2p:
            # a way back, where its pairs' ways forth went past (a pipeline's activations forth at a step's start,
            # gradients back at its end), says nothing of the place of the stuck stream's call: the ways alike only
            found = [o for o in found if _analogs.same_way(by_rank, s, o) and _same_places(by_rank, s, o, colls)]
            if found and not _one_density(by_rank, s, found, colls):
                found = []
        out[s] = found
    return out


def _way_back_like(by_rank, cyc):
    """{p2p stream of ``cyc``, shown both ways of its sizes (analogs.both_ways): the p2p streams like it by the calls
    it shows before its stuck one (as few as MIN_SHARED_EARLY, one at its first call), of its way
    (analogs.same_way)}: ``ordering.way_back_culprit``'s.  Not a link whose way back carries other sizes: a ring's,
    whose way back is another ring's, of another number of calls a step (the fuzzer's ring seed 505002445: link
    3 -> 4 carried two rings' calls a step and 4 -> 3 one, and at their #2 the links like them spoke of two steps)."""
    out = {}
    for s, seq in {c[0]: c[1] for c in cyc}.items():
        if _streams.is_p2p(s) and _analogs.both_ways(by_rank, s):
            found = _analogs.like_p2p(by_rank, s, min_shared=min(_analogs.MIN_SHARED_EARLY, seq))
            out[s] = [o for o in found if _analogs.same_way(by_rank, s, o)]
    return out


def _early_dissent(by_rank, cyc):
    """{stream: [streams]}: for each collective stream of ``cyc``, the groups like it by as few shared calls as its
    first steps show (MIN_SHARED_EARLY, fewer at its first calls), with a step of its program on record
    (analogs.alike_in_a_step): ``ordering.majority_culprit``'s ``dissent``, heard only against a culprit."""
    return {s: _early_like(by_rank, s, seq) for s, seq in {c[0]: c[1] for c in cyc}.items() if not _streams.is_p2p(s)}


def _early_like(by_rank, stream, seq):
    """The groups like collective ``stream`` by as few shared calls as its first steps show (MIN_SHARED_EARLY; at
    its first calls, as many as it shows before #seq), each with a step of its program on record (groups that agree
    at its first calls run its program only where a step shows it: analogs.alike_in_a_step)."""
    shared = _analogs.MIN_SHARED_EARLY if seq > _analogs.MIN_SHARED_EARLY else seq - 1
    return [o for o in _analogs.like(by_rank, stream, min_shared=shared)
            if _analogs.alike_in_a_step(by_rank, stream, o, seq)]


def _stepped_or_many(by_rank, stream, seq):
    """The groups like ``stream`` (analogs.like) that speak for its order at #seq: MIN_GROUPS of them or more, else
    the one with a step of its program on record (analogs.alike_in_a_step).  One group like it by its first calls
    alone may run another program: the fuzzer's stages seed 283008131 (NCCL model), a pair of five calls a step
    beside one pair of four, like it by its calls #1-#4, whose rank 4 left #4 out at step 0 and issued the world's
    call after #4 where the other pair did: its partner, waiting in #5, was named until 2026-12-06."""
    likes = _analogs.like(by_rank, stream)
    if len(likes) >= _analogs.MIN_GROUPS:
        return likes
    return [o for o in likes if _analogs.alike_in_a_step(by_rank, stream, o, seq)]


def _same_places(by_rank, stream, other, against):
    """Whether p2p stream ``other`` is issued where ``stream`` is among the calls of each collective stream of
    ``against``, at every seq both senders' histories show: two links of one slot, not of two slots that move
    tensors of one size (the fuzzer's seed 13008571: an exchange after the world's all_reduce each step was
    "like" a chain's link before it, and its ranks, waiting in the all_reduce without their next exchange,
    spoke for the chain's order)."""
    for a in against:
        mine, theirs = _places_on(by_rank, stream, a), _places_on(by_rank, other, a)
        if any(theirs[q] != n for q, n in mine.items() if q in theirs):
            return False
    return True


def _one_density(by_rank, stream, likes, against):
    """Whether the p2p streams ``likes`` carry as many calls between two calls of each stream of ``against``
    wherever two of them show it (their ends went past both: ``_counts_at``), and p2p ``stream`` and its ranks'
    other links no more there (fewer: a rank's op left out of its batch).  Links of one slot carry one call a step; a
    link that two rings share carries two, and where the stuck link, the links like it or its ranks' other links
    differ so, links like it by their sizes and places may be of another slot, and none speaks for its order:
    the fuzzer's ring seed 115009218 (rings [0..6] and [4..8] share 4->5 and 5->6; rank 5 left its second
    ring's send to 6 out at step 0, so its record of 5->6 shows one call a step, as the first ring's other
    links; those, in the world's all_reduce without their #3, spoke against rank 6, whose recv #3 is the first
    ring's of step 1), 127004120 and 128019995 (links two rings share, their #3 of the same step, spoke for a
    link of one ring).  Only the steps the ends closed count: a rank that ran ahead into its ring's next step
    (skipping the world's call) shows two calls in the step it has not closed, and is still named (107002107).
    Fewer calls than the links like it are a rank's op left out, where one end has not closed the step; where both
    ends did (each issued the collective after it), no op was left out, for its peer would wait in it: the stream
    runs fewer a step, another slot.  The fuzzer's seed 432050847 (recorder model): chains [0..5] and [0..4] each
    step, so links 0->1 to 3->4 carry two calls a step and 4->5 one; rank 5 left the world's barrier of step 1
    out and waited in its recv #2 from 4, and the other links, whose #2 came before the barrier, named rank 4."""
    for a in against:
        base = {}
        for other in likes:
            for p, n in _counts_at(by_rank, other, a, went_past=True).items():
                if base.setdefault(p, n) != n:
                    return False
        if any(n > base[p] for p, n in _counts_at(by_rank, stream, a, went_past=True).items() if p in base):
            return False
        if any(n != base[p] for p, n in _counts_at(by_rank, stream, a, went_past=True, both=True).items()
               if p in base):
            return False  # fewer where both its ends went past: no op left out (its peer would wait), a sparser slot
        for other in _links_of_its_ends(by_rank, stream):
            if any(n != base[p] for p, n in _counts_at(by_rank, other, a, went_past=True).items() if p in base):
                return False
    return True


def _links_of_its_ends(by_rank, stream):
    """The other p2p streams of the group of p2p ``stream`` that its ends' documents show."""
    ends, group = _streams.p2p_ends(stream) or (), str(stream).rpartition(_streams.P2P)[0]
    return sorted({g.stream for r in ends if r in by_rank for g in by_rank[r].groups
                   if g.kind == "p2p" and g.stream != stream and str(g.stream).rpartition(_streams.P2P)[0] == group})


def _counts_at(by_rank, stream, against, went_past=False, both=False):
    """{place: the most calls of p2p ``stream`` either end's history shows there} (``_analogs.places_on``'s
    places); ``went_past``: only places an end went past (it issued call #place + 1 of ``against``); ``both``: only
    places both ends went past."""
    out = collections.Counter()
    lasts = []
    for r in _streams.p2p_ends(stream) or ():
        if r not in by_rank:
            lasts.append(0)
            continue
        g = by_rank[r].position(against)
        last = g.last_started if g is not None and isinstance(g.last_started, int) else 0
        lasts.append(last)
        counts = collections.Counter(_analogs.places_on(by_rank, r, stream, against).values())
        out |= collections.Counter({p: n for p, n in counts.items() if not went_past or p < last})
    if both:
        out = collections.Counter({p: n for p, n in out.items() if all(p < last for last in lasts)})
    return out


def _places_on(by_rank, stream, against):
    """{seq: the last call of ``against`` that the sender of p2p ``stream`` issued before its call #seq there (0:
    none, where its history shows the first), where its history shows it}."""
    src = _streams.p2p_ends(stream)[0]
    if src not in by_rank:
        raise KeyError(src)  # a sender that sent no document: the cycle undecided (order_cycles), as ever
    return _analogs.places_on(by_rank, src, stream, against)


def _sizes_ahead(by_rank, cycle, group_name):
    """Where the ranks' Pythons ran ahead of their GPUs (NCCL), the rank that left a p2p stream's program: a rank
    that never arrived at a stuck p2p call of the cycle, its half of that call issued behind the call its GPU waits
    in (``ByRank.issued``), of another size than the waiting rank's half: the half that is not the size the links
    like it carried there (analogs.p2p_program_call), or that the stream's own period puts a place later
    (analogs.p2p_own_pattern), left calls out.  A program with one more call on the other group (a slot first run
    at that step), the other rank skipping it, would have this rank issue its half of the program's size.  The
    fuzzer's seed 160000952 (NCCL model): a chain 0 -> 1 of three sizes a step around the world's all_reduce; rank 1
    left its recv of 1 x float32 out at step 23 and issued the all_reduce, then a recv of 4 x float32 as #70, where
    rank 0 waits in its send #70 of 1 x float32.  An ordering_culprit's Found, or None."""
    issued = getattr(by_rank, "issued", None) or {}
    if not issued:
        return None
    written = dict(by_rank)
    written.update(issued)
    found = set()
    for stream, seq, waiting, missing in cycle:
        if not _streams.is_p2p(stream):
            continue
        sizes = dict((r, _size_at(written[r] if r in written else None, stream, seq))
                     for r in list(waiting) + list(missing))
        if len(sizes) != 2 or None in sizes.values() or len(set(sizes.values())) != 2 or not any(
                r in issued for r in missing):
            continue
        like = _analogs.p2p_program_call(written, stream, seq)
        if like is not None:
            odd, why = [r for r, z in sizes.items() if z != like[0]], "the links like it (%s) carried %s there" % (
                ", ".join(map(str, like[1][:4])), like[0])
        else:
            got = _analogs.p2p_own_pattern(written, stream, seq, sizes)
            if got is None:
                continue
            odd = sorted(got[3])
            why = "its calls #%d-#%d repeat every %d calls, which puts %s at #%d" % (
                got[2][0], got[2][1], got[1], got[0], seq)
        if len(odd) == 1:
            r = odd[0]
            other = [x for x in sizes if x != r][0]
            found.add((r, stream, seq, other, "rank %d's half of #%d on %s%s carries %s where rank %d's carries %s; "
                       "%s: rank %d left calls of it out" % (
                           r, seq, group_name(stream), ", issued behind the call its GPU waits in," if r in issued
                           and r in missing else "", sizes[r], other, sizes[other], why, r)))
    if len({f[0] for f in found}) != 1:
        return None
    r, stream, seq, other, text = sorted(found)[0]
    return _ordering.Found(r, (stream, seq), (stream, seq), [other], text)


def _size_at(doc, stream, seq):
    """The size of call #seq on ``stream`` as ``doc`` shows it, or None."""
    g = doc.position(stream) if doc is not None else None
    c = g.call(seq) if g is not None else None
    return None if c is None else c.size


def _written(by_rank):
    """{rank: {stream: the last seq its Python issued}} of the ranks whose documents as written (``ByRank.issued``)
    show calls issued behind the one their device waits in (NCCL)."""
    issued = getattr(by_rank, "issued", None) or {}
    return dict((r, dict((g.stream, g.last_started if isinstance(g.last_started, int) else 0) for g in doc.groups))
                for r, doc in issued.items())


def _written_calls(by_rank):
    """{rank: {(stream, seq): (op, size)}}: the collectives the ranks of ``_written`` issued behind the one their
    device waits in (their documents as written, past the last seq their device started)."""
    issued = getattr(by_rank, "issued", None) or {}
    out = {}
    for r, doc in issued.items():
        calls = out[r] = {}
        for g in doc.groups:
            d = by_rank[r].position(g.stream) if r in by_rank else None
            past = d.last_started if d is not None and isinstance(d.last_started, int) else 0
            for c in g.shown():
                if c.seq > past and not _streams.is_p2p(g.stream):
                    calls[(g.stream, c.seq)] = (c.op, c.size)
    return out


def in_cycle(hangs, start):
    return _reaches(hangs, start, start)


def order_cycles(hangs, cycles, by_rank, undecided):
    """A cycle of stuck calls (ranks wait for each other in different groups: an ordering deadlock): the
    rank whose order of calls across its groups broke the order the others and its own earlier steps
    followed (ordering.py) is its culprit; the call it skipped is the root.  Returns the culprits."""
    histories, last_started, last_completed, members, names = {}, {}, {}, {}, {}
    batched = set()  # (rank, p2p stream) whose call in flight is an op of a batch_isend_irecv
    for r, doc in by_rank.items():
        histories[r] = [_ordering.Call(s, c.seq, c.op, t, c.size) for t, s, c in _analogs.history_of(by_rank, r)]
        last_started[r] = {g.stream: g.last_started for g in doc.groups}
        last_completed[r] = {g.stream: g.last_completed for g in doc.groups}
        for g in doc.groups:
            members.setdefault(g.stream, g.members())
            if g.kind == "p2p" and g.in_flight is not None and g.in_flight.api == "batch_isend_irecv":
                batched.add((r, g.stream))
            names.setdefault(g.stream, "group %s" % g.group if g.kind != "p2p" else "group %s (p2p %s)" % (
                g.group, g.stream.rpartition(_streams.P2P)[2]))
    culprits = set()
    done = set()
    likes = {}

    def name(stream):
        return names.get(stream, "group %s" % stream)

    def like_of(stream):
        if stream not in likes:
            likes[stream] = _analogs.like(by_rank, stream) if not _streams.is_p2p(stream) else []
        return likes[stream]

    for i in cycles:
        if i in done:
            continue
        ring = sorted({i} | {j for j in cycles if _in_cycle_with(hangs, i, j)})
        done.update(ring)
        cyc = [(hangs[j].stream, hangs[j].seq, hangs[j].waiting_ranks, hangs[j].missing_ranks) for j in ring]
        found = None
        try:
            like = {s: _stepped_or_many(by_rank, s, seq) for s, seq in {c[0]: c[1] for c in cyc}.items()
                    if not _streams.is_p2p(s)}
            found = _ordering.ordering_culprit(histories, last_started, members, cyc,
                                               group_name=name, like=like,
                                               last_completed=last_completed, batched=batched,
                                               written=_written(by_rank), written_calls=_written_calls(by_rank))
            if not found:  # a skip older than the histories shows as a shift of one rank's places
                found = _shifts.shift_culprit(histories, last_started, last_completed, members, cyc, like_of,
                                              group_name=name)
            if not found:  # one rank against every other rank of both groups, at the stuck calls themselves
                found = _ordering.majority_culprit(members, cyc, group_name=name,
                                                   like=_many_like(by_rank, like, cyc), last_started=last_started,
                                                   histories=histories, dissent=_early_dissent(by_rank, cyc))
            if not found:  # a link and its way back, at a pipeline's first steps: the links like them
                found = _ordering.way_back_culprit(histories, last_started, cyc, _way_back_like(by_rank, cyc),
                                                   group_name=name)
            if not found:  # one rank's own period, broken once by the call it never arrived at
                found = _left_out.left_out_culprit(histories, last_started, last_completed, cyc, group_name=name)
            if not found:  # one rank's pair of p2p ops, one left out at its last step
                found = _left_out.batch_culprit(histories, last_started, last_completed, cyc, group_name=name,
                                                members=members, batched=batched)
            if not found:  # a p2p half of another size, issued behind the call its GPU waits in
                found = _sizes_ahead(by_rank, cyc, name)
        except Exception:  # the history is odd: undecided, never a crash of the verdict
            found = None
        if not found:
            for j in ring:
                undecided.append("%s is part of a cycle of stuck calls (ranks wait for each other in different "
                                 "groups: an ordering deadlock), and the ranks' recent calls do not show who broke "
                                 "the order" % describe(hangs[j]))
            continue
        culprits.add(found.rank)
        ordering = Ordering(rank=found.rank, issued=list(found.issued), skipped=list(found.skipped),
                            witnesses=found.witnesses or [], text=found.text)
        for j in ring:
            h = hangs[j]
            h.ordering = ordering
            if (h.stream, h.seq) == tuple(found.skipped):  # the call the culprit skipped: the root
                h.caused_by = []
                h.missing[str(found.rank)] = Draft(Whereabouts, state=Where.OUT_OF_ORDER, text=found.text,
                                                   issued=list(found.issued))
    return culprits


def _in_cycle_with(hangs, i, j):
    """Whether hang j is reachable from hang i along caused_by and back."""
    return i == j or (_reaches(hangs, i, j) and _reaches(hangs, j, i))
