"""The twins of ``programs.undecidable_at_hang``'s flags, built: for a case and its faulty run, the program a user
may write and its one fault on another rank that leave the case's documents (issue 42).  Each builder gives
(the twin program's calls per rank, the twin's faulty calls, the twin's culprit); ``same_documents`` runs them
and holds their documents against the case's.  tests/unit/test_fuzz_twins.py checks every flag's twin under the
source models whose documents are a function of the calls the ranks ran (simulate.AT_HANG_SOURCES); under the
NCCL model, where a rank's Python issues calls past the one its GPU waits in, ``simulate.flag_at_hang`` flags a
case only where a twin built here leaves the same NCCL documents.  Pure Python, no torch.  Python 3.8."""
from . import programs, simulate


def documents_of(program, calls, seed, source="exact"):
    """The documents of ``calls`` run on ``program``'s groups, as the case's own are rendered (simulate.run_case)."""
    sim = simulate.Sim(program._replace(calls=calls), calls).run()
    return sim, simulate.documents(sim, simulate.mode_of(seed), source=source, period=simulate.period_of(seed))


def healthy_ends(program, calls):
    sim = simulate.Sim(program._replace(calls=calls), calls).run()
    return not sim.hung


def sparse(case, faulty):
    """The program with one more call on S ahead of the W call the partner waits in (the call the rank waits in,
    on both ranks of S), and that fault: the partner skipped it.  (twin program, twin faulty calls, its culprit)"""
    f = case.fault
    rank = f.rank
    s_gid, _ = faulty.blocked[rank]
    partner = [x for x in case.program.groups[s_gid].ranks if x != rank][0]
    w_gid, place = faulty.blocked[partner]
    extra = case.calls[rank][f.index]  # the S call the rank issued after the skip (or first, a swap), and waits in
    healthy = {q: list(cs) for q, cs in case.program.calls.items()}
    for q in (rank, partner):  # (W's call: a collective, or the partner's half of a skipped send or recv)
        healthy[q].insert(programs.nth_on_stream(healthy[q], q, w_gid, place), extra)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[partner][programs.nth_on_stream(healthy[partner], partner, w_gid, place) - 1]
    return healthy, twin_faulty, partner


def sibling(case, faulty):
    """The program whose every group of the pair's family that runs its calls there (programs.mirrors) issues, at
    the place, the call the rank issued there (a one-off of the program's), and that fault: the partner issued the
    program's call of before (a mismatch).  (twin program, twin faulty calls, its culprit)"""
    f, c, program = case.fault, case.fault.call, case.program
    issued = case.calls[f.rank][f.index]  # a mismatch's call, or the call after a skip (on the same group)
    assert issued.group == c.group
    index_of_root = program.groups[c.group].ranks.index(issued.root) if issued.root is not None else None
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    place = programs.coll_place(program.calls[f.rank], f.index)
    for gid in [c.group] + programs.mirrors(program, c.group, place):  # a group that runs other calls (shape
        # "stages") keeps its own
        for q in program.groups[gid].ranks:
            i = next(i for i, x in enumerate(healthy[q]) if (x.group, x.step, x.slot) == (gid, c.step, c.slot))
            mine = healthy[q][i]
            root = program.groups[gid].ranks[index_of_root] if index_of_root is not None else None
            healthy[q][i] = (issued if q == f.rank else
                             issued._replace(group=gid, root=root, step=mine.step, slot=mine.slot, at=mine.at))
    partner = [x for x in program.groups[c.group].ranks if x != f.rank][0]
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    i = next(i for i, x in enumerate(healthy[partner]) if (x.group, x.step, x.slot) == (c.group, c.step, c.slot))
    twin_faulty[partner][i] = program.calls[partner][i]
    return healthy, twin_faulty, partner


