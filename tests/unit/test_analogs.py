"""A desync with no majority decided by the groups like the stuck one (analogs.py; issue 42, item 5), on the
fuzzer's simulated documents (tests/fuzz): the rank that left the program is named where other groups with
the stuck group's history went past the place with one call; nothing is named where they disagree there or
where their histories are not the stuck group's."""
import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))  # tests/, for ``fuzz``

from c10d_observer import verdict  # noqa: E402
from fuzz import programs, simulate  # noqa: E402

# a pair group (ranks 0-1) of a job of four pairs; rank 1 skipped all_reduce #28 on it: its broadcast #28 meets
# rank 0's all_reduce #28, one each, no majority; the other three pairs went past #28 with an all_reduce
SEED = 1000182


def _docs():
    case = programs.make_case(SEED)
    _, _, docs = simulate.run_case(case, simulate.mode_of(SEED))
    return case, docs


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
    assert "issued all_reduce of 65536 x int64 at #28" in h.mismatch.evidence
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


def test_groups_whose_history_is_not_the_stuck_groups_do_not_speak_for_it():
    _, docs = _docs()
    edited = docs
    for stream in ("2", "3"):  # two of the three pairs issued another op before the place: one pair is left
        edited = _edit(edited, stream, {26}, "all_gather")
    v = verdict.analyze(edited)
    assert v.culprit_ranks == [], v.summary
