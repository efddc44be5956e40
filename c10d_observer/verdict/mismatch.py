"""A desync at one seq: the ranks in a stuck call issued different ops, sizes or roots; the odd ones out by a
majority, or by what the groups like this one issued there (analogs.py)."""
import collections
import re

from .. import analogs as _analogs
from .. import callword as _cw
from .. import documents as _documents
from .. import patterns as _patterns
from ..levels import MismatchKind
from ..streams import MAKING, is_p2p
from ..text import rank_list, ranks_in
from .fields import Draft
from .types import Mismatch


ROOT_TEXT = re.compile(r"(, |^)(root \d+)$")  # the root a size text ends with (callword.decode_sig)


def mismatch(ops, calls, kind=MismatchKind.OP):
    """Different calls at one seq (a draft Mismatch; ``unknown``: ranks whose root is not known, where the
    roots differ): the majority's is expected, the others are the odd ones out."""
    counts = collections.Counter(ops.values())
    (top, n), = counts.most_common(1)
    unique_top = list(counts.values()).count(n) == 1
    odd = sorted(r for r, op in ops.items() if op != top) if unique_top else []
    by_op = collections.OrderedDict()
    for r, op in sorted(ops.items(), key=lambda x: (x[1] == top, x[0])):
        by_op.setdefault(op, []).append(r)
    return Draft(Mismatch, ("unknown",), kind=kind, ops={str(r): op for r, op in sorted(ops.items())},
                 expected_op=top if unique_top else None, odd_ranks=odd,
                 text=", ".join("%s %s" % (rank_list(rs), op) for op, rs in by_op.items()))


def made_apart(by_rank, hangs):
    """The first call of the world's making stream at which the ranks' documents show different groups (each
    ``new_group`` carries the group it makes: callword.encode_members), completed or not: (a draft Mismatch of
    sizes, the seq, whether a stuck call is that call: its own desync says it) or None.  torch names a group by its
    place in every rank's sequence of ``new_group`` calls, so ranks that made different groups there hold groups
    wired across under one name, and every call on them may be between ranks that mean different groups.  The
    ranks whose records show the same makings are read once (a job's ranks show one sequence)."""
    shown = {}
    for r, doc in by_rank.items():
        pos = doc.position(MAKING) if doc is not None else None
        if pos is None:
            continue
        rec, c = pos.recent, pos.in_flight
        key = (rec.words() if type(rec) is _documents.Record else tuple((x.seq, x.op, x.size) for x in rec),
               None if c is None else (c.seq, c.op, c.size))
        shown.setdefault(key, (pos, []))[1].append(r)
    if len(shown) < 2:
        return None  # every rank's record shows the same makings
    at = collections.defaultdict(dict)  # seq: {rank: "new_group of members ..."}
    for pos, ranks in shown.values():
        for c in pos.shown():
            if c.size:
                word = "%s of %s" % (c.op, c.size)
                at[c.seq].update((r, word) for r in ranks)
    stuck = {h.seq for h in hangs if h.stream == MAKING}
    for seq in sorted(at):
        words = at[seq]
        if len(set(words.values())) > 1:
            m = mismatch(words, None, MismatchKind.SIZE)
            return m, seq, seq in stuck, _guarded(at, seq, m, _digested(by_rank, at))
    return None


