"""ordering_culprit: who broke the order of calls across groups, from histories of simulated programs."""
import random

from c10d_observer.ordering import Call, ordering_culprit

HOUR = 3600.0
WORLD4 = {"0": [0, 1, 2, 3], "1": [2, 3]}


def run(members, program, steps, keep=16, offsets=None, seed=0):
    """Ranks run ``program(rank, step)`` (a list of (stream, op)) for each step with blocking calls, until
    none can move: each tick, a rank whose call every member of its stream has started goes on to its next
    call.  Returns (histories, last_started, stuck calls) as a watchdog would see them: the last ``keep``
    calls per stream, shuffled, each rank on its own clock (hours apart, running at its own speed)."""
    ranks = sorted({r for rs in members.values() for r in rs})
    if offsets is None:
        offsets = {r: (-1) ** r * (r + 1) * 5 * HOUR for r in ranks}
    todo = {r: [c for i in range(steps) for c in program(r, i)] for r in ranks}
    started = {r: {} for r in ranks}
    calls = {r: [] for r in ranks}
    waits, tick, moved = {}, 0, True
    while moved:
        tick, moved = tick + 1, False
        for r in ranks:
            w = waits.get(r)
            if w and all(started[m].get(w[0], 0) >= w[1] for m in members[w[0]]):
                del waits[r]
        for r in ranks:
            if r not in waits and todo[r]:
                stream, op = todo[r].pop(0)
                seq = started[r][stream] = started[r].get(stream, 0) + 1
                calls[r].append(Call(stream, seq, op, offsets[r] + tick * (1 + 0.1 * r)))
                waits[r], moved = (stream, seq), True
    histories = {}
    for r in ranks:
        kept = [c for c in calls[r] if c.seq > started[r][c.stream] - keep]
        random.Random(seed + r).shuffle(kept)
        histories[r] = kept
    stuck = []
    for key in sorted(set(waits.values())):
        waiting = sorted(r for r, w in waits.items() if w == key)
        missing = [m for m in members[key[0]] if started[m].get(key[0], 0) < key[1]]
        if missing:
            stuck.append((key[0], key[1], waiting, missing))
    return histories, started, stuck


def culprit(members, program, steps, **kw):
    histories, last, stuck = run(members, program, steps, **kw)
    return ordering_culprit(histories, last, members, stuck)


def skipping(rank, step, stream, subgroup=(2, 3), sub="1"):
    """The brief's program: a world all_reduce, then one on `sub` by the ranks of `subgroup`, every step;
    `rank` leaves out its call on `stream` at `step`."""
    def program(r, i):
        calls = [("0", "all_reduce")] + ([(sub, "all_reduce")] if r in subgroup else [])
        return [c for c in calls if (r, i, c[0]) != (rank, step, stream)]
    return program


def test_the_stuck_calls_of_the_example_form_a_cycle():
    _, last, stuck = run(WORLD4, skipping(2, 3, "1"), 8)
    assert stuck == [("0", 5, [0, 1, 2], [3]), ("1", 4, [3], [2])]
    assert last[2] == {"0": 5, "1": 3} and last[3] == {"0": 4, "1": 4}


def test_the_rank_that_skipped_its_subgroup_call_is_named():
    got = culprit(WORLD4, skipping(2, 3, "1"), 8)
    assert got._asdict() == {
        "rank": 2, "issued": ("0", 5), "skipped": ("1", 4), "witnesses": [3],
        "text": "rank 2 issued all_reduce #5 on group 0 without its all_reduce #4 on group 1, which rank 3 "
                "issued between all_reduce #4 and #5 on group 0 (as rank 2 did with #3 between #3 and #4)"}


def test_clocks_hours_apart_and_the_order_of_the_history_do_not_matter():
    want = culprit(WORLD4, skipping(2, 3, "1"), 8)
    for seed, offsets in enumerate([{0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}, {0: 0.0, 1: 9 * HOUR, 2: 30 * HOUR, 3: -7 * HOUR},
                                    {0: 1e9, 1: 0.0, 2: -3 * HOUR, 3: 11 * HOUR}]):
        assert culprit(WORLD4, skipping(2, 3, "1"), 8, offsets=offsets, seed=seed * 7) == want


def test_a_skip_by_the_other_subgroup_rank_names_that_rank():
    got = culprit(WORLD4, skipping(3, 5, "1"), 9)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (3, ("0", 7), ("1", 6), [2])


