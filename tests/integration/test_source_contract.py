"""What every event source must do, parametrised over the sources the installed torch offers.

Two gloo ranks run every collective and p2p call this torch has; each rank then reads its own channel.
"""
import pytest

import c10d_observer
from harness import Job

USABLE = [s for s, r in c10d_observer.capabilities()["sources"].items() if r["usable"]]
# No torch release ships torch.distributed.hooks, so the hooks source runs against a STAND-IN of that
# module (tests/standins/torch_hooks_standin.py: its exact contract, events emitted from real gloo calls
# on a background thread), installed by the scenario when source="hooks".
SOURCES = USABLE + ([] if "hooks" in USABLE else ["hooks"])

# what the scenario ran -> the (op, api) names an event of it may carry
EXPECT = {
    "all_reduce": {"all_reduce"}, "all_reduce_async": {"all_reduce"}, "broadcast": {"broadcast"},
    "reduce": {"reduce"}, "all_gather": {"all_gather"}, "gather": {"gather"}, "scatter": {"scatter"},
    "all_to_all_single": {"all_to_all_single"}, "barrier": {"barrier"},
    "monitored_barrier": {"monitored_barrier"}, "all_gather_object": {"all_gather_object"},
    "broadcast_object_list": {"broadcast_object_list"}, "gather_object": {"gather_object"},
    "scatter_object_list": {"scatter_object_list"}, "all_reduce_coalesced": {"all_reduce_coalesced"},
    "all_gather_coalesced": {"all_gather_coalesced"}, "reduce_scatter": {"reduce_scatter"},
    "all_to_all": {"all_to_all"}, "reduce_scatter_tensor": {"reduce_scatter_tensor", "reduce_scatter_single"},
    "all_gather_into_tensor": {"all_gather_into_tensor", "all_gather_single"},
    "send": {"send"}, "recv": {"recv"}, "isend": {"send"}, "irecv": {"recv"},
    "batch_isend_irecv": {"batch_isend_irecv"}, "send_object_list": {"send_object_list"},
    "recv_object_list": {"recv_object_list"}, "_coalescing_manager": {"all_reduce_coalesced"},
    "group_method": {"all_reduce"},
}


@pytest.fixture(scope="module", params=SOURCES)
def run(request, tmp_path_factory):
    job = Job("all_ops", 2, tmp_path_factory.mktemp(request.param), source=request.param)
    try:
        assert job.finish() == [0, 0], job.log_text()
        yield request.param, job.facts(0), job.facts(1)
    finally:
        job.close()


def _names(facts):
    names = set()
    for s in facts["streams"].values():
        for call in s["calls"]:  # [seq, op, api, done, size]
            names.add(call[1])
            names.add(call[2])
    return names


# The flight recorder is read every poll, not per call: a collective that starts and ends between two
# reads moves its group's counter without a record of its own (its op is looked up only when a call stays
# in flight).  For it, the contract on collectives is the count; p2p and monitored_barrier, which the
# patch source fills in, are still seen by name.
COUNTED = {"flight_recorder"}
BY_NAME_ALWAYS = {"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list",
                  "recv_object_list", "monitored_barrier"}


# The hooks source hears of collectives on torch's event thread, after the fact: it cannot tell which
# composite call issued them, so those are seen as the ops they are made of.
PARTS = {"all_gather_object": {"all_gather"}, "broadcast_object_list": {"broadcast"},
         "gather_object": {"gather"}, "scatter_object_list": {"scatter"}}


# torch 2.14.1's HookOpName has no *_BASE / *_COALESCED members: its pre/post hooks name those calls by
# their family (an all_gather_into_tensor is an ALLGATHER); 2.15 names them exactly.
COARSE_HOOK_NAMES = {"all_to_all_single": "all_to_all", "all_reduce_coalesced": "all_reduce",
                     "all_gather_coalesced": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
                     "all_gather_into_tensor": "all_gather", "_coalescing_manager": "all_reduce"}


def _coarse_hook_names():
    from torch._C import _distributed_c10d as C
    names = getattr(C, "HookOpName", None)
    return names is not None and not hasattr(names, "ALLGATHER_BASE")