def _digested(by_rank, at):
    """{digest: members} of the groups past 24 ranks whose members the documents tell (callword.members_digest):
    the groups they show (their streams' ranks, where a rank called on the group), and those whose makers at one
    place are its members (their digest is the group's); and the digests a group's members cannot have: one the
    whole world made at one place (its members would be the world's, whose digest it is not) maps to no rank."""
    seen = set()
    for doc in by_rank.values():
        for g in doc.groups if doc is not None else ():
            if g.stream != MAKING and g.ranks and len(g.ranks) > 1:
                seen.add(tuple(g.ranks))
    makers = collections.defaultdict(set)  # (seq, words) -> the ranks that made it there
    for s, words in at.items():
        for r, w in words.items():
            makers[(s, w)].add(r)
    seen.update(tuple(sorted(ranks)) for ranks in makers.values())
    known = {"%06x" % _cw.members_digest(ranks): set(ranks) for ranks in seen}
    sizes = set(doc.world_size for doc in by_rank.values() if doc is not None and doc.world_size)
    world = set(range(sizes.pop())) if len(sizes) == 1 else None
    for (_, w), ranks in makers.items():
        got = _DIGEST.search(w)
        if world is not None and ranks == world and got is not None and got.group(1) not in known:
            known[got.group(1)] = set()  # the whole world made it, and it is not the world's: some maker is not in it
    return known


# what made the groups apart, where the makings show it (made_apart's ``why``): every rank made only the groups it
# is in; the odd ones left out one group they are not in, their later makings one place ahead of the others'; the
# odd ones are not in the group the others made there, and no later making shows that they left it out
OWN_ONLY, LEFT_OUT, NOT_IN, UNSHOWN = "own_only", "left_out", "not_in", "unshown"
_MEMBERS = re.compile(r" of members ([0-9][0-9, -]*)$")
_DIGEST = re.compile(r" of members of digest ([0-9a-f]{6})$")


def _members(word, digested=None):
    """The ranks of a making's words ("new_group of members 0-2, 5"; past 24 ranks "... of digest 3fa2c1", whose
    ranks ``digested`` knows where the documents show that group), or None."""
    got = _MEMBERS.search(word or "")
    if got is None:
        got = _DIGEST.search(word or "")
        return digested[got.group(1)] if got is not None and digested and got.group(1) in digested else None
    return ranks_in(got.group(1))


def _guarded(at, seq, m, digested=None):
    """Why the makings differ at ``seq``, where they show it: (OWN_ONLY, None) where every rank's makings, shown
    from the world's first, are all of groups it is in (``if rank in ranks: new_group(ranks)`` on every rank: no
    rank is the odd one, whatever a majority says); (LEFT_OUT, the group's members) where each odd one is not in
    the majority's group there and its makings from there on are the majority's one place on (one place: one
    call a group on torch 2.x, two on 1.x, whose store-based barrier after the factory carries the members too);
    (NOT_IN, the members) where the odd ones are not in that group and their makings past it do not show that
    they left it out (the others wait in it, or in its barrier, and show none past it); (UNSHOWN, None) where no
    making shown is of a group its rank is not in, but not every one is known to be of a group its rank is in (a
    digest past 24 ranks of a group no document shows; the first makings not shown): the guard on every rank is
    not ruled out, and a majority could name the wrong ranks; else None."""
    ranks = set(r for words in at.values() for r in words)
    inside = [r in got if got is not None else None
              for got, r in ((_members(w, digested), r) for words in at.values() for r, w in words.items())]
    if False not in inside:  # no rank shown making a group it is not in
        if None not in inside and min(at) == 1 and all(r in at[1] for r in ranks):
            return OWN_ONLY, None
        return UNSHOWN, None
    if not m.odd_ranks or m.expected_op is None:
        return None
    group = _members(m.expected_op, digested)
    if not group or any(r in group for r in m.odd_ranks):  # empty: not the world's, whose it is nothing tells
        return None
    for step in (1, 2):
        pairs = [(at[s][r], collections.Counter(w for q, w in at[s + step].items() if q not in m.odd_ranks))
                 for r in m.odd_ranks for s in sorted(at) if s >= seq and s + step in at and r in at[s]]
        pairs = [(w, top) for w, top in pairs if top]
        if pairs and all(top.most_common(1)[0][0] == w for w, top in pairs):
            return LEFT_OUT, sorted(group)
    return NOT_IN, sorted(group)


