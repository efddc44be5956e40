"""The watchdog's protocols (protocols.py): phases are enums whose values are the old strings, and each
machine refuses a transition its table does not allow."""
import pytest

from c10d_observer import config
from c10d_observer.actions import ProtocolError
from c10d_observer.protocols import Abort, AbortPhase, Gather, GatherPhase, StackCollection, StackPhase
from c10d_observer.relay_window import RelayPhase, RelayWindow
from c10d_observer.requests import GatherRequest

W = config.windows(0.1)


def test_phases_are_enum_members_with_the_names_logs_and_tests_read():
    assert Abort(W).phase is AbortPhase.IDLE and AbortPhase.EXIT == "exit"
    assert Gather(W, "", 0.0).phase is GatherPhase.IDLE and GatherPhase.OWNER == "owner"
    assert StackCollection(W).phase is StackPhase.IDLE and StackPhase.DUMPING == "dumping"


def test_every_table_names_only_its_own_phases_and_covers_each_of_them():
    for machine, phases in ((Abort, AbortPhase), (Gather, GatherPhase), (StackCollection, StackPhase),
                            (RelayWindow, RelayPhase)):
        assert set(machine.ALLOWED) == set(phases), machine
        for targets in machine.ALLOWED.values():
            assert set(targets) <= set(phases), machine


def test_abort_walks_its_phases_in_order_and_refuses_to_go_back_once_the_rank_is_asked_to_exit():
    a = Abort(W)
    assert a.start(0, culprit=True)
    assert a.phase is AbortPhase.CULPRIT and a.before_exit and not a.ending
    acts = a.step(1)  # a culprit goes on at once: CULPRIT -> STACKS -> EXIT
    assert [x.kind for x in acts] == ["error_file", "exit_request"] and a.phase is AbortPhase.EXIT
    assert a.ending and not a.before_exit and a.how_ended().startswith("asked to exit with code")
    with pytest.raises(ProtocolError, match="no transition from exit to idle"):
        a.cancel()  # a held verdict cannot take back an exit already asked for
    a.step(int((W.abort_exit + 1) * 1e9))
    assert a.phase is AbortPhase.TERM and a.how_ended() == "SIGTERM"


def test_abort_cancelled_while_it_waits_for_the_verdict_starts_again_from_idle():
    a = Abort(W)
    a.start(0)
    assert a.waits_for_verdict and a.waits_for_culprits
    a.cancel()
    assert a.phase is AbortPhase.IDLE and not a.active and a.how_ended() is None
    assert a.start(1)


def test_gather_merges_only_what_it_owns():
    g = Gather(W, "", 0.0)
    assert not g.due(10 ** 12, 2, lambda w: True)
    with pytest.raises(ProtocolError, match="no transition from idle to idle"):
        g.merged()  # nothing owned: nothing to merge
    g.own("g1", 0)
    assert g.phase is GatherPhase.OWNER
    g.superseded(GatherRequest(id="theirs", supersedes="g1"))
    assert g.phase is GatherPhase.IDLE and g.owned is None


def test_the_relay_window_merges_its_own_first_request_and_answers_an_earlier_one_read_later():
    w = RelayWindow(5.0)
    assert w.phase is RelayPhase.IDLE and w.expire(0.0) and not w.open
    assert not w.published(2, GatherRequest(id="mine"), 0.0)  # the first it knows of: it merges
    assert w.merging and "mine" in w and w.number == 2
    assert not w.after_first(1) and w.after_first(3)  # a later number loses unread
    assert w.read(1, GatherRequest(id="theirs"), 0.5)  # numbered earlier, read later: it is the merge now
    assert w.phase is RelayPhase.ANSWERING and w.number == 1 and w.own == (2, "mine")
    assert not w.read(4, GatherRequest(id="later"), 0.6) and w.number == 1
    assert not w.expire(5.4)  # "theirs" and "later" still count
    assert w.expire(5.7) and w.phase is RelayPhase.IDLE and w.winner is None and w.own is None


