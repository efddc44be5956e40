"""A rank whose own calls show the one it left out: its period, broken once by a missing call on a stuck
stream, and resumed (issue 42).

A pipeline's middle stage receives from the stage before and sends to the stage after, step after step.  If it
skips one send at step 10 of 12, gloo matches its later sends with its peer's earlier recvs: the job runs on,
and at its end the next stage waits in a recv the stage will never post while the stage waits in the final
barrier.  The stuck calls form a cycle whose order each side finds the other out of (ordering.py: undecided),
and the counts alone (11 sends, 12 recvs) do not say whether one side left a call out or the other added one.
The stage's own history does: its calls repeat ``recv from 5, send to 7`` and, once, hold ``recv, recv``.

The rule: for a stuck call B #k of a cycle, a rank m missing from it that made k - 1 calls on B, all
completed (it went past), whose completed calls (in the order it issued them, over the span in which its
history shows every one of its streams) are one period P of at most ``MAX_PERIOD`` calls repeated, but for one
call of B, of the stuck call's op and size, left out at one place: ``MIN_REPEATS`` whole periods or more shown
before the place, and the period resumed for one whole period after it.  Every other rank in the cycle's stuck
calls must show no such break, and one rank only is named.  A call the period does not hold (a prologue, an
epilogue) is left at the span's ends; an op the source did not name (a recorder's counters) decides nothing.

It bets on the program repeating, over the calls shown, what it did before and after the place, as
analogs.own_pattern does: a program whose slot does not run at that one step, and whose other rank issued a
call there the program does not have, leaves the same documents.  The break must sit inside the span (a whole
period after it): a last step that differs (a pipeline's drain, a last batch) never decides.  A call left out
of a period of one call (a chain's first stage, which only sends) leaves no break: nothing is said.

The same at the last step, for an op of a pair (``batch_culprit``): a ring's rank posts, each step, its send to the
next rank and its recv from the one before, one beside the other (``batch_isend_irecv``); if it leaves the recv out,
its send completes, it goes on to the next step's barrier, and the rank before it waits in its send while every
other rank waits in the barrier: a cycle of two stuck calls whose order each side finds the other out of, with no
period resumed after the place.  Its own calls say it: on two of its p2p streams they went one for one, call #j
beside call #j with nothing between, over the last ``MIN_PAIRED_ALONE`` calls or more, every one its history shows,
or ``MIN_PAIRED`` where its calls on other streams show the pair once a step (``_one_a_step``; three in every case
until 2026-12-06: with two, 13 of 20,000 cases of seed 7 more exact under each source model, 82 of the ring shape's,
4 of mesh3d's, none named wrongly, nothing else moved); at #k it issued the one and not the other, and went on.  The
rank is named where it is the one rank of the cycle whose paired streams part that way (a rank that waits in the
call it issued of such a pair, its other op not posted yet, parts none: a pipeline's blocking send before its recv),
each rank waiting in the call it left out posted its half of #k beside the other op of its own pair (its step as
every step before: the ring's symmetry), and it went past every call of its own before (its last call there
completed).  A chain of blocking calls whose stage leaves its send out at the last step is not decided: its next
stage waits in a recv with nothing beside it, and a program whose last step has no send there, with that stage's
recv one too many, leaves the same documents (``left_out_culprit``: a last step never decides).  Pure: no torch, no
files, no clock.
"""
from .ordering import Found, unseen_kind
from .streams import is_p2p, p2p_ends

MAX_PERIOD = 16  # calls in one period, at most
MIN_REPEATS = 3  # whole periods shown before the place
MIN_PAIRED = 2  # calls of two paired streams shown one beside the other before the place (batch_culprit),
MIN_PAIRED_ALONE = 3  # ... where its other calls show them one pair a step (_one_a_step), else this many
# pairs shown before the place within which a collective never shown before, issued past the op left out, may be a
# slot every few steps first run there (batch_culprit's sparse twin: evals and checkpoint barriers every 2-10 steps,
# as the fuzzer draws them); past them it is read as the loop's end (an epilogue's barrier after a chain of 16 steps:
# the fuzzer's seed 7000884, whose rank 5, named, had left a recv out at step 1)
FIRST_RUN_WITHIN = 10


