"""The fuzzer's faults in the making of the groups (tests/fuzz/programs.py, MAKING_KINDS; run by real ranks only:
tests/fuzz/real_rank.py makes each rank's groups as ``programs.making`` says).  No torch, no ranks: each generated
case changes exactly what its kind says on exactly one rank, and every other rank makes the program's groups in
the order of their names."""
import collections
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))  # tests/, for ``fuzz``

from fuzz import programs, run  # noqa: E402

SEEDS = [run.case_seed(71, i) for i in range(300)]


def _cases(kind):
    cases = [programs.make_case(s, kind=kind) for s in SEEDS]
    return [c for c in cases if c.fault is not None]


def _program_order(case):
    return [(gid, tuple(case.program.groups[gid].ranks))
            for gid in sorted((g for g in case.program.groups if g != "0"), key=int)]


ONE_RANK = ("make_order", "make_members", "make_skip")  # the kinds with one faulty rank (make_own: every rank)


def test_every_kind_in_the_making_is_tested_here():
    assert set(programs.MAKING_KINDS) == set(ONE_RANK) | {"make_own"}


@pytest.mark.parametrize("kind", ONE_RANK)
def test_only_the_faulty_rank_makes_its_groups_another_way(kind):
    cases = _cases(kind)
    assert len(cases) > 50, len(cases)
    for case in cases:
        f = case.fault
        assert f.kind == kind and f.call is None and f.step == -1, f
        assert case.expected == {f.rank}
        assert case.calls == case.program.calls  # nothing in the loop changed
        want = _program_order(case)
        for r in range(case.program.world):
            if r != f.rank:
                assert programs.making(case, r) == want, (case.seed, r)
        mine = programs.making(case, f.rank)
        assert mine != want and len(mine) == len(want) - (kind == "make_skip"), (case.seed, mine, want)
        assert mine[:f.index] == want[:f.index], case.seed  # the first making that differs is at the fault's index
        assert mine[f.index] != want[f.index], case.seed


def test_a_rank_that_makes_two_groups_the_other_way_round_swaps_two_of_other_members():
    for case in _cases("make_order"):
        j, mine, want = case.fault.index, programs.making(case, case.fault.rank), _program_order(case)
        assert mine[j:j + 2] == [want[j + 1], want[j]] and mine[j + 2:] == want[j + 2:], case.seed
        assert set(want[j][1]) != set(want[j + 1][1]), case.seed  # two groups alike: no fault at all
        assert case.fault.rank in set(want[j][1]) | set(want[j + 1][1]), case.seed  # else torch 2.x makes neither


def test_a_rank_that_passes_other_members_passes_one_rank_more_or_fewer():
    for case in _cases("make_members"):
        j, mine, want = case.fault.index, programs.making(case, case.fault.rank), _program_order(case)
        assert mine[j][0] == want[j][0] and mine[j + 1:] == want[j + 1:], case.seed
        assert len(set(mine[j][1]) ^ set(want[j][1])) == 1 and mine[j][1], (case.seed, mine[j], want[j])
        assert all(0 <= q < case.program.world for q in mine[j][1]), case.seed
        assert case.fault.rank in set(mine[j][1]) | set(want[j][1]), case.seed  # else torch 2.x makes neither


def test_a_rank_that_leaves_a_making_out_leaves_out_one_of_a_group_it_is_not_in_before_one_it_is_in():
    """``if rank in ranks: new_group(ranks)`` on one rank: the group it left out is not its own (it could not call
    a group it never made), and a later one is (else nothing it makes is named otherwise)."""
    for case in _cases("make_skip"):
        j, mine, want = case.fault.index, programs.making(case, case.fault.rank), _program_order(case)
        r = case.fault.rank
        assert mine == want[:j] + want[j + 1:], case.seed
        assert r not in want[j][1] and any(r in ranks for _, ranks in want[j + 1:]), case.seed