def test_the_relay_window_never_turns_an_answering_node_into_the_merging_one():
    w = RelayWindow(5.0)
    assert w.read(3, GatherRequest(id="theirs"), 0.0) and w.phase is RelayPhase.ANSWERING
    assert w.published(4, GatherRequest(id="mine"), 0.1)  # numbered after: the relay writes "theirs" back
    assert w.phase is RelayPhase.ANSWERING
    with pytest.raises(ProtocolError, match="no transition from answering to merging"):
        w.published(2, GatherRequest(id="older"), 0.2)  # numbers only grow: a bug, refused where it happens


def test_a_second_request_of_the_merging_node_leaves_the_merge_to_its_first():
    w = RelayWindow(5.0)
    w.published(1, GatherRequest(id="first"), 0.0)
    assert w.published(2, GatherRequest(id="second"), 1.0) and w.phase is RelayPhase.ANSWERING
    assert w.number == 1 and w.winner[1].id == "first" and w.own == (2, "second")


def test_one_rule_takes_a_gather_request_for_the_watchdog_and_for_the_relay():
    req = GatherRequest(id="g", job_id="job", requested_at=100.0)
    assert req.valid("job") and not req.valid("other") and not GatherRequest(job_id="job").valid("job")
    assert req.valid("job", now=104.9, within=5.0) and not req.valid("job", now=105.0, within=5.0)
    assert req.valid("job", since=100.0) and not req.valid("job", since=100.5)  # an earlier run's: history
    merged = req.replace(merged_at=101.0)
    assert merged.valid("job") and not merged.valid("job", merged_ok=False)
    g = Gather(W, "job", 100.0 + W.gather_wait)
    assert g.fresh(req, 100.1) and not g.fresh(merged, 100.1) and g.mine(req) and not g.fresh(None, 100.1)


def test_stack_collection_without_helper_or_dump_signal_stays_idle():
    s = StackCollection(W, has_dump_signal=False)
    assert s.ask(0, "why", helper_alive=False, size_now=0) == [] and s.idle
    s = StackCollection(W)
    assert [a.kind for a in s.ask(0, "why", helper_alive=True, size_now=0)] == ["stack_request"]
    assert s.phase is StackPhase.ASKED and not s.idle
    assert s.step(1, size_now=10) == [] and s.idle  # the file grew: answered


# -- the rules a verdict meets, without a Watchdog (issue 43: protocols own their rules) ----------------------
def _hang(stream="0", seq=5, waiting=(0,), missing=(1,), level="hard", held_until=None):
    from c10d_observer.verdict.types import Hang
    return Hang.from_json({"stream": stream, "seq": seq, "group": stream, "op": "all_reduce", "waiting_ranks":
                           list(waiting), "missing_ranks": list(missing), "level": level, "held_until": held_until})


def _verdict(gid="g1", hangs=(), culprits=(1,), level="hard", held_until=None):
    from c10d_observer.verdict.types import Verdict
    return Verdict.from_json({"gather_id": gid, "hangs": [h.to_json() for h in hangs], "culprit_ranks": list(culprits),
                              "level": level, "held_until": held_until})


def _entry(stream="0", seq=5, level="hard", in_flight=True):
    from c10d_observer.documents import Overdue
    return Overdue(stream, stream, seq, "all_reduce", level=level, in_flight=in_flight)


def _answered(gid="g1"):
    g = Gather(W, "", 0.0)
    g.answered = gid
    return g


def test_a_later_detection_joins_the_verdict_its_gather_merged_only_where_it_holds_the_call_at_its_level():
    g = _answered()
    v = _verdict(hangs=[_hang()])
    assert g.joins(v, [_entry()], rank=0) is v  # this rank waits in the stuck call the verdict holds
    assert g.joins(v, [_entry(seq=6)], rank=0) is None  # a call the verdict does not hold: gather it
    assert g.joins(v, [_entry()], rank=2) is None  # this rank is not in it
    assert g.joins(v, [_entry()], rank=1) is v  # the late culprit, once it entered the call
    assert g.joins(_verdict(hangs=[_hang(level="soft")], level="soft"), [_entry()], rank=0) is None  # hard now
    assert g.joins(_verdict(gid="g0", hangs=[_hang()]), [_entry()], rank=0) is None  # another gather's
    g.own("g2", 0)
    assert not g.may_join() and g.joins(v, [_entry()], rank=0) is None  # it owns a merge of its own