def left_out_culprit(histories, last_started, last_completed, cycle, group_name=None):
    """The rank whose own calls left out the call of a stuck call of ``cycle`` it never arrived at (module
    docstring), or None.

    histories: {rank: [ordering.Call]}, each on the rank's own clock (read in the order of their starts);
    last_started, last_completed: {rank: {stream: seq}}; cycle: [(stream, seq, waiting_ranks, missing_ranks)].
    Returns an ordering.Found."""
    name = group_name or (lambda stream: "group %s" % stream)
    in_cycle = set()
    for _, _, waiting, missing in cycle:
        in_cycle.update(waiting)
        in_cycle.update(missing)
    breaks = {}
    for r in sorted(in_cycle):
        got = _one_break(histories.get(r) or (), last_started.get(r) or {}, last_completed.get(r) or {})
        if got is not None:
            breaks[r] = got
    if len(breaks) != 1:
        return None  # no rank's history shows a break, or two do
    (m, (token, before, after, period, place)), = breaks.items()
    for stream, seq, waiting, missing in cycle:
        if m not in missing or token[0] != stream:
            continue
        started, completed = (last_started.get(m) or {}).get(stream, 0), (last_completed.get(m) or {}).get(stream)
        if started != seq - 1 or completed != seq - 1:
            continue  # it has not gone past its last call there
        if not _theirs(histories, waiting, stream, seq, token):
            continue  # the ranks waiting there issued another call at #seq than the one the period lacks
        if _apart_elsewhere(cycle, m, stream):
            return None  # a second disagreement, which a call left out on ``stream`` does not make
        issued = _issued(cycle, m)
        text = ("rank %d left out %s on %s: its calls repeat %s, and between %s and %s it issued none (%d "
                "periods before, the period again after); it made %d calls on %s, where rank%s %s waits in #%d" % (
                    m, _call_words(token), name(stream), _period_words(period, name), _words(before, name),
                    _words(after, name), place, seq - 1, name(stream), "s" if len(waiting) > 1 else "",
                    ", ".join(map(str, sorted(waiting))), seq))
        return Found(m, issued or (stream, seq - 1), (stream, seq), [], text)
    return None


def _apart_elsewhere(cycle, m, stream):
    """Whether ``m`` and another rank wait for each other in two stuck calls of ``cycle``, neither on ``stream``:
    ``m`` in a call of one stream the other rank never arrived at, that rank in a call of another stream ``m``
    never arrived at.  A call left out on ``stream`` shifts ``m``'s calls there only: on every other stream it and
    its peers issue their calls in the program's order, one after the other alike, and wait for each other only
    through ``stream``'s stuck call.  Two ranks that each went on to a call the other has not reached, of two other
    streams, disagree on those streams' order too, which the break in ``m``'s period does not explain: a period
    of two calls broken once reads as one call left out or as the other added (a slot that runs every few steps),
    and only the first is ``m``'s fault.  The fuzzer's stages seed 458034271 (NCCL model): rank 0 left its tp
    pair's first barrier out, at step 0, and went on; at the end its pair's other rank waited in the pair's
    barrier #17 (a second barrier every ten steps), rank 0 in the world's closing barrier, and the other rank,
    whose calls repeat [all_reduce on its dp pair, barrier on its tp pair] and show the barrier twice at step 9,
    was named for an all_reduce left out there."""
    where = {}
    for s, q, waiting, missing in cycle:
        for w in waiting:
            where[w] = (s, set(missing))
    mine = where.get(m)
    if mine is None or mine[0] == stream:
        return False
    for x in mine[1]:
        theirs = where.get(x)
        if theirs is not None and theirs[0] not in (stream, mine[0]) and m in theirs[1]:
            return True
    return False


def _theirs(histories, waiting, stream, seq, token):
    """Whether a rank waiting in #seq of ``stream`` shows it as the call ``token`` the period lacks (the same
    op, and size where both are known): the call left out is the one they wait in."""
    for w in waiting:
        for c in histories.get(w) or ():
            if c.stream == stream and c.seq == seq:
                # a recv waits for the send left out: p2p halves carry the other op
                ok = c.op == token[1] or {c.op, token[1]} <= {"send", "recv", "isend", "irecv"}
                return ok and (c.size is None or token[2] is None or c.size == token[2])
    return False