def test_every_rank_that_makes_only_its_own_groups_is_no_culprit_and_the_case_is_flagged():
    """The guard on every rank: each makes exactly the groups it is in, in the program's order; no rank is the odd
    one (the documents of a program whose groups came in another order would be the same), so nobody is
    expected and the case is flagged undecidable; the fault's rank is the first whose group took another name."""
    cases = _cases("make_own")
    assert len(cases) > 50, len(cases)
    for case in cases:
        want, f = _program_order(case), case.fault
        assert case.expected == set() and case.undecidable and "only the groups it is in" in case.why_undecidable
        assert case.calls == case.program.calls
        for r in range(case.program.world):
            assert programs.making(case, r) == [m for m in want if r in m[1]], (case.seed, r)
        mine = programs.making(case, f.rank)
        assert mine[:f.index] == want[:f.index] and mine[f.index] != want[f.index], case.seed
        for r in range(case.program.world):  # no rank's making departs from the program's order before it
            assert programs.making(case, r)[:f.index] == want[:f.index] or len(programs.making(case, r)) <= f.index, (
                case.seed, r)


@pytest.mark.parametrize("kind", ONE_RANK)
def test_two_ranks_that_made_their_groups_two_ways_are_flagged_undecidable(kind):
    """One rank against one: no majority says which way the program meant (the verdict's "none has a majority").
    (A 2-rank program of these shapes has one subgroup at most: only ``make_members`` finds a place there.)"""
    cases = _cases(kind)
    assert any(c.program.world == 2 for c in cases) == (kind == "make_members")
    assert any(c.program.world > 2 for c in cases)
    for case in cases:
        assert case.undecidable == (case.program.world == 2), (case.seed, case.why_undecidable)