def by_program(m, calls, by_rank, stream, seq):
    """A desync with no majority: the odd ones out are the ranks whose call is not the one the program puts at
    this seq, where some of its ranks issued that call: the one that groups like this one, with its history,
    issued there and went past (analogs.program_call: two groups, or one where the period of this group's own
    calls puts the same call there: analogs.period_call); where no group like it went past, the ranks that left
    out calls of that period (analogs.own_pattern); in the group's first calls, what many groups of its size
    issued there is said and decides nothing (``_early_lead``).  The evidence is said.  ``m``, changed in place,
    returned."""
    if m.odd_ranks or m.unknown or any(c.op in (None, "unknown") for c in calls.values()):
        return m
    if is_p2p(stream):
        return _by_like_links(m, calls, by_rank, stream, seq)
    return _unless_a_repeat(_by_program(m, calls, by_rank, stream, seq), calls, by_rank, stream, seq)


def _by_program(m, calls, by_rank, stream, seq):
    votes, _ = _analogs.past_calls(by_rank, stream, seq)
    if not votes:  # no group like this one went past the place: many groups at its first calls, or its period
        m = _by_own_pattern(m, calls, by_rank, stream, seq)
        if not m.odd_ranks:
            m = _by_neighbours(m, calls, by_rank, stream, seq)
        if not m.odd_ranks:
            _early_lead(m, by_rank, stream, seq)
        return m
    got, period = _analogs.program_call(by_rank, stream, seq), None
    if got is None:  # one group like it went past: where this group's own period puts the same call there
        got, period = _analogs.program_call(by_rank, stream, seq, min_groups=1), _analogs.period_call(
            by_rank, stream, seq)
        if got is None or period is None or period[0] != got[0]:
            return m
    (op, size), streams, (first, last) = got
    odd = {r: 0 for r, c in calls.items() if (c.op, c.size) != (op, size)}
    if _analogs.own_calls_possible(by_rank, stream, seq, [(calls[r].op, calls[r].size) for r in odd]):
        return m
    if not _name(m, calls, odd):
        return m
    m.evidence = "no majority in the group; group%s %s, whose calls #%d-#%d were this group's, issued %s at #%d" % (
        "s" if len(streams) > 1 else "", _few(streams), first, last, _call(op, size), seq)
    if period is not None:
        (_, cycle, (first, last)) = period
        m.evidence += ", which this group's own calls #%d-#%d, repeating every %d calls, put there too" % (
            first, last, len(cycle))
    new = sorted(r for r in m.odd_ranks if _analogs.new_kind(by_rank, [stream] + list(streams), seq,
                                                             (calls[r].op, calls[r].size), (op, size)))
    if new:  # however many groups voted: a slot of the group's own may be first run here
        mine = calls[new[0]]
        own = _analogs.own_groups(by_rank, stream, seq) if op in ("barrier", mine.op) else []
        m.evidence += ("; but %s issued %s, %s, of a kind no record showed%s: a call this group runs alone (first "
                       "run here), the other rank%s leaving it out, leaves the same documents, so nothing decides" % (
                           rank_list(new), _call(mine.op, mine.size),
                           "a call of a tensor where the barrier goes" if op == "barrier" else
                           "another size" if op == mine.op else "another op and size",
                           ", and group%s %s, of this group's size, %s" % (
                               "s" if len(own) > 1 else "", _few(own),
                               "run calls of their own" if len(own) > 1 else "runs calls of its own") if own else "",
                           "s" if len(calls) - len(new) > 1 else ""))
        m.odd_ranks, m.expected_op = [], None
    elif period is not None:
        ahead = sorted(r for r in m.odd_ranks if _analogs.issued_next(by_rank, streams, seq,
                                                                       (calls[r].op, calls[r].size)))
        if ahead:
            m.evidence += "; %s issued %s, the call group%s %s issued next, at #%d" % (
                rank_list(ahead), _call(calls[ahead[0]].op, calls[ahead[0]].size),
                "s" if len(streams) > 1 else "", _few(streams), seq + 1)
    return m


