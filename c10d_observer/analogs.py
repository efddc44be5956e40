"""The call a program puts at a place, as the groups like the stuck one issued it (issue 42).

A desync with no majority (two ranks of a pair group, one in ``all_reduce`` #28, the other in ``broadcast``
#28) names nobody by a count of votes.  But users' jobs make groups by the dozen that run one program: the
tensor-parallel groups of a mesh, the pairs of a pipeline, the data-parallel replicas.  Where other groups of
the same size issued, call for call, what the stuck group issued before the place (the same op and size at
every seq both show, at least ``MIN_SHARED`` of them), went past the place, and all issued one call there,
that call is the program's, and the ranks that issued another left the program.

It decides nothing where fewer than two such groups went past the place, where they disagree there (groups
with one history that part at this call: a pipeline's last stage, a call made on some groups only), or
where the stuck group's own ranks disagree before the place.  Pure: no torch, no files, no clock.
"""
MIN_SHARED = 4  # seqs two groups must both show, and agree on, before one speaks for the other
MIN_GROUPS = 2  # groups that must agree at the place


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


def like(by_rank, stream):
    """The collective streams of groups like ``stream``: of its size, other ranks, and issuing what its ranks
    issued at every seq both show (at least MIN_SHARED of them)."""
    streams = _streams(by_rank)
    me = streams.get(stream)
    if me is None:
        return []
    mine = {s: k for s, k in me["calls"].items() if s not in me["clash"]}
    out = []
    for other, h in streams.items():
        if other == stream or len(h["ranks"]) != len(me["ranks"]) or set(h["ranks"]) & set(me["ranks"]):
            continue
        common = [s for s in mine if s in h["calls"] and s not in h["clash"]]
        if len(common) >= MIN_SHARED and all(h["calls"][s] == mine[s] for s in common):
            out.append(other)
    return sorted(out, key=_natural)


def program_call(by_rank, stream, seq):
    """``((op, size), streams, (first, last))``: the call that groups like ``stream`` issued at #seq and went
    past (``streams``), and the seqs before it on which they agree with ``stream``'s ranks; None where
    nothing decides (module docstring)."""
    streams = _streams(by_rank)
    me = streams.get(stream)
    if me is None:
        return None
    mine = {s: k for s, k in me["calls"].items() if s < seq and s not in me["clash"]}
    votes, shared = {}, []
    for other, h in streams.items():
        if other == stream or len(h["ranks"]) != len(me["ranks"]):
            continue
        if h["done"] < seq or seq not in h["calls"] or seq in h["clash"]:
            continue  # it has not gone past the place (or its ranks disagree there)
        common = [s for s in mine if s in h["calls"] and s not in h["clash"]]
        if len(common) < MIN_SHARED or any(h["calls"][s] != mine[s] for s in common):
            continue  # another program, or too little to tell
        votes.setdefault(h["calls"][seq], []).append(other)
        shared += common
    if len(votes) != 1:
        return None  # none, or groups like this one issued different calls there
    (call, who), = votes.items()
    if len(who) < MIN_GROUPS:
        return None
    return call, sorted(who, key=_natural), (min(shared), max(shared))


def _natural(stream):
    s = str(stream)
    return (0, int(s), s) if s.isdigit() else (1, 0, s)