def _world(facts):
    return [s for s in facts["streams"].values() if s["desc"]["kind"] == "collective"
            and s["desc"]["stream"] == s["desc"]["group"]][0]


def test_every_call_is_seen(run):
    source, f0, f1 = run
    for facts in (f0, f1):
        assert facts["source"] == source
        names = _names(facts)
        must = [d for d in facts["done"] if source not in COUNTED or d in BY_NAME_ALWAYS]
        coarse = source == "pg_hooks" and _coarse_hook_names()
        missing = [d for d in must if not (EXPECT[d] | (PARTS.get(d, set()) if source == "hooks" else set())
                                           | ({COARSE_HOOK_NAMES[d]} if coarse and d in COARSE_HOOK_NAMES
                                              else set())) & names]
        assert not missing, "calls the %s source did not see: %s" % (source, missing)
        if source in COUNTED:  # at least one number per collective call the scenario made
            collectives = [d for d in facts["done"] if d not in BY_NAME_ALWAYS]
            assert _world(facts)["last_started"] >= len(collectives)


def test_direct_group_calls_and_async_works_are_counted(run):
    source, f0, _ = run
    world = _world(f0)
    if source in COUNTED:
        assert world["last_started"] >= len([d for d in f0["done"] if d not in BY_NAME_ALWAYS])
        return
    all_reduces = [c for c in world["calls"] if c[1] == "all_reduce" and not c[2]]
    assert len(all_reduces) >= 3  # dist.all_reduce, async_op=True, and pg.allreduce() called directly


def test_sequence_numbers_agree_across_ranks(run):
    source, f0, f1 = run
    coll0 = {k: s for k, s in f0["streams"].items() if s["desc"]["kind"] == "collective"}
    coll1 = {k: s for k, s in f1["streams"].items() if s["desc"]["kind"] == "collective"}
    assert set(coll0) == set(coll1)
    for key in coll0:
        assert coll0[key]["desc"]["ranks"] == coll1[key]["desc"]["ranks"]
        assert coll0[key]["last_started"] == coll1[key]["last_started"]
        if source not in COUNTED:
            assert [c[:3] for c in coll0[key]["calls"]] == [c[:3] for c in coll1[key]["calls"]]
    p2p0 = {k: s for k, s in f0["streams"].items() if s["desc"]["kind"] == "p2p"}
    p2p1 = {k: s for k, s in f1["streams"].items() if s["desc"]["kind"] == "p2p"}
    assert set(p2p0) == set(p2p1) and p2p0
    for key in p2p0:  # one stream per direction: the n-th send from A to B is the n-th recv on B
        d = p2p0[key]["desc"]
        sender, receiver = (p2p0, p2p1) if d["src"] == 0 else (p2p1, p2p0)
        assert key == "%s:p2p:%d->%d" % (d["group"], d["src"], d["dst"])
        assert {c[1] for c in sender[key]["calls"]} == {"send"}
        assert {c[1] for c in receiver[key]["calls"]} == {"recv"}
        assert [c[0] for c in sender[key]["calls"]] == [c[0] for c in receiver[key]["calls"]]


def test_every_call_completed(run):
    source, f0, f1 = run
    for facts in (f0, f1):
        for key, s in facts["streams"].items():
            assert s["in_flight"] is None, key
            if source in COUNTED and s is _world(facts):
                continue  # numbers skipped over have no slot of their own to show
            assert all(c[3] for c in s["calls"]), (key, [c for c in s["calls"] if not c[3]])


# The sources that write a call's size signature on the call path, each with the op word's layout
# inlined (callword.py; tests/unit/test_callword.py checks that they take it from there)
SIZED = {"patch", "pg_hooks"}


def test_the_size_a_writer_puts_in_the_op_word_is_the_one_the_codec_reads(run):
    source, f0, f1 = run
    if source not in SIZED:
        pytest.skip("the %s source writes no size signature on the call path" % source)
    for facts in (f0, f1):
        sizes = {call[4] for s in facts["streams"].values() for call in s["calls"] if call[1] == "all_reduce"}
        assert "4 x float32" in sizes, sizes  # dist.all_reduce(torch.ones(4)) in the all_ops scenario
