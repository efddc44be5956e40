"""The fuzzer's flags of undecidable cases that need the hang's state (programs.undecidable_at_hang) are facts,
not guesses: for seeds of each kind, the twin the flag's reason describes is built here, call for call, run
healthy to its end (a program users may write: every rank done, nothing left waiting) and run with its own
fault on another rank, and the documents of that run are the case's own, equal field for field.  No verdict can
tell the two apart, so the verdict must name nobody in the case (run.py counts a case named in spite of its
flag apart, and test_fuzz_corpus holds none named).  No torch, no ranks: the simulator (tests/fuzz)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))  # tests/, for ``fuzz``

from c10d_observer import verdict  # noqa: E402
from fuzz import programs, simulate  # noqa: E402

# (seed, twin): seeds of ``run.py --seed 7`` that only the hang's state flags, found by that run (2026-12-02)
SPARSE = (7001379, 7003226, 7001350, 7001875)  # a skip on W, the rank then waits in a call on a pair S
SIBLING = (7001624, 7000189, 7001986, 7002340, 7003440)  # a desync of a pair of a job of pairs, out of the others'
# records (7003440: a skip)
SHIFTED = (7000236, 11000972, 11001218)  # a skip on a 2-rank world, the rank's calls shifted by one to the
# epilogue's barrier
SPARSE_SWAPS = (13000674, 13000047, 13000115, 13000832)  # ``--kind swap --seed 13``: a W call and the S call after
# it issued the other way round, the S call the sparse twin's extra one (13000047: S, the 2-rank world's epilogue
# barrier; the others a subset pair at steps 28-51)
SWAPPED = (13000284, 13000670)  # ``--kind swap --seed 13``: a pair's last call and the epilogue's barrier issued
# the other way round


def _faulty(case):
    sim = simulate.Sim(case.program, case.calls, case.stop).run()
    assert sim.hung
    return sim


def _documents(program, calls, seed, source="exact"):
    """The documents of ``calls`` run on ``program``'s groups, as the case's own are rendered (simulate.run_case)."""
    sim = simulate.Sim(program._replace(calls=calls), calls).run()
    return sim, simulate.documents(sim, simulate.mode_of(seed), source=source, period=simulate.period_of(seed))


def _healthy_ends(program, calls):
    sim = simulate.Sim(program._replace(calls=calls), calls).run()
    return not sim.hung


def _sparse_twin(case, faulty):
    """The program with one more call on S ahead of the W call the partner waits in (the call the rank waits in,
    on both ranks of S), and that fault: the partner skipped it.  (twin program, twin faulty calls, its culprit)"""
    f = case.fault
    rank = f.rank
    s_gid, _ = faulty.blocked[rank]
    partner = [x for x in case.program.groups[s_gid].ranks if x != rank][0]
    w_gid, place = faulty.blocked[partner]
    extra = case.calls[rank][f.index]  # the S call the rank issued after the skip (or first, a swap), and waits in
    healthy = {q: list(cs) for q, cs in case.program.calls.items()}
    for q in (rank, partner):
        healthy[q].insert(programs.nth_call(healthy[q], w_gid, place), extra)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    del twin_faulty[partner][programs.nth_call(healthy[partner], w_gid, place) - 1]
    return healthy, twin_faulty, partner


def _sibling_twin(case, faulty):
    """The program whose every group of the pair's family issues, at the place, the call the rank issued there (a
    one-off of the program's), and that fault: the partner issued the program's call of before (a mismatch).
    (twin program, twin faulty calls, its culprit)"""
    f, c, program = case.fault, case.fault.call, case.program
    issued = case.calls[f.rank][f.index]  # a mismatch's call, or the call after a skip (on the same group)
    assert issued.group == c.group
    index_of_root = program.groups[c.group].ranks.index(issued.root) if issued.root is not None else None
    healthy = {q: list(cs) for q, cs in program.calls.items()}
    for gid in program.families[program.groups[c.group].family]:
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


def _shifted_twin(case, faulty):
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


def _swapped_twin(case, faulty):
    """The program with the W call and the first call of the other slot the other way round on both ranks of W,
    and that fault: the partner issued them in the case's program order (a swap).  (twin program, twin faulty
    calls, its culprit)"""
    f = case.fault
    w = case.program.groups[f.call.group]
    partner = [x for x in w.ranks if x != f.rank][0]
    place = 1 + sum(1 for x in case.program.calls[f.rank][:f.index] if x.group == f.call.group)
    j = programs.nth_call(case.program.calls[partner], f.call.group, place)
    healthy = {q: list(cs) for q, cs in case.program.calls.items()}
    healthy[f.rank] = list(case.calls[f.rank])  # the rank's calls as it issued them are the twin's program
    x, y = healthy[partner][j], healthy[partner][j + 1]
    healthy[partner][j], healthy[partner][j + 1] = y._replace(at=x.at), x._replace(at=y.at)
    twin_faulty = {q: list(cs) for q, cs in healthy.items()}
    twin_faulty[partner] = list(case.program.calls[partner])  # the partner swapped them back: a swap, one fault
    return healthy, twin_faulty, partner


TWINS = {"sparse": _sparse_twin, "sibling": _sibling_twin, "shifted": _shifted_twin, "sparse_swap": _sparse_twin,
         "swapped": _swapped_twin}
PREFIX = {"sparse": "a skip of", "shifted": "a skip on group", "sparse_swap": "a swap of", "swapped": "a swap of"}


@pytest.mark.parametrize("seed,kind", [(s, "sparse") for s in SPARSE] + [(s, "sibling") for s in SIBLING] +
                         [(s, "shifted") for s in SHIFTED] + [(s, "sparse_swap") for s in SPARSE_SWAPS] +
                         [(s, "swapped") for s in SWAPPED])
def test_a_case_flagged_at_the_hang_has_a_twin_with_the_same_documents(seed, kind):
    case = programs.make_case(seed, kind="swap" if kind in ("sparse_swap", "swapped") else None)
    assert not case.undecidable  # the program and the fault alone do not flag it
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert flagged.undecidable, "seed %d is not flagged at the hang" % seed
    assert flagged.why_undecidable.startswith(PREFIX.get(kind, case.fault.kind)), flagged.why_undecidable
    healthy, twin_faulty, twin_culprit = TWINS[kind](case, faulty)
    assert twin_culprit not in case.expected
    assert _healthy_ends(case.program, healthy), "the twin program hangs without its fault"
    for source in simulate.AT_HANG_SOURCES:  # the source models the flags hold for
        _, mine = _documents(case.program, case.calls, seed, source)
        twin_sim, theirs = _documents(case.program, twin_faulty, seed, source)
        assert twin_sim.hung
        assert theirs == mine, source
        assert not verdict.analyze(mine).culprit_ranks, source  # and the verdict names nobody


def test_a_shifted_skip_is_not_flagged_by_the_places_of_other_pairs():
    """A skip at step 0 on a mesh's dp pair shifts the rank's calls on the pair by one: the hang is at the pair's
    last call, the rank one call short, and the verdict names it (the fuzzer's seed 7000659).  The flag of
    other pairs' records is the place's, never a shift's."""
    case = programs.make_case(7000659)
    faulty = _faulty(case)
    assert not simulate.flag_at_hang(case, faulty).undecidable
    docs = simulate.documents(faulty, simulate.mode_of(case.seed), period=simulate.period_of(case.seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


@pytest.mark.parametrize("seed,shape", [(81002092, "ops"), (81009787, "ops"), (81009827, "ops"), (71006345, "async")])
def test_a_call_is_judged_by_the_op_its_document_shows(seed, shape):
    """A document shows an object collective's two calls as its inner op's (the sizes' all_gather of one int64,
    then the bytes'), so a plain all_gather of one int64 issued in its place is a call the record showed, not
    one it never showed; and an all_reduce issued with async_op=True as all_reduce, so a skipped all_reduce
    before one shifts the rank's calls.  No twin, and the verdict names the rank (``--shape ops``, seed 81:
    three cases flagged and named, ``--shape async``, seed 71: one; run.py's count of cases named in spite of
    their flag, before programs.shown_op)."""
    case = programs.make_case(seed, shape=shape)
    assert not case.undecidable, case.why_undecidable
    faulty = _faulty(case)
    assert not simulate.flag_at_hang(case, faulty).undecidable
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


@pytest.mark.parametrize("seed", [13000480, 13000499, 13001046])
def test_a_swap_is_not_flagged_for_another_groups_call_its_pair_never_showed(seed):
    """A swap issues another group's call at the pair's place, which the pair's record never shows, of course:
    that says nothing of a twin, and the order the earlier steps kept names the rank (``--kind swap``, seed 13:
    20 cases of 5,000 flagged by _unseen_at_place and named, before the rule left swaps out)."""
    case = programs.make_case(seed, kind="swap")
    assert not case.undecidable, case.why_undecidable
    faulty = _faulty(case)
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]