def extra(case, faulty):
    """The program with one more call on the pair's group at the place, on that group alone (a pipeline stage's:
    shape "stages"), the call the rank issued there, and that fault: the partner skipped it.  (twin program, twin
    faulty calls, its culprit)"""
    f, c, program = case.fault, case.fault.call, case.program
    issued = case.calls[f.rank][f.index]  # a mismatch's call, or the call after a skip (on the same group)
    assert issued.group == c.group
    partner = [x for x in program.groups[c.group].ranks if x != f.rank][0]
    place = programs.coll_place(program.calls[f.rank], f.index)
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    for q in (f.rank, partner):
        i = programs.nth_call(healthy[q], c.group, place)
        healthy[q].insert(i, issued._replace(step=healthy[q][i].step, slot=healthy[q][i].slot))
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[partner][programs.nth_call(healthy[partner], c.group, place)]
    return healthy, twin_faulty, partner


def shifted(case, faulty):
    """The program of the rank's calls as it issued them (one call fewer in the run), and that fault: the partner
    issued the run's call at the seq where both wait, in place of the rank's (a mismatch).  (twin program, twin
    faulty calls, its culprit)"""
    f = case.fault
    gid, seq = faulty.blocked[f.rank]
    partner = [x for x in case.program.groups[gid].ranks if x != f.rank][0]
    mine, theirs = case.calls[f.rank], case.program.calls[partner]
    i, j = programs.nth_call(mine, gid, seq), programs.nth_call(theirs, gid, seq)
    healthy = {q: list(cs) for q, cs in case.program.calls.items()}
    healthy[f.rank] = list(mine)
    healthy[partner] = theirs[:j] + [mine[i]._replace(at=theirs[j].at)] + mine[i + 1:]
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    twin_faulty[partner][j] = theirs[j]
    return healthy, twin_faulty, partner


def swapped(case, faulty):
    """The program with the W call and the first call of the other slot the other way round on both ranks of W,
    and that fault: the partner issued them in the case's program order (a swap).  (twin program, twin faulty
    calls, its culprit)"""
    f = case.fault
    w = case.program.groups[f.call.group]
    partner = [x for x in w.ranks if x != f.rank][0]
    place = programs.coll_place(case.program.calls[f.rank], f.index)
    j = programs.nth_call(case.program.calls[partner], f.call.group, place)
    healthy = {q: list(cs) for q, cs in case.program.calls.items()}
    healthy[f.rank] = list(case.calls[f.rank])  # the rank's calls as it issued them are the twin's program
    x, y = healthy[partner][j], healthy[partner][j + 1]
    healthy[partner][j], healthy[partner][j + 1] = y._replace(at=x.at), x._replace(at=y.at)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    twin_faulty[partner] = list(case.program.calls[partner])  # the partner swapped them back: a swap, one fault
    return healthy, twin_faulty, partner


def link(case, faulty):
    """The program with one more exchange between the rank and its peer ahead of the W call the peer waits in (the
    send or recv the rank waits in, and its other half on the peer), and that fault: the peer skipped its half.
    The rank's calls up to that send or recv are the program's as it issued them, at the times it issued them (a
    skip of one of two calls alike issues the second at the first's place).  (twin program, twin faulty calls, its
    culprit)"""
    f, program = case.fault, case.program
    rank = f.rank
    i = faulty.ptr[rank] - 1
    mine = case.calls[rank][i]  # the send or recv the rank waits in, after its last W call
    partner = mine.peer
    w_gid, place = faulty.blocked[partner]
    assert mine.op in ("send", "recv") and ":p2p:" not in str(w_gid)
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    healthy[rank] = case.calls[rank][:i + 1] + program.calls[rank][programs.nth_on_stream(
        program.calls[rank], rank, w_gid, place):]
    k = programs.nth_on_stream(healthy[partner], partner, w_gid, place)
    healthy[partner].insert(k, mine._replace(op="recv" if mine.op == "send" else "send", peer=rank))
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[partner][k]
    return healthy, twin_faulty, partner