def test_calls_a_verdict_left_out_are_gathered_again_once_and_a_held_verdict_holds():
    g = _answered()
    v = _verdict(hangs=[_hang()])
    acts = g.on_verdict(v, [_entry(seq=9)], 0, "dump", aborting=False)
    assert [(a.kind, a.detail) for a in acts] == [("gather", "hard")]
    assert g.on_verdict(v, [_entry(seq=9)], 0, "dump", aborting=False) == []  # once per call
    held = _verdict(hangs=[_hang(held_until=5.0)], held_until=5.0)
    assert [a.kind for a in g.on_verdict(held, [_entry()], 0, "dump", aborting=False)] == ["hold"]


def test_under_abort_every_rank_writes_the_error_file_and_the_culprit_is_ended_first():
    v = _verdict(hangs=[_hang()])
    waiter = [(a.kind, a.detail if a.kind != "error_file" else a.detail[1])
              for a in _answered().on_verdict(v, [_entry()], 0, "abort", aborting=False)]
    assert waiter == [("error_file", False), ("arm", False)]
    culprit = [a.kind for a in _answered().on_verdict(v, [], 1, "abort", aborting=False)]
    assert culprit == ["error_file", "arm", "abort_culprit"]
    assert [a.kind for a in _answered().on_verdict(v, [], 1, "abort", aborting=True)] == ["error_file", "arm"]
    soft = _verdict(hangs=[_hang(level="soft")], level="soft")
    assert _answered().on_verdict(soft, [], 1, "abort", aborting=False) == []  # soft verdicts never act


def test_the_signal_goes_at_the_hard_verdict_never_to_the_culprit_and_without_one_after_abort_verdict():
    from c10d_observer.protocols import PendingSignal
    v = _verdict(hangs=[_hang()])
    p = PendingSignal(W)
    assert p.step(0, v, "g1", 0, lambda: True, "SIGUSR1") == []  # nothing asked
    p.ask("why", 0)
    assert [(a.kind, a.detail) for a in p.step(1, v, "g1", 0, lambda: True, "SIGUSR1")] == [("signal", "why")]
    p.ask("why", 0)
    assert [a.detail for a in p.step(1, v, "g1", 1, lambda: True, "SIGUSR1")] == [
        "no SIGUSR1 sent: the verdict names this rank the culprit"]
    p.ask("why", 0)
    assert p.step(1, v, "g1", 1, lambda: True, "SIGUSR1") == []  # said once per verdict
    p.ask("why", 0)
    assert p.step(1, v, "g1", 0, lambda: False, "SIGUSR1") == []  # its call left flight before the verdict
    p.ask("why", 0)
    assert p.step(1, None, "g1", 0, lambda: True, "SIGUSR1") == []  # no verdict yet: it waits
    late = int((W.abort_verdict + 1) * 1e9)
    assert [a.kind for a in p.step(late, None, "g1", 0, lambda: True, "SIGUSR1")] == ["signal"]


def test_an_abort_waiting_for_its_verdict_is_cancelled_by_a_held_one_and_disarms():
    a = Abort(W)
    a.start(0)
    held = _verdict(hangs=[_hang(held_until=5.0)], held_until=5.0)
    assert [x.kind for x in a.on_step(1, held, "g1", lambda v: True, True)] == ["disarm"]
    assert a.phase is AbortPhase.IDLE
    assert a.ended_why("process 7 ended") == "process 7 ended"
    # armed when it answered a hard gather, the machine idle (its own call not overdue yet): the observer's end
    assert "armed to exit with code 93" in a.ended_why("process 7 ended", armed=True)