def test_a_rank_ahead_on_a_subgroup_of_two_is_not_named_by_its_partner_alone():
    # rank 2 leaves out world #4 and issues its group-1 #4 straight after group-1 #3: the pattern and rank 3,
    # itself stuck in world #4, put world #4 first.  The program with one more group-1 all_reduce there (run
    # every few steps, first run now), which rank 3 left out, leaves the same documents: nobody is named
    # (ordering._twin_of_a_sparse_call; the fuzzer's seed 7059038 is that program, and rank 2 was named)
    histories, last, stuck = run(WORLD4, skipping(2, 3, "0"), 8)
    assert stuck == [("0", 4, [0, 1, 3], [2]), ("1", 4, [2], [3])]
    assert ordering_culprit(histories, last, WORLD4, stuck) is None
    # a third rank of the subgroup that kept the order is a second witness: that twin needs two faults
    three = {"0": [0, 1, 2, 3, 4], "1": [2, 3, 4]}
    histories, last, stuck = run(three, skipping(2, 3, "0", subgroup=(2, 3, 4)), 8)
    got = ordering_culprit(histories, last, three, stuck)
    assert got is not None and got.rank == 2 and got.witnesses == [3, 4], got


def test_a_swap_of_two_calls_in_one_step_of_a_pair_is_a_twin_and_names_nobody():
    # rank 1 issues its step's broadcast before its all_reduce: the program with a broadcast run every few
    # steps, first run there, which rank 0 left out, leaves the same documents (ordering._twin_of_a_sparse_call)
    def program(r, i):
        calls = [("0", "all_reduce"), ("1", "broadcast")]
        return calls[::-1] if (r, i) == (1, 4) else calls
    assert culprit({"0": [0, 1], "1": [0, 1]}, program, 8) is None


def test_a_program_order_deadlock_from_the_first_step_is_not_decided():
    def program(r, i):
        calls = [("0", "all_reduce"), ("1", "all_reduce")]
        return calls[::-1] if r == 1 else calls
    histories, last, stuck = run({"0": [0, 1], "1": [0, 1]}, program, 3)
    assert stuck == [("0", 1, [0], [1]), ("1", 1, [1], [0])]
    assert ordering_culprit(histories, last, {"0": [0, 1], "1": [0, 1]}, stuck) is None


def test_histories_too_short_to_show_the_pattern_decide_nothing():
    assert culprit(WORLD4, skipping(2, 3, "1"), 8, keep=2) is None
    assert culprit(WORLD4, skipping(2, 1, "1"), 8) is None  # the skip at the second step: one earlier pair


def test_the_pattern_alone_names_a_rank_no_other_rank_can_witness():
    # three pairs of ranks in a ring: 0-1 on "a", 1-2 on "b", 2-0 on "c"; rank 1 leaves out its "b" call
    members = {"a": [0, 1], "b": [1, 2], "c": [0, 2]}

    def program(r, i):
        calls = [(s, "all_reduce") for s in ("a", "b", "c") if r in members[s]]
        return [c for c in calls if (r, i, c[0]) != (1, 5, "b")]
    histories, last, stuck = run(members, program, 10)
    assert {c[0] for c in stuck} == {"a", "b", "c"}
    got = ordering_culprit(histories, last, members, stuck, group_name=lambda s: "group %r" % s)
    assert got._asdict() == {
        "rank": 1, "issued": ("a", 7), "skipped": ("b", 6), "witnesses": [],
        "text": "rank 1 issued all_reduce #7 on group 'a' without its all_reduce #6 on group 'b', which the earlier "
                "steps place between all_reduce #6 and #7 on group 'a' (as rank 1 did with #5 between #5 and #6)"}


def test_a_third_group_outside_the_cycle_changes_nothing():
    members = {"0": list(range(6)), "1": [2, 3], "2": [4, 5]}

    def program(r, i):
        calls = [("0", "all_reduce")] + [(s, "reduce_scatter") for s in ("1", "2") if r in members[s]]
        return [c for c in calls if (r, i, c[0]) != (3, 6, "1")]
    histories, last, stuck = run(members, program, 10)
    assert sorted(c[0] for c in stuck) == ["0", "1"]
    got = ordering_culprit(histories, last, members, stuck)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (3, ("0", 8), ("1", 7), [2])
    assert got.text.startswith("rank 3 issued all_reduce #8 on group 0 without its reduce_scatter #7 on "
                                  "group 1, which rank 2 issued between")


def test_two_subgroup_calls_per_step_follow_a_period_of_two():
    def program(r, i):
        calls = [("0", "all_reduce")] + ([("1", "all_gather"), ("1", "reduce_scatter")] if r in (2, 3) else [])
        return calls[:2] if (r, i) == (3, 4) else calls
    got = culprit(WORLD4, program, 8)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (3, ("0", 6), ("1", 10), [2])
    assert got.text == ("rank 3 issued all_reduce #6 on group 0 without its reduce_scatter #10 on group 1, "
                           "which rank 2 issued between all_reduce #5 and #6 on group 0 (as rank 3 did with #9 "
                           "between #5 and #6)")