def _issued(cycle, m):
    for stream, seq, waiting, _ in cycle:
        if m in waiting:
            return (stream, seq)
    return None


def _span(calls, last_started, last_completed):
    """The rank's completed calls, in its order, over the span in which its history shows each stream it made
    calls on (a stream that keeps fewer calls than it made starts later than the others), as tokens
    (stream, op, size) with their calls; None where an op is not known."""
    timed = _order(calls)
    done = [c for c in timed if c.seq <= (last_completed.get(c.stream) or 0)]
    first = {}
    for i, c in enumerate(done):
        first.setdefault(c.stream, (i, c.seq))
    start = 0
    for stream, (i, seq) in first.items():
        if seq > 1:  # its history begins after the stream's first call: the calls before are not all shown
            start = max(start, i)
    out = []
    for c in done[start:]:
        if c.op in (None, "unknown"):
            return None
        out.append(((c.stream, c.op, c.size), c))
    return out


def _one_break(calls, last_started, last_completed):
    """(token left out, the calls before and after the place, the period, whole periods before it) where the
    rank's span is one period with one call left out (module docstring), else None."""
    span = _span(calls, last_started, last_completed)
    if not span or len(span) < 2 * MIN_REPEATS:
        return None
    tokens = [t for t, _ in span]
    found = []
    for p in range(2, min(MAX_PERIOD, len(tokens) // (MIN_REPEATS + 1)) + 1):
        got = _break_of(tokens, p)
        if got is not None:
            found.append((p, got))
            break  # the shortest period that explains the calls
    if not found:
        return None
    p, (d, token, lo) = found[0]
    period = tokens[d - p:d]
    before, after = span[d - 1][1], span[d][1]
    return (token, (before.stream, before.op, before.seq), (after.stream, after.op, after.seq), period,
            (d - lo) // p)


def _break_of(tokens, p):
    """(d, the token, where the periodic run begins) where ``tokens`` with one token put back at index d are
    one run of period ``p`` from some start on (a prologue's calls before it), with ``MIN_REPEATS`` periods
    before d and one whole period after it; None where no one token does, or two places would."""
    n = len(tokens)
    bad = [i for i in range(p, n) if tokens[i] != tokens[i - p]]
    if not bad:
        return None  # unbroken: nothing left out (or a period of the whole span)
    # the break's mismatches lie in [d, d + p); those before them are a prologue's
    for lo in range(0, p + 2):
        rest = [i for i in bad if i >= lo + p]
        if not rest or rest[-1] - rest[0] >= p:
            continue
        got = set()
        for d in range(max(lo + p, rest[0] - p + 1), rest[0] + 1):
            x = tokens[d - p]
            u = tokens[lo:d] + [x] + tokens[d:]
            if all(u[i] == u[i - p] for i in range(p, len(u))):
                got.add((d, x))
        if not got:
            continue
        if len({x for _, x in got}) != 1:
            return None
        d = min(d for d, _ in got)  # the first place it could have gone: the calls before it are the period's
        d_last = max(d for d, _ in got)
        if d - lo < MIN_REPEATS * p or n - d_last < p:
            return None  # too few periods before, or not resumed for a whole period after
        return d, next(iter(got))[1], lo
    return None


def _call_words(token):
    stream, op, size = token
    return "its %s%s" % (op, " (%s)" % size if size else "")


def _words(token, name):
    stream, op, seq = token
    return "%s #%d on %s" % (op, seq, name(stream))


def _period_words(period, name):
    return "[%s]" % ", ".join("%s on %s" % (op, name(stream)) for stream, op, _ in period)


def batch_culprit(histories, last_started, last_completed, cycle, group_name=None, members=None,
                  batched=frozenset()):
    """The rank that left one op of a pair out at its last step (module docstring: ``batch_culprit``), or None.
    Arguments as ``left_out_culprit``'s, ``members`` ({stream: [ranks]}) and ``batched`` ({(rank, p2p stream)}
    whose call in flight is an op of a ``batch_isend_irecv``); returns an ordering.Found.

    Where the rank then waits in a collective of a group of just itself and the rank that waits in the op it
    left out, nothing is said: a program with one more call on that group between the two ops' slots (a slot
    first run at that step), which the other rank skipped, leaves the same documents, as
    ``ordering._twin_of_a_sparse_call`` weighs (the fuzzer's seed 7014099: a 2-rank world, one chain slot each
    way and a barrier each step; rank 1 left its send out, its recv completed, and it waits in the barrier);
    unless the waiting rank's half is an op of a batch (a ring's ``batch_isend_irecv``, which no call comes
    between; a history shows a batch's ops as plain ones, the call in flight its api)."""
    name = group_name or (lambda stream: "group %s" % stream)
    in_cycle = set()
    for _, _, waiting, missing in cycle:
        in_cycle.update(waiting)
        in_cycle.update(missing)
    found = []
    for stream, seq, waiting, missing in cycle:
        if not is_p2p(stream) or not waiting:
            continue
        for m in missing:
            got = _left_out_of_pair(histories.get(m) or (), last_started.get(m) or {},
                                    last_completed.get(m) or {}, stream, seq)
            if got is not None:
                found.append((m, stream, seq, waiting, got))
    if len(found) != 1:
        return None
    m, stream, seq, waiting, (other, after, shown) = found[0]
    own_group = set((members or {}).get(after[0]) or ()) == {m} | set(waiting)
    if (not is_p2p(after[0]) and not any((w, stream) in batched for w in waiting) and (
            own_group or _first_run_before(histories.get(m) or (), last_started, members, after, waiting, shown))):
        return None  # the sparse twin: a call on the pair's own group between the two ops, skipped by the other
    for w in waiting:  # each posted its half of #seq beside the other op of its own pair: its step as ever
        pairs = _pairs(_order(histories.get(w) or ()))
        if not any(a == stream and seq in seqs for (a, b), seqs in pairs.items()):
            return None  # a blocking recv with nothing beside it (a chain's next stage): a drain's twin stands
    for r in sorted(in_cycle - {m}):
        if _parted(histories.get(r) or (), last_started.get(r) or {}):
            return None  # another rank's pairs part too: which one left the program is not shown
    issued = _issued(cycle, m)
    text = ("rank %d left out %s #%d on %s: its calls there went one for one with its calls on %s (#%d-#%d, each "
            "beside the other), and it issued #%d on %s without it, then %s; rank%s %s wait%s in #%d" % (
                m, _half(stream, m), seq, name(stream), name(other), shown[0], shown[1], seq, name(other),
                _words(after, name), "s" if len(waiting) > 1 else "", ", ".join(map(str, sorted(waiting))),
                "" if len(waiting) > 1 else "s", seq))
    return Found(m, issued or (after[0], after[2]), (stream, seq), [], text)


def _first_run_before(calls, last_started, members, after, waiting, shown):
    """Whether the collective the rank issued past the op it left out (``after``: (stream, op, seq)) is a call of
    a group of the waiting ranks too that none of them issued, and the first of its group, or of a kind the
    rank's record of that group never showed (``ordering.unseen_kind``): a slot first run at this step, between
    the pair's two slots, which the waiting rank may have skipped (the fuzzer's p2p seed 330079733, found
    2026-12-06: a world all_reduce every three steps, first at step 2, between a chain's link and an exchange
    of ranks 1 and 3; rank 3 left it out and waits in the exchange's recv, and rank 1, in the all_reduce, was
    named for its send).  Only within ``FIRST_RUN_WITHIN`` pairs shown (``shown``: the first and last)."""
    stream, _, seq = after
    if shown[1] >= FIRST_RUN_WITHIN or not set(waiting) <= set((members or {}).get(stream) or ()) or any(
            (last_started.get(w) or {}).get(stream, 0) >= seq for w in waiting):
        return False
    return seq == 1 or unseen_kind(calls, stream, seq)


def _half(stream, rank):
    ends = p2p_ends(stream)
    return "its send" if ends and ends[0] == rank else "its recv"


def _order(calls):
    """The rank's calls with a start, in the order it issued them (its own clock)."""
    return sorted((c for c in calls if c.started_at is not None), key=lambda c: (c.started_at, str(c.stream), c.seq))


def _pairs(timed):
    """{(stream a, stream b): the seqs j at which the rank's call a #j and call b #j sit side by side}, over its
    p2p streams, where every call of ``a`` its history shows from b's first shown seq on sits beside b's call of
    its seq (a stream's history keeps its last calls: the two may begin a call apart)."""
    where = {}
    for i, c in enumerate(timed):
        if is_p2p(c.stream):
            where.setdefault(c.stream, {})[c.seq] = i
    out = {}
    for a, mine in where.items():
        for b, theirs in where.items():
            if a == b:
                continue
            first = min(theirs)
            both = sorted(j for j in mine if j >= first)
            if both and all(j in theirs and abs(theirs[j] - mine[j]) == 1 for j in both):
                out[(a, b)] = both
    return out


def _left_out_of_pair(calls, started, completed, stream, seq):
    """(the stream paired with ``stream``, the rank's first call after its #seq there, the seqs shown paired)
    where the rank went past its call #seq - 1 on ``stream`` and not further, and issued #seq of a stream whose
    calls went one for one with it (``MIN_PAIRED`` shown, ending at #seq - 1), then a call of another stream;
    else None."""
    if started.get(stream, 0) != seq - 1 or completed.get(stream, 0) != seq - 1 or seq - 1 < MIN_PAIRED:
        return None
    timed = _order(calls)
    for (a, b), seqs in sorted(_pairs(timed).items()):
        if a != stream or started.get(b, 0) < seq or completed.get(b, 0) < seq:
            continue
        if seqs[-MIN_PAIRED:] != list(range(seq - MIN_PAIRED, seq)):
            continue  # fewer than MIN_PAIRED shown side by side, or not up to #seq - 1
        at = next((i for i, c in enumerate(timed) if c.stream == b and c.seq == seq), None)
        if at is None:
            continue
        if len(seqs) < MIN_PAIRED_ALONE and not _one_a_step(timed[:at], a, b):
            continue
        after = next((c for c in timed[at + 1:] if c.stream not in (a, b)), None)
        if after is None:
            continue  # it went nowhere else: not past the place
        return b, (after.stream, after.op, after.seq), (seqs[0], seqs[-1])
    return None


def _one_a_step(timed, a, b):
    """Whether the rank's calls before the place (``timed``) show its calls on ``a`` and ``b`` as many between each
    two of its calls on other streams (a barrier, another link: what marks its steps), one each at least in
    ``MIN_PAIRED`` such steps, and as many after the last: the pair one link of one slot, once a step.  A link two
    rings share carries two calls a step (the fuzzer's ring seed 7009963: rank 5's recvs from rank 4, of two rings,
    sat beside its sends to rank 6 of one ring at #1 and #2, by the order of the batches, and rank 5 was named with
    two pairs shown; rank 1 had left a recv out).  Nothing else among its calls: nothing shows a step."""
    steps, n = [], None
    for c in timed:
        if c.stream not in (a, b):
            if n is not None:
                steps.append(n)
            n = {a: 0, b: 0}
        elif n is not None:
            n[c.stream] += 1
    if n is None or n[a] != n[b] or any(s[a] != s[b] for s in steps):
        return False
    return sum(1 for s in steps if s[a] >= 1) >= MIN_PAIRED


def _parted(calls, started):
    """Whether the rank's paired p2p streams (``_pairs``, ``MIN_PAIRED`` shown) part: it issued more calls on
    one than on the other and issued a call of another stream after its last call of the one (it went on);
    a rank whose last call is that one's, the other op not posted yet, parts none."""
    timed = _order(calls)
    if not timed:
        return False
    last = timed[-1].stream
    for (a, b), seqs in _pairs(timed).items():
        if len(seqs) < MIN_PAIRED:
            continue
        na, nb = started.get(a, 0), started.get(b, 0)
        if nb > na and last != b:
            return True
    return False