def later(case, faulty):
    """The program whose group S (the skipped call's, of two ranks) runs that call after the W call the rank waits
    in, on both its ranks, and that fault: the partner skipped that W call.  (twin program, twin faulty calls, its
    culprit)"""
    return _later(case, faulty, from_a_later_step=False)


def later_step(case, faulty):
    """``later``'s other program: S runs that call from a later step on (its calls from the place on, one fewer, the
    partner's next one issued at the time it issued the skipped one in the case), and that fault: the partner
    skipped the W call the rank waits in.  Under the NCCL model, where a rank's Python runs ahead of its GPU, the one
    twin may leave the case's documents where the other does not.  (twin program, twin faulty calls, its culprit)"""
    return _later(case, faulty, from_a_later_step=True)


def _later(case, faulty, from_a_later_step):
    f, program = case.fault, case.program
    rank, s_gid = f.rank, f.call.group
    partner = [x for x in program.groups[s_gid].ranks if x != rank][0]
    w_gid, k = faulty.blocked[rank]
    place = programs.coll_place(program.calls[rank], f.index)
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    if from_a_later_step:
        at = healthy[partner][programs.nth_call(healthy[partner], s_gid, place)].at
        for q in (rank, partner):
            del healthy[q][programs.nth_call(healthy[q], s_gid, place)]
        assert sum(1 for x in healthy[partner] if x.group == s_gid and x.op not in programs.P2P_OPS) >= place  # (S
        # runs a call after it, which the partner waits in, in the twin)
        i = programs.nth_call(healthy[partner], s_gid, place)
        healthy[partner][i] = healthy[partner][i]._replace(at=at)
        assert programs.nth_call(healthy[partner], w_gid, k) < i
    else:
        for q in (rank, partner):
            x = healthy[q].pop(programs.nth_call(healthy[q], s_gid, place))
            healthy[q].insert(programs.nth_call(healthy[q], w_gid, k) + 1, x)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[partner][programs.nth_call(healthy[partner], w_gid, k)]
    return healthy, twin_faulty, partner


def link_extra(case, faulty):
    """The program with the rank's next op after the skip twice in a row (its other half on the peer ahead of the op
    the peer waits in), and that fault: the peer skipped that half.  (twin program, twin faulty calls, its
    culprit)"""
    f, program = case.fault, case.program
    rank = f.rank
    assert faulty.ptr[rank] - 1 == f.index  # the op it waits in is its next after the skip
    mine = case.calls[rank][f.index]
    peer = mine.peer
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    healthy[rank].insert(f.index, mine)
    j = faulty.ptr[peer] - 1  # the op the peer waits in
    healthy[peer].insert(j, mine._replace(op="recv" if mine.op == "send" else "send", peer=rank))
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[peer][j]
    return healthy, twin_faulty, peer


def link_later(case, faulty):
    """The program with the skipped send or recv, and its other half on the peer, after the W call the rank waits
    in, and that fault: the peer skipped that W call.  (twin program, twin faulty calls, its culprit)"""
    f, program = case.fault, case.program
    rank, peer = f.rank, f.call.peer
    w_gid, k = faulty.blocked[rank]
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    x = healthy[rank].pop(f.index)
    healthy[rank].insert(programs.nth_call(healthy[rank], w_gid, k) + 1, x)
    j = faulty.ptr[peer] - 1  # its half, which it waits in
    y = healthy[peer].pop(j)
    assert y.peer == rank and y.op in ("send", "recv")
    i = programs.nth_call(healthy[peer], w_gid, k)
    assert i >= j  # the W call came after its half
    healthy[peer].insert(i + 1, y)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[peer][i]
    return healthy, twin_faulty, peer


BUILDERS = {"sparse": sparse, "link": link, "link_extra": link_extra, "link_later": link_later, "later": later,
            "later_step": later_step, "sibling": sibling, "shifted": shifted, "sparse_swap": sparse, "swapped": swapped,
            "extra": extra}