def test_several_world_calls_per_subgroup_call():
    def program(r, i):
        calls = [("0", "all_reduce"), ("0", "broadcast")] + ([("1", "all_reduce")] if r in (2, 3) else [])
        return calls[:2] if (r, i) == (2, 4) else calls
    got = culprit(WORLD4, program, 8)
    assert (got.rank, got.issued, got.skipped) == (2, ("0", 11), ("1", 5))
    assert "between broadcast #10 and all_reduce #11 on group 0" in got.text


def test_p2p_and_barrier_streams_are_streams_like_any_other():
    members = {"0": [0, 1, 2], "0:p2p:1->2": [1, 2], "3:monitored_barrier": [0, 1, 2]}

    def program(r, i):
        calls = [("3:monitored_barrier", "monitored_barrier")]
        if r == 1 and (r, i) != (1, 4):
            calls.append(("0:p2p:1->2", "send"))
        elif r == 2:
            calls.append(("0:p2p:1->2", "recv"))
        return calls
    got = culprit(members, program, 8)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (
        1, ("3:monitored_barrier", 6), ("0:p2p:1->2", 5), [2])
    # rank 2's recv is not rank 1's op on that stream: the stream's name (1->2) says rank 1's is the send
    assert got.text == ("rank 1 issued monitored_barrier #6 on group 3:monitored_barrier without its send #5 "
                           "on group 0:p2p:1->2, which rank 2 issued between monitored_barrier #5 and #6 on group "
                           "3:monitored_barrier (as rank 1 did with #4 between #4 and #5)")


def test_a_program_without_a_pattern_is_not_decided():
    order = random.Random(3)
    flips = [order.random() < 0.5 for _ in range(12)]

    def program(r, i):
        calls = [("0", "all_reduce")] + ([("1", "all_reduce")] if r in (2, 3) else [])
        if flips[i] and r in (2, 3):
            calls = calls[::-1]
        return [c for c in calls if (r, i, c[0]) != (2, 8, "1")]
    assert culprit(WORLD4, program, 12) is None


def test_two_ranks_out_of_order_are_not_decided():
    def program(r, i):
        calls = [("0", "all_reduce")] + ([("1", "all_reduce")] if r in (1, 2, 3) else [])
        return [c for c in calls if (r, i, c[0]) not in ((1, 4, "1"), (2, 4, "1"))]
    got = culprit({"0": [0, 1, 2, 3], "1": [1, 2, 3]}, program, 8)
    assert got is None


def test_a_rank_without_a_history_or_a_call_without_a_start_time():
    histories, last, stuck = run(WORLD4, skipping(2, 3, "1"), 8)
    assert ordering_culprit({r: h for r, h in histories.items() if r != 3}, last, WORLD4, stuck) is None
    assert ordering_culprit(histories, {r: p for r, p in last.items() if r != 3}, WORLD4, stuck) is None
    # rank 3's group-1 #4 without a time: the pattern of the earlier steps still says where it goes
    untimed = dict(histories)
    untimed[3] = [c._replace(started_at=None) if (c.stream, c.seq) == ("1", 4) else c for c in histories[3]]
    got = ordering_culprit(untimed, last, WORLD4, stuck)
    assert (got.rank, got.witnesses) == (2, [])
    assert "which the earlier steps place between all_reduce #4 and #5 on group 0" in got.text


def test_a_cycle_on_one_stream_has_no_order_to_break():
    histories, last, stuck = run(WORLD4, skipping(2, 3, "1"), 8)
    assert ordering_culprit(histories, last, WORLD4, [c for c in stuck if c[0] == "0"]) is None
    assert ordering_culprit({}, {}, {}, []) is None


def timeline(text, clock=0.0):
    """A rank's calls from "a1 b1 a2 ...": stream, then sequence number, one second apart on its clock."""
    return [Call(w[0], int(w[1:]), "all_reduce", clock + i) for i, w in enumerate(text.split())]