def _unless_a_repeat(m, calls, by_rank, stream, seq):
    """``m``, its odd one out withdrawn where that rank's call at this seq is the call it (and the other rank, the
    two alike up to here) issued just before it: the program may hold that call twice in a row at this step (a
    slot that runs every few steps, first run here or once in more steps than the record spans), and the other
    rank may have left out one of the two; that program, the other rank at fault, leaves the same documents, so
    neither the group's period nor groups like it decide.  The fuzzer's seeds 140000134 (a pair's barrier each
    step, and every five steps a second one, first run at step 4, where rank 3 left out the first: rank 2 was
    named by the pair's period) and 134047993, 138013550 (the same with all_reduces of one size), 138007219 (a
    stage's own all_reduce after the one every pair runs: named by the other pairs)."""
    if len(m.odd_ranks) != 1 or len(m.ops) != 2:
        return m
    odd = m.odd_ranks[0]
    mine, before = calls[odd], _analogs.shown_call(by_rank, stream, seq - 1)
    if before is None or not _patterns.alike((mine.op, mine.size), before):
        return m
    other = [int(r) for r in m.ops if int(r) != odd][0]
    if _went_on_alone(by_rank, stream, seq, odd, other):
        return m
    m.evidence = ("%s; but rank %d's call at #%d is the group's call at #%d again (%s): a program with that call "
                  "twice in a row here (one that runs every few steps, first run here), rank %d leaving out one "
                  "of the two, leaves the same documents, so nothing decides" % (
                      m.evidence or "no majority in the group", odd, seq, seq - 1, _call(*before), other))
    m.odd_ranks, m.expected_op = [], None
    return m


def _by_like_links(m, calls, by_rank, stream, seq):
    """A send and its recv of two sizes: the half whose size is not the one that p2p streams like this one
    carried at this seq and went past (analogs.p2p_program_call) left the program; where none did, the half
    whose size the stream's own period puts later than the other's left calls out (analogs.p2p_own_pattern)."""
    got = _analogs.p2p_program_call(by_rank, stream, seq)
    if got is None:
        return _by_own_link(m, calls, by_rank, stream, seq)
    if not _name(m, calls, {r: 0 for r, c in calls.items() if c.size != got[0]}):
        return m
    size, streams, (first, last) = got
    m.evidence = "no majority in the pair; p2p streams %s, whose calls #%d-#%d were this stream's, carried %s at " \
        "#%d and went past it" % (_few(streams), first, last, size, seq)
    return m


def _by_own_link(m, calls, by_rank, stream, seq):
    got = _analogs.p2p_own_pattern(by_rank, stream, seq, {r: c.size for r, c in calls.items()})
    if got is None or not _name(m, calls, got[3]):
        return m
    size, period, (first, last), skipped = got
    m.evidence = "no majority in the pair; its calls #%d-#%d repeat every %d calls, which puts %s at #%d; %s" % (
        first, last, period, size, seq, "; ".join(
            "%s's half carried the size it puts at #%d (%d call%s left out)" % (
                rank_list([r]), seq + k, k, "" if k == 1 else "s") for r, k in sorted(skipped.items())))
    return m


def _few(streams):
    """The first four streams, and how many more."""
    return ", ".join(map(str, streams[:4])) + (" and %d more" % (len(streams) - 4) if len(streams) > 4 else "")


