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
from fuzz import programs, run, simulate, twins  # noqa: E402

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
# ``--seed 31`` (its real programs left them undecided, 2026-12-03), and ``--seed 1`` (1008687): a desync at the
# first step of a pair whose family's other pairs run its calls and show the place (a root, a dtype, a size
# changed); the twin: the pair runs one more call there, on it alone (a pipeline stage's), the partner skipping it
EXTRA = (31000432, 31000176, 31000287, 1008687)
# ``--source recorder --seed 160`` (2026-12-05): a skipped send or recv on a 2-rank world, the rank then waits in
# the world's next collective, its peer in the p2p call's other half: the sparse twin, its extra call on the world
# (160001211, 160012164: between an exchange's send and recv, which two slots of a step leave alike; and seed 7's
# 7014099, two chain slots, one each way: the verdict named the rank by its pair of links before left_out's check)
# ``--seed 54`` (a real program of 2.15, 2026-12-05) and ``--seed 7``: a skip of a world call at the prologue or step 0,
# after which the rank waits in its pair's first call of the step, whose family's other pairs run it at its steps but
# have no step of it on record yet: the sparse twin (its extra call on the pair alone), since programs._stepped_before
SPARSE_UNSTEPPED = (54000000, 7000578, 7000603, 7007682)
SPARSE_P2P = (160000952, 160005517, 160009009, 160012562, 160019184, 160001211, 160012164, 7014099)
# a skip of a collective, the rank's next call its first send or recv with a rank that waits in the collective
# (programs._sparse_twin_link; 58000113: a real 2.15 program's, undecided there and in the simulation)
LINK = (58000113, 7001638, 7008902, 7010613, 7013191, 7013977, 7014239, 7014924, 7018762)
# a skip on a pair before a step of it is on record, the rank then waiting in a call of another group its partner is
# in (programs._later_at_first_step; 58000147: a real 2.15 program's, undecided there and in the simulation)
# a skip of a send or recv at its link's first step: the rank's next op on the link twice (programs._extra_on_a_link),
# or the op after the group's call the rank then waits in (programs._later_on_a_link)
LINK_EXTRA = (7000227, 7004749, 7005359, 7007596, 7008788, 7012418)
LINK_LATER = (7000994, 7001519, 7002144, 7003197, 7005431, 7008209)
LATER = (58000147, 59000074, 7001847, 7001995, 7002789, 7003214, 7006911, 7007613)


def _faulty(case):
    sim = simulate.Sim(case.program, case.calls, case.stop).run()
    assert sim.hung
    return sim


PREFIX = {"sparse": "a skip of", "link": "a skip of", "link_extra": "a skip of", "link_later": "a skip of", "later":
          "a skip on group", "shifted": "a skip on group", "sparse_swap": "a swap of", "swapped": "a swap of",
          "extra": programs.EXTRA_PREFIX}


@pytest.mark.parametrize("seed,kind", [(s, "sparse") for s in SPARSE + SPARSE_P2P + SPARSE_UNSTEPPED] +
                         [(s, "sibling") for s in SIBLING] +
                         [(s, "shifted") for s in SHIFTED] + [(s, "sparse_swap") for s in SPARSE_SWAPS] +
                         [(s, "swapped") for s in SWAPPED] + [(s, "extra") for s in EXTRA] +
                         [(s, "link") for s in LINK] + [(s, "later") for s in LATER] +
                         [(s, "link_extra") for s in LINK_EXTRA] + [(s, "link_later") for s in LINK_LATER])
def test_a_case_flagged_at_the_hang_has_a_twin_with_the_same_documents(seed, kind):
    case = programs.make_case(seed, kind="swap" if kind in ("sparse_swap", "swapped") else None)
    assert not case.undecidable  # the program and the fault alone do not flag it
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert flagged.undecidable, "seed %d is not flagged at the hang" % seed
    assert flagged.why_undecidable.startswith(PREFIX.get(kind, case.fault.kind)), flagged.why_undecidable
    healthy, twin_faulty, twin_culprit = twins.BUILDERS[kind](case, faulty)
    assert twin_culprit not in case.expected
    assert twins.healthy_ends(case.program, healthy), "the twin program hangs without its fault"
    for source in simulate.AT_HANG_SOURCES:  # the source models the flags hold for
        _, mine = twins.documents_of(case.program, case.calls, seed, source)
        twin_sim, theirs = twins.documents_of(case.program, twin_faulty, seed, source)
        assert twin_sim.hung
        assert theirs == mine, source
        assert not verdict.analyze(mine).culprit_ranks, source  # and the verdict names nobody


