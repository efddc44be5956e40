"""Who broke the order of calls across groups: the culprit of an ordering deadlock, from the ranks' histories.

A cycle of stuck calls (rank 2 waits in group 0 for rank 3, which waits in group 1 for rank 2) says that
some rank issued its calls on two groups in an order the others did not, but not which.  The ranks run one
program, so for two streams A and B the place of each B call among the A calls ("B #b comes after A #n")
is the same on every rank, step after step; a rank whose calls leave that order is the one that broke it.
Pure: no torch, no files, no clock.
"""
from collections import namedtuple

from .analogs import MIN_GROUPS, MIN_GROUPS_EARLY, MIN_SHARED, issued_first
from .patterns import alike, as_the_pattern, b_as_the_pattern, multiples, repeats, signatures
from .places import consensus, expected_place, in_order, lower_bound, places_of
from .streams import P2P, is_p2p, p2p_ends

# one call of one rank; started_at: wall seconds or None; size: its size signature where known (or None)
Call = namedtuple("Call", "stream seq op started_at size")
Call.__new__.__defaults__ = (None,)

# an ordering deadlock's culprit: ``rank`` issued ``issued`` ((stream, seq)) without ``skipped`` ((stream, seq)),
# which the program puts before it; ``witnesses``: the other ranks that issued ``skipped`` at that place
# (empty where only its earlier steps show it); ``text``: all of it in words (ordering_culprit, shifts)
Found = namedtuple("Found", "rank issued skipped witnesses text")


def majority_culprit(members, cycle, group_name=None, like=None, last_started=None, histories=None, dissent=None):
    """Where the histories do not show who broke the order: the one rank that went the other way round at two
    stuck calls of the cycle, against every other rank of both groups (at least two), or None.

    For two stuck calls X and Y of the cycle (a p2p call's group: its two ranks), every rank of both groups is
    in one of them and never arrived at the other: those in X issued X first, those in Y issued Y first.  Where one rank
    alone issued Y first and two or more issued X first, that rank broke the order they kept (a majority, as
    a desync's odd one out is named): a barrier issued before its group's last call, say, where the other
    ranks of both groups issued that call.  Each pair of the cycle that decides must name the same rank.
    The ranks of groups like Y's (``like``: {stream: [streams]}, analogs.like and like_p2p: one program, other
    ranks; a p2p call's two ranks alone never decide without them) that
    wait in X and never issued their own group's call at Y's seq (``last_started``: {rank: {stream: seq}})
    issued X first too, and count with them; one of them that issued it and went on to X says the program
    may put Y first: that pair of stuck calls names nobody.  A rank of both groups that waits in Y and issued
    X (its ``last_started`` there is X's seq or later: a broadcast's tree let it through X, which ranks above
    it completed) issued X first too; so did the ranks of groups like X's that issued their own group's call
    at X's seq and never arrived at Y; one that waits in Y without it, or a rank of a group like
    Y's that issued its own call at Y's seq and never arrived at X, went Y's way: that pair names nobody
    (``_like_order``).  The ranks of groups like Y's count only where Y's call is of a kind its ranks' histories
    (``histories``, as ``ordering_culprit``'s) showed on Y before (``unseen_kind``: not a slot first run there,
    which Y's group may run alone, as a pipeline stage's: the fuzzer's seed 173000299).
    ``dissent``: {stream: [streams]}, groups like a stream by fewer shared calls (``cycles._early_dissent``); they never
    count for the one rank's fault, and one of their ranks that went Y's way names nobody too.  A group with a call
    of its own each step shares more calls with the stuck one than the groups that run its program do, at its first
    steps: the fuzzer's stages seed 430041265 (NCCL model), pair [0, 1] with a barrier of its own each step, the
    only group like pair [12, 13] by four calls, spoke for barrier #4 before the world's all_gather #4, and rank 13,
    which issued the all_gather, was named; the ranks of three pairs like it by their three calls had issued it
    after their #3, as rank 13 did (rank 12 left it out).
    Returns a Found; ``witnesses``: the ranks that issued X first.
    """
    name = group_name or (lambda stream: "group %s" % stream)
    calls = [(c[0], c[1], tuple(c[2]), tuple(c[3])) for c in cycle]
    found = set()
    for x in calls:
        for y in calls:
            if x[0] == y[0]:
                continue
            both = set(members.get(x[0]) or ()) & set(members.get(y[0]) or ())
            first_x = (both & set(x[2]) & set(y[3])) | _went_past(both & set(y[2]), x, last_started)
            first_y = both & set(y[2]) & set(x[3])
            in_like_x, y_by_x = _like_order(x, y, members, like, last_started, x_side=True,
                                            histories=histories)  # groups like X's
            y_by_y, likes = _like_order(y, x, members, like, last_started)  # ranks of groups like Y's
            if likes and histories is not None and (any(unseen_kind(histories.get(r) or (), y[0], y[1])
                                                        for r in members.get(y[0]) or ()) or _one_group_for_a_new_kind(
                    histories, x[0], x[1], members.get(x[0]) or (), len(
                        {o for o in (like or {}).get(y[0]) or () if set(members.get(o) or ()) & likes}))):
                likes = set()  # Y's call a slot first run there: groups like Y's may not run it
            if y_by_x or y_by_y:
                continue  # a rank of a group like X's or Y's went Y's way: the program may put Y first
            if dissent and (_like_order(x, y, members, dissent, last_started, x_side=True, histories=histories)[1]
                            or _like_order(y, x, members, dissent, last_started)[0]):
                continue  # so did a rank of a group like X's or Y's by fewer calls: groups of one size part here
            if len(first_y) == 1 and len(first_x | likes | in_like_x) >= 2 and first_x | first_y == both:
                found.add((next(iter(first_y)), x, y, tuple(sorted(first_x)), tuple(sorted(likes)),
                           tuple(sorted(in_like_x - likes))))
    if len({f[0] for f in found}) != 1:
        return None
    r, x, y, witnesses, likes, likes_x = sorted(found, key=lambda f: (str(f[2][0]), f[2][1]))[0]
    if witnesses:
        text = "rank %d issued #%d on %s before #%d on %s, which %s issued first" % (
            r, y[1], name(y[0]), x[1], name(x[0]), "every other rank of both groups (%s)" % ", ".join(
                map(str, witnesses)) if len(witnesses) >= 2 or not (likes or likes_x) else
            "the other rank of both groups (%s)" % ", ".join(map(str, witnesses)))
        so = "; so did "
    else:  # it is the one rank of both groups (two p2p streams of its own, a group and a link): the groups like them
        # speak alone (the words were "which the other rank of both groups () issued first" until 2026-12-07)
        text = "rank %d issued #%d on %s before #%d on %s, the one rank of both groups; the ranks of groups like " \
               "them issued the other first: " % (r, y[1], name(y[0]), x[1], name(x[0]))
        so = ""
    if likes:
        text += "%srank%s %s, of groups like %s, before #%d on their own" % (
            so, "s" if len(likes) > 1 else "", _ranks(likes), name(y[0]), y[1])
        so = "; so did " if so else "; "
    if likes_x:
        text += "%srank%s %s, of groups like %s, with #%d on their own" % (
            so, "s" if len(likes_x) > 1 else "", _ranks(likes_x), name(x[0]), x[1])
    return Found(r, (y[0], y[1]), (x[0], x[1]), list(witnesses) + list(likes) + list(likes_x), text)