def _early_lead(m, by_rank, stream, seq):
    """Where many groups of its size went past its first calls one way (analogs.early_call, or early_lead where
    its record shows less than a step of their program), what they issued, said and not named on: a group of a
    pipeline's stage may run calls the others do not, at a step its record has not reached yet.  They named the
    other rank of the fuzzer's stages seed 131006330 (NCCL model; every source): dp pair 0-4 runs an all_gather
    every third step from step 2 that no other pair runs; rank 4 left its first one out, and the three other
    pairs, which had run the pair's two calls before it and a step of its program, issued the call rank 4 issued
    at #3, so rank 0 was named.  Its twin, rank 0 issuing its #3 of another size in a program without that call,
    leaves the same documents.  Withdrawn 2026-12-05: 79 exact of 20,000 at seed 7 (69 at steps 0-2; step 3+
    99.27 -> 99.15 %, steps 0-2 93.28 -> 92.61 % of the cases with no twin)."""
    got = _analogs.early_call(by_rank, stream, seq)
    if got is not None:
        (op, size), streams, shared = got
        m.evidence = ("%d groups of its size (%s), %s, issued %s at #%d and went past it, but a group may run a "
                      "call the others do not at a step its record has not reached (a pipeline's stage), so they "
                      "do not decide" % (len(streams), _few(streams), "whose calls #%d-#%d were this group's" % shared
                                         if shared else "at this group's first call", _call(op, size), seq))
        return
    got = _analogs.early_lead(by_rank, stream, seq)
    if got is not None:
        (op, size), streams = got
        m.evidence = ("%d groups of its size (%s) issued %s at #%d, but this group's record shows less than a "
                      "step of their program before it: groups of one size may run different calls (a "
                      "pipeline's stages), so they do not decide" % (len(streams), _few(streams), _call(op, size),
                                                                      seq))


def _went_on_alone(by_rank, stream, seq, odd, other):
    """Whether the repeat's twin is refuted by the calls the two ranks started on their other groups between their
    calls on ``stream`` (each read on its own clock): where the two kept one count of them between every two calls
    of ``stream`` their records show (at least ``LOCKSTEP`` such gaps: one program, the same calls a step), the
    twin's other rank, which runs the odd rank's program and left out one of the two alike calls, would have
    started, before its call at #seq, what the odd rank started between #seq - 1 and #seq (had it left out the
    second), or that and what the odd rank started between #seq - 2 and #seq - 1 before its #seq - 1 (had it left
    out the first).  Where it started fewer, the odd rank went on to calls of another group without its call here:
    a skip of its own, not the other's.  The fuzzer's seed 160002231 (recorder model): a tp pair of a mesh issued
    a barrier and an all_reduce each step; rank 12 left the barrier out, started its dp broadcast and then the
    all_reduce again, while rank 13 waits in the barrier, its dp broadcast of that step not started.

    And where both ranks' Pythons ran ahead of their GPUs (NCCL) to one call of another stream, started after
    their calls at #seq: the twin's odd rank, which issued the extra call, would have started one call on
    ``stream`` more than the other by then, the two of them the step's calls there; where it started fewer, it
    left one out (``_at_a_later_call``; the fuzzer's seed 160000086, NCCL model: a world of two and its pair,
    rank 0 left the pair's all_gather out and issued its all_reduce again, then the world's barrier, by which
    rank 1 had issued the pair's #104)."""
    issued = getattr(by_rank, "issued", None) or {}  # the documents with the calls issued behind the device's
    as_written = [issued[r] if r in issued else by_rank[r] for r in (odd, other)]
    if odd in issued and (_ahead_of_the_other(as_written[0], as_written[1], stream, seq, other)
                          or _more_between(as_written[0], as_written[1], stream, seq)):
        return True
    later = _at_a_later_call(as_written[0], as_written[1], stream, seq)
    if later is not None and later[0] < later[1]:
        return True
    if odd in issued and other in issued and _fewer_in_its_step(as_written[0], as_written[1], stream, seq):
        return True
    gaps = {r: _gaps(by_rank[r], stream, seq) for r in (odd, other)}
    mine, theirs = gaps[odd], gaps[other]
    if mine is None or theirs is None or seq not in mine or seq not in theirs:
        return False
    earlier = [k for k in mine if k < seq - 1 and k in theirs]
    if len(earlier) < LOCKSTEP or any(mine[k] != theirs[k] for k in earlier):
        return False
    if theirs[seq] >= mine[seq]:
        return False  # the other left out the second of the two
    return not (seq - 1 in mine and seq - 1 in theirs and theirs[seq - 1] >= mine[seq - 1] + mine[seq])


