"""left_out_culprit: a rank whose own period of calls shows, once, the call it never arrived at (issue 42: a
pipeline stage that skips one send mid-run hangs the job only at its end, an ordering cycle the order rules
leave undecided), from histories of simulated programs (test_ordering.run: real blocking matching, each rank
on its own clock, histories shuffled and cut to the last ``keep`` calls a stream)."""
from c10d_observer.left_out import batch_culprit, left_out_culprit
from c10d_observer.ordering import ordering_culprit
from c10d_observer.streams import p2p_name

from test_ordering import run

A, B, C = p2p_name("0", 5, 6), p2p_name("0", 6, 7), p2p_name("0", 6, 5)  # a chain 5 -> 6 -> 7, and back to 5
CHAIN = {"0": [5, 6, 7], A: [5, 6], B: [6, 7], C: [6, 5]}


def chain(skipper, at, steps=12, keep=32, skip=B, first=None, back=False):
    """Each step rank 5 sends to 6, 6 receives and sends to 7, 7 receives (and, ``back``, 6 then sends to 5,
    which receives); a barrier after the loop.  ``skipper`` leaves out its call on ``skip`` at step ``at``;
    ``first``: an op issued once before the loop (a prologue's broadcast)."""
    def program(r, i):
        calls = {5: [(A, "send")], 6: [(A, "recv"), (B, "send")], 7: [(B, "recv")]}[r]
        calls = calls + ([{5: (C, "recv"), 6: (C, "send")}[r]] if back and r != 7 else [])
        if (r, i) == (skipper, at):
            calls = [c for c in calls if c[0] != skip]
        return ([("0", first)] if first and i == 0 else []) + calls + ([("0", "barrier")] if i == steps - 1 else [])
    histories, last, stuck = run(CHAIN, program, steps, keep=keep)
    done = {r: {s: n - (1 if any(r in c[2] and c[0] == s for c in stuck) else 0) for s, n in calls.items()}
            for r, calls in last.items()}
    assert stuck  # it hangs
    return histories, last, done, stuck


def culprit(histories, last, done, stuck):
    return left_out_culprit(histories, last, done, stuck)


def test_a_send_left_out_mid_run_names_the_stage_from_its_own_period():
    histories, last, done, stuck = chain(skipper=6, at=8)
    # the stage waits in the barrier, its next stage in a recv it never posts: each finds the other out of order
    assert any(c[0] == B and c[3] == [6] for c in stuck)
    assert ordering_culprit(histories, last, CHAIN, stuck) is None
    got = culprit(histories, last, done, stuck)
    assert got.rank == 6 and got.skipped == (B, 12) and got.issued == ("0", 1)
    assert "rank 6 left out its send" in got.text and "it made 11 calls" in got.text
    assert "where rank 7 waits in #12" in got.text


def test_a_recv_left_out_names_the_stage_too():
    got = culprit(*chain(skipper=6, at=6, skip=A))
    assert got is not None and got.rank == 6 and got.skipped[0] == A


def test_a_prologue_before_the_loop_is_left_at_the_span_s_start():
    got = culprit(*chain(skipper=6, at=7, first="broadcast"))
    assert got is not None and got.rank == 6


def test_the_last_step_never_decides():
    # a last step without the send is also a pipeline's drain: the period must come back after the place
    assert culprit(*chain(skipper=6, at=11)) is None


def test_a_last_step_without_the_send_but_with_its_other_calls_never_decides():
    # the break shows (its last step: recv from 5, send back to 5), but no whole period follows it
    histories, last, done, stuck = chain(skipper=6, at=11, back=True)
    assert any(c[0] == B and c[3] == [6] for c in stuck)
    assert culprit(histories, last, done, stuck) is None
    assert culprit(*chain(skipper=6, at=10, back=True)).rank == 6  # a step before the end: named


def test_too_few_periods_before_the_place_decide_nothing():
    assert culprit(*chain(skipper=6, at=1)) is None


def test_a_period_of_one_call_shows_no_break():
    # the chain's head only sends: a send left out leaves its calls one period shorter, nothing more
    assert culprit(*chain(skipper=5, at=6, skip=A)) is None


def test_a_break_older_than_the_history_decides_nothing():
    assert culprit(*chain(skipper=6, at=3, steps=40, keep=16)) is None


# -- batch_culprit: one op of a pair left out at the last step --------------------------------------------------
def ring(left_out=None, at=6, blocking=None, steps=None):
    """A ring 0 -> 1 -> 2 -> 0 on group "g" and a world barrier: each step a barrier, then each rank posts its
    send to the next rank and its recv from the one before, side by side (batch_isend_irecv), for ``at`` + 1
    steps; at the last, rank ``left_out[0]`` leaves out its op on stream ``left_out[1]`` and goes on to the next
    barrier, where every rank but the one waiting for it stands (what the fuzzer's ring programs leave, as each
    rank's watchdog reads its own calls).  ``blocking``: (rank, stream) that instead waits in its op of that
    stream with its other op not posted yet (a pipeline's send before its recv).  Returns (histories,
    last_started, last_completed, the cycle's stuck calls)."""
    from c10d_observer.ordering import Call
    links = {r: (p2p_name("g", r, (r + 1) % 3), p2p_name("g", (r - 1) % 3, r)) for r in range(3)}
    hist, started = {r: [] for r in range(3)}, {r: {} for r in range(3)}
    t = 0.0
    for step in range(at + 1):
        for r in range(3):
            t += 1.0
            started[r]["g"] = started[r].get("g", 0) + 1
            hist[r].append(Call("g", started[r]["g"], "barrier", t))
            for s, op in ((links[r][0], "send"), (links[r][1], "recv")):
                if step == at and (r, s) == left_out:
                    continue
                if step == at and blocking is not None and blocking[0] == r and s != blocking[1]:
                    continue
                t += 0.1
                started[r][s] = started[r].get(s, 0) + 1
                hist[r].append(Call(s, started[r][s], op, t))
    done = {r: dict(v) for r, v in started.items()}
    cycle = []
    if left_out is not None:
        m, s = left_out
        peer = [r for r in range(3) if r != m and s in links[r]][0]
        for r in range(3):
            if r != peer:  # the next barrier: every rank but the one waiting in the op left out
                t += 1.0
                started[r]["g"] += 1
                hist[r].append(Call("g", started[r]["g"], "barrier", t))
        done[peer][s] = started[peer][s] - 1
        for r in range(3):
            done[r]["g"] = started[r]["g"] - (0 if r == peer else 1)
        cycle = [(s, at + 1, [peer], [m]), ("g", at + 2, [r for r in range(3) if r != peer], [peer])]
    return hist, started, done, cycle