def way_back_culprit(histories, last_started, cycle, like, group_name=None):
    """Where a link and its way back wait on each other (rank a in its call #k on a -> b, rank b in its call #k on
    b -> a, each never having issued the other): the rank that issued its two calls of step k in the other order
    than the ranks of the links like them, or None.  A pipeline's stage receives activations and sends gradients
    back; where it left the recv out, it waits in its send back, and its peer in its send forth: at a pipeline's
    first steps, before the pair's own steps show an order, the other links of the pipeline's replicas do.

    ``like``: {stream: [p2p streams like it]}, of its way (``analogs.same_way``).  Each link like a -> b whose way
    back is like b -> a votes by each of its two ranks, on its own clock: for the part that rank plays on it (the
    sender or the receiver forth), whether it issued its #k forth before its #k back, at every seq up to k both
    show (one order over its steps, else no vote).  It decides only where at least ``MIN_GROUPS_EARLY`` such links
    voted for each part, every vote of a part the same, the pair's own earlier steps, where its ranks show them,
    the same too, and exactly one of the pair's two ranks went the other way than its part's votes.  The fuzzer's
    mesh3d seed 513000656: rank 25, the last stage, left its recv #3 from rank 17 out and waits in its send #3
    back; rank 17 waits in its send #3 forth; the ranks of 22 links like them went forth first, and 25 is named."""
    if len(cycle) != 2:
        return None
    (x, k, x_wait, x_miss), (y, ky, y_wait, y_miss) = cycle
    ends = p2p_ends(x)
    if ends is None or p2p_ends(y) != ends[::-1] or k != ky or len(x_wait) != 1 or len(y_wait) != 1:
        return None
    if set(x_miss) != set(y_wait) or set(y_miss) != set(x_wait) or set(x_wait) | set(y_wait) != set(ends):
        return None
    votes, counted = {}, {}
    backs = set((like or {}).get(y) or ())
    for other in (like or {}).get(x) or ():
        pair = p2p_ends(other)
        back = str(other).rpartition(P2P)[0] + P2P + "%s->%s" % (pair[1], pair[0])
        if back not in backs:
            continue
        got = {_part(other, r): _forth_first(histories.get(r) or (), (last_started or {}).get(r), other, back, k)
               for r in pair}
        if None in got.values():
            continue  # a link one of whose ranks issued neither #k votes not
        for part, first in got.items():
            votes.setdefault(part, set()).add(first)
            counted[part] = counted.get(part, 0) + 1
    if any(counted.get(part, 0) < MIN_GROUPS_EARLY or len(votes.get(part, ())) != 1 for part in ("src", "dst")):
        return None
    out = []
    for r in ends:
        forth = votes[_part(x, r)] == {True}
        own = _forth_first(histories.get(r) or (), None, x, y, k - 1, shown_only=True)
        if own is not None and own != forth:
            return None  # the pair's own steps went the other way: its program is not theirs
        if (r in x_wait) != forth:  # waits in the way back, never having gone forth, where the others went forth
            out.append(r)
    if len(out) != 1:
        return None
    r = out[0]
    name = group_name or (lambda stream: "group %s" % stream)
    issued, skipped = (y, x) if r in y_wait else (x, y)
    n = counted["src"]
    text = "rank %d issued #%d on %s before #%d on %s; the ranks of %d link%s like them issued the other first" % (
        r, k, name(issued), k, name(skipped), n, "s" if n > 1 else "")
    return Found(r, (issued, k), (skipped, k), [], text)


def _forth_first(history, started, forth, back, k, shown_only=False):
    """Whether a rank put its #q on ``forth`` before its #q on ``back`` (True), after it (False), or neither (None:
    two orders), at every q up to ``k`` its history shows both of, on its own clock; and at #k, unless
    ``shown_only``, one it issued where it never issued the other (``started``: {stream: its last seq}) is first
    too (None where it issued neither)."""
    at = {forth: {}, back: {}}
    for c in history:
        if c.stream in at and c.seq <= k and c.started_at is not None:
            at[c.stream][c.seq] = c.started_at
    order = issued_first(at[forth], at[back])
    if not shown_only and not (k in at[forth] and k in at[back]):
        if k in at[forth] and (started or {}).get(back, 0) < k:
            order.add(True)
        elif k in at[back] and (started or {}).get(forth, 0) < k:
            order.add(False)
        else:
            return None
    return order.pop() if len(order) == 1 else None


def _went_past(ranks, x, last_started):
    """The ``ranks`` that issued stuck call X (its stream's seq or later in ``last_started``)."""
    return {r for r in ranks if ((last_started or {}).get(r) or {}).get(x[0], 0) >= x[1]}


def _like_order(s_call, t_call, members, like, last_started, x_side=False, histories=None):
    """``(s_first, t_first)``: the ranks of groups like stuck call S's (not of S's group) whose own group's call
    at S's seq came before T (they issued it and wait in T, or issued it and never arrived at T), and those
    for which T came first (they wait in T without their own call at S's seq).  The other pairs of a job of
    pairs that wait in the world's barrier without their pair's #3 (the fuzzer's seed 7000122); the other
    links of a chain whose receivers wait in their own recv at the seq the head never sent (seed 7003238).
    ``x_side``: S is the call the one rank did not issue first; a rank of a group like it that waits in T
    having issued its own call at S's seq issued S first too (the other pairs of a job of pairs that issued
    their pair's #1, then the world's all_gather, where one rank issued the world's first: the fuzzer's
    ``--kind swap`` seed 13000302; a p2p stream's rank only where it plays the part the ranks of both calls play
    on S, ``parts``; the mesh3d seed 5000640, whose p2p streams were like S's by their sizes alone, from another
    slot, names nobody else: test_fuzz_corpus).  Nor does
    a link's rank that waits in T's stream's first call without its call at S's seq: no call of T's stream
    before it showed where the link's slot goes among them (``cycles._same_places`` had nothing to compare),
    and a link of another slot, of S's sizes, may come after T where S's comes before (the fuzzer's seed
    7092466: a chain's link before the first of a world all_reduce every nine steps, an exchange's after)."""
    s_first, t_first = set(), set()
    # on p2p streams, only the ranks that play the part the ranks of both calls play on S (a chain's links are
    # alike, but its ranks receive then send: the sender of a link like S is not a receiver of S; the fuzzer's
    # seed 17018885)
    parts = {_part(s_call[0], r) for r in set(members.get(s_call[0]) or ()) & set(members.get(t_call[0]) or ())}
    # p2p streams like S come issued where S is among the collectives (cycles._same_places): one slot's links
    p2p = is_p2p(s_call[0])
    for other in (like or {}).get(s_call[0]) or ():
        for r in set(members.get(other) or ()) - set(members.get(s_call[0]) or ()):
            if _part(other, r) not in parts:
                continue
            got = ((last_started or {}).get(r) or {}).get(other, 0)
            issued = got >= s_call[1]
            if r in t_call[2]:
                # for the one rank against many: a link's rank speaks for T first only from the call before S's
                # seq (a ring's link that carries one call a step, where the stuck one carries two, never
                # reaches the seq: the fuzzer's ring seeds 61010852, 61011177, 61013297)
                if not issued and (x_side or got == s_call[1] - 1 and t_call[1] > 1):
                    t_first.add(r)
                elif not issued and not p2p:
                    # a collective group's rank short of the call before S's seq says nothing of the order:
                    # its group may run fewer calls a step (the fuzzer's shape "stages", seed 95003939: one pair
                    # ran two all_reduces a step, the other one; the other pair's ranks, 12 calls in, waited in
                    # the world's barrier and spoke for it against #24).  analogs.same_steps does not cover it:
                    # without it the seeds 95005676, 95008602 and 95013854, named exactly, name nobody
                    pass
                else:  # it issued its own call at S's seq, then T (on X's side, a collective group like X's
                    # too: the other pairs of a job of pairs that issued their pair's call, then the world's)
                    s_first.add(r)
            elif r in t_call[3] and issued and not (x_side and _out_of_its_order(
                    (histories or {}).get(r), (last_started or {}).get(r), t_call[0], other)):
                s_first.add(r)
    return s_first, t_first