LOCKSTEP = 3


def _fewer_in_its_step(odd, other, stream, seq):
    """Whether, both ranks' Pythons having run ahead of their GPUs (NCCL) to a call of another group after their
    calls at #seq (each its own group: a mesh's two dp groups), the odd rank started fewer calls on ``stream``
    between that group's call before it and it than the other did, where each rank's earlier records kept one count
    of them between every two calls of its group (``LOCKSTEP`` such gaps or more, the same count for both) and the
    other rank's last gap holds that count.  In the repeat's twin the odd rank runs the program with the alike
    call twice and the other left one out: the odd rank's step holds as many calls there as the other's or more.
    The fuzzer's seed 490001299 (NCCL model): a pair of a 14-rank mesh runs an all_gather and an all_reduce a step
    and then each rank its dp all_reduce; rank 8 left step 7's all_gather out and enqueued its dp all_reduce #8
    right after the pair's all_reduce #15; rank 9 enqueued the pair's #15 and #16 before its dp #8."""
    got = [_last_step(doc, stream, seq) for doc in (odd, other)]
    if None in got or got[0][0] != got[1][0] or got[0][3] != got[1][3]:
        return False  # (the two groups of one size, their calls at #k-1 and #k alike: no call first run there)
    (_, mine, mine_before, _), (_, theirs, theirs_before, _) = got
    kept = set(mine_before) | set(theirs_before)  # the one count of every earlier step of both, or not one
    if len(mine_before) < LOCKSTEP or len(theirs_before) < LOCKSTEP or kept != {theirs}:
        return False
    return mine < theirs


def _last_step(doc, stream, seq):
    """(k, n, [n_j], size) of a rank's document as written: its first call on another group (not p2p) started after
    its #seq on ``stream``, that group's call #k, of the kind of its #k-1; n its calls on ``stream`` started between
    that group's #k-1 and #k; n_j the same between each two earlier calls of that group its record shows, where the
    record of ``stream`` reaches back before the earlier of the two; size the group's.  None where a start time or a
    call is not shown, or where #k is of another kind than #k-1 (a call first run there)."""
    starts = _starts(doc)
    if starts is None or (stream, seq) not in starts:
        return None
    at = starts[(stream, seq)]
    after = [(t, s, q) for (s, q), t in starts.items() if s != stream and not is_p2p(s) and t > at]
    if not after:
        return None
    _, group, k = min(after)
    mine = [t for (s, _), t in starts.items() if s == stream]
    first = min(mine)
    calls = dict((q, t) for (s, q), t in starts.items() if s == group)
    p = doc.position(group)
    last, before = (p.call(k), p.call(k - 1)) if p is not None else (None, None)
    if k - 1 not in calls or last is None or before is None or (last.op, last.size) != (before.op, before.size):
        return None
    counts = [sum(1 for t in mine if calls[j - 1] < t < calls[j]) for j in sorted(calls)
              if j - 1 in calls and j < k and calls[j - 1] > first]
    return k, sum(1 for t in mine if calls[k - 1] < t < calls[k]), counts, len(p.ranks or ())


