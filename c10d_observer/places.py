"""Where one rank put one stream's calls among another's: "B #b comes after A #n", read from the rank's own
history (``places_of``), agreed across ranks (``consensus``, ordering's rule 1), guessed from the pattern of the
steps before (rule 2, ``patterns.extrapolate``) or from groups like the pair (rule 3), and bounded from below
by the calls before it (``lower_bound``).  ordering.py and shifts.py judge from these places.
Pure: no torch, no files, no clock.
"""
import bisect

from .patterns import extrapolate


def lower_bound(places, known, target, pending=()):
    """The least place B #target can have: a B call comes after the B calls before it on every rank, so its
    place is at least theirs: the known places (rule 1), and for an earlier B call that two ranks or more
    issued (in flight for them, say), the least place at which one issued it (a rank that skipped an A call
    before it, or issued it early, puts it lower than the program does, never higher); and where two ranks or
    more of the pair have not issued B #target yet (``pending``: the last A call each started), the least of
    those: each started it before B #target, as the program has it, unless it skipped B #target, which the
    least of two or more leaves out (the fuzzer's seed 7000533: three ranks in world #13 place barrier #8 on
    their half after it; the rank that skipped world #13 issued it after #12)."""
    low = max([n for k, n in (known or {}).items() if k < target] or [0])
    for k in set(s for got in places.values() for s in got if s < target):
        at = [got[k] for got in places.values() if k in got]
        if len(at) >= 2:
            low = max(low, min(at))
    if len(pending) >= 2:
        # one rank may be off either way (one that skipped an A call before has a count too low): of three or
        # more, the second least is an in-order rank's (real gloo, seed 9000040: the culprit's world count)
        low = max(low, sorted(pending)[1 if len(pending) >= 3 else 0])
    return low


def places_of(calls, counted, other, last_other):
    """{seq: n} for each `counted` call of one rank whose place is known: n is the last `other` call the
    rank started before it (0: none)."""
    others = {c.seq: c.started_at for c in calls if c.stream == other and c.started_at is not None}
    out = {}
    times = set(others.values())
    if any(t != t for t in times):  # a NaN start: its comparisons as the plain reading makes them
        return _places_plain(calls, counted, others, last_other)
    # the other calls by start, each with the greatest seq started up to it: n, the last other call started
    # before a counted one, is a bisection (a rank's 32 calls a stream, each against the other's 32: the
    # ordering rules' most frequent reading, 2026-12-01)
    order = sorted((t, q) for q, t in others.items())
    starts = [t for t, _ in order]
    most, top = [0], None
    for _, q in order:
        top = q if top is None or q > top else top
        most.append(top)
    for c in calls:
        t = c.started_at
        if c.stream != counted or t is None or t in times:
            continue
        n = most[bisect.bisect_left(starts, t)]
        after = others.get(n + 1)
        if n >= last_other or (after is not None and after > t):
            out[c.seq] = n  # else the history lacks the other call that came next
    return out


def _places_plain(calls, counted, others, last_other):
    """places_of, each counted call against every other call (no ordering of the starts)."""
    out = {}
    for c in calls:
        if c.stream != counted or c.started_at is None or c.started_at in others.values():
            continue
        n = max([s for s, t in others.items() if t < c.started_at] or [0])
        after = others.get(n + 1)
        if n >= last_other or (after is not None and after > c.started_at):
            out[c.seq] = n  # else the history lacks the other call that came next
    return out


def consensus(places, last):
    """{seq: place} of the calls that ranks went on past, or None where two ranks put one at different places."""
    known = {}
    for r, got in places.items():
        for seq, n in got.items():
            if seq < last[r] and known.setdefault(seq, n) != n:
                return None
    return known


def in_order(known):
    """Whether the places of ``known`` ({seq: place}) never go back: a later call placed before an earlier one is
    no one program's (each rank issues its calls in order), but two programs' read as one (consensus agrees
    where places share a seq, and a like group whose record holds other seqs than the pair's shares none)."""
    top = None
    for seq in sorted(known):
        if top is not None and known[seq] < top:
            return False
        top = known[seq]
    return True


def expected_place(places, known, target, rank, like_places=None, end=True):
    """(place of call #target, other ranks that issued it there, the A calls a period of the pattern spans
    where the place comes from the pattern alone (else None), the pattern's period in B calls where the
    pattern gave the place (else None), whether the pattern is its run's end only (``patterns.extrapolate``; never
    where ``end`` is False)), or None where nothing decides it.  Rule 3 reads the like groups'
    ranks too (``like_places``): where they agree (two or more), they speak for the place unless the pair's
    other ranks, two or more, agree on another (one rank alone may be the culprit)."""
    if known is None:
        return None
    guess, stride, period, at_end = known.get(target), None, None, False
    if guess is None:
        guess, stride, period, at_end = extrapolate(known, target, end=end)
    others = {r: got[target] for r, got in places.items() if r != rank and target in got}
    if guess is None:
        own = set(others.values())
        like = [got[target] for got in (like_places or {}).values() if target in got]
        if len(own) == 1 and (not like or set(like) == own):
            guess = own.pop()
        elif len(set(like)) == 1 and len(like) >= 2 and len(others) <= 1:
            guess = like[0]
        else:
            return None
    witnesses = sorted(r for r, n in others.items() if n == guess)
    return guess, witnesses, stride if not witnesses else None, period, at_end