def _out_of_its_order(calls, started, t_stream, s_stream):
    """Whether a rank that issued its call on ``s_stream`` and never arrived at its next call on ``t_stream`` went
    past the place its own earlier steps put that call at (``calls``: its history; ``started``: {stream: its last
    seq}): it is then out of its own order, as a rank that skipped the T call is, and no witness that the program
    puts S first.  The fuzzer's stages seed 273015130 (NCCL model): rank 13 skipped its tp group's broadcast #6,
    which its steps put before its dp group's all_gather #5, issued #5 and #6, and was counted as a rank of a dp
    group like the stuck one's that issued #5 first; the rank waiting in the broadcast was named."""
    if not calls or not started:
        return False
    target = started.get(t_stream, 0) + 1
    places = {0: places_of(calls, t_stream, s_stream, started.get(s_stream, 0))}
    expected = expected_place(places, consensus(places, {0: target}), target, None)
    return expected is not None and started.get(s_stream, 0) > expected[0]


def _part(stream, rank):
    """"src" or "dst": the part ``rank`` plays on p2p ``stream`` ("<group>:p2p:<src>-><dst>"); None on a collective
    stream."""
    ends = p2p_ends(stream)
    if ends is None:
        return None
    return "src" if ends[0] == rank else "dst" if ends[1] == rank else None


def _ranks(ranks):
    ranks = sorted(ranks)
    return ", ".join(map(str, ranks)) if len(ranks) <= 8 else "%s and %d more" % (
        ", ".join(map(str, ranks[:8])), len(ranks) - 8)


def ordering_culprit(histories, last_started, members, cycle, group_name=None, like=None, last_completed=None,
                     batched=frozenset(), written=None, written_calls=None):
    """The rank that broke the order of calls across the groups of a cycle of stuck calls, or None.

    histories: {rank: [Call, ...]}, each rank's recent calls on all its streams (the last few per stream,
        in-flight ones included), in any order; started_at is read on the rank's own clock only, so clocks
        of different ranks may differ by any amount.
    last_started: {rank: {stream: the last sequence number the rank started on that stream}} (from 1).
    members: {stream: [ranks]}.  cycle: the stuck calls, [(stream, seq, waiting_ranks, missing_ranks)].
    group_name: stream -> words for the text; default "group <stream>".
    like: {stream: [streams of groups like it]} (analogs.like: other ranks, one program): the ranks of a like
        group that share the other stream of a pair speak for the places too (rule 1, never under test): in a
        job of pairs, the other pairs say where a pair's call goes among the world's calls.  Their last call
        counts where it completed (``last_completed``: {rank: {stream: seq}}): they are not under test.
    batched: {(rank, p2p stream)} whose call in flight is an op of a ``batch_isend_irecv`` (``_past_its_slot``).
    written: {rank: {stream: the last seq its Python issued}} of the ranks whose Python ran ahead of its GPU (NCCL:
        the calls issued behind the one its device waits in, which ``last_started`` leaves out; ``_ran_past``).
    written_calls: {rank: {(stream, seq): (op, size)}}: those calls themselves, collectives only
        (``_issued_another``).
    Where several ranks are out of order and exactly one of them by rule 1 (ranks went past the call at a
    place it skipped), that rank is named: a place the ranks went past outweighs a place a pattern gives.
    Else, where one rank is out of order by the places two ranks or more issued the call at, and every other
    rank out of order is so only by that one rank's place, the one is named (a skip makes its rank the one
    witness against the many: each side finds the other out of order).
    Returns a Found (rank, issued: (stream, seq), skipped: (stream, seq), witnesses: [ranks], text):
    the culprit issued `issued` without `skipped`, which the program puts before it; `witnesses` are the
    other ranks that issued `skipped` at that place (empty where only the earlier steps show it).
    The rule is ``_pair_findings``'s.
    """
    name = group_name or (lambda stream: "group %s" % stream)
    streams = sorted({c[0] for c in cycle})
    suspects = {}  # stream -> the ranks that never arrived at a stuck call on it
    for c in cycle:
        suspects.setdefault(c[0], set()).update(c[3])
    stuck = {(c[0], c[1]) for c in cycle}
    found = []  # (rank, a, b, place, target, witnesses, places on b)
    for a in streams:
        for b in streams:
            pair = _pair_findings(a, b, histories, last_started, members, like, last_completed, suspects,
                                  batched, written, written_calls)
            if pair is None:
                return None
            found += pair
    if len({f[0] for f in found}) != 1:
        if any(_outvoted(f, found) for f in found):
            return None  # the groups like the pair's disagree on its program at this step
        by_fact = {f[0] for f in found if f[7][0]}
        one = by_fact if len(by_fact) == 1 else _one_against_many(found)
        if len(one) != 1:
            return None
        found = [f for f in found if f[0] in one]
    if all(f[7][4] for f in found):
        return None  # found out of order by one witness's place alone, which a twin leaves (_one_more_a_step)
    found.sort(key=lambda f: ((f[2], f[4]) not in stuck, (f[1], f[3] + 1) not in stuck, f[1], f[2]))
    r, a, b, n, target, witnesses, own, (_, likes, _, like_what, _, _) = found[0]
    text = _text(histories, r, a, b, n, target, witnesses, own, name)
    if likes:
        text += "; rank%s %s, of groups like %s, issued it at that place" % (
            "s" if len(likes) > 1 else "", ", ".join(map(str, likes)), name(like_what))
    return Found(r, (a, n + 1), (b, target), witnesses, text)




def _outvoted(finding, found):
    """Whether ``finding`` stands on a fact of the groups like the pair's alone (their ranks went past the call; no
    rank of the pair's own did), and a finding of another rank stands on as many such groups or more: the groups
    like the pair's disagree, one of them runs a call the others do not (a pipeline stage's own), which the pair
    may run too or not, and nothing decides (the many name the other rank where the pair runs the one's call, its
    rank that kept the program having left it out).  The fuzzer's stages seed 457005480 (recorder model, found
    2026-12-07): pair [0, 1] runs a barrier of its own every seven steps, first at step 6, before the world's
    all_gather, which rank 8 left out; pair [0, 1], past its barrier #15, put pair [8, 9]'s #15 before the world's
    #7, and rank 9, which kept the program, was named by that fact, against five pairs that put the world's #7
    after their #14; stages seed 468040299 (exact model): pair [6, 7]'s own barrier every seven steps against pair
    [4, 5], one group each."""
    if not (finding[7][0] and finding[7][5]):
        return False
    return any(f[0] != finding[0] and f[7][2] >= max(1, finding[7][2]) for f in found)


