"""A rank that left out a call long ago: its calls on one group sit one place later, among its other
group's calls, than every other rank's do (issue 42).

gloo matches calls by order, so a rank that skips one tensor-parallel ``all_reduce`` of a 2 x 2 mesh at step
4 does not hang there: its later calls on that group pair with its partner's earlier ones, and the job runs
on until its end, where the partner waits in the group's last call and the rank that skipped it waits in the
final ``barrier``.  By then the skip is older than the calls a history keeps, and the stuck calls form a
cycle whose order each side finds the other out of (ordering.py: undecided).  The histories still show it:
each tensor-parallel call of that rank comes one data-parallel call later than its partner's does, and
later than the other ranks' do on the groups like theirs; and it is the rank that never issued the group's
last call.

The rule: a rank m missing from a stuck call B #k (its last call on B, #k-1, completed: it went on past),
waiting in a call where another rank waits too that had made #k or more calls on B or a group like it, and
as many as m on m's other groups (the counts run from the program's start, so they show a skip of any age;
alone they would not tell m from a program whose groups of one family make different numbers of calls),
and whose place of each B call among its calls on another group S (the S calls it started before it, as
places.places_of reads them) is more, by the same d > 0 on each of the last MIN_SHARED calls both show
(and never less before them), than the places at which two ranks or more issued those calls (on B, or on a
group like B, among their calls on S or a group like S: analogs.like), who all agree, one of them m's own
partner on B.  m then issued d calls on S too early for its calls on B, or left out a call on B: either way
it left the program the others kept, and it is named.  Nothing is said where fewer than two ranks witness,
where they disagree among themselves, where m's places move about rather than shift once, or where the
shift is the other way (m would be waiting in B, not missing from it).  Pure: no torch, no files, no clock.
"""
from .ordering import Found, _op
from .places import places_of

MIN_SHARED = 4  # B calls whose places both ranks show, and that shift by one same d
MIN_WITNESSES = 2  # ranks that agree on the places, one of them m's partner on B


def shift_culprit(histories, last_started, last_completed, members, cycle, like_of, group_name=None):
    """The rank whose calls on a group of a cycle of stuck calls sit later among its other calls than every
    other rank's do, and which never issued that group's stuck call (module docstring), or None.

    histories, last_started, members, cycle: as ordering.ordering_culprit's; last_completed: {rank: {stream:
    seq}}; like_of(stream): the streams of groups like it (analogs.like).  Returns what ordering_culprit
    does: an ordering.Found."""
    name = group_name or (lambda stream: "group %s" % stream)
    waiting_in = {r: (c[0], c[1]) for c in cycle for r in c[2]}
    found = []
    for b, k, _waiting, missing in cycle:
        for m in missing:
            if m not in histories or (last_started.get(m) or {}).get(b, 0) != k - 1:
                continue
            if ((last_completed or {}).get(m) or {}).get(b) != k - 1:
                continue  # its last call on B is not over: it may still be on its way
            same = _same_place(last_started, last_completed, members, like_of, waiting_in, m, b, k)
            if not same:
                continue
            for s in sorted((s for s in last_started[m] if s != b and m in members.get(s, ())), key=str):
                got = _shift(histories, last_started, members, like_of, m, b, s)
                if got is not None:
                    found.append((m, b, k, s) + got + (same,))
    if len({f[0] for f in found}) != 1:
        return None
    m, b, k, s, d, first, witnesses, mine, theirs, same = found[0]
    issued = waiting_in.get(m) or (s, last_started[m][s])
    shown = max(mine)
    text = ("rank %d issued %s #%d on %s without %s #%d on %s: it issued each of its calls on %s %s on %s "
            "later than rank%s %s issued theirs on it or on groups like them (%s #%d after %s #%d on %s, where "
            "they issued #%d after #%d), %s" % (
                m, _op(histories, m, issued[0], issued[1]), issued[1], name(issued[0]),
                _op(histories, m, b, k), k, name(b), name(b), "one call" if d == 1 else "%d calls" % d, name(s),
                "s" if len(witnesses) > 1 else "", ", ".join(map(str, witnesses)),
                _op(histories, m, b, shown), shown, _op(histories, m, s, mine[shown]), mine[shown], name(s),
                shown, theirs[shown],
                "from its #%d on: it left out a call on %s before it" % (first, name(b)) if first is not None
                else "since before the calls its history keeps: it left out a call on %s" % name(b)))
    text += "; rank%s %s, in %s #%d too, had made %d calls on %s, rank %d %d on %s" % (
        "s" if len(same) > 1 else "", ", ".join(str(w) for w, _, _ in same), _op(histories, m, *issued), issued[1],
        same[0][2], " and ".join(sorted({name(s2) for _, s2, _ in same})), m, k - 1, name(b))
    return Found(m, issued, (b, k), witnesses, text)