def _ahead_of_the_other(written, theirs, stream, seq, other):
    """Whether the odd rank's Python issued, after its call #seq on ``stream`` and before its next call there (NCCL:
    ``written``, its document as written, its calls issued behind the one its device waits in), a collective on
    another group that rank ``other`` is in and had not issued (``theirs``: its document as written).  The twin's
    other rank runs the odd rank's program and left out one of the two alike calls: it issued that call, which
    comes before the program's next call on ``stream``, before its own #seq, so that twin's documents are not these.
    The fuzzer's seed 7000846 (NCCL model): a world of two and its pair; rank 0 left the world's second
    all_reduce of step 9 out, issued step 10's first (the group's call at #19 again), which its GPU waits in, and
    behind it the pair's broadcast #12 and the world's #21; rank 1 waits in the all_reduce rank 0 left out, the
    pair's #12 not issued."""
    starts = _starts(written)
    if starts is None or (stream, seq) not in starts:
        return False
    lo = starts[(stream, seq)]
    hi = starts[(stream, seq + 1)] if (stream, seq + 1) in starts else None
    between = collections.Counter()
    for (s, q), t in starts.items():
        if s != stream and not is_p2p(s) and t > lo and (hi is None or t < hi):  # (a p2p call's two halves
            # may come at two places of the two ranks' programs)
            between[s] = max(q, between[s])
    for s, k in between.items():
        p = written.position(s)
        if p is None or other not in (p.ranks or ()):
            continue
        t = theirs.position(s)
        if (t.last_started if t is not None and isinstance(t.last_started, int) else 0) < k:
            return True
    return False


def _more_between(written, theirs, stream, seq):
    """Whether the odd rank, whose Python issued its call #seq + 1 on ``stream`` too (NCCL: ``written``, its
    document as written), the call the other rank issued at #seq (``theirs``: its document), started more calls
    on its other groups between its #seq - 2 and #seq + 1 than the other rank did between its #seq - 2 and #seq.
    In the repeat's twin both run one program, the odd rank its two alike calls (#seq - 1, #seq) and the call
    after them, the other rank one of the two and then that call: the same calls of other groups between the call
    before the two and the call after them.  The fuzzer's seed 240006295 (NCCL model): a 2 x 3 mesh, each step a
    tp all_reduce of 1, a dp all_reduce, a tp all_reduce of 1024; rank 3 left the tp 1024 of step 41 out and
    issued step 42's tp 1 (#84, the group's #83 again), then its dp all_reduce and its tp 1024 (#85): two dp calls
    between #82 and #85, where rank 2 started one between #82 and its #84.  Only where the two kept one count of
    those calls between every two calls of ``stream`` before (``LOCKSTEP`` gaps or more), as ``_went_on_alone``."""
    mine, other = _gaps(written, stream, seq + 1), _gaps(theirs, stream, seq)
    if mine is None or other is None or any(k not in mine for k in (seq - 1, seq, seq + 1)) or any(
            k not in other for k in (seq - 1, seq)):
        return False
    earlier = [k for k in mine if k < seq - 1 and k in other]
    if len(earlier) < LOCKSTEP or any(mine[k] != other[k] for k in earlier):
        return False  # not one count of other calls a step: the two may run other calls between theirs
    after = [c for c in _recent(written, stream) if c.seq == seq + 1]
    at = [c for c in _recent(theirs, stream) if c.seq == seq]
    if not after or not at or (after[0].op, after[0].size) != (at[0].op, at[0].size):
        return False  # its next call is not the other rank's at #seq: the twin's call after the two is not shown
    return mine[seq - 1] + mine[seq] + mine[seq + 1] > other[seq - 1] + other[seq]


def _recent(doc, stream):
    """The calls of ``stream`` a document shows, its call in flight included."""
    g = doc.position(stream)
    return () if g is None else g.shown()


def _at_a_later_call(odd, other, stream, seq):
    """(the odd rank's, the other's) last seq on ``stream`` started before the last call of another stream both
    started after their calls #seq (each on its own clock); None where there is none, or a document lacks one."""
    mine, theirs = _starts(odd), _starts(other)
    if mine is None or theirs is None or (stream, seq) not in mine or (stream, seq) not in theirs:
        return None
    common = [k for k in mine if k[0] != stream and k in theirs and mine[k] > mine[(stream, seq)]
              and theirs[k] > theirs[(stream, seq)]]
    if not common:
        return None
    at = max(common, key=lambda k: (mine[k], k[1]))
    return tuple(max(q for (s, q), t in starts.items() if s == stream and t < starts[at]) for starts in (mine, theirs))


