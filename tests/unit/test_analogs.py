"""A desync with no majority decided by the groups like the stuck one (analogs.py; issue 42, item 5), on the
fuzzer's simulated documents (tests/fuzz): the rank that left the program is named where other groups with
the stuck group's history went past the place with one call; nothing is named where they disagree there or
where their histories are not the stuck group's."""
import copy
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))  # tests/, for ``fuzz``

from c10d_observer import analogs, verdict  # noqa: E402
from fuzz import programs, simulate  # noqa: E402

# a pair group (ranks 0-1) of a job of four pairs; rank 1 skipped all_reduce #28 on it: its broadcast #28 (the
# pair's call #27 again) meets rank 0's all_reduce #28, one each, no majority; the other three pairs went past #28
# with an all_reduce.  As simulated, the case is one the verdict must not decide (a program with that broadcast
# twice in a row, rank 0 skipping one, leaves the same documents: ``test_a_call_that_repeats_the_one_before_it``);
# the tests of the like groups' rule read rank 1's call #28 as an all_gather of the all_reduce's tensor (a desync:
# nothing repeats, one field changed)
SEED = 1000182


def _simulated(seed, **shape):
    """(the generated case of ``seed``, its ranks' documents at hang time, as the simulator renders them)."""
    case = programs.make_case(seed, **shape)
    _, _, docs = simulate.run_case(case, simulate.mode_of(seed))
    return case, docs


def _in_flight(docs, rank, stream, seq, **fields):
    """``docs`` with ``rank``'s call ``seq`` of ``stream``, in flight, given ``fields`` (op=, size=)."""
    new = copy.deepcopy(docs)
    for g in new[rank]["groups"]:
        if g.get("stream") == stream and g.get("in_flight_seq") == seq:
            g.update(("in_flight_" + k, v) for k, v in fields.items())
    return new


def _docs(size="65536 x int64"):
    case, docs = _simulated(SEED)
    return case, _in_flight(docs, 1, "1", 28, op="all_gather", size=size)


def test_a_call_that_repeats_the_one_before_it_names_nobody_and_says_why():
    """The case as simulated: rank 1's broadcast #28 is the pair's broadcast #27 again; the pairs like it issued an
    all_reduce at #28, but a program in which this pair alone runs that broadcast twice here (a slot every few
    steps, first run at step 13), rank 0 skipping one of the two, leaves these documents, and names rank 0: the
    verdict names nobody and says why (mismatch._unless_a_repeat), as the fuzzer flags it
    (programs._repeat_at_place, its twin built by twins.extra)."""
    case, docs = _simulated(SEED)
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("1", 28, {1})
    assert v.culprit_ranks == [] and not h.mismatch.odd_ranks, v.summary
    assert "but rank 1's call at #28 is the group's call at #27 again (broadcast of 4 x int64" in h.mismatch.evidence
    assert "rank 0 leaving out one of the two, leaves the same documents" in h.mismatch.evidence
    assert any(h.mismatch.evidence in u for u in v.undecided), v.undecided
    _, faulty, _ = simulate.run_case(case, simulate.mode_of(SEED))
    flagged = simulate.flag_at_hang(case, faulty)
    assert flagged.undecidable and flagged.why_undecidable.startswith(programs.REPEAT_PREFIX), flagged.why_undecidable


def _stuck(v):
    [h] = [h for h in v.hangs if h.mismatch]
    return h


def test_the_rank_whose_call_is_not_the_one_the_like_groups_issued_there_is_named_with_the_evidence():
    case, docs = _docs()
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("1", 28, {1})
    assert v.culprit_ranks == [1] and h.mismatch.odd_ranks == [1], v.summary
    assert h.mismatch.evidence.startswith("no majority in the group; groups 2, 3, 4, whose calls #"), h.mismatch.evidence
    assert "issued all_reduce of 65536 x int64 at #28" in h.mismatch.evidence and "again" not in h.mismatch.evidence
    assert h.mismatch.evidence in verdict.format_text(v.to_json())