def test_ranks_that_went_on_past_the_skipped_call_are_witnesses_unless_they_disagree():
    members = {"a": [0, 1, 2], "b": [0, 1, 2]}
    culprit_calls = timeline("a1 b1 a2 b2 a3 b3 a4 a5", clock=5 * HOUR)
    in_order = timeline("a1 b1 a2 b2 a3 b3 a4 b4 a5 b5")
    last = {r: {"a": 5, "b": 5} for r in (1, 2)}
    last[0] = {"a": 5, "b": 3}
    cycle = [("a", 5, [0], [1, 2]), ("b", 4, [1, 2], [0])]
    got = ordering_culprit({0: culprit_calls, 1: in_order, 2: in_order}, last, members, cycle)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (0, ("a", 5), ("b", 4), [1, 2])
    assert "which ranks 1, 2 issued between all_reduce #4 and #5 on group a" in got.text
    # a call started at the same instant as one on the other stream has no place: rank 2 alone witnesses
    tied = [c._replace(started_at=6.0) if (c.stream, c.seq) == ("b", 4) else c for c in in_order]
    got = ordering_culprit({0: culprit_calls, 1: tied, 2: in_order}, last, members, cycle)
    assert (got.rank, got.witnesses) == (0, [2])
    # ranks that went on past b #4 put it at different places: the program has no one order there
    other_order = timeline("a1 b1 a2 b2 a3 b3 b4 a4 a5 b5")
    assert ordering_culprit({0: culprit_calls, 1: in_order, 2: other_order}, last, members, cycle) is None
    # ... or at any earlier call: their order is not one program's, so the pattern proves nothing
    other_order = timeline("a1 b1 b2 a2 a3 b3 a4 b4 a5 b5")
    assert ordering_culprit({0: culprit_calls, 1: in_order, 2: other_order}, last, members, cycle) is None


def test_a_gap_in_a_history_leaves_that_call_without_a_place():
    # rank 3's world #6 is lost: its group-1 #6 (and #5) have no place, so rank 3 witnesses nothing and the
    # place of group-1 #6 comes from the pattern of the earlier steps
    histories, last, stuck = run(WORLD4, skipping(2, 5, "1"), 10)
    assert [c[:2] for c in stuck] == [("0", 7), ("1", 6)]
    got = ordering_culprit(histories, last, WORLD4, stuck)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (2, ("0", 7), ("1", 6), [3])
    histories[3] = [c for c in histories[3] if (c.stream, c.seq) != ("0", 6)]
    got = ordering_culprit(histories, last, WORLD4, stuck)
    assert (got.rank, got.issued, got.skipped, got.witnesses) == (2, ("0", 7), ("1", 6), [])
    # with the gap earlier on, too few places are left for a pattern
    histories, last, stuck = run(WORLD4, skipping(2, 3, "1"), 8)
    histories[3] = [c for c in histories[3] if (c.stream, c.seq) != ("0", 4)]
    assert ordering_culprit(histories, last, WORLD4, stuck) is None


def test_a_call_that_comes_before_the_first_call_of_the_other_stream_is_said_so():
    from c10d_observer.ordering import _text
    histories = {0: timeline("a1 a2"), 1: timeline("b1 a1 b2")}
    text = _text(histories, 0, "a", "b", 0, 1, [1], {}, lambda s: "group " + s)
    assert text == ("rank 0 issued all_reduce #1 on group a without its all_reduce #1 on group b, which rank 1 "
                    "issued before all_reduce #1 on group a")


def test_ranks_that_have_not_issued_the_call_yet_bound_its_place_from_below():
    # the fuzzer's seed 7000533: two halves, each step a barrier on the half then two world calls, an
    # all_reduce on the halves every 5 steps (no period the rule reads); rank 3 leaves out the world's
    # all_gather at step 5.  Ranks 4-6 wait in world #12 before their barrier #8, rank 3 waits in barrier #8
    members = {"0": list(range(7)), "1": [0, 1, 2], "2": [3, 4, 5, 6]}

    def program(r, i):
        half = "1" if r < 3 else "2"
        calls = ([(half, "all_reduce")] if i % 5 == 4 else []) + [(half, "barrier"), ("0", "all_reduce"),
                                                                   ("0", "all_gather")]
        return calls[:-1] if (r, i) == (3, 5) else calls
    histories, last, stuck = run(members, program, 8)
    assert ("2", 8, [3], [4, 5, 6]) in stuck
    got = ordering_culprit(histories, last, members, stuck)
    assert got is not None and got.rank == 3 and got.skipped == ("0", 12)


def test_a_subgroup_skip_at_step_1_has_a_twin_with_the_other_rank_at_fault():
    # issue 42's subgroup_skip_early: each step a world call, then one on [2, 3]; rank 2 skips its subgroup
    # call at step 1.  Its twin: a program with one more world call at step 1 (every two steps, first met
    # there), which rank 3 skipped.  Each rank issues the same calls in the same order in both, and both hang
    # in the same calls: no rule can name either rank, and none does
    def genuine(r, i):
        calls = [("0", "all_reduce")] + ([("1", "all_reduce")] if r in (2, 3) else [])
        return [c for c in calls if (r, i, c[0]) != (2, 1, "1")]

    def twin(r, i):
        calls = [("0", "all_reduce")] + ([("0", "all_reduce")] if i % 2 == 1 and r != 3 else []) + (
            [("1", "all_reduce")] if r in (2, 3) else [])
        return calls
    runs = [run(WORLD4, program, steps) for program, steps in ((genuine, 6), (twin, 4))]
    orders = [{r: [(c.stream, c.seq) for c in sorted(h[r], key=lambda c: c.started_at)] for r in h}
              for h, _, _ in runs]
    assert orders[0] == orders[1]
    assert runs[0][2] == runs[1][2] == [("0", 3, [0, 1, 2], [3]), ("1", 2, [3], [2])]
    for histories, last, stuck in runs:
        assert ordering_culprit(histories, last, WORLD4, stuck) is None


