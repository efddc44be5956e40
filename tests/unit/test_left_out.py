"""left_out_culprit: a rank whose own period of calls shows, once, the call it never arrived at (issue 42: a
pipeline stage that skips one send mid-run hangs the job only at its end, an ordering cycle the order rules
leave undecided), from histories of simulated programs (test_ordering.run: real blocking matching, each rank
on its own clock, histories shuffled and cut to the last ``keep`` calls a stream)."""
from c10d_observer.left_out import left_out_culprit
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
