"""The watchdog's protocols (protocols.py): phases are enums whose values are the old strings, and each
machine refuses a transition its table does not allow."""
import pytest

from c10d_observer import config
from c10d_observer.protocols import (Abort, AbortPhase, Gather, GatherPhase, ProtocolError, StackCollection,
                                     StackPhase)
from c10d_observer.requests import GatherRequest

W = config.windows(0.1)


def test_phases_are_enum_members_with_the_names_logs_and_tests_read():
    assert Abort(W).phase is AbortPhase.IDLE and AbortPhase.EXIT == "exit"
    assert Gather(W, "", 0.0).phase is GatherPhase.IDLE and GatherPhase.OWNER == "owner"
    assert StackCollection(W).phase is StackPhase.IDLE and StackPhase.DUMPING == "dumping"


def test_every_table_names_only_its_own_phases_and_covers_each_of_them():
    for machine, phases in ((Abort, AbortPhase), (Gather, GatherPhase), (StackCollection, StackPhase)):
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


def test_stack_collection_without_helper_or_dump_signal_stays_idle():
    s = StackCollection(W, has_dump_signal=False)
    assert s.ask(0, "why", helper_alive=False, size_now=0) == [] and s.idle
    s = StackCollection(W)
    assert [a.kind for a in s.ask(0, "why", helper_alive=True, size_now=0)] == ["stack_request"]
    assert s.phase is StackPhase.ASKED and not s.idle
    assert s.step(1, size_now=10) == [] and s.idle  # the file grew: answered