# ``--shape stages --seed 95``: a desync of a pair whose family's other pairs run other calls at and just before the
# place (a slot that only some of them run), flagged by programs.undecidable since programs.mirrors (2026-12-03)
STAGES_ONE_OFF = (95000058, 95000212, 95000332, 95000357)


@pytest.mark.parametrize("seed", STAGES_ONE_OFF)
def test_a_pair_desync_whose_family_runs_other_calls_there_has_a_twin(seed):
    """95000332: pairs 0-1 and 2-3 run a barrier and a broadcast each step, pair 2-3 an all_reduce too (a stage's
    call); rank 1 issued an all_gather for its broadcast at step 16.  Pair 2-3's record shows nothing of pair
    0-1's program there (its calls around the place are others), so the program with a one-off all_gather on pair
    0-1 at that step, rank 0 issuing the broadcast of before, leaves the same documents: flagged, the twin built
    call for call, and the verdict names nobody."""
    case = programs.make_case(seed, shape="stages")
    f, program = case.fault, case.program
    assert f.kind.startswith("mismatch") and case.undecidable, case.why_undecidable
    assert len(program.families[program.groups[f.call.group].family]) > 1  # the family has other pairs
    faulty = _faulty(case)
    healthy, twin_faulty, twin_culprit = twins.sibling(case, faulty)
    assert twin_culprit not in case.expected
    assert twins.healthy_ends(program, healthy), "the twin program hangs without its fault"
    for source in simulate.AT_HANG_SOURCES:
        _, mine = twins.documents_of(program, case.calls, seed, source)
        twin_sim, theirs = twins.documents_of(program, twin_faulty, seed, source)
        assert twin_sim.hung and theirs == mine, source
        assert not verdict.analyze(mine).culprit_ranks, source