def _same_place(last_started, last_completed, members, like_of, waiting_in, m, b, k):
    """[(w, its stream like B, its count there)]: the ranks in the call m waits in, at the same place of the
    program, that had made #k or more calls on B or a group like it, all completed, and as many as m on
    each other group m and they are in (or groups like them); [] where any rank there had made fewer, or
    none is there.  Counts run from the program's start: a skip older than any history shows in them."""
    place = waiting_in.get(m)
    if place is None:
        return []
    out = []
    for w, at in sorted(waiting_in.items()):
        if w == m or at != place:
            continue
        b2 = [x for x in [b] + list(like_of(b) or ()) if w in members.get(x, ())]
        if len(b2) != 1:
            continue
        n = last_started[w].get(b2[0], 0)
        if n < k or ((last_completed or {}).get(w) or {}).get(b2[0]) != n:
            return []  # it had made as few, or its last call there is not over
        for s in last_started[m]:
            if s in (b, place[0]) or m not in members.get(s, ()):
                continue
            s2 = [x for x in [s] + list(like_of(s) or ()) if w in members.get(x, ())]
            if len(s2) == 1 and last_started[w].get(s2[0], 0) != last_started[m].get(s, 0):
                return []  # it differs on another group too: not one call left out
        out.append((w, b2[0], n))
    return out


def _shift(histories, last_started, members, like_of, m, b, s):
    """(d, the first B call found shifted or None, witnesses, m's places, the witnesses' places) where m's B
    calls sit d places later among its S calls than the witnesses' (module docstring), else None."""
    mine = places_of(histories[m], b, s, last_started[m].get(s, 0))
    if len(mine) < MIN_SHARED:
        return None
    likes_b = [b] + [x for x in (like_of(b) or ()) if x != b]
    likes_s = [s] + [x for x in (like_of(s) or ()) if x != s]
    theirs, witnesses = {}, []
    for b2 in likes_b:
        for x in members.get(b2, ()):
            if x == m or x not in histories or x not in last_started:
                continue
            s2 = [t for t in likes_s if x in members.get(t, ())]
            if len(s2) != 1:
                continue  # no group like S, or more than one: nothing to compare
            got = places_of(histories[x], b2, s2[0], last_started[x].get(s2[0], 0))
            for seq, n in got.items():
                if theirs.setdefault(seq, n) != n:
                    return None  # the witnesses disagree: no one program to hold m to
            if len(set(got) & set(mine)) >= MIN_SHARED:
                witnesses.append(x)
    if len(witnesses) < MIN_WITNESSES or not set(witnesses) & set(members.get(b, ())):
        return None
    common = sorted(set(mine) & set(theirs))
    diffs = [mine[q] - theirs[q] for q in common]
    d = diffs[-1]
    if d <= 0 or any(x != d for x in diffs[-MIN_SHARED:]):
        return None
    if any(x < 0 or x > d for x in diffs) or any(y < x for x, y in zip(diffs, diffs[1:])):
        return None  # its places move about: not one shift
    first = next((q for q, x in zip(common, diffs) if x == d), None) if diffs[0] != d else None
    return d, first, sorted(witnesses), mine, theirs
