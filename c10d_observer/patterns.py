"""The pattern of a program's calls across steps, as ordering's rule 2 reads it: the period of the places of one
group's calls among another's (``extrapolate``), and whether a call is the one the period puts at a seq (the same
op and size as the call one period before it).  Pure: no package imports, no torch, no clock.
"""


def b_as_the_pattern(histories, stream, seq, period):
    """Whether call #seq on `stream`, as a rank that issued it has it, is the call the pattern puts there: the
    same op and size as call #(seq - period); False only where a rank's history shows both and they differ
    (a call that runs every k steps), True where none shows both."""
    for calls in histories.values():
        mine = signatures(calls, stream)
        if seq in mine and seq - period in mine and not alike(mine[seq], mine[seq - period]):
            return False
    return True


def multiples(known, target, period, at_end):
    """The k for which the pattern of ``period`` B calls (``extrapolate``'s) holds as a pattern of k periods too,
    k = 1 first: one that held over the whole run of known places just before ``target`` holds with period kp
    wherever that run spans 2kp + 1 places, and puts the same place at ``target``.  A B call that is not the
    one the period puts at ``target`` (a world's calls of two sizes in turn, their places one a step: period one
    among the places, two among the calls) may be the one kp puts there (the fuzzer's ``--kind swap``, seed
    13000147).  Only k = 1 where the period held over the run's end only."""
    if at_end:
        return [1]
    _, _, length = _run_before(known, target)
    return [1] + [k for k in range(2, length + 1) if 2 * k * period + 1 <= length]


def _run_before(known, target):
    """(its first seq, its last, its length) of the run of consecutive known places just before ``target``."""
    last = max([s for s in known if s < target] or [0])
    start = last
    while start - 1 in known:
        start -= 1
    return start, last, last - start + 1 if last else 0


def signatures(calls, stream):
    """{seq: (op, size)} of one rank's calls on ``stream``."""
    return dict((c.seq, (c.op, c.size)) for c in calls if c.stream == stream)


def repeats(shown, seq, q):
    """Whether the calls up to #seq (``shown``: ``signatures``) repeat with period q over 2q calls (each the call q
    before it, where both are shown), call #seq and the one q before it shown."""
    return seq in shown and seq - q in shown and all(
        alike(shown[s], shown[s - q]) for s in range(seq - 2 * q + 1, seq + 1) if s in shown and s - q in shown)


def alike(x, y):
    """Two calls' (op, size) are the same call of a program: the same op, and the same size where both
    sizes are known (an in-flight call's may not be)."""
    return x[0] == y[0] and (x[1] is None or y[1] is None or x[1] == y[1])


def as_the_pattern(calls, stream, seq, stride):
    """Whether a rank's call #seq on `stream` is the call its pattern puts there: the same op and size as its
    call #(seq - stride), one period before; False where either is not in its history."""
    mine = signatures(calls, stream)
    now, before = mine.get(seq), mine.get(seq - stride) if stride > 0 else None
    return now is not None and before is not None and alike(now, before)


def extrapolate(known, target, end=True):
    """(the place of call #target by the period of the run of known places just before it, the A calls one
    period spans, the period in B calls, whether it holds over the run's end only), or (None, None, None,
    False).  The period holds over the whole run (2p + 1 places at least), else (where ``end``) over its end
    where that is three quarters of it or more: a prologue's calls before
    the loop's (a broadcast, then the loop's first all_gather, both before the first send) have places of
    their own, and the loop's pattern speaks for the next call (the fuzzer's seed 7002206); a period that
    holds only over a short end is a coincidence of a longer one (seed 7001375: three world calls every two
    sends, whose last three places rise by one each).  Where B #target is not the call the end's period puts
    there (a call that runs every k steps), the caller asks again without it (``end`` False)."""
    start, last, length = _run_before(known, target)
    for whole in (True, False) if end else (True,):
        for p in range(1, (length - 1) // 2 + 1):
            step = known[last] - known[last - p]
            first = last  # the first B call of the run's end whose place is the one p calls before it + step
            while first - p - 1 >= start and known[first - 1] - known[first - 1 - p] == step:
                first -= 1
            span = last - (first - p) + 1
            if step < 0 or span < 2 * p + 1 or span < (length if whole else 0.75 * length):
                continue
            value = dict((s, known[s]) for s in range(first - p, last + 1))
            for s in range(last + 1, target + 1):
                value[s] = value[s - p] + step
            return value[target], step, p, not whole
    return None, None, None, False