@pytest.mark.parametrize("seed", [95003042, 95009758])
def test_a_pair_whose_family_runs_its_calls_around_the_place_is_mirrored(seed):
    """95003042: pair 2-3 runs two all_reduces a step, pair 0-1 one (a stage's one more layer); rank 2 issued an
    all_gather for one.  Around the place both pairs' calls are all_reduces alike: pair 0-1 shows the program's
    call there, as the verdict reads it (analogs.like), so the case is not flagged, and the rank is named.
    95009758: pair 0-1 runs an all_reduce every six steps that the other pairs do not; four calls before the place
    the pairs run alike again."""
    case = programs.make_case(seed, shape="stages")
    group = case.fault.call.group
    place = 1 + sum(1 for x in case.program.calls[case.fault.rank][:case.fault.index] if x.group == group)
    alike = programs.mirrors(case.program, group, place)
    assert alike
    whole = programs.calls_on(case.program, group)
    assert all(programs.calls_on(case.program, g) != whole for g in alike)  # another program, alike there
    assert not case.undecidable, case.why_undecidable
    faulty = _faulty(case)
    assert not simulate.flag_at_hang(case, faulty).undecidable
    docs = simulate.documents(faulty, simulate.mode_of(case.seed), period=simulate.period_of(case.seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


def test_a_shifted_skip_is_not_flagged_by_the_places_of_other_pairs():
    """A skip at step 0 on a mesh's dp pair shifts the rank's calls on the pair by one: the hang is at the pair's
    last call, the rank one call short, and the verdict names it (the fuzzer's seed 7000659).  The flag of
    other pairs' records is the place's, never a shift's."""
    case = programs.make_case(7000659)
    faulty = _faulty(case)
    assert not simulate.flag_at_hang(case, faulty).undecidable
    docs = simulate.documents(faulty, simulate.mode_of(case.seed), period=simulate.period_of(case.seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


@pytest.mark.parametrize("seed,shape,named", [(81002092, "ops", False), (81009787, "ops", True),
                                              (81009827, "ops", False), (71006345, "async", True)])
def test_a_call_is_judged_by_the_op_its_document_shows(seed, shape, named):
    """A document shows an object collective's two calls as its inner op's (the sizes' all_gather of one int64,
    then the bytes'), so a plain all_gather of one int64 issued in its place is a call the record showed, not
    one it never showed; and an all_reduce issued with async_op=True as all_reduce, so a skipped all_reduce
    before one shifts the rank's calls.  Not flagged (``--shape ops``, seed 81: three cases flagged and named,
    ``--shape async``, seed 71: one; run.py's count of cases named in spite of their flag, before
    programs.shown_op).  The verdict names the rank, except where the plain all_gather of one int64 stands just
    before the object collective's own (81002092, 81009827): the record then shows that call twice in a row, and a
    program with a plain all_gather of one int64 there (first run at that step), the other rank skipping it,
    leaves the same documents (verdict.mismatch._unless_a_repeat; the fuzzer's repeat flag does not read an
    object collective's two calls, so these count as undecided, not flagged).  81002092's period reads the rank
    as having left one call out, and its call there is the next all_gather_object's sizes: a program with one
    more of them there leaves the same documents too, which is said first (mismatch._a_new_object_call); so is
    81009827's, a broadcast_object_list's, since 2026-12-06, where the neighbours no longer decide (the record
    shows the sizes call right before the bytes' call: analogs.neighbour_call)."""
    case = programs.make_case(seed, shape=shape)
    assert not case.undecidable, case.why_undecidable
    faulty = _faulty(case)
    assert not simulate.flag_at_hang(case, faulty).undecidable
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    v = verdict.analyze(docs)
    if named:
        assert v.culprit_ranks == [case.fault.rank], v.summary
    else:
        assert v.culprit_ranks == [] and any((" again (" in u and " of 1 x int64" in u) or (
            "the sizes call of " in u) for u in v.undecided), v.undecided


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


# ``run.py --seed 7 --source nccl``: cases the hang's state flags under the exact model (151 of 20,000, found
# 2026-12-03), whose twin, built, leaves the same documents under the NCCL model too: as built (92) ...
NCCL_ALIKE = ((7000189, "sibling"), (7000044, "sibling"), (7001472, "sparse"), (7006391, "shifted"))
# ... or with its synchronisations where the case's ranks' Pythons stopped (twins.synced_as: 37; 7000180: the
# rank that skipped a pair's call issued nothing past the call its GPU waits in, the end of its step; the twin's
# rank, whose partner skipped the pair's extra call, issues the rest of its step unless the program synchronises
# after that call) ...
NCCL_SYNCED = ((7000180, "sparse"), (7000242, "sparse"), (7003440, "sibling"))
# ... or with a barrier after the program's end (twins.going_on: 18 of seed 7's 100,000 at step 3+; 7000236:
# rank 0's GPU waits in broadcast #57, the last call its Python issued; the case's Python then waits at its step's
# end, for the epilogue's barrier comes after; the twin's, whose program ends at that broadcast, at the program's
# end: with a barrier after it, at the step's end too) ...
NCCL_GOING_ON = ((7000236, "shifted"), (7020525, "shifted"))
# ... and whose twin does not (22 of the first 20,000): a rank's Python issued a call past the one its GPU waits in
# that the twin's does not issue there (7005304: rank 1 issued all_reduce #4 on group 1 where the twin's rank
# issues group 0's #4)
NCCL_APART = ((7005304, "sparse"), (7008294, "sibling"))


@pytest.mark.parametrize("seed,kind", NCCL_ALIKE + NCCL_SYNCED + NCCL_GOING_ON + NCCL_APART)
def test_under_the_nccl_model_a_case_is_flagged_where_its_twin_leaves_the_same_documents(seed, kind):
    """Under the NCCL model each rank's Python runs ahead of its GPU to a synchronisation, so a twin of the exact
    model's flag may leave other documents: the flag holds there only where the twin, built and run, leaves the
    case's NCCL documents, as built, with a synchronisation where the case's Pythons stopped (a program may
    hold one anywhere) or going on after its end with one more barrier (simulate.flag_at_hang,
    twins.same_documents), as this test builds it again; and the verdict names nobody in any of them (where no
    twin leaves the same documents, the NCCL documents hold more than the calls the verdict reads: run.py counts
    those undecided, not flagged)."""
    case = programs.make_case(seed)
    faulty = _faulty(case)
    assert simulate.flag_at_hang(case, faulty).undecidable  # the exact model's flag
    healthy, twin_faulty, twin_culprit = twins.BUILDERS[kind](case, faulty)
    assert twin_culprit not in case.expected and twins.healthy_ends(case.program, healthy)
    _, mine = twins.documents_of(case.program, case.calls, seed, "nccl")
    twin_sim, theirs = twins.documents_of(case.program, twin_faulty, seed, "nccl")
    assert twin_sim.hung
    assert (theirs == mine) is ((seed, kind) in NCCL_ALIKE)
    synced = twins.synced_as(faulty, case.program, twin_faulty)
    synced_sim, theirs = twins.documents_of(case.program, synced, seed, "nccl")
    assert synced_sim.hung
    assert (theirs == mine) is ((seed, kind) in NCCL_ALIKE + NCCL_SYNCED)
    on = twins.going_on(case.program, twin_faulty)
    assert twins.healthy_ends(case.program, twins.going_on(case.program, healthy))
    on_sim, theirs = twins.documents_of(case.program, on, seed, "nccl")
    assert on_sim.hung
    if (seed, kind) not in NCCL_ALIKE:  # (alike as built; with the barrier, a rank that waited at its end differs)
        assert (theirs == mine) is ((seed, kind) in NCCL_GOING_ON)
    flagged = simulate.flag_at_hang(case, faulty, "nccl")
    if (seed, kind) in NCCL_APART and flagged.undecidable:
        # flagged by another twin of the case (7008294: rank 8's broadcast #2 is the pair's #1 again,
        # programs._repeat_at_place), built, which leaves the case's NCCL documents
        assert flagged.why_undecidable.startswith(programs.REPEAT_PREFIX), flagged.why_undecidable
        assert twins.same_documents(flagged, faulty, "nccl") is not None
        return
    assert flagged.undecidable is ((seed, kind) not in NCCL_APART), flagged.why_undecidable
    assert not verdict.analyze(mine).culprit_ranks



# ``--shape stages --seed 95``: a skip of a world call, after which the rank waits in its pair's next call, where
# the pair's family's other pairs run its calls but at other steps (a stage that runs one call more each step),
# flagged at the hang since programs.in_step (2026-12-04); 95000633: pairs that run its calls at its steps too
STAGES_SPARSE = (95001023, 95003896, 95004754, 95010483)


@pytest.mark.parametrize("seed", STAGES_SPARSE)
def test_a_skip_before_a_stages_pair_call_its_family_runs_at_other_steps_has_the_sparse_twin(seed):
    """95001023: pair 0-1 runs two all_gathers a step around the world's all_reduce, pair 2-3 one (the same
    all_gather); rank 1 skipped the all_reduce at step 9 and waits in its pair's next all_gather, rank 0 in the
    all_reduce.  Pair 2-3 makes that all_gather at other steps, so its record shows nothing of whether pair 0-1
    runs one more there: the program with one more all_gather on pair 0-1 alone ahead of the all_reduce (a
    stage's call first run at that step), rank 0 skipping it, leaves the same documents.  Flagged, the twin built
    call for call, and the verdict names nobody."""
    case = programs.make_case(seed, shape="stages")
    assert not case.undecidable and case.fault.kind == "skip" and case.fault.step >= 3
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert flagged.undecidable and flagged.why_undecidable.endswith(programs.MIRRORED), flagged.why_undecidable
    healthy, twin_faulty, twin_culprit = twins.sparse(case, faulty)
    assert twin_culprit not in case.expected
    assert twins.healthy_ends(case.program, healthy), "the twin program hangs without its fault"
    for source in simulate.AT_HANG_SOURCES:
        _, mine = twins.documents_of(case.program, case.calls, seed, source)
        twin_sim, theirs = twins.documents_of(case.program, twin_faulty, seed, source)
        assert twin_sim.hung and theirs == mine, source
        assert not verdict.analyze(mine).culprit_ranks, source


def test_a_skip_before_a_pair_call_its_family_runs_at_its_steps_is_not_flagged_and_is_named():
    """95000633: eight pairs run one all_reduce a step, the world an all_gather; rank 6 skipped the all_gather at
    step 10 and waits in its pair's next all_reduce.  The other pairs run that all_reduce at the same steps: their
    records show the program's order, the case is not flagged, and the verdict names rank 6."""
    seed = 95000633
    case = programs.make_case(seed, shape="stages")
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert not flagged.undecidable, flagged.why_undecidable
    _, mine = twins.documents_of(case.program, case.calls, seed, "exact")
    assert set(verdict.analyze(mine).culprit_ranks) == case.expected == {6}



@pytest.mark.parametrize("seed", [7000009, 7000877, 7001795])
def test_a_skip_before_an_exchange_its_link_ran_before_is_not_flagged(seed):
    """A skip of a collective, the rank then waiting in a send or recv with a rank that waits in the collective,
    where that link carried the exchange at an earlier step: its record shows the exchange after the collective,
    and the verdict names the rank by it (the bet on the program repeating what the documents show, which the
    fuzzer does not flag); the link twin stands only at the link's first exchange (programs._sparse_twin_link)."""
    case = programs.make_case(seed)
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert not (flagged.why_undecidable or "").endswith(programs.LINK_SPARSE), flagged.why_undecidable
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


@pytest.mark.parametrize("seed", [7000195, 7000912, 7001229, 7001574])
def test_a_skip_on_a_pair_with_a_step_of_it_on_record_has_no_later_twin(seed):
    """The later twin (a pair that runs its call after the other group's) stands only before a step of the pair is on
    record: past it, the groups of the pair's family show where its calls go, and the verdict names the rank that
    skipped by them (seeds 7000195, 7001229, 7001574: pairs at steps 21, 10, 6; 7000912: halves at step 27), the
    bet the fuzzer does not flag (programs._later_at_first_step)."""
    case = programs.make_case(seed)
    assert case.fault.kind == "skip" and case.fault.call.step >= 1
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty)
    assert not (flagged.why_undecidable or "").endswith(programs.LATER), flagged.why_undecidable
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


@pytest.mark.parametrize("seed", [7000060, 7000091, 7000096, 7000434, 7000904, 7001126])
def test_a_p2p_skip_past_its_links_first_step_has_no_link_twin(seed):
    """The link twins of a skipped send or recv (one op more on the link, or the op after the group's call) stand
    only at the link's first step: past it, the link's record shows its ops and where they go among the group's
    calls, and the verdict names the rank by them (steps 10-29 of p2p programs; flagged at every step, these were
    counted as named in spite of a twin): programs._extra_on_a_link, _later_on_a_link."""
    case = programs.make_case(seed)
    assert case.fault.kind == "skip" and case.fault.call.op in ("send", "recv") and case.fault.call.step >= 1
    faulty = _faulty(case)
    why = simulate.flag_at_hang(case, faulty).why_undecidable or ""
    assert not why.endswith((programs.LINK_EXTRA, programs.LINK_LATER)), why
    docs = simulate.documents(faulty, simulate.mode_of(seed), period=simulate.period_of(seed))
    assert verdict.analyze(docs).culprit_ranks == [case.fault.rank]


def test_two_like_links_at_a_links_first_step_do_not_name_against_the_link_twin():
    """272095939 (recorder model, p2p, step 0): rank 3 left its recv from 7 (slot 1, a 4 x int64 exchange) out and
    waits in the world's all_reduce, rank 7 in its send; link 2-10, which runs both exchanges as link 3-7 does,
    issued its slot-1 ops before the all_reduce.  The program with link 3-7's op after the all_reduce, rank 7
    skipping the all_reduce, leaves the same documents (programs._later_on_a_link, built): flagged, and the two
    links alike (2-10 and the pair's own) do not name rank 3 (verdict.cycles._many_like: three links at a link's
    first steps, two groups for collectives)."""
    case = programs.make_case(272095939)
    faulty = _faulty(case)
    flagged = simulate.flag_at_hang(case, faulty, "recorder")
    assert flagged.why_undecidable and flagged.why_undecidable.endswith(programs.LINK_LATER), flagged.why_undecidable
    docs = simulate.documents(faulty, simulate.mode_of(case.seed), source="recorder",
                              period=simulate.period_of(case.seed))
    assert verdict.analyze(docs).culprit_ranks == []


# the strict test (twins.built_twins, benchmarks/fuzz.py --twins): every twin built, whatever the flags say
STRICT_CASES = ((7000133, "undecided", ["shifted", "extra"]), (7000060, "exact", ["link_extra"]),
                (7000027, "exact", []))


@pytest.mark.parametrize("seed,outcome,kinds", STRICT_CASES)
def test_every_twin_built_is_found_whatever_the_flags_say(seed, outcome, kinds):
    """7000133 (pairs, step 1): rank 3 issued an all_gather for its pair's all_reduce; the verdict names nobody, and
    no flag takes the case (past the first step the flags' rules bet that a pair runs its family's program), yet
    the program with one more call on the pair at that step (a stage's), rank 2 skipping it, leaves its
    documents: no verdict could decide it.  7000060 (p2p, step 10): the verdict names the rank that left its send
    out, a bet against the program with that exchange twice at that step (a wrong culprit there).  7000027: no
    twin built leaves its documents.  Each twin found is built again here and its documents held to the case's."""
    res = run.judge(seed, check_healthy=False)
    assert res.outcome == outcome and not res.case.undecidable
    faulty = _faulty(res.case)
    assert twins.built_twins(res.case, faulty) == kinds
    _, mine = twins.documents_of(res.case.program, res.case.calls, seed)
    for kind in kinds:
        healthy, twin_faulty, culprit = twins.BUILDERS[kind](res.case, faulty)
        assert culprit not in res.case.expected and twins.healthy_ends(res.case.program, healthy)
        twin_sim, theirs = twins.documents_of(res.case.program, twin_faulty, seed)
        assert twin_sim.hung and theirs == mine, kind


def test_a_stopped_rank_has_no_twin_built():
    """A stall (a rank stopped before a call) is no fault of the calls issued: no twin of them is built."""
    case = programs.make_case(350000000)
    assert case.fault.kind == "stall" and case.stop
    assert twins.built_twins(case, _faulty(case)) == []


def test_the_strict_counts_of_real_programs_keep_the_bets_apart():
    """benchmarks/fuzz.py --real-only: the rows that hung and carry their twins, counted by whether one was built
    (or the flags took one); a program named where a twin was is a bet, and exact of the rest is of those no twin
    explains."""
    rows = [{"outcome": "exact", "twins": []}, {"outcome": "exact", "twins": []}, {"outcome": "undecided", "twins": []},
            {"outcome": "exact", "twins": ["sparse"]}, {"outcome": "undecided", "twins": ["extra"]},
            {"outcome": "undecided_ok", "twins": [], "undecidable": True},
            {"outcome": "torch raised", "twins": []}, {"outcome": "exact", "twins": None}]
    got = run.strict_counts(rows)
    assert got == {"no twin": {"exact": 2, "undecided": 1},
                   "a twin": {"exact": 1, "undecided": 1, "undecided_ok": 1}}
    words = run.strict_words(got)
    assert "3 hung with no twin: 2 exact (66.7 %), 1 undecided" in words
    assert "3 with a twin (built, or the flags'): 1 named (a bet" in words and "2 undecided" in words.rpartition(";")[2]


def test_a_twin_that_differs_only_in_when_it_issues_its_calls_is_found_at_the_case_s_times():
    """Real seed 363000231 (torch 2.15, 2026-12-06; the same in the simulation): ranks 1 and 2 of a world of three
    run a barrier on their pair each step, rank 2 left the one of step 4 out, and the job hung at its end: rank 1 in
    the pair's #48, ranks 0 and 2 in the world's closing barrier.  The verdict names nobody, and the strict test
    counted it a miss: no twin built left its documents.  The program with one more barrier on the pair after
    the world's, rank 1 skipping the world's, leaves them call for call; only the times differ, the builder
    keeping each moved call's time (``later``: the pair's step-4 barrier issued last, at step 4's time).  A
    program's calls come when its compute lets them, which the verdict does not weigh: issued at the case's times
    (``twins.retimed``) the twin leaves the case's documents, and the strict test finds it."""
    res = run.judge(363000231, check_healthy=False)
    assert res.outcome == "undecided" and not res.case.undecidable
    faulty = _faulty(res.case)
    healthy, twin_faulty, culprit = twins.BUILDERS["later"](res.case, faulty)
    assert culprit == 1 and twins.healthy_ends(res.case.program, healthy)
    _, mine = twins.documents_of(res.case.program, res.case.calls, res.case.seed)
    sim, theirs = twins.documents_of(res.case.program, twin_faulty, res.case.seed)
    assert sim.hung and theirs != mine  # the builder's times
    again = twins.retimed(res.case, twin_faulty)
    assert [[(c.group, c.op, c.step, c.slot) for c in again[r]] for r in sorted(again)] == [
        [(c.group, c.op, c.step, c.slot) for c in twin_faulty[r]] for r in sorted(twin_faulty)]  # the same calls
    sim, theirs = twins.documents_of(res.case.program, again, res.case.seed)
    assert sim.hung and theirs == mine
    assert twins.built_twins(res.case, faulty) == ["later"]