def _pair_findings(a, b, histories, last_started, members, like, last_completed, suspects, batched=frozenset(),
                   written=None, written_calls=None):
    """The ranks out of order on the pair of streams (A, B) = (``a``, ``b``): [(rank, a, b, place, target,
    witnesses, places on b, (by a fact, like ranks, like groups, like what, by one witness's place alone, which
    a twin leaves: ``_one_more_a_step``, the fact the like groups' alone: ``_outvoted``))], or None where the pair
    leaves the cycle undecided.

    The rule.  For each ordered pair (A, B) of the cycle's streams and each rank r in both, the *place* of
    B #b on r is n, the last A call r started before it (0: none), read on r's clock; it is read only where
    r's history shows the A call that came next, after B #b (or r never went past A #n) and no A call
    started at the same instant.  The expected place P(b) comes from:
      1. the ranks that issued B #b and went on to a later B call, which agree (where such ranks put any
         B call at different places, the pair has no one order and decides nothing);
      2. else the pattern of the places just before b: the run of consecutive places known by rule 1,
         read with the smallest period p over which P(b) - P(b-p) is one constant, on a run of at least
         2p + 1 places (three where a step has one B call, five where it has two); a rank found out of
         order by this rule alone is named only where the A call it issued past that place is the call the
         pattern puts there (the same op and size as the A call one period before it, in its history): a
         call the history has not shown (a slot that runs every k steps, first met here, or older than the
         history) breaks the pattern, and the rank that followed the program is not to be named for it;
         nor does the pattern decide anything where B #b, as a rank issued it, is not the pattern's call
         either (its op or size differs from B #(b - p)'s): the pair is then undecided (the fuzzer,
         tests/fuzz: 7 wrong culprits in 50,000 cases before these checks, 1 after);
      3. else, with no pattern, the place at which the other ranks issued B #b, if they agree.
    A rank's last call on a stream is still under test: it never counts in rule 1, and where it contradicts
    rule 2 it is set aside (its rank is then the one that rule 2 finds out of order).  r is out of order
    where it started A #P(b)+1 though it has not issued B #b (b: its last B call + 1); checking the pairs
    both ways finds a rank that went ahead on either stream.  A culprit is named only where exactly one
    rank is out of order and every other check is decided (P(b) known, or r's last A call at most a place
    known for an earlier B call), else None.  So a program-order deadlock with no earlier steps (rank 0:
    A then B, rank 1: B then A) is undecided: each rank is out of order by the other's calls.  Why this
    order of rules: rule 1 lets an irregular program speak for itself; rule 2 before rule 3 lets the
    earlier steps outvote one rank's stuck call, so that a rank which issued B early is found as surely as
    one that skipped it; the period (not a constant stride) covers steps with several calls on B.  Where A or B
    is a p2p stream, the other links of its slot speak for the least place too (``_links``): where nothing else
    does, and against one rank's place (rule 3), which the one rank may have taken out of order.
    """
    found = []
    ranks = sorted(set(members.get(a, ())) & set(members.get(b, ())))
    if a == b or not ranks:
        return found
    if any(r not in histories or r not in last_started for r in ranks):
        return None  # a rank in both streams sent nothing: its order is unknown
    last, places, all_places, all_last, known = _pair_places(a, b, histories, last_started, members, like,
                                                             last_completed, suspects, ranks)
    for r in ranks:
        got, target = last_started[r].get(a, 0), last[r] + 1
        like_only = {k: p for k, p in all_places.items() if k not in places}
        first_run = _one_group_for_a_new_kind(histories, b, target, ranks, len({k[2:] for k in like_only}))
        if first_run:
            like_only = {}  # B #target of a kind B never showed, fewer groups like A's: _one_group_for_a_new_kind
        expected = expected_place(places, known, target, r, like_only)
        ks = _as_the_pattern_by(histories, b, target, known, expected)
        if not ks:
            if not expected[4]:
                return None  # B #target is not the pattern's call there: the pattern says nothing of it
            expected = expected_place(places, known, target, r, like_only, end=False)  # nor its end's pattern
            ks = _as_the_pattern_by(histories, b, target, known, expected)
            if not ks:
                return None
        if expected is None:
            many = _many(places, target, r)
            if many is not None and got <= many:
                continue  # in order by the place all but one of the others issued it at
            pending = _pending(last_started, a, r, target, ranks, last, all_last)
            if got > lower_bound(all_places, known, target, pending):
                links, more = _links(histories, last_started, a, b, r, target, places[r], ranks)
                if not (links or more) or got > lower_bound(_with(all_places, links), known, target,
                                                            pending + more):
                    return None  # it may be out of order; nothing says where B #target goes
        elif got > expected[0]:
            if expected[2] is not None and not _a_as_the_pattern(histories[r], a, expected[0] + 1, expected[2], ks):
                return None  # the call it issued there is not the pattern's: the pattern may be wrong
            weak = _one_more_a_step(histories, members, a, b, known, target, expected, r)  # a twin the groups
            # like A's cannot refute: the finding stands on one witness's place, which names nobody alone
            agree = [k for k, p in all_places.items() if k not in places and p.get(target) == expected[0]]
            likes = sorted({k[1] for k in agree})
            # a call of a kind A's record never showed before is a slot first run here, maybe A's alone (a pipeline
            # stage's): groups like A, which may not run it, do not refute the sparse twin
            kept = likes if not first_run and not unseen_kind(histories[r], a, expected[0] + 1) else []
            if _twin_of_a_sparse_call(a, b, target, known, kept, expected[1], members, None if first_run else like,
                                      last, histories, expected[0]) and not _past_its_slot(
                    histories[r], a, b, target, expected[0], batch=(expected[1][0], b) in batched) and not _ran_past(
                    (written or {}).get(r), a, b, target, expected[0]) and not _issued_another(
                    (written_calls or {}).get(r), histories, r, b, target):
                return None
            if target not in known and _others_went_past_too(histories, last_started, members, a, b, ranks,
                                                              places[r], target, expected[0]):
                continue  # in order as the ranks like it are: the place is refuted at this step, not the rank
            if target not in known and expected[3] is None and len(expected[1]) == 1:
                # one rank's place (rule 3) against the other links of a p2p slot, which put B #target later
                links, more = _links(histories, last_started, a, b, r, target, places[r], ranks)
                if (links or more) and got <= lower_bound(_with(all_places, links), known, target, _pending(
                        last_started, a, r, target, ranks, last, all_last) + more):
                    continue  # in order as the other links are: the one witness may be the culprit
            if target not in known and _issued_it_later(places, r, target, expected[0], expected[1]):
                return None  # ranks issued B #target past that place too: the pattern is refuted at this step
            found.append((r, a, b, expected[0], target, expected[1], places[r],
                          (target in known, [] if weak else likes, 0 if weak else len({k[2:] for k in agree}),
                           a if any(k[2] != a for k in agree) else b, weak,
                           not any(target in places[k] and target < last[k] for k in ranks))))
    return found


def _pending(last_started, a, r, target, ranks, last, all_last):
    """The last A call of each rank of the pair but r, and of the like groups' ranks, that has not issued B
    #target (``places.lower_bound``'s ``pending``)."""
    return [last_started[x].get(a, 0) for x in ranks if x != r and last[x] < target] + [
        last_started[k[1]].get(k[2], 0) for k, n in all_last.items()
        if k not in last and n < target and k[1] in last_started]


def _with(d, more):
    out = dict(d)
    out.update(more)
    return out