def _recorded(name):
    """A cycle as the ordering rule read it in a real run (tests/data), as ordering_culprit's arguments."""
    import json
    import os
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data", name)) as f:
        d = json.load(f)
    histories = {int(r): [Call(*c) for c in calls] for r, calls in d["histories"].items()}
    last = {int(r): s for r, s in d["last_started"].items()}
    done = {int(r): s for r, s in d["last_completed"].items()}
    return histories, last, done, d["members"], [tuple(c) for c in d["cycle"]], d["like"]


def test_a_3d_jobs_skipped_tensor_parallel_call_is_named_from_32_calls_of_history_and_not_from_16():
    # benchmarks/job3d.py (pp 2 x dp 2 x tp 2, FSDP2 and pipelining on 8 gloo ranks): rank 5 leaves out one
    # tensor-parallel all_reduce; the stage's four ranks wait in a cycle of tp and dp calls.  A step holds 8 tp
    # and about 12 dp calls per rank: the pattern rule needs 2p + 1 places, more than 16 calls show
    # (rank_docs.HISTORY was 16 until this run)
    histories, last, done, members, cycle, like = _recorded("ordering-3d-tp-skip.json")
    got = ordering_culprit(histories, last, members, cycle, like=like, last_completed=done)
    assert got is not None and got.rank == 5 and got.skipped == ("11", 246)
    short = {r: [c for c in calls if c.seq > last[r].get(c.stream, 0) - 16] for r, calls in histories.items()}
    assert ordering_culprit(short, last, members, cycle, like=like, last_completed=done) is None


def test_one_rank_of_many_at_another_place_neither_blocks_nor_names_and_the_skip_is_named():
    # the fuzzer's real programs, seed 9000040 (2.13, 6 gloo ranks): rank 3 skips the world's broadcast #2 and
    # issues the subset's all_reduce #1.  gloo completes the broadcast for ranks 0, 2, 5, who go on to the
    # all_reduce; rank 1 stays in the broadcast.  Rank 3 alone puts the all_reduce one world call earlier, and
    # its world count, one short, was the least bound of the subset's next call: each held a rank "may be out
    # of order" and the skip was "cannot decide".  All but one of three or more speak for a place and a bound.
    histories, last, done, members, cycle, like = _recorded("ordering-real-9000040.json")
    got = ordering_culprit(histories, last, members, cycle, like=like, last_completed=done)
    assert got is not None and got.rank == 3 and got.skipped == ("0", 2), got


def test_the_least_bound_of_a_place_outvotes_one_rank_only_among_three():
    # places.lower_bound: of two ranks that have not issued B #3, either may be the one off; of three, one
    from c10d_observer.places import lower_bound as _lower_bound
    assert _lower_bound({}, {}, 3, pending=[2, 5]) == 2
    assert _lower_bound({}, {}, 3, pending=[1, 5, 5]) == 5
    assert _lower_bound({}, {}, 3, pending=[5, 5, 9]) == 5


def test_one_rank_against_every_other_rank_of_both_groups_is_named_where_the_histories_say_nothing():
    """ordering.majority_culprit (the fuzzer's swap, seed 7000084): rank 11 issued the epilogue's barrier before
    its half's last all_reduce, which ranks 6-10 and 12 issued first; no history holds the barrier."""
    from c10d_observer import ordering
    members = {"2": list(range(6, 13)), "0": list(range(13))}
    cycle = [("0", 1, [0, 1, 2, 3, 4, 5, 11], [6, 7, 8, 9, 10, 12]), ("2", 110, [6, 7, 8, 9, 10, 12], [11])]
    found = ordering.majority_culprit(members, cycle)
    assert found.rank == 11 and found.issued == ("0", 1) and found.skipped == ("2", 110)
    assert found.witnesses == [6, 7, 8, 9, 10, 12] and "every other rank of both groups" in found.text
    # two ranks in both groups, one each way: no majority
    assert ordering.majority_culprit({"1": [1, 10], "0": list(range(12))},
                                     [("0", 8, [0, 1, 2], [10]), ("1", 8, [10], [1])]) is None
    # two ranks went the other way round: no one rank to name
    assert ordering.majority_culprit(members, [("0", 1, [0, 1, 2, 3, 4, 5, 11, 12], [6, 7, 8, 9, 10]),
                                               ("2", 110, [6, 7, 8, 9, 10], [11, 12])]) is None
    # a rank of both groups in neither call (elsewhere): the two calls do not say its order
    assert ordering.majority_culprit(members, [("0", 1, [0, 1, 2, 3, 4, 5, 11], [6, 7, 8, 9, 10]),
                                               ("2", 110, [6, 7, 8, 9, 10], [11, 12])]) is None