def _starts(doc):
    """{(stream, seq): started_at} of the calls a rank's document shows; None where one has no start time."""
    if doc is None:
        return None
    out = {}
    for g in doc.groups:
        for c in g.shown():
            if c.started_at is None:
                return None
            out[(g.stream, c.seq)] = c.started_at
    return out


def _gaps(doc, stream, seq):
    """{k: the calls the rank started on its other streams between its calls #k-1 and #k on ``stream``} for the
    k <= seq its record shows with both start times; None where a call of its record has no start time."""
    starts = _starts(doc)
    if starts is None:
        return None
    at = dict((q, t) for (s, q), t in starts.items() if s == stream)
    others = [t for (s, _), t in starts.items() if s != stream]
    return {k: sum(1 for t in others if at[k - 1] < t < at[k]) for k in at if k - 1 in at and k <= seq}


def _by_own_pattern(m, calls, by_rank, stream, seq):
    """The ranks that left out calls of the group's own period (analogs.own_pattern) named, with its evidence; not
    where such a rank's call is an object collective's sizes call (``_a_new_object_call``)."""
    got = _analogs.own_pattern(by_rank, stream, seq, {r: (c.op, c.size) for r, c in calls.items()})
    if got is None:
        return m
    (op, size), period, (first, last), skipped = got
    evidence = "no majority in the group; its calls #%d-#%d repeat every %d calls, which puts %s at #%d; %s" % (
        first, last, period, _call(op, size), seq, "; ".join(
            "%s issued the call it puts at #%d (%d left out)" % (rank_list([r]), seq + k, k)
            for r, k in sorted(skipped.items())))
    new = _a_new_object_call(calls, skipped)
    if new is not None:
        m.evidence = "%s; but %s" % (evidence, new)
    elif _name(m, calls, skipped):
        m.evidence = evidence
    return m


def _a_new_object_call(calls, skipped):
    """Why the period names nobody, or None: a rank the period reads as having left calls out (``skipped``) issued
    an object collective's sizes call (documents.object_sizes_call), which every such collective of that api, root
    and number of objects issues alike: a program with one more of them here (a slot that runs every few steps,
    first run here), the other ranks leaving it out and going on to the period's call, leaves the same documents.
    The fuzzer's ops seed 254013423: a world of two, two broadcast_object_lists and a barrier a step and a third
    list every three steps, first run at step 2, which rank 0 left out; rank 1's call, the third list's sizes
    (root 0), was the second list's, two calls later in the period, and rank 1 was named."""
    new = sorted(r for r in skipped if _documents.object_sizes_call(calls[r]))
    if not new:
        return None
    api = calls[new[0]].api
    return ("%s issued the sizes call of %s, as every %s of that root and number of objects does: a program with "
            "one more %s here (one that runs every few steps, first run here), the other ranks leaving it out, "
            "leaves the same documents, so nothing decides" % (rank_list(new), api, api, api))


def _by_neighbours(m, calls, by_rank, stream, seq):
    got = _analogs.neighbour_call(by_rank, stream, seq, {r: (c.op, c.size) for r, c in calls.items()})
    if got is None or not _name(m, calls, {r: 0 for r, c in calls.items() if (c.op, c.size) == got[1]}):
        return m
    keep, odd, before, (first, last), n = got
    m.evidence = ("no majority in the group; in its calls #%d-#%d, %s came right after %s %d times and %s never, "
                  "but right after the two of them: %s left %s out" % (
                      first, last, _call(*keep), _call(*before), n, _call(*odd), rank_list(m.odd_ranks),
                      _call(*keep)))
    return m


def _name(m, calls, odd):
    """``odd`` ({rank: ...}) are the odd ones out, where some rank of ``calls`` is not: True where named."""
    agree = sorted(r for r in calls if r not in odd)
    if not agree or not odd or str(agree[0]) not in m.ops:
        return False
    m.odd_ranks, m.expected_op = sorted(odd), m.ops[str(agree[0])]
    return True


def _call(op, size):
    return "%s%s" % (op, " of %s" % size if size else "")
