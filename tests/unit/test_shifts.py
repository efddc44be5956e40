"""shift_culprit: a rank that left out a call long before the hang, found by where its calls sit among its
other group's calls (issue 42's 2 x 2 mesh), from histories of simulated programs (test_ordering.run)."""
from c10d_observer.ordering import ordering_culprit
from c10d_observer.shifts import shift_culprit

from test_ordering import run

# a 2 x 2 mesh: tensor-parallel groups "2" [0, 1] and "3" [2, 3], data-parallel "4" [0, 2] and "5" [1, 3]
MESH = {"0": [0, 1, 2, 3], "2": [0, 1], "3": [2, 3], "4": [0, 2], "5": [1, 3]}
LIKE = {"2": ["3"], "3": ["2"], "4": ["5"], "5": ["4"]}


def mesh(skipper, at, steps=24, tp_first=None):
    """Each step a tp all_reduce then a dp all_reduce, a barrier at the end; ``skipper`` leaves out its tp
    call at step ``at``.  ``tp_first``: {rank: False} for ranks whose program issues dp first."""
    def program(r, i):
        tp, dp = ("2" if r < 2 else "3"), ("4" if r % 2 == 0 else "5")
        calls = [(tp, "all_reduce"), (dp, "all_reduce")]
        if (tp_first or {}).get(r, True) is False:
            calls.reverse()
        if (r, i) == (skipper, at):
            calls = [c for c in calls if c[0] != tp]
        return calls + ([("0", "barrier")] if i == steps - 1 else [])
    histories, last, stuck = run(MESH, program, steps)
    waiting = {r for c in stuck for r in c[2]}
    done = {r: {s: n - (1 if any(r in c[2] and c[0] == s for c in stuck) else 0) for s, n in calls.items()}
            for r, calls in last.items()}
    assert waiting  # it hangs
    return histories, last, done, stuck


def culprit(histories, last, done, stuck, like=LIKE):
    return shift_culprit(histories, last, done, MESH, stuck, lambda s: like.get(s, []))


def test_a_tp_call_skipped_long_before_the_hang_names_the_rank_that_skipped_it():
    histories, last, done, stuck = mesh(skipper=3, at=3)
    assert ordering_culprit(histories, last, MESH, stuck) is None  # each side finds the other out of order
    got = culprit(histories, last, done, stuck)
    assert got.rank == 3 and got.skipped == ("3", 24) and got.issued == ("0", 1)
    assert got.witnesses == [0, 1, 2]
    assert "one call on group 5 later than ranks 0, 1, 2" in got.text
    assert "since before the calls its history keeps" in got.text


def test_the_partner_that_skipped_is_named_not_a_rank_of_a_place_in_the_mesh():
    got = culprit(*mesh(skipper=2, at=5))
    assert got.rank == 2 and got.skipped == ("3", 24)
    got = culprit(*mesh(skipper=0, at=4))
    assert got.rank == 0 and got.skipped == ("2", 24)


def test_a_skip_the_history_still_shows_is_dated():
    got = culprit(*mesh(skipper=3, at=16))
    assert got.rank == 3
    assert "from its #17 on: it left out a call on group 3 before it" in got.text


def test_without_groups_like_its_own_one_partner_is_too_few_witnesses():
    assert culprit(*mesh(skipper=3, at=3), like={}) is None


def test_groups_of_one_family_that_order_their_calls_apart_decide_nothing():
    # tp group [0, 1] issues dp first, [2, 3] tp first, and rank 3 skips: then ranks 0, 1 and 3 place their
    # calls alike and rank 2 is the odd one by the places; but rank 2 is not where a rank with one call more
    # waits (it waits in its tp call), and rank 3's witnesses disagree: nobody is named (rank 2 would be wrong)
    histories, last, done, stuck = mesh(skipper=3, at=3, tp_first={1: False, 0: False})
    assert culprit(histories, last, done, stuck) is None


def test_a_group_that_makes_one_call_more_than_the_groups_like_it_decides_nothing():
    # the program's tp group [0, 1] makes one more tp call at the end than [2, 3] (a last stage's loss), and
    # rank 2 makes it too (it runs the other stage's code): rank 3 waits in the barrier with one tp call
    # fewer than rank 1, as after a skip, but its calls sit where its partner's do: nobody is named
    def program(r, i):
        tp, dp = ("2" if r < 2 else "3"), ("4" if r % 2 == 0 else "5")
        extra = [(tp, "all_reduce")] if i == 23 and r in (0, 1, 2) else []
        return [(tp, "all_reduce"), (dp, "all_reduce")] + extra + ([("0", "barrier")] if i == 23 else [])
    histories, last, stuck = run(MESH, program, 24)
    done = {r: {s: n - (1 if any(r in c[2] and c[0] == s for c in stuck) else 0) for s, n in calls.items()}
            for r, calls in last.items()}
    assert ("3", 25, [2], [3]) in stuck
    assert culprit(histories, last, done, stuck) is None


def test_a_skip_that_hangs_at_once_leaves_no_shift_to_read():
    # world then subgroup each step; rank 2 skips its subgroup call at step 1: the hang comes there and then
    members = {"0": [0, 1, 2, 3], "1": [2, 3]}

    def program(r, i):
        calls = [("0", "all_reduce")] + ([("1", "all_reduce")] if r in (2, 3) else [])
        return [c for c in calls if (r, i, c[0]) != (2, 1, "1")]
    histories, last, stuck = run(members, program, 20)
    done = {r: dict(calls) for r, calls in last.items()}
    for r in done:
        for c in stuck:
            if r in c[2]:
                done[r][c[0]] -= 1
    assert shift_culprit(histories, last, done, members, stuck, lambda s: []) is None