def _links(histories, last_started, a, b, r, target, own, ranks):
    """``({key: places}, [A counts])``: what the other links of a p2p slot say of B #target's least place
    (``places.lower_bound``), where the pair's own ranks leave it open.  A p2p stream's slot runs other links,
    each at the same place among the collectives (a chain's, an exchange's pairs; their ranks may be the pair's,
    in another part): on B p2p, the places among A of another stream of B's group, on a rank that shares A,
    equal to B's on rank r (``own``) at every seq both show, MIN_SHARED or more, count as B's (keys
    ("link", rank, stream)); on A p2p, a rank of another stream of A's group whose places of B among it equal
    r's among A likewise, and which has not issued B #target, started its last call there before B #target as
    the program has it (a count of ``pending``).  Two links of one size from two slots part somewhere in what
    the histories show; a link's rank that skipped a call is one count of several, as ``lower_bound`` reads them.
    The real program 376000094 on 2.15 (found 2026-12-07): a chain 3 -> 2 -> 1 -> 0 after the world's all_gather,
    a world broadcast every nine steps; rank 3 left its send of step 29 out; rank 0, waiting in its recv #30 with
    the world's #63 its last call, was "maybe out of order" on (world, 1 -> 0) and on (1 -> 0, world): the
    broadcast of step 27 broke the pattern of places, and no other rank of the pair had issued #30 (nor the
    world's #64).  Ranks 1 and 2 issued their links' #30 after the world's #63 as rank 0 did, and none the
    world's #64: rank 3 is named."""
    links, more = {}, []
    p2p = b if is_p2p(b) else a if is_p2p(a) else None
    if p2p is None or r not in histories:
        return links, more
    group, part = str(p2p).rpartition(P2P)[0], _part(p2p, r)
    sizes = {q: z for q, (_, z) in signatures(histories[r], p2p).items() if z is not None}
    for x in sorted(histories):
        if x not in last_started:
            continue
        for s in sorted({c.stream for c in histories[x] if c.stream != p2p and is_p2p(c.stream)}):
            if str(s).rpartition(P2P)[0] != group or _part(s, x) != part:
                continue  # another group's, or the link's other end (a chain's sender lags its receiver)
            if p2p == b:  # B's places among A
                theirs = places_of(histories[x], s, a, last_started[x].get(a, 0))
            else:  # B's places among the link's calls
                theirs = places_of(histories[x], b, s, last_started[x].get(s, 0))
            common = [q for q in own if q in theirs and q < target - 1]
            if len(common) < MIN_SHARED or any(theirs[q] != own[q] for q in common) or any(
                    sizes.get(q, z) != z for q, (_, z) in signatures(histories[x], s).items() if z is not None):
                continue  # too few seqs shown to tell, or another slot's link: other places or other sizes
            if p2p == b:
                links[("link", x, s)] = theirs
            elif last_started[x].get(b, 0) < target:
                more.append(last_started[x].get(s, 0))
    return links, more


def _as_the_pattern_by(histories, b, target, known, expected):
    """The multiples k of the pattern's period p (``patterns.multiples``) by which B #target is the pattern's
    call: k = 1 where it is the call p before it (``b_as_the_pattern``), k > 1 where the ranks' B calls repeat
    with period kp over the 2kp calls up to it (``patterns.repeats``: no call between breaks it, as a barrier every nine
    steps between two all_gathers kp apart would: the fuzzer's seed 7033940).  [] where by none; [1] where the
    pattern gave no place (nothing to check).  A period of one, where one rank at most issued B #target at the place
    (maybe the culprit, its count on A one short), only where B's calls repeat with it over the two calls up to it:
    the fuzzer's ring seed 526014674 (NCCL model), a world's broadcast, all_gather, all_reduce and all_gather one
    place apart, a period of one, put the all_gather #5 where rank 5, one recv short, issued it, and rank 4 was
    named."""
    if expected is None or expected[3] is None:
        return [1]
    period = expected[3]
    shown = [m for m in (signatures(calls, b) for calls in histories.values()) if target in m]
    out = [1] if b_as_the_pattern(histories, b, target, period) and (period > 1 or len(expected[1]) > 1 or all(
        repeats(m, target, period) for m in shown if target - 2 * period in m)) else []
    more = multiples(known, target, period, expected[4])[1:]
    if more:
        out += [k for k in more if all(repeats(m, target, k * period) for m in shown)]
    return out


def _a_as_the_pattern(calls, a, seq, stride, ks):
    """Whether the A call a rank issued past the pattern's place (#seq) is the pattern's call: the call one
    period (``stride`` A calls) before it (``patterns.as_the_pattern``), or, by a multiple k of it that B's check
    allowed (``ks``), its A calls repeating with period k * stride over twice that (``patterns.repeats``)."""
    if 1 in ks and as_the_pattern(calls, a, seq, stride):
        return True
    shown = signatures(calls, a)
    return any(repeats(shown, seq, k * stride) for k in ks if k > 1)


def _twin_of_a_sparse_call(a, b, target, known, likes, witnesses, members, like, last, histories=None, n=None):
    """Whether a rank found out of order by the pattern alone (rule 2: B #target not yet past on any rank) has
    one witness only, itself under test (B #target is its own last call), on a collective group A of two ranks
    that no group is like: then the program with a call on A that runs every few steps, first run at this
    place and as the one before it, which the witness left out, leaves the same documents (the rank named
    issued it and waits in it for the witness): nothing is said.  The fuzzer's seed 7059038: a subset [1, 8]
    broadcasts each step and, every seven steps, once more; rank 1 skipped that second broadcast at its first
    run (step 6) and waits in the world's all_gather, rank 8 in the broadcast; rank 8 was named, the pattern of
    one broadcast a step and rank 1's place for the all_gather against it.  A witness that went past the
    place (rule 1), two witnesses, or a group like A whose ranks keep the order, would each need a second
    fault in that twin; a p2p link's sends do not come every few steps as a collective's evals and
    checkpoints do."""
    ranks_a, ranks_b = set(members.get(a) or ()), set(members.get(b) or ())
    if not (target not in known and not likes and not is_p2p(a) and len(ranks_a & ranks_b) == 2
            and not (like or {}).get(a) and len(witnesses) == 1 and last[witnesses[0]] == target):
        return False
    return len(ranks_a) == 2 or any(_an_extra_call((histories or {}).get(x) or (), a, n)
                                    for x in sorted(ranks_a - ranks_b))