def _edit(docs, stream, seqs, op):
    """Every rank's record of calls ``seqs`` on ``stream`` says ``op``."""
    docs = copy.deepcopy(docs)
    for d in docs.values():
        for g in d.get("groups") or ():
            if g.get("stream") == stream:
                for c in g.get("recent_ops") or ():
                    if c[0] in seqs:
                        c[1] = op
                if g.get("in_flight_seq") in seqs:
                    g["in_flight_op"] = op
    return docs


def test_like_groups_that_issued_different_calls_at_the_place_decide_nothing():
    _, docs = _docs()
    v = verdict.analyze(_edit(docs, "2", {28}, "broadcast"))  # one pair went past #28 with rank 1's call
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary
    assert any("none has a majority" in u for u in v.undecided), v.undecided


def _other_history(docs):
    """Two of the three pairs issued another op before the place (#26): one pair like group 1 is left."""
    for stream in ("2", "3"):
        docs = _edit(docs, stream, {26}, "reduce_scatter")
    return docs


def test_groups_whose_history_is_not_the_stuck_groups_do_not_speak_for_it():
    _, docs = _docs()
    v = verdict.analyze(_other_history(docs))
    h = _stuck(v)
    # the one pair left speaks only with the period of group 1's own calls (the next test takes that away)
    assert v.culprit_ranks == [1], v.summary
    assert h.mismatch.evidence.startswith("no majority in the group; group 4, whose calls #"), h.mismatch.evidence
    assert "which this group's own calls #" in h.mismatch.evidence


def test_a_call_of_another_op_and_size_never_shown_is_not_outvoted_by_like_groups_or_the_period():
    """Rank 1's call #28 an all_gather of the broadcast's 4 x int64 (root 0, as simulated): another op and another
    size than the all_reduce of 65536 x int64 that group 4 and group 1's period put there, of a kind no record
    showed: no one field of a call changed, but another call, which a call of group 1's own, first run there, may
    be, rank 0 leaving it out (analogs.new_kind; the fuzzer's stages seeds 228006973, 253007367): nobody is named,
    and the verdict says why."""
    _, docs = _docs(size="4 x int64, root 0")
    v = verdict.analyze(_other_history(docs))
    h = _stuck(v)
    assert v.culprit_ranks == [] and not h.mismatch.odd_ranks, v.summary
    assert "but rank 1 issued all_gather of 4 x int64, root 0, another op and size, of a kind no record " \
           "showed" in h.mismatch.evidence, h.mismatch.evidence
    assert any(h.mismatch.evidence in u for u in v.undecided), v.undecided
    # three like groups, which issued the all_reduce at #28, do not outvote it either (the fuzzer's stages seed
    # 404008047, wrong until 2026-12-07): a slot of group 1's own may be first run there
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert v.culprit_ranks == [] and not h.mismatch.odd_ranks, v.summary
    assert h.mismatch.evidence.startswith("no majority in the group; groups 2, 3, 4, whose calls #"), h.mismatch.evidence
    assert "another op and size, of a kind no record showed" in h.mismatch.evidence, h.mismatch.evidence
    # the same call with the program's size (one field changed) is named, as the test above shows; so is a barrier
    # issued there (a call of no tensor: the rank-dependent barrier, the classic bug)
    _, docs = _docs(size=None)
    v = verdict.analyze(_other_history(_in_flight(docs, 1, "1", 28, op="barrier")))
    assert v.culprit_ranks == [1], v.summary


def test_one_like_group_without_the_stuck_groups_own_period_decides_nothing():
    _, docs = _docs()
    # group 1 and its like group 4 issued a call at #25 that no period holds: group 1's calls show none
    v = verdict.analyze(_edit(_edit(_other_history(docs), "1", {25}, "all_gather"), "4", {25}, "all_gather"))
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary


# Where no group like the stuck one went past the place (their records of calls no longer reach back to it),
# the stuck group's own calls speak: a pair of a job of six pairs, rank 5 skipped the second of three calls of
# each step at step 5 (its all_gather of 4 x float32, the period's third, meets rank 4's second, #17)
OWN = 7000099


def _own():
    return _simulated(OWN)


def test_the_rank_that_left_out_a_call_of_its_groups_own_period_is_named_with_the_evidence():
    case, docs = _own()
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("3", 17, {5})
    assert v.culprit_ranks == [5] and h.mismatch.odd_ranks == [5], v.summary
    assert h.mismatch.evidence == (
        "no majority in the group; its calls #1-#16 repeat every 3 calls, which puts all_gather of 1024 x bfloat16 "
        "at #17; rank 5 issued the call it puts at #18 (1 left out)"), h.mismatch.evidence


def test_a_call_the_period_does_not_hold_decides_nothing():
    case, docs = _own()
    # rank 5's call at #17 is one its group never issued (a last batch, smaller, say): either side may have
    # changed; the same where the group's calls break the period just before the place
    v = verdict.analyze(_in_flight(docs, 5, "3", 17, size="4 x int64"))
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary
    assert any("none has a majority" in u for u in v.undecided), v.undecided
    v = verdict.analyze(_edit(docs, "3", {16}, "broadcast"))
    assert v.culprit_ranks == [], v.summary


# shape "stages": pairs 0-1 and 2-3 run broadcast, broadcast, all_reduce each step, pair 4-5 one broadcast more (a
# pipeline's last stage); rank 0 skipped its all_reduce at step 6 (#21 on group 1) and issued the next step's
# broadcast; pair 2-3 went past #21 more than a record ago, pair 4-5's record holds the same calls in another order
STAGES_OWN = 95000188


def test_a_group_of_its_size_whose_period_its_calls_do_not_hold_leaves_its_own_period_to_decide():
    case, docs = _simulated(STAGES_OWN, shape="stages")
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("1", 21, {0})
    # the group's own period reads the place (pair 4-5's record does not refute it); but rank 0's broadcast #21 is
    # the pair's #20 again, so a program with that broadcast twice here, rank 1 skipping one, is its twin: nobody
    # is named (mismatch._unless_a_repeat), the period's reading said
    assert v.culprit_ranks == [] and h.mismatch.odd_ranks == [], v.summary
    assert h.mismatch.evidence.startswith(
        "no majority in the group; its calls #1-#20 repeat every 3 calls, which puts all_reduce of 1048576 x "
        "float32 at #21; rank 0 issued the call it puts at #22 (1 left out); but rank 0's call at #21 is the "
        "group's call at #20 again"), h.mismatch.evidence
    # the rule alone: pair 4-5's record (b, b, b, a) is a program that pair 0-1's calls (b, b, a) do not hold
    streams = {"1": {"ranks": (0, 1), "calls": dict(enumerate(["b", "b", "a"] * 3, 1)), "clash": set()},
               "3": {"ranks": (4, 5), "calls": dict(enumerate(["b", "b", "b", "a"] * 4, 1)), "clash": set()}}
    assert not analogs._period_refuted(streams, "1", ["b", "b", "a"], mine=["b", "b", "a"] * 3)
    # a record that shows no period of its own still refutes: the program's period may be longer than it
    streams["3"]["calls"] = dict(enumerate(["b", "b", "a", "b", "b", "a", "a"] * 2, 1))
    assert analogs._period_refuted(streams, "1", ["b", "b", "a"], mine=["b", "b", "a"] * 3)
    # a period the stuck group's few calls hold (a, b each step, b once more every other: 17002512) refutes too
    streams["3"]["calls"] = dict(enumerate(["b", "a", "b", "a", "a"] * 3, 1))
    assert analogs._period_refuted(streams, "1", ["b", "a"], mine=["b", "a", "b", "a"])
    assert not analogs._period_refuted(streams, "1", ["b", "a"], mine=["b", "a"] * 3)