def going_on(program, calls):
    """``calls`` (per rank) with one more world barrier after each rank's last: the program goes on after the
    place (a ``barrier()`` before the checkpoint it saves at the end, say).  Where every rank of the twin's hang
    waits before it, no rank issues it, but an NCCL rank whose GPU waits in the last call its Python issued then
    waits for its step's end, as the case's did, where the program's end would be its wait otherwise."""
    last = max(c.step for cs in calls.values() for c in cs)
    at = max(c.at for cs in calls.values() for c in cs) + programs.STEP_S
    end = programs.Call("0", "barrier", None, None, None, last + 1, len(program.template) + 1, at)
    return {q: list(cs) + [end] for q, cs in calls.items()}


def synced_as(faulty, program, twin_faulty):
    """NCCL model: ``twin_faulty`` with each rank's run-ahead cut where the case's was (``faulty``: the case's Sim,
    run).  A rank whose GPU waits in a call issued the calls after it up to a synchronisation (simulate.ahead):
    in the case, the end of its step; a program may hold one anywhere (a ``loss.item()``, a flag's all_reduce read
    back), at any time.  So in the twin, the calls past the one its GPU waits in are enqueued at the case's times
    and the twin synchronises where the case did: the same calls, if they are the same, leave the same documents
    (``same_documents`` renders them and holds them equal, which is the check).  The twin's calls per rank."""
    twin = simulate.Sim(program._replace(calls=twin_faulty), twin_faulty).run()
    out = dict(twin_faulty)
    for r in range(program.world):
        if faulty.state[r] != "blocked" or twin.state[r] != "blocked":
            continue
        more, _ = simulate.ahead(faulty, r)
        calls, i = list(out[r]), twin.ptr[r] - 1
        if i + len(more) >= len(calls):
            continue  # the twin has fewer calls there: its documents will differ
        step = calls[i].step
        for j, (_, _, _, _, t) in enumerate(more, i + 1):
            calls[j] = calls[j]._replace(step=step, at=t - simulate.T0)
        if i + len(more) + 1 < len(calls):
            calls[i + len(more) + 1] = calls[i + len(more) + 1]._replace(step=step + 0.5)  # a synchronisation
        out[r] = calls
    return out


def same_documents(case, faulty, source):
    """The kind of the twin ``case.why_undecidable`` (``programs.undecidable_at_hang``'s reason) describes, built,
    where its documents under ``source`` are the case's (``faulty``: the case's Sim, run), its culprit another rank,
    its program ending healthy and its own fault hanging it; or None."""
    why = case.why_undecidable or ""
    if why.endswith(programs.LINK_SPARSE):
        kinds = ("link",)
    elif why.endswith(programs.LINK_EXTRA):
        kinds = ("link_extra",)
    elif why.endswith(programs.LINK_LATER):
        kinds = ("link_later",)
    elif why.endswith(programs.LATER):
        kinds = ("later", "later_step")
    elif why.startswith(("a skip of", "a swap of")):
        kinds = ("sparse", "swapped") if why.startswith("a swap of") else ("sparse",)
    elif why.startswith("a skip on group"):
        kinds = ("shifted",)
    elif why.startswith((programs.EXTRA_PREFIX, programs.REPEAT_PREFIX)):
        kinds = ("extra",)
    else:
        kinds = ("sibling",)
    _, mine = documents_of(case.program, case.calls, case.seed, source)
    for kind in kinds:
        try:
            built = BUILDERS[kind](case, faulty)
        except (AssertionError, StopIteration):
            # the builder's program is not this one's shape (``--shape stages``: a slot that only some groups of
            # the family run, the rank's next call on another group): no twin built, no flag by it
            continue
        got = _leaves(case, faulty, source, kind, built, mine)
        if got is not None:
            return got
    return None