def _an_extra_call(calls, a, n):
    """Whether a rank of A (not of B) shows A #n as an extra call of the step of A #n + 1: the period of the counts
    of its calls of other groups between two A calls, over its earlier A calls (two periods or more shown, some
    count one or more), breaks between A #n - 1 and #n or between #n and #n + 1.  The sparse twin (a call on A
    first run there, which the witness left out) then stands on a group A of more ranks than the two of B: the
    fuzzer's stages seed 206006319, a world of five whose all_reduce every six steps was first run at step 5 as
    the step's second all_reduce, its pair's rank 1 leaving the first out; rank 0, of the pair, was named by the
    pair's barrier after each all_reduce before.  Where it holds, or nothing shows it, the rule speaks as ever."""
    at = dict((c.seq, c.started_at) for c in calls if c.stream == a and c.started_at is not None)
    others = sorted(c.started_at for c in calls if c.stream != a and c.started_at is not None)
    seqs = [k for k in range(min(at or [0]) + 1, n + 2) if k in at and k - 1 in at]
    if not seqs or seqs[-1] != n + 1 or seqs != list(range(seqs[0], n + 2)):
        return False
    gap = dict((k, sum(1 for t in others if at[k - 1] < t < at[k])) for k in seqs)
    before = [k for k in seqs if k < n]
    for p in range(1, len(before) // 2 + 1):
        run = [k for k in before[-2 * p:] if k - p in gap]
        if len(run) == 2 * p and all(gap[k] == gap[k - p] for k in run) and any(gap[k] for k in run):
            return gap[n] != gap[n - p] or gap[n + 1] != gap[n + 1 - p]
    return False


def _one_more_a_step(histories, members, a, b, known, target, expected, r):
    """Whether the place of B #target that finds rank ``r`` out of order is one witness's (rule 3, the groups like
    A's agreeing or not) where the pair's own record shows the place of one B call like #target (a prologue's call
    of another kind shows no step), and every A call the rank and the witness show is of one op and size, on a
    group A whose every rank is in B: the program in which A's ranks run one such call more than the groups like
    it after each such B call (a stage's own), which the witness left out, leaves the same documents (the rank
    named went on to the call the witness skipped), and the pair's one place cannot refute it.  The
    fuzzer's stages seed 404024054 (recorder model): pairs run three barriers a step around a world all_reduce,
    pair [0, 1] a fourth of its own after it; rank 1 left one out at step 1 and issued the world's #2 after its
    barrier #6, as ranks 2-5 did, and rank 0, waiting in barrier #7, was named.  With calls of several kinds, the
    same where the A call the rank issued past the place is not the one a B period (the witness's count of A calls
    from B #target - 1 to B #target) before it: not the next call of a rank that left B #target out, but the
    twin's (stages seed 410003610: an all_reduce of the pair's own last in its step, which the witness left out,
    where the pairs' step puts a broadcast).  Two known places of such B calls show the pair's own count a step; two
    witnesses, or calls of two kinds of which the rank's is the step's, would need a second fault in that twin."""
    if target in known or expected[3] is not None or len(expected[1]) != 1 or not set(members.get(a) or ()) <= set(
            members.get(b) or ()):
        return False  # (a rank of A outside B, which issued A's calls a step, would refute the twin)
    on_b = signatures(histories.get(expected[1][0]) or (), b)
    call = on_b.get(target)
    if call is None or sum(1 for s in known if s in on_b and alike(on_b[s], call)) != 1:
        return False  # two such places show the pair's count a step; none leaves a call before B's first, once
        # (the sparse twin, which the groups like A's refute: _twin_of_a_sparse_call)
    mine = signatures(histories.get(r) or (), a)
    n, before = expected[0], known.get(target - 1)
    if before is not None and n > before and n + 1 in mine and before + 1 in mine and not alike(
            mine[n + 1], mine[before + 1]):  # (before + 1: the A call one B period, n - before calls, before n + 1)
        return True  # the A call it issued past the place is not the one a B period before it: not the next call
        # of a rank that left B #target out, but the twin's (the fuzzer's stages seed 410003610)
    kinds = list(mine.values()) + list(signatures(histories.get(expected[1][0]) or (), a).values())
    return bool(kinds) and all(alike(k, kinds[0]) for k in kinds)


def _one_group_for_a_new_kind(histories, stream, seq, ranks, groups):
    """Whether the ranks of ``groups`` groups like a stuck call Y's, which speak for the order of Y and a call #seq on
    ``stream`` (X), are fewer than MIN_GROUPS, and X is of a kind its stream never showed before on any of ``ranks``
    (a slot first run there): where X falls among that group's calls says nothing of where it falls among Y's, as a
    stage's own call before it may put it later (``majority_culprit``; in ``_pair_findings`` the like groups' places
    of B #target).  The fuzzer's stages seed 392040924: a 2 x 2 mesh whose tp groups run two
    all_gathers a step, [0, 1] one of its own first, [2, 3] one of its own last, and a world all_reduce every three
    steps between them for [0, 1] and first for [2, 3]; rank 0 left its own all_gather out at step 0, so its first
    such all_reduce came after its tp #4, as ranks 2 and 3 issued theirs, and rank 1, waiting in tp #5, was named.
    Where many groups speak (six pairs, each issuing a world call of a new kind after its #10: the fuzzer's NCCL seed
    376009588), they still do: the bet that groups alike run one program (analogs.MIN_GROUPS)."""
    return groups < MIN_GROUPS and any(_first_of_its_kind(histories.get(r) or (), stream, seq) for r in ranks)


def _first_of_its_kind(calls, a, seq):
    """Whether the rank's call #seq on A is of an op and size none of its earlier A calls its history shows were
    (and some are shown): a slot first run there (or once in more steps than the history spans)."""
    _, call, before = _kinds_before(calls, a, seq)
    return call is not None and bool(before) and call not in before


def _kinds_before(calls, a, seq):
    """(``signatures`` of the rank's A calls, #seq's (op, size), [those of the calls before it])."""
    mine = signatures(calls, a)
    return mine, mine.get(seq), [k for s, k in mine.items() if s < seq]


def unseen_kind(calls, a, seq):
    """Whether the rank's call #seq on A is of an op and size its earlier A calls, as its history shows them,
    never were (and some were shown), or were only in the run of such calls right before it, after calls of other
    kinds (a slot first run at this step, twice).  The fuzzer's seed 173000299 (``--shape stages``): pair 0-1 runs an
    all_gather every eight steps that pair 2-3 never runs, first at step 7; rank 1 skipped the world's all_gather
    at step 6 and waits in that one, rank 0 in the world's; ranks 2 and 3, of the pair like 0-1 by every call
    so far, went to the world's call without a call of their own, and rank 1 was named; the program with the
    pair's call first run at step 6, which rank 0 skipped, leaves the same documents."""
    mine, call, before = _kinds_before(calls, a, seq)
    if call is None or not before:
        return False
    # or shown only in the run of it right before #seq, after calls of other kinds: a slot first run at this step,
    # as a stage's call twice (the fuzzer's stages seed 297015374, recorder model: pairs run an all_reduce every
    # nine steps, pair [6, 7] a second one of that op and size after it; rank 7 left the second out at step 8, and
    # the other pairs, which went to the world's call after the first, named rank 6)
    s = seq - 1
    while mine.get(s) == call:
        s -= 1
    earlier = [k for q, k in mine.items() if q <= s]
    return call not in earlier and bool(earlier)


def _others_went_past_too(histories, last_started, members, a, b, ranks, mine, target, n):
    """Whether a rank of A outside the pair went past A #n + 1, the call past the expected place, without call
    #target of a stream of its own whose calls #target - 1 and #target - 2 it put at the places the rank under test
    put B's (``mine``): a stream that runs where B runs, every step, left behind the same way.  Had the rank under
    test broken the order, that rank, which followed the program, would have issued it first; so the rank is in
    order as the ranks like it are (as ``_many`` clears a rank), and the step holds an A call more than the
    pattern or the witness says (a slot that runs every few steps, first run here, which the witness that issued
    B #target at that place may have skipped).  The fuzzer's seeds 140095256 (a world barrier
    each step and, every nine steps, a second one, first run at step 8, which rank 3 skipped; ranks 0-2 and 4-11
    went on to the second without their pairs' all_gathers, and rank 2 was named by its pair's pattern),
    139078864 (the same with the world's every-ten-steps barrier ahead of its all_reduce), 139084777 and
    134000789 (a p2p link's send, the other links of its exchange left behind as it was).  The stream's places
    must be B's at every seq both show, not only the last two: a stream of another slot may sit between the same
    A calls two steps running (the fuzzer's seed 379060343, found 2026-12-07: rank 0 left its recv from 7 out of
    an exchange at step 5, a chain after a world all_reduce every three steps, the exchange before it; the chain's
    links, beside the exchange at steps 3 and 4, cleared rank 0, and rank 7 was named)."""
    if not mine.get(target - 1):
        return False  # (none of A's calls came before B #target - 1: where the streams go among A's is not shown)
    for x in members.get(a, ()):
        if x in ranks or x not in histories or x not in last_started:
            continue
        started = last_started[x]
        if started.get(a, 0) <= n:
            continue
        for s2 in sorted({c.stream for c in histories[x]} - {a, b}, key=str):
            if started.get(s2, 0) != target - 1:
                continue
            theirs = places_of(histories[x], s2, a, started.get(a, 0))
            if all(theirs.get(q) == mine[q] for q in (target - 1, target - 2) if q in mine) and all(
                    theirs[q] == mine[q] for q in mine if q in theirs):
                return True
    return False


def _issued_it_later(places, r, target, n, witnesses):
    """Whether as many ranks of the pair's as the pattern's witnesses, or more, issued B #target after A #n + 1
    (their last calls, under test as the witnesses' are), where the pattern (rule 2) puts it after A #n: the step
    holds an A call more than the pattern says (a slot that runs every few steps, first run here), and the witness
    that put B #target after A #n may have skipped it.  The fuzzer's stages seed 208014462 (NCCL model): a group of
    seven runs two broadcasts a step and an all_gather every seven steps, first run at step 6, before the world's
    all_gather; rank 3 skipped the step's second broadcast; ranks 0, 2, 4-6 issued the world's call after it, rank
    3 one call sooner, and rank 1, which waits in the broadcast, was named by the pattern and rank 3's place.  As
    many as the witnesses refute it too: stages seed 457030299 (recorder model, 2026-12-07), a half of three
    ranks with a broadcast of its own and a common one of one size each step, whose rank 1 left its own out at
    step 1; rank 1 put the world's all_reduce #4 where the pattern does, rank 2 past it as rank 0, and rank 0,
    in the half's broadcast, was named by the pattern and rank 1's place."""
    later = [x for x, p in places.items() if x != r and p.get(target, 0) > n]
    return bool(later) and len(later) >= len(witnesses or ())


def _ran_past(written, a, b, target, n):
    """Whether a rank whose calls put B #target after A #n, and whose device waits in A #n + 1, had its Python issue
    A #n + 2 (``written``: {stream: the last seq it issued}, its run ahead of its GPU under NCCL) and never B
    #target: the twin ``_twin_of_a_sparse_call`` weighs, A #n + 1 an extra call of the program just ahead of B
    #target, has the rank issue B #target before the program's next A call, so its documents are not these.  The
    fuzzer's seed 160000311 (NCCL model): a world of two and its pair, a barrier on the pair, then the world's
    all_gather and broadcast each step; rank 0 left the barrier out at step 14, issued the all_gather, which its
    GPU waits in, and the broadcast, and waits at the step's end; rank 1 waits in the barrier."""
    if not written:
        return False
    return written.get(a, 0) >= n + 2 and written.get(b, 0) < target


def _issued_another(written, histories, r, b, target):
    """Whether rank ``r``, whose device waits in the call the twin ``_twin_of_a_sparse_call`` weighs as an extra
    call of the program ahead of B #target, had its Python issue B #target (NCCL, behind its device's call;
    ``written``: {(stream, seq): (op, size)}) as a call other than the one the other ranks that issued B #target
    did: in that twin the rank runs the program and issues its B #target, which the rank that skipped the extra
    call issued too, so its documents are not these.  The fuzzer's seed 7016841 (NCCL model): a world of two and
    its pair, the pair's all_reduce then the world's two all_reduces each step; rank 0 left the world's second out
    at step 40 and issued the next step's pair call, which its GPU waits in, and behind it the world's first and
    second of that step; rank 1 waits in the world's second of step 40 (#83), of another size than rank 0's
    #83."""
    mine = (written or {}).get((b, target))
    if mine is None or is_p2p(b):
        return False
    theirs = {(c.op, c.size) for x, calls in histories.items() if x != r for c in calls
              if c.stream == b and c.seq == target}
    return len(theirs) == 1 and mine not in theirs


def _past_its_slot(calls, a, b, target, n, batch=False):
    """Whether a rank whose calls put B #target after A #n issued, after A #n, a call on a third stream whose
    call before it came, in its previous step, after B #(target - 1) and before the A call that followed it: it
    went past B #target's place in its step without it.  A call on A inserted just ahead of B #target (the
    twin ``_twin_of_a_sparse_call`` weighs) would have it wait there before that third call, so that twin's
    documents are not these.  The fuzzer's ring seed 61000299: rank 0 of a 2-rank world left its isend to
    rank 1 out of its batch, and its irecv from rank 1, posted after it each step, completed; it then waits in
    the world's all_reduce, rank 1 in its recv.  A third stream that links the two ranks of B the other way says
    nothing, unless the witness's half of B #target is an op of a batch (``batch``: its document's api, a ring's
    ``batch_isend_irecv``, which no call comes between): its call and B's may be two slots of a step (a pipeline's
    forward send, its backward recv; a history shows a batch's ops as plain ones), and the twin's extra call may
    come between them (the fuzzer's seed 7018297, an exchange of plain sends and recvs: nothing is said).  Nor
    where B's calls #target - 1 and #target - 2 differ (two slots of B a step: the world's barrier and all_reduce,
    seed 179004801 under the NCCL model), nor a call started after the one the rank waits in (its Python's run
    ahead of its GPU)."""
    pair = set(p2p_ends(b) or ()) if not batch else set()
    at = dict(((c.stream, c.seq), c.started_at) for c in calls if c.started_at is not None)
    kinds = dict(((c.stream, c.seq), (c.op, c.size)) for c in calls)
    if kinds.get((b, target - 1), 0) != kinds.get((b, target - 2), 0):
        return False  # B runs calls of two slots a step: its call before #target says nothing of #target's place
    # calls started after the one it waits in (A #n + 1) are its Python's run ahead of its GPU (NCCL), which the
    # twin's rank, its GPU waiting in the extra call, would start too
    until = at.get((a, n + 1))
    before, since = at.get((b, target - 1)), at.get((a, n))
    if before is None or since is None or since < before:
        return False
    later = [t for (s, _), t in at.items() if s == a and t > before]
    if not later:
        return False
    after = min(later)
    for (s, q), t in at.items():
        if s in (a, b) or t <= since or (until is not None and t > until):
            continue
        if pair and set(p2p_ends(s) or ()) == pair:
            continue
        prev = at.get((s, q - 1))
        if prev is not None and before < prev < after:
            return True
    return False


def _pair_places(a, b, histories, last_started, members, like, last_completed, suspects, ranks):
    """(each rank's last B call, the places of B calls among A calls on the pair's ranks, the same with the like
    groups' ranks, their last B calls, the places known by rule 1 (``_pair_findings``)): where the like groups'
    ranks disagree, the pair's own ranks speak alone; a place only suspects went past is no fact."""
    last = {r: last_started[r].get(b, 0) for r in ranks}
    places = {r: places_of(histories[r], b, a, last_started[r].get(a, 0)) for r in ranks}
    all_places, all_last = dict(places), dict(last)
    all_places.update(_like_places(histories, last_started, members, like, a, b, ranks))
    all_last.update(_like_last(last_started, last_completed, members, like, a, b, ranks))
    known = consensus(all_places, all_last)
    if known is None or not in_order(known):
        # the like groups' places disagree with the pair's, at one seq or by going back across seqs: a like group
        # of another pace (the fuzzer's stages seed 227003504: tp pair [2, 3] runs two all_reduces a step, pair
        # [0, 1] one; its #27, at step 13, went among the dp calls 30 places before pair [0, 1]'s #26)
        all_places, all_last = dict(places), dict(last)
        known = consensus(places, last)
    for seq in _suspect_facts(known, all_places, all_last, suspects.get(a, ()), min(last.values())):
        del known[seq]
    return last, places, all_places, all_last, known


def _one_against_many(found):
    """{c} where one rank c is out of order by the places two ranks or more issued calls at (or the ranks of
    two groups like its own, or more: analogs.MIN_GROUPS), and every other rank found out of order is so only
    by c's own place (c alone witnessed it): the one against the many, as a desync's odd one out; else set().
    (The fuzzer's seed 7001400: in a 2 x 3 mesh, rank 5 issued its dp group's all_reduce #27 before the
    world's all_reduce #19; rank 2 alone of its own groups witnessed the order, and ranks 0, 1, 3, 4 of the
    dp groups like it did too.)"""
    out = set()
    for c in {f[0] for f in found}:
        others = [f for f in found if f[0] != c]
        if all(f[5] and set(f[5]) <= {c} for f in others) and any(
                len(set(f[5]) - {c}) >= 2 or f[7][2] >= MIN_GROUPS for f in found if f[0] == c):
            out.add(c)
    return out


def _suspect_facts(known, places, last, suspects, issued):
    """The seqs of ``known`` past ``issued`` (a B call a rank of the pair has not issued yet: the call at
    stake) that only suspects went past: ranks that never arrived at a stuck call on the pair's other stream
    (``suspects``).  A rank that skipped an A call and went on past B #b puts B #b one A
    call early, and is as likely the culprit as the rank its place would name (the simulator's gloo
    broadcast, seed 7002238: rank 7 skipped its pair's all_reduce, issued the world's broadcast as its root
    and, the tree letting it through, went past it; its place alone said where the broadcast goes, and its
    partner was named).  Such a place is no fact; rule 3 may still read it, as one rank's."""
    out = []
    for seq in [q for q in known or () if q > issued]:
        vouch = [k for k, got in places.items() if seq in got and seq < last[k]]
        # a like group's rank (its key ("like", rank, A', B')) is a suspect as the pair's own are: the fuzzer's
        # shape "stages", seed 95001895 (rank 1 skipped its dp group's #84, then issued its tp group's #42, like
        # the stuck tp group of ranks 2 and 3; its place said where #42 goes, and rank 3 was named)
        if vouch and all((k[1] if isinstance(k, tuple) else k) in suspects for k in vouch):
            out.append(seq)
    return out


def _many(places, target, rank):
    """The place at which the other ranks but one issued B #target, two of them or more, where exactly one
    other rank issued it elsewhere; else None.  It clears ``rank`` (a rank that issued its calls at the
    place of the many is not the one that broke the order), and names nobody: the one that issued it
    elsewhere is judged by the other pair of streams.  Real gloo, seed 9000040 on 2.13: a broadcast completes
    for the ranks it does not route through the rank that skipped it; ranks 0, 2 and 5 then put the
    subgroup's all_reduce #1 after it, the culprit before it, and rank 1, still in the broadcast, was held
    "may be out of order" by that one dissent, leaving the skip "cannot decide"."""
    at = [got[target] for r, got in places.items() if r != rank and target in got]
    if len(at) < 3:
        return None
    top = max(set(at), key=at.count)
    return top if at.count(top) == len(at) - 1 else None


def _like_pairs(members, like, a, b, ranks):
    """(rank, A', B'): the ranks, not of ``ranks``, in a pair of streams like (a, b), one or both of them a like
    group's."""
    if not like or is_p2p(a) or is_p2p(b):
        # a p2p stream's two ranks play opposite parts (one sends, one receives): a rank of a like group on
        # the same p2p stream is its other end, not one more rank of the same program (the fuzzer's mesh3d,
        # seed 50000055: rank 3 skipped its send to rank 9; its dp call, one send early, spoke for where rank
        # 9's dp call goes among its recvs, and rank 9 was named)
        return []
    out = []
    for a2 in [a] + list(like.get(a) or ()):
        for b2 in [b] + list(like.get(b) or ()):
            if (a2, b2) == (a, b):
                continue
            for r in sorted(set(members.get(a2, ())) & set(members.get(b2, ())) - set(ranks)):
                out.append((r, a2, b2))
    return out


def _like_places(histories, last_started, members, like, a, b, ranks):
    """{key: places} of the like groups' ranks (keys apart from ranks': ("like", rank, A', B'))."""
    return {("like", r, a2, b2): places_of(histories[r], b2, a2, last_started[r].get(a2, 0))
            for r, a2, b2 in _like_pairs(members, like, a, b, ranks) if r in histories and r in last_started}


def _like_last(last_started, last_completed, members, like, a, b, ranks):
    """The like groups' ranks' last counted call + 1: their last completed call counts too."""
    done = last_completed or {}
    return {("like", r, a2, b2): max(last_started[r].get(b2, 0), (done.get(r) or {}).get(b2, 0) + 1)
            for r, a2, b2 in _like_pairs(members, like, a, b, ranks) if r in last_started}


def _op(histories, r, stream, seq):
    """The op of call #seq on `stream` as rank r issues it: its own, else that of a rank that issued the
    calls r shares with it on that stream with r's ops (send and recv pair up on one stream), else "call"."""
    ends = p2p_ends(stream)  # on a p2p stream, r sends or receives
    if ends is not None and r in ends:
        return "send" if r == ends[0] else "recv"
    mine = dict((c.seq, c.op) for c in histories[r] if c.stream == stream)
    for rank in [r] + sorted(histories):
        theirs = dict((c.seq, c.op) for c in histories[rank] if c.stream == stream)
        if seq in theirs and all(theirs.get(k, op) == op for k, op in mine.items()):
            return theirs[seq]
    return "call"


def _text(histories, r, a, b, n, target, witnesses, own, name):
    def between(n, short=False):
        first, second = ("", "") if short else (_op(histories, r, a, n) + " ", _op(histories, r, a, n + 1) + " ")
        if n == 0:
            return "before %s#1" % second
        return "between %s#%d and %s#%d" % (first, n, "" if first == second else second, n + 1)

    who = "which the earlier steps place"
    if witnesses:
        who = "which rank%s %s issued" % ("s" if len(witnesses) > 1 else "", ", ".join(map(str, witnesses)))
    text = "rank %d issued %s #%d on %s without its %s #%d on %s, %s %s on %s" % (
        r, _op(histories, r, a, n + 1), n + 1, name(a), _op(histories, r, b, target), target, name(b),
        who, between(n), name(a))
    earlier = [s for s in own if s < target]
    if earlier:
        text += " (as rank %d did with #%d %s)" % (r, max(earlier), between(own[max(earlier)], short=True))
    return text