# a job of four pairs (groups 1-4); rank 2 issued its pair's first all_reduce with int64 where rank 3 and the
# other three pairs used float32: one each in group 2, nothing before the place; three groups of its size went
# past #1 with rank 3's call, but no step of group 2 is on record: a program whose pair 2 runs one call more
# (a pipeline's stage), rank 3 at fault, leaves the same documents (analogs.early_call, alike_in_a_step)
EARLY = 7000022
# a job of six pairs (groups 1-6); rank 0 left out its pair's all_reduce of 65536 x int64 at step 1 (#4): its
# 1048576 x int64 meets rank 1's 65536 x int64 at #4; the other five pairs went past #4 with 65536, and a whole
# step of pair 1 (#1-#3: two calls a step) is on record before it
STEPPED = 7000651


def _early():
    return _simulated(EARLY)


def _names_nobody_with_lead(v, h, lead):
    """The stuck call's mismatch names nobody; ``lead`` is its evidence and ends its undecided line."""
    assert v.culprit_ranks == [] and not h.mismatch.odd_ranks, v.summary
    assert h.mismatch.evidence == lead
    assert any(u.endswith("none has a majority; " + lead) for u in v.undecided), v.undecided


def test_at_a_groups_first_call_the_groups_of_its_size_give_a_lead_and_name_nobody():
    case, docs = _early()
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected, case.undecidable) == ("2", 1, {2}, False)
    lead = ("3 groups of its size (1, 3, 4) issued all_reduce of 65536 x float32 at #1, but this group's record "
            "shows less than a step of their program before it: groups of one size may run different calls (a "
            "pipeline's stages), so they do not decide")
    _names_nobody_with_lead(v, h, lead)
    assert lead in verdict.format_text(v.to_json())


def test_once_a_step_of_the_group_is_on_record_the_groups_of_its_size_still_only_give_a_lead():
    """They named the rank against them until 2026-12-05: a group may run a call the other groups of its size do
    not, first at a step after its record (the fuzzer's stages seed 131006330: a pair's all_gather every third
    step from step 2, left out by one rank; the other rank was named, below), and its twin leaves these
    documents."""
    case, docs = _simulated(STEPPED)
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("1", 4, {0})
    lead = ("5 groups of its size (2, 3, 4, 5 and 1 more), whose calls #1-#3 were this group's, issued all_reduce "
            "of 65536 x int64 at #4 and went past it, but a group may run a call the others do not at a step its "
            "record has not reached (a pipeline's stage), so they do not decide")
    _names_nobody_with_lead(v, h, lead)


@pytest.mark.parametrize("source", ["exact", "nccl"])
def test_a_pairs_call_no_other_pair_runs_first_at_step_2_names_nobody(source):
    """The fuzzer's stages seed 131006330 (``benchmarks/fuzz.py --shape stages --source nccl --seed 131``): dp pair
    0-4 runs an all_gather of 65536 x int64 every third step from step 2, which the other three pairs never run;
    rank 4 left the first one out and met rank 0's with its next call, the pairs' all_gather of 1048576 x float32.
    The three other pairs, whose calls #1-#2 were this pair's and which ran a step of its program, issued that call
    at #3, and rank 0 was named; a rank 0 that issued its #3 of another size, in a program without the pair's own
    call, leaves the same documents.  Nobody is named."""
    from fuzz import run
    res = run.judge(131006330, check_healthy=False, shape="stages", source=source)
    assert 0 not in res.culprits and res.outcome in ("undecided", "undecided_ok"), (res.culprits, res.summary)


def test_at_a_groups_first_calls_two_groups_or_groups_that_disagree_decide_nothing():
    _, docs = _simulated(STEPPED)
    v = verdict.analyze(_edit(docs, "4", {4}, "broadcast"))  # one of the five went past #4 another way
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary
    two = copy.deepcopy(docs)
    for d in two.values():  # groups 4-6's ranks say nothing of them: two groups of its size are left
        d["groups"] = [g for g in d.get("groups") or () if g.get("stream") not in ("4", "5", "6")]
    v = verdict.analyze(two)
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary


# a one-step job of six pairs (groups 1-6), the world's two broadcasts between each pair's two all_reduces: rank 10
# issued a barrier for its pair's second all_reduce (#2); the other five pairs went past #2 with the all_reduce.
# Between the world's two broadcasts no pair made a call: that interval is no step of the pair's program, and the
# program whose pair 10-11 runs one more call there (a stage's barrier), rank 11 skipping it, leaves the same
# documents (the fuzzer's flag at the first step, twins.extra)
ZERO_STEP = 1008687


def test_an_interval_of_the_worlds_calls_with_no_call_of_the_group_is_no_step_on_record():
    case, docs = _simulated(ZERO_STEP)
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("6", 2, {10})
    assert v.culprit_ranks == [] and not h.mismatch.odd_ranks, v.summary
    assert "shows less than a step of their program before it" in h.mismatch.evidence, h.mismatch.evidence


# A ring job whose link 1 -> 2 carries two rings' tensors by turns (4 x float32, then 1 x float32, each step);
# rank 1 left its isend of 1 x float32 out of its batch at step 32: its next send on the link is the other
# ring's (4 x float32) and meets rank 2's recv of 1 x float32 at #66, one each, no other link like it
# (analogs.p2p_own_pattern: the link's own period)
LINK = 61000104


def _link():
    return _simulated(LINK, shape="ring")


def test_the_half_of_a_link_that_left_out_a_size_of_its_links_own_period_is_named_with_the_evidence():
    case, docs = _link()
    v = verdict.analyze(docs)
    h = _stuck(v)
    assert (h.stream, h.seq, case.expected) == ("0:p2p:1->2", 66, {1})
    assert v.culprit_ranks == [1] and h.mismatch.odd_ranks == [1], v.summary
    assert h.mismatch.evidence == (
        "no majority in the pair; its calls #35-#65 repeat every 2 calls, which puts 1 x float32 at #66; "
        "rank 1's half carried the size it puts at #67 (1 call left out)"), h.mismatch.evidence


def test_a_size_the_links_period_does_not_hold_or_a_period_broken_before_decides_nothing():
    _, docs = _link()
    # a size the link never carried: either half may have changed
    v = verdict.analyze(_in_flight(docs, 1, "0:p2p:1->2", 66, size="8 x float32"))
    assert v.culprit_ranks == [] and not _stuck(v).mismatch.odd_ranks, v.summary
    new = copy.deepcopy(docs)
    for d in new.values():
        for g in d.get("groups") or ():
            if g.get("stream") == "0:p2p:1->2":
                for c in g.get("recent_ops") or ():
                    if c[0] == 63:
                        c[2] = "1 x float32"  # the period broken two calls before the place
    v = verdict.analyze(new)
    assert v.culprit_ranks == [], v.summary


def test_the_groups_tables_are_made_once_a_verdict_and_kept_by_its_documents_only():
    """analogs' tables of the groups' calls (``_streams``, ``_p2p_streams``): made once for the analysis's
    documents (verdict.analysis.ByRank's ``memo``, which a verdict's rules read several times), each time for any
    other mapping (no module-level cache holds a verdict's documents after it: a merging watchdog's 16,384)."""
    from c10d_observer import analogs
    from c10d_observer.documents import RankDoc
    from c10d_observer.verdict.analysis import ByRank
    _, docs = _docs()
    plain = {r: RankDoc.of(d) for r, d in docs.items()}
    for table in (analogs._streams, analogs._p2p_streams):
        assert table(plain) == table(plain) and table(plain) is not table(plain)
        held = ByRank(plain)
        held.memo = {}
        first = table(held)
        assert table(held) is first and first == table(plain)
        assert table(ByRank(plain)) is not table(ByRank(plain))  # (its documents not final: no memo yet)
    # the verdict of these documents is the one the tables made anew give (the rule that reads them names rank 1)
    assert verdict.analyze(docs).culprit_ranks == [1]