def retimed(case, calls):
    """``calls`` (per rank) issued at the case's times: each rank's i-th call no earlier than the case's i-th call
    of that rank (its ``at``), a call past the case's list no earlier than the one before it.  A program's calls
    come when its compute between them lets them, which the verdict does not read as evidence (a step's compute
    differs from rank to rank and from step to step), and the simulator issues each call at its ``at`` where the
    rank is free by then: so a twin whose calls are the case's, one for one, leaves the case's documents once it
    issues them at the case's times, where the builder's program, keeping the times of the calls it moved, may
    not (seed 363000231: a two-rank group's barrier skipped at step 4 leaves the documents of a program with one
    more barrier on it after the world's closing one, skipped by the other rank, but for the times)."""
    out = {}
    for q, cs in calls.items():
        mine, new, prev = case.calls[q], [], 0.0
        for i, x in enumerate(cs):
            at = mine[i].at if i < len(mine) else max(x.at, prev)
            new.append(x._replace(at=at))
            prev = at
        out[q] = new
    return out


def _leaves(case, faulty, source, kind, built, mine, retime=False):
    """``kind`` (and under the NCCL model how the twin was run) where the twin ``built`` (a builder's (twin program,
    twin faulty calls, its culprit)) leaves the documents ``mine`` under ``source``, its culprit another rank, its
    program ending healthy and its own fault hanging it; else None.  ``retime``: or, where it does not, the twin
    issuing its calls at the case's times (``retimed``)."""
    healthy, twin_faulty, culprit = built
    if culprit in case.expected or not healthy_ends(case.program, healthy):
        return None
    twin, theirs = documents_of(case.program, twin_faulty, case.seed, source)
    if twin.hung and theirs == mine:
        return kind
    if retime:
        again = retimed(case, twin_faulty)
        if again != twin_faulty:
            twin, theirs = documents_of(case.program, again, case.seed, source)
            if twin.hung and theirs == mine:
                return kind + ", at the case's times"
    if source != "nccl":
        return None
    # the twin with its synchronisations where the case's Pythons stopped; and going on after the place
    variants = ((", synchronised where the case's ranks were", healthy, synced_as(faulty, case.program,
                                                                                     twin_faulty)),
                (", going on after the place", going_on(case.program, healthy),
                 going_on(case.program, twin_faulty)))
    for how, program_calls, calls in variants:
        if program_calls is not healthy and not healthy_ends(case.program, program_calls):
            continue
        twin, theirs = documents_of(case.program, calls, case.seed, source)
        if twin.hung and theirs == mine:
            return kind + how
    return None


STRICT = tuple(kind for kind in BUILDERS if kind != "sparse_swap")  # every builder once (``sparse_swap`` is
# ``sparse``)


def built_twins(case, faulty, source="exact"):
    """The kinds of every twin of BUILDERS that, built for this case whatever its flags say, leaves the case's
    documents under ``source`` (``faulty``: the case's Sim, run): the strict test of whether the documents decide
    (issue 42).  A case with one cannot be decided from its documents: a verdict that names its culprit bets
    that the program is not the twin's (each such bet is a wrong culprit in the twin).  The flags
    (``programs.undecidable_at_hang``) take a twin only where the verdict does not bet, by rules of their own;
    this takes every twin built here, so it counts the verdict's bets too.  A builder applied where its flag's
    rules would not apply it may make no program at all (an index past a list, a broadcast's root outside its
    group): no twin by it.  Not every twin a user may write is built here: a case without one may still have
    one.  Only a fault of the calls a rank issues has twins here (programs.TWIN_KINDS: no stop, a run of the
    calls alone)."""
    if case.fault is None or case.fault.kind not in programs.TWIN_KINDS or case.stop:
        return []
    _, mine = documents_of(case.program, case.calls, case.seed, source)
    found = []
    for kind in STRICT:
        try:
            got = _leaves(case, faulty, source, kind, BUILDERS[kind](case, faulty), mine, retime=True)
        except Exception:  # no program by this builder here (above): no twin
            got = None
        if got is not None:
            found.append(kind)
    return found