def test_a_recv_left_out_of_a_ring_s_last_batch_names_the_rank_from_its_own_pairs():
    hist, started, done, cycle = ring(left_out=(1, p2p_name("g", 0, 1)))
    got = batch_culprit(hist, started, done, cycle)
    assert got is not None and got.rank == 1 and got.skipped == (p2p_name("g", 0, 1), 7)
    assert "rank 1 left out its recv #7" in got.text and "rank 0 waits in #7" in got.text
    assert left_out_culprit(hist, started, done, cycle) is None  # the last step: no period resumed after it


def test_a_send_left_out_of_a_ring_s_last_batch_names_the_rank_too():
    got = batch_culprit(*ring(left_out=(2, p2p_name("g", 2, 0))))
    assert got is not None and got.rank == 2 and "its send #7" in got.text


def test_too_few_pairs_shown_decide_nothing():
    # one pair before the place decides nothing; two do where the barrier between them shows one pair a step
    assert batch_culprit(*ring(left_out=(1, p2p_name("g", 0, 1)), at=1)) is None
    got = batch_culprit(*ring(left_out=(1, p2p_name("g", 0, 1)), at=2))
    assert got is not None and got.rank == 1 and "(#1-#2, each beside the other)" in got.text


def test_two_pairs_shown_decide_only_where_the_other_calls_show_one_pair_a_step():
    from c10d_observer.left_out import _one_a_step
    from c10d_observer.ordering import Call
    a, b, x, y = "a", "b", "x", "y"

    def calls(*names):
        seq = {}
        out = []
        for i, s in enumerate(names):
            seq[s] = seq.get(s, 0) + 1
            out.append(Call(s, seq[s], "barrier" if s in (x, y) else "send", float(i)))
        return out

    assert _one_a_step(calls(x, b, a, x, b, a, x), a, b)  # a barrier, then the pair, each step
    assert _one_a_step(calls(y, b, a, x, y, b, a, x, y), a, b)  # another link's calls mark the steps as well
    assert not _one_a_step(calls(x, b, a, x), a, b)  # one step shown
    assert not _one_a_step(calls(b, a, b, a), a, b)  # nothing else shows where a step ends
    # a link two rings share: two calls on b a step, one on a (the fuzzer's ring seed 7009963)
    assert not _one_a_step(calls(x, a, b, y, b, x, a, b, y, b, x), a, b)
    assert not _one_a_step(calls(x, b, a, x, b, a, x, b), a, b)  # b's call after the last step without a's


def test_ops_that_were_not_side_by_side_decide_nothing():
    hist, started, done, cycle = ring(left_out=(1, p2p_name("g", 0, 1)))
    # a call between rank 1's send #3 and recv #3: its two streams did not go one for one beside each other
    from c10d_observer.ordering import Call
    recv3 = next(c for c in hist[1] if c.stream == p2p_name("g", 0, 1) and c.seq == 3)
    hist[1].append(Call("h", 1, "all_reduce", recv3.started_at - 0.05))
    assert batch_culprit(hist, started, done, cycle) is None


def test_a_second_rank_whose_pairs_part_leaves_it_undecided():
    hist, started, done, cycle = ring(left_out=(1, p2p_name("g", 0, 1)))
    # rank 2 too issued its send #7 without its recv #7 and went on: which one left the program is not shown
    from c10d_observer.ordering import Call
    hist[2] = [c for c in hist[2] if (c.stream, c.seq) != (p2p_name("g", 1, 2), 7)]
    started[2][p2p_name("g", 1, 2)] = done[2][p2p_name("g", 1, 2)] = 6
    assert batch_culprit(hist, started, done, cycle) is None


def test_a_rank_waiting_in_the_op_it_posted_first_parts_nothing():
    from c10d_observer.left_out import _parted
    hist, started, done, _ = ring(blocking=(0, p2p_name("g", 0, 1)))
    assert started[0][p2p_name("g", 0, 1)] == 7 and started[0][p2p_name("g", 2, 0)] == 6
    assert not _parted(hist[0], started[0])


def test_a_chain_s_stage_that_left_its_send_out_at_the_last_step_stays_undecided():
    # its next stage waits in a blocking recv with nothing beside it: a last step with no send, that stage's recv
    # one too many, leaves the same documents
    assert batch_culprit(*chain(skipper=6, at=11)) is None
    assert batch_culprit(*chain(skipper=6, at=11, back=True)) is None