def test_the_ranks_of_groups_like_the_stuck_one_count_against_the_one_rank_of_a_pair():
    """ordering.majority_culprit with ``like`` (the fuzzer's seed 7000122: rank 6 skipped the world's barrier at
    step 2 and waits in its pair's all_reduce #3; its pair's other rank, 7, waits in the barrier #5 with every
    other rank): one rank each way in both groups, but the ranks of the four pairs like rank 6's wait in the
    barrier without their own pair's #3: they issued the barrier first too."""
    from c10d_observer import ordering
    pairs = {str(g): [2 * (g - 1), 2 * (g - 1) + 1] for g in range(1, 6)}
    members = dict(pairs, **{"0": list(range(10))})
    cycle = [("0", 5, [0, 1, 2, 3, 4, 5, 7, 8, 9], [6]), ("4", 3, [6], [7])]
    like = {"4": ["1", "2", "3", "5"], "0": []}
    last = {r: {"0": 5, str(r // 2 + 1): 2} for r in range(10)}
    last[6] = {"0": 4, "4": 3}
    assert ordering.majority_culprit(members, cycle) is None  # rank 6 against rank 7 alone
    found = ordering.majority_culprit(members, cycle, like=like, last_started=last)
    assert found.rank == 6 and found.issued == ("4", 3) and found.skipped == ("0", 5), found
    assert found.witnesses == [7, 0, 1, 2, 3, 4, 5, 8, 9], found.witnesses
    assert "so did ranks 0, 1, 2, 3, 4, 5, 8, 9, of groups like group 4, before #3 on their own" in found.text
    # one of those ranks issued its own pair's #3 and went on to the barrier: the program may put #3 first
    last[0] = {"0": 5, "1": 3}
    assert ordering.majority_culprit(members, cycle, like=like, last_started=last) is None


def test_the_other_pairs_of_an_exchange_count_against_the_one_rank_of_a_p2p_call():
    """The same for a p2p call of the cycle (the fuzzer's seed 7000023: rank 2 skipped the world's all_reduce at
    step 1 and waits in its recv #3 from rank 4, which waits in the all_reduce #4 with every other rank): the
    ranks of the exchange's other pairs (analogs.like_p2p) wait in the all_reduce with two calls each way."""
    from c10d_observer import ordering
    pairs = [(3, 1), (5, 6), (4, 2), (0, 7)]
    members = {"0": list(range(8))}
    last = {r: {"0": 4} for r in range(8)}
    for a, b in pairs:
        for s, d in ((a, b), (b, a)):
            members["0:p2p:%d->%d" % (s, d)] = sorted((s, d))
            last[s]["0:p2p:%d->%d" % (s, d)] = last[d]["0:p2p:%d->%d" % (s, d)] = 2
    last[2].update({"0": 3, "0:p2p:4->2": 3})
    cycle = [("0", 4, [0, 1, 3, 4, 5, 6, 7], [2]), ("0:p2p:4->2", 3, [2], [4])]
    like = {"0:p2p:4->2": ["0:p2p:0->7", "0:p2p:3->1", "0:p2p:5->6", "0:p2p:7->0", "0:p2p:1->3", "0:p2p:6->5"]}
    assert ordering.majority_culprit(members, cycle) is None
    found = ordering.majority_culprit(members, cycle, like=like, last_started=last)
    assert found.rank == 2 and found.issued == ("0:p2p:4->2", 3) and found.skipped == ("0", 4), found


def test_ranks_a_broadcast_let_through_before_the_other_call_issued_it_first():
    """majority_culprit (the fuzzer's seed 7002244): rank 6 skipped its half's broadcast #12; the ranks of its
    half went on, and at the end the root, rank 4, waits in broadcast #23 for rank 6, which waits with every
    other rank in the epilogue's barrier; gloo's tree let ranks 5, 7 and 8 through #23 (they issued it, then
    the barrier): with rank 4 they issued the broadcast first, rank 6 alone the barrier."""
    from c10d_observer import ordering
    members = {"2": [4, 5, 6, 7, 8], "0": list(range(9))}
    cycle = [("2", 23, [4], [6]), ("0", 1, [0, 1, 2, 3, 5, 6, 7, 8], [4])]
    last = {r: {"0": 1, "2": 23} for r in (5, 7, 8)}
    last.update({4: {"2": 23}, 6: {"0": 1, "2": 22}})
    assert ordering.majority_culprit(members, cycle) is None  # without the counts: ranks 5, 7, 8 unplaced
    found = ordering.majority_culprit(members, cycle, last_started=last)
    assert found.rank == 6 and found.issued == ("0", 1) and found.skipped == ("2", 23), found
    assert found.witnesses == [4, 5, 7, 8]
    last[5] = {"0": 1, "2": 22}  # rank 5 too went to the barrier without #23: two ranks, no one to name
    assert ordering.majority_culprit(members, cycle, last_started=last) is None


def test_a_prologue_before_the_loop_leaves_the_loops_pattern_to_speak_and_a_short_end_does_not():
    """patterns.extrapolate: the places of B calls among A calls (B #k after A #known[k]).  A prologue's
    broadcast and the loop's first all_gather both come before the first send (places 0, 0), then one each
    step: the whole run has no period, its end (8 of 9 places) has one (the fuzzer's seed 7002206).  Three
    B calls every two A calls whose last three places happen to rise by one each: the whole run's period
    (3) speaks, not the end's (1) (seed 7001375).  A run whose end is under three quarters of it: nothing."""
    from c10d_observer.patterns import extrapolate as _extrapolate
    prologue = {1: 0, 2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 6, 9: 7}
    assert _extrapolate(prologue, 10) == (8, 1, 1, True)
    assert _extrapolate(prologue, 10, end=False) == (None, None, None, False)
    three_in_two = {1: 0, 2: 0, 3: 1, 4: 2, 5: 2, 6: 3, 7: 4, 8: 4, 9: 5, 10: 6}
    assert _extrapolate(three_in_two, 11) == (6, 2, 3, False)
    broken = {1: 0, 2: 3, 3: 1, 4: 0, 5: 2, 6: 3, 7: 4, 8: 5}
    assert _extrapolate(broken, 9) == (None, None, None, False)


def test_a_pattern_holds_over_the_multiples_of_its_period_its_run_spans():
    """patterns.multiples: a period p that held over the whole run of 2kp + 1 places or more holds as kp too (the
    same place at the target), so a B call of two sizes in turn (the world's all_reduces of a pair's step, one a
    step among the pair's calls: period 1 among the places, 2 among the calls) is the pattern's call by two
    periods (the fuzzer's ``--kind swap`` seed 13000147).  Over the run's end only: the period alone."""
    from c10d_observer.patterns import multiples
    one_a_step = dict((s, s) for s in range(1, 13))
    assert multiples(one_a_step, 13, 1, False) == [1, 2, 3, 4, 5]
    assert multiples(one_a_step, 13, 2, False) == [1, 2]
    assert multiples(one_a_step, 13, 1, True) == [1]
    assert multiples({1: 0, 2: 1, 3: 2}, 4, 1, False) == [1]


def test_a_rank_that_went_past_its_slot_in_its_step_leaves_no_twin_of_a_sparse_call():
    """ordering._past_its_slot: each step rank 0 sends on 0->1 (B), receives on 2->0, then all_reduces on the
    world (A); at step 3 it left the send out, received, and waits in the world's #4.  Its recv #3 came after
    A #3 and its recv #2 between B #2 and A #3: it went past B #3's place.  Without that recv, nothing says so;
    nor does a recv from the rank B sends to (1->0): that link and B may be two slots of a step, and the twin's
    extra call may come between them (the fuzzer's seed 7018297)."""
    from c10d_observer import ordering
    C = ordering.Call
    calls = []
    for k in (1, 2):
        calls += [C("g:p2p:0->1", k, "send", 10.0 * k), C("g:p2p:2->0", k, "recv", 10.0 * k + 1),
                  C("g", k + 1, "all_reduce", 10.0 * k + 2)]
    calls += [C("g", 1, "broadcast", 1.0), C("g:p2p:2->0", 3, "recv", 31.0), C("g", 4, "all_reduce", 32.0)]
    assert ordering._past_its_slot(calls, "g", "g:p2p:0->1", 3, 3)
    assert not ordering._past_its_slot([c for c in calls if (c.stream, c.seq) != ("g:p2p:2->0", 3)],
                                       "g", "g:p2p:0->1", 3, 3)
    # a recv that came before the send each step is no call past the send's place
    early = [c._replace(started_at=c.started_at - 2) if c.stream == "g:p2p:2->0" else c for c in calls]
    assert not ordering._past_its_slot(early, "g", "g:p2p:0->1", 3, 3)
    back = [c._replace(stream="g:p2p:1->0") if c.stream == "g:p2p:2->0" else c for c in calls]
    assert not ordering._past_its_slot(back, "g", "g:p2p:0->1", 3, 3)
    assert ordering._past_its_slot(back, "g", "g:p2p:0->1", 3, 3, batch=True)  # a batch's: no call between


def test_a_p2p_call_a_rank_never_issued_is_named_by_its_part_on_the_stream():
    from c10d_observer.ordering import Call, _op
    histories = {5: [Call("0:p2p:5->6", 7, "send", 1.0)], 6: [Call("0", 9, "all_gather", 2.0)]}
    assert _op(histories, 6, "0:p2p:5->6", 8) == "recv" and _op(histories, 5, "0:p2p:5->6", 8) == "send"
    assert _op(histories, 6, "0", 9) == "all_gather"


def test_the_other_links_of_a_chain_waiting_in_their_own_call_count_against_the_head():
    """majority_culprit with ``like`` for the stuck call X (the fuzzer's seed 7003238): a chain 2 -> 3 -> 4 ->
    5 -> 6; rank 2, its head, skipped a send and, one send short, waits in the epilogue's barrier; each
    receiver waits in its recv #57: rank 3 alone of both groups against rank 2, but the receivers of the
    links like 2->3 (ranks 5, 6) wait in their own #57 and never arrived at the barrier: X first, with 3."""
    from c10d_observer import ordering
    links = ["0:p2p:%d->%d" % (a, a + 1) for a in range(2, 6)]
    members = dict({s: [int(s[-4]), int(s[-1])] for s in links}, **{"0": list(range(16))})
    cycle = [("0", 2, [0, 1, 2] + list(range(7, 16)), [3, 4, 5, 6])] + [
        (s, 57, [int(s[-1])], [int(s[-4])]) for s in links]
    last = {r: {"0": 2} for r in range(16)}
    last[2] = {"0": 2, links[0]: 56}
    for a in range(3, 7):
        last[a] = {"0": 1, links[a - 3]: 57}
        if a < 6:
            last[a][links[a - 2]] = 56
    like = {links[0]: [links[2], links[3]]}
    assert ordering.majority_culprit(members, cycle, last_started=last) is None  # rank 3 against rank 2 alone
    found = ordering.majority_culprit(members, cycle, like=like, last_started=last)
    assert found.rank == 2 and found.issued == ("0", 2) and found.skipped == (links[0], 57), found
    assert found.witnesses == [3, 5, 6] and "so did ranks 5, 6, of groups like group 0:p2p:2->3, with #57" in found.text
    last[6] = {"0": 2, links[3]: 56}  # rank 6 waits in the barrier without its own #57: Y may come first
    cycle[0] = ("0", 2, [0, 1, 2, 6] + list(range(7, 16)), [3, 4, 5])
    cycle[-1] = (links[3], 57, [], [5])
    assert ordering.majority_culprit(members, cycle, like=like, last_started=last) is None


def test_a_rank_that_went_past_the_place_as_the_ranks_of_like_streams_did_is_not_named():
    # the fuzzer's seed 140095256, in small: three pairs, each step a world barrier then the pair's all_gather, and
    # every nine steps one world barrier more, first run at step 8, which rank 3 skipped.  Rank 2 issued the
    # world's #10 without its pair's #9, which rank 3 issued after the world's #9 as every earlier step put it;
    # so did ranks 0, 1, 4 and 5 with their own pairs' #9, which had run where pair 2-3's does.  Had rank 2 broken
    # the order they would have issued their #9 first: rank 2 is in order as they are (ordering._others_went_past_too)
    members = {"0": list(range(6)), "1": [0, 1], "2": [2, 3], "3": [4, 5]}

    def program(r, i):
        pair = str(1 + r // 2)
        calls = ([("0", "barrier")] if i % 9 == 8 else []) + [("0", "barrier"), (pair, "all_gather")]
        return calls[1:] if (r, i) == (3, 8) else calls
    histories, last, stuck = run(members, program, 12)
    assert stuck == [("0", 10, [0, 1, 2, 4, 5], [3]), ("2", 9, [3], [2])]
    got = ordering_culprit(histories, last, members, stuck)
    assert got is None or got.rank == 3, got


def test_places_that_go_back_across_seqs_are_no_one_programs():
    """places.in_order: a like group of another pace, whose record holds other seqs than the pair's, agrees with
    the pair at no seq (consensus) but puts a later call 30 places before an earlier one (the fuzzer's stages
    seed 227003504: pair [2, 3]'s #27 at the dp group's #32, pair [0, 1]'s #26 at #62)."""
    from c10d_observer.places import consensus, in_order
    known = consensus({0: {25: 60, 24: 58}, 2: {27: 32, 28: 32}}, {0: 26, 2: 30})
    assert known == {24: 58, 25: 60, 27: 32, 28: 32}
    assert not in_order(known)
    assert in_order({24: 58, 25: 60, 26: 60, 27: 62})
    assert in_order({})