def test_the_simulated_fuzzer_runs_a_fault_in_the_making_and_refuses_what_it_does_not_model(tmp_path):
    """--kind make_order simulated: torch 2.x's and 1.x's makings (tests/fuzz/making.py), a line each, every case
    judged; two faults or the NCCL model: a usage error that says so (real ranks run two: --real-only --two)."""
    fuzz = os.path.join(HERE, os.pardir, os.pardir, "benchmarks", "fuzz.py")
    p = subprocess.run([sys.executable, fuzz, "--kind", "make_order", "--cases", "30", "--seed", "71", "--out",
                        str(tmp_path / "out.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "make_order, torch 2.x: 30 cases" in p.stdout and "make_order, torch 1.x: 30 cases" in p.stdout, p.stdout
    for bad in (["--two"], ["--source", "nccl"]):
        p = subprocess.run([sys.executable, fuzz, "--kind", "make_order", "--cases", "1"] + bad, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        assert p.returncode == 2 and "--kind make_order, simulated: one fault" in p.stderr, p.stderr


@pytest.mark.parametrize("kind", programs.MAKING_KINDS)
def test_two_faults_with_the_first_in_the_making_add_one_of_the_loop_on_another_rank(kind):
    """make_case2 with a making kind (real ranks' --two): the making's fault as make_case's kind makes it, and one
    fault of the loop (FAULT_KINDS) on another rank; expected both ranks, or the loop's alone for make_own (no rank
    of its making is at fault)."""
    seen = set()
    for s in SEEDS:
        case = programs.make_case2(s, kind=kind)
        if case.fault is None:
            continue
        f = case.fault
        assert f.kind == kind and f.call is None and case.making, s
        assert case.calls != case.program.calls or case.stop, s  # the loop's fault changed a call or stops a rank
        changed = {r for r in range(case.program.world) if case.calls[r] != case.program.calls[r]} | set(case.stop)
        assert len(changed) == 1, (s, changed)
        [second] = changed
        seen.add(f.detail.split("; and ")[1].split(" ")[0])
        if kind == "make_own":
            assert case.expected == {second} and not case.undecidable, s
        else:
            assert second != f.rank and case.expected == {f.rank, second}, s
            assert programs.making(case, f.rank) != _program_order(case), s
    assert seen == set(programs.FAULT_KINDS), seen


@pytest.mark.parametrize("line", ["2.x", "1.x"])
@pytest.mark.parametrize("kind", programs.MAKING_KINDS)
def test_the_simulated_making_holds_ranks_as_torch_does_and_the_verdict_names_no_wrong_rank(kind, line):
    """tests/fuzz/making.py over 120 seeds a kind and line: each rank's making stream is its sequence of new_group
    calls (one call a group on 2.x; on 1.x two, the factory and the world's barrier after it, of one members), done
    up to the one it is held in; a held rank's last call is not done, a rank past every making has each done; the
    faulty rank of a one-rank kind is held (its group is not the others'); and the verdict on the documents names no
    rank outside the expected ones (make_own: nobody)."""
    from fuzz import making
    judged = exact = 0
    for s in SEEDS[:120]:
        case = programs.make_case(s, kind=kind)
        if case.fault is None:
            continue
        made, held = making.run_making(case, line)
        for r in range(case.program.world):
            mine = programs.making(case, r)
            calls = made[r]
            per = 1 if line == "2.x" else 2
            assert [q for q, _, _ in calls] == list(range(1, len(calls) + 1)), (s, r, calls)
            assert [m for _, m, _ in calls] == [tuple(mine[i // per][1]) for i in range(len(calls))], (s, r)
            if r in held:
                assert calls and not calls[-1][2] and all(done for _, _, done in calls[:-1]), (s, r, calls)
            else:
                assert len(calls) == per * len(mine) and all(done for _, _, done in calls), (s, r, calls)
        f = case.fault
        _, across = making._races(case, [programs.making(case, r) for r in range(case.program.world)])
        if kind != "make_own" and f.rank in programs.making(case, f.rank)[f.index][1] and len(
                programs.making(case, f.rank)[f.index][1]) > 1 and not across:
            assert f.rank in held, (s, held)  # (a member that left itself out passes at once: the others wait;
            # where gloo's race lets ranks through alone, wired across, it may be one of them)
        _, outcome, named, summary = making.judge(s, kind, line)
        if outcome == "nohang":
            assert not held, s  # every group's members agreed under its name, or passed wired across: no hang
            continue
        judged += 1
        exact += outcome in ("exact", "undecided_ok")
        # undecided_ok: flagged (making.flag_at_hang), as 71000054, make_members: rank 5 adds itself to a group of
        # every rank but itself, and every rank is held at new_group #1: the documents of every rank making only its
        # own groups of a program with both groups, where no rank is at fault
        assert outcome in ("exact", "undecided_ok"), (s, outcome, named, sorted(case.expected), summary)
    assert judged > 30 and exact >= 0.9 * judged, (judged, exact)


def test_a_making_older_than_the_record_of_the_rank_that_made_it_apart_is_flagged_and_names_nobody():
    """233000658 (``--kind make_order --shape mesh3d``, 64 ranks, found by the first simulated runs): rank 10 made
    new_group #3 and #4 the other way round (#3 a group it is not in: through at once), gloo's race let it through
    #4 alone, and it went on past all 48 makings; its document keeps its last 32 calls (#17-#48, the others'), so
    nothing shows its #3, and ranks 8, 9 and 11 wait there for it: "cannot decide", nobody named, and the case is
    flagged (making.flag_at_hang), not a miss."""
    from fuzz import making
    case, outcome, named, summary = making.judge(233000658, "make_order", "2.x", shape="mesh3d")
    assert (outcome, named) == ("undecided_ok", []), (outcome, named, summary)
    assert "#3, is older than the 32 calls its document keeps" in case.why_undecidable


# the fixed corpus's share of making cases (test_fuzz_corpus's C10D_FUZZ_CORPUS: 10,000 on the 2.13 line, 200
# elsewhere): a tenth of it a kind and line, seeds of run.py --seed 2
MAKING_CORPUS = max(20, int(os.environ.get("C10D_FUZZ_CORPUS") or 200) // 10)


@pytest.mark.parametrize("kind", programs.MAKING_KINDS)
def test_the_simulated_making_corpus_names_no_wrong_rank(kind):
    """MAKING_CORPUS seeds a kind, torch 2.x's and 1.x's makings (tests/fuzz/making.py): no rank named outside the
    expected ones; every case judged exact, or flagged and nobody named."""
    from fuzz import making
    seen = collections.Counter()
    for line in making.LINES:
        for i in range(MAKING_CORPUS):
            s = run.case_seed(2, i)
            case, outcome, named, summary = making.judge(s, kind, line)
            seen[outcome] += 1
            assert outcome in (None, "nohang", "exact", "undecided_ok"), (s, line, outcome, named, summary)
    assert seen["exact"] > MAKING_CORPUS // 2, seen
