"""Every kind of document through its type (documents.py), and the documents of the previous release.

tests/data/documents-v1/ holds files written by the release before the typed documents (version 1, commit
a777099, torch 2.13, real gloo ranks: test_verdict.py's cascade and dead-rank jobs, and a node's states
written by that release's relay): this release reads them, and makes the same verdict of them.
"""
import json
import os
import shutil

import pytest

from c10d_observer import documents, dumpdir, verdict
from c10d_observer.documents import Call, Overdue, Position, RankDoc

V1 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "documents-v1")


def _position(**kw):
    base = dict(stream="0", group="0", kind="collective", ranks=(0, 1, 2), backend="gloo", last_started=5,
                last_completed=4, in_flight=Call(5, "all_reduce", "4 x float32", 100.5, ""),
                recent=(Call(4, "all_reduce", "4 x float32", 99.0), Call(5, "all_reduce", "4 x float32", 100.5)))
    base.update(kw)
    return Position(**base)


def _overdue(**kw):
    base = dict(stream="0", group="0", seq=5, op="all_reduce", size="4 x float32", group_ranks=(0, 1, 2),
                started_at=100.5, detected_at=103.6, age_s=3.1)
    base.update(kw)
    return Overdue(**base)


@pytest.mark.parametrize("kind", ["report", "state", "end"])
def test_each_kind_of_rank_document_round_trips_through_json(tmp_path, kind):
    doc = RankDoc(kind, 2, 3, "host", 1234, "job", 104.0, 90.0, kind != "end", "gone" if kind == "end" else None,
                  False, 0.1, 0xab, "/d/stacks-rank2-pid1234.txt", None, None, "g1" if kind == "state" else None,
                  10, (_position(), _position(stream="0:p2p:1->2", kind="p2p", src=1, dst=2, peer=1,
                                              in_flight=None, recent=())),
                  (_overdue(), _overdue(seq=3, in_flight=False, ended="completed", completed_at=99.0,
                                        resolved_after_s=4.0)),
                  {"0": [{"seq": 4, "op": "all_reduce", "size": "4 x float32"}]}, {"timeout": 3.0},
                  {"signal": "SIGUSR1"}, extra={"source": "patch"} if kind == "report" else None)
    path = str(tmp_path / "doc.json")
    dumpdir.write_json(path, doc.to_json())
    [back] = documents.load(path)
    assert back == doc._replace(path=path, extra=back.extra)
    assert (back.extra or {}).get("source") == ("patch" if kind == "report" else None)
    assert back.overdue[1].resolved and not back.overdue[0].resolved
    assert back.groups[1].members() == [1, 2] and back.groups[0].members() == [0, 1, 2]


def test_long_rank_lists_are_written_as_runs_and_read_back_whole(tmp_path):
    ranks = tuple(range(0, 4096, 2))
    doc = RankDoc("state", 0, 4096, groups=(_position(ranks=ranks),), overdue=(_overdue(group_ranks=ranks),))
    j = doc.to_json()
    assert j["groups"][0]["ranks"] is None and j["groups"][0]["ranks_runs"] == [[0, 2048, 2]]
    back = RankDoc.from_json(json.loads(json.dumps(j)))
    assert back.groups[0].ranks == ranks and back.overdue[0].group_ranks == ranks


def test_the_documents_of_one_group_share_its_ranks_and_runs_of_another_shape_still_read():
    from c10d_observer import channel
    ranks = tuple(range(1, 4096, 4))
    a, b = (RankDoc.from_json(json.loads(json.dumps(RankDoc("state", r, 4096, groups=(_position(ranks=ranks),))
                                                    .to_json()))) for r in (1, 5))
    assert a.groups[0].ranks == ranks and a.groups[0].ranks is b.groups[0].ranks  # one tuple per group
    # runs of tuples (not the JSON's lists) stand for the same ranks; runs the key cannot hash (a list inside a
    # run) are keyed by their JSON, as before, and fail where they cannot be expanded, as before
    assert channel.ranks_from_runs([(1, 1024, 4)]) is a.groups[0].ranks
    with pytest.raises(TypeError):
        channel.ranks_from_runs([[0, [2], 1]])


def test_a_node_file_labels_its_states_with_the_gather_they_answer_here(tmp_path):
    states = [RankDoc("state", r, 4, gather_id="theirs", stacks_size_before=100, groups=(_position(),))
              for r in (2, 3)]
    path = str(tmp_path / dumpdir.node_states_name(1))
    dumpdir.write_json(path, documents.node_states_json("node1", "ours", states))
    docs = documents.load(path)
    assert [d.rank for d in docs] == [2, 3]
    assert all(d.gather_id == "ours" and d.extra["answered_gather_id"] == "theirs" for d in docs)
    assert all(d.relayed_from == "node1" and d.stacks_size_before is None for d in docs)
    # the file on disk keeps each state as its node wrote it
    raw = dumpdir.read_json(path)
    assert [d["gather_id"] for d in raw["docs"]] == ["theirs", "theirs"] and raw["answers"] == "ours"


def test_a_call_of_a_rank_comes_from_its_position_its_overdue_entries_or_its_flight_recorder():
    doc = RankDoc("state", 0, groups=(_position(recent=(), in_flight=None, last_started=9, last_completed=9),),
                  overdue=(_overdue(seq=7, op="broadcast"),),
                  flight_recorder={"0": [{"seq": 8, "op": "all_reduce", "size": "1 x float32",
                                          "time_created_ns": 5 * 10 ** 9}]})
    assert doc.call("0", 7).op == "broadcast"
    assert doc.call("0", 8) == Call(8, "all_reduce", "1 x float32", 5.0)
    assert doc.call("0", 6) is None
    assert [(t, c.seq) for t, s, c in doc.history()] == [(5.0, 8)]


def test_documents_of_the_previous_release_are_read(tmp_path):
    rep = documents.load(os.path.join(V1, "report-rank0-pid4258.json"))[0]
    assert (rep.kind, rep.rank, rep.world_size, rep.extra["source"]) == ("report", 0, 3, "flight_recorder")
    [e] = rep.overdue
    assert (e.seq, e.op, e.in_flight, e.ended, e.resolved) == (2, "all_reduce", False, "completed", True)
    assert rep.groups[0].recent[0] == Call(2, "all_reduce", "4 x float32", None)  # version 1: no start times
    dead = documents.load(os.path.join(V1, "state-rank1-pid4413-dead.json"))[0]
    assert dead.kind == "end" and dead.dead and "ended without disable()" in dead.exit_reason
    state = documents.load(os.path.join(V1, "state-rank2-pid4260.json"))[0]
    assert state.kind == "end" and state.alive and state.exit_reason == "the observer was disabled"
    node = documents.load(os.path.join(V1, "states-node3.json"))
    assert [d.rank for d in node] == [1, 2] and all(d.gather_id == "vm-1-2" for d in node)


def test_a_folder_of_the_previous_release_gets_the_verdict_it_had(tmp_path):
    """verdict.json of version 1 (no record beside it) is the record; the documents read as they were."""
    for name in ("report-rank0-pid4258.json", "state-rank2-pid4260.json", "verdict.json", "verdict.txt"):
        shutil.copy(os.path.join(V1, name), str(tmp_path / name))
    v, problems, _ = verdict.load(str(tmp_path))
    v = v.to_json()
    old = dumpdir.read_json(os.path.join(V1, "verdict.json"))
    assert problems == [] and v["recorded"] is True
    assert v["culprit_ranks"] == old["culprit_ranks"] == [2] and v["summary"] == old["summary"]
    assert [h["seq"] for h in v["hangs"]] == [h["seq"] for h in old["hangs"]]
    assert "after: " in verdict.format_text(v)


def test_a_declared_phase_and_frozen_spans_read_as_values_and_write_back_as_they_were():
    """Issue 43: the verdict reads a rank's declared phase and its frozen spans as values (documents.Phase,
    FrozenSpan), not as dicts by key; the document's JSON is what it was."""
    from c10d_observer import documents
    d = {"format": documents.FORMAT, "version": documents.VERSION, "kind": "state", "rank": 1,
         "phase": {"name": "checkpoint", "since": 100.0, "until": 700.0, "up_to_s": 600.0},
         "frozen_spans": [{"since": 110.0, "until": None}, {"since": "bad"}, {"since": 90.0, "until": 95.5}]}
    doc = documents.RankDoc.from_json(d)
    assert doc.phase == documents.Phase("checkpoint", 100.0, 700.0, 600.0) and doc.phase.up_to_s == 600.0
    assert doc.frozen_spans == (documents.FrozenSpan(110.0, None), documents.FrozenSpan(90.0, 95.5))
    out = doc.to_json()
    assert out["phase"] == d["phase"] and out["frozen_spans"] == d["frozen_spans"]
    assert documents.RankDoc.from_json(dict(d, phase={})).phase is None


def _nccl_rank(backend="nccl", later_at=10.02):
    """Rank 7 of the fuzzer's seed 7000038 (NCCL model), cut down: its GPU waits in broadcast #8 on group 2
    (issued at 10.0); its Python went on and issued the world's all_reduce #8 (at ``later_at``)."""
    bcast = Call(8, "broadcast", "1024 x bfloat16, root 1", 10.0)
    ar = Call(8, "all_reduce", "4 x float32", later_at)
    return RankDoc("state", 7, groups=(
        _position(stream="0", group="0", ranks=tuple(range(11)), backend=backend, last_started=8, last_completed=7,
                  in_flight=ar, recent=(Call(7, "all_reduce", "4 x float32", 9.9), ar)),
        _position(stream="2", group="2", ranks=(5, 6, 7, 8, 9, 10), backend=backend, last_started=8,
                  last_completed=7, in_flight=bcast, recent=(Call(7, "broadcast", "1024 x bfloat16, root 1", 9.8),
                                                             bcast))),
        overdue=(_overdue(stream="0", seq=8, started_at=later_at), _overdue(stream="2", group="2", seq=8,
                                                                             started_at=10.0)))


def test_an_nccl_rank_reads_where_its_gpu_stands_without_the_calls_its_python_issued_behind():
    """RankDoc.at_device: NCCL runs a rank's calls on its GPU in the order it issued them, while its Python
    goes on; the call issued after the one its GPU waits in is taken out, as a gloo rank blocked there would
    have written it (in flight, last started, recent calls, overdue)."""
    doc, left_out = _nccl_rank().at_device()
    assert left_out == {"0": {8}}
    world = doc.position("0")
    assert (world.last_started, world.last_completed, world.in_flight) == (7, 7, None)
    assert [c.seq for c in world.recent] == [7]
    assert doc.position("2") == _nccl_rank().position("2")
    assert [(e.stream, e.seq) for e in doc.overdue] == [("2", 8)]


def test_a_call_of_unknown_start_does_not_hide_the_calls_issued_behind_the_gpu():
    """RankDoc.at_device compares every call's start at once where each is known; a call whose start is unknown
    (a recorder's entry without one) takes the way call by call, and the call issued behind the GPU's is still
    taken out."""
    doc = _nccl_rank()
    bcast = doc.position("2")
    doc = doc._replace(groups=(doc.position("0"), bcast._replace(recent=(Call(6, "broadcast", None, None),)
                                                                     + bcast.recent)))
    assert doc.at_device()[1] == {"0": {8}}


@pytest.mark.parametrize("backend,later_at", [("gloo", 10.02), ("cpu:gloo,cuda:nccl", 10.02), ("nccl", 10.0)])
def test_a_cpu_backend_a_mixed_one_or_calls_of_one_instant_are_read_as_they_are(backend, later_at):
    """gloo runs a group's works on threads of its own; a backend of both does not say the call's device; two
    calls dated alike have no order: the document is read as it is."""
    doc = _nccl_rank(backend, later_at)
    assert doc.at_device() == (doc, {})


def _p2p(stream, src, dst, seq, t, api):
    c = Call(seq, "send" if src == 0 else "recv", "4 x float32", t, api)
    return _position(stream=stream, group="0", kind="p2p", ranks=(0, 1, 2), backend="nccl", src=src, dst=dst,
                     peer=dst if src == 0 else src, last_started=seq, last_completed=seq - 1, in_flight=c,
                     recent=(c,))


@pytest.mark.parametrize("api,left_out", [("batch_isend_irecv", {}), ("", {"0:p2p:0->2": {3}})])
def test_the_ops_of_a_batch_run_together_but_a_p2p_call_waited_on_holds_the_next(api, left_out):
    """RankDoc.at_device on p2p: the ops of one batch_isend_irecv run together (one NCCL group call), so the
    later op is not held by the earlier one; a plain recv, waited on, holds the send issued after it."""
    doc = RankDoc("state", 0, groups=(_p2p("0:p2p:1->0", 1, 0, 3, 10.0, api), _p2p("0:p2p:0->2", 0, 2, 3, 10.001, api)))
    assert doc.at_device()[1] == left_out


def test_a_node_file_of_packed_states_reads_as_its_states_and_a_damaged_one_is_refused(tmp_path):
    """Issue 44: the merging node keeps another node's states packed as its relay sent them (wire.labelled);
    documents.load unpacks them once, each relayed from the node's host.  A file whose packed states do not
    unpack (a damaged copy) is a DocumentError, which every reader of dump_dir skips, never an exception that
    would stop a watchdog's scan."""
    from c10d_observer import wire
    states = [{"format": documents.FORMAT, "version": documents.VERSION, "kind": "state", "rank": r, "pid": 1,
               "host": "node1", "gather_id": "theirs", "alive": True, "groups": []} for r in (2, 3)]
    label, packed = wire.label_of(wire.labelled({"window": 1, "host": "node1"}, states))
    assert label == {"window": 1, "host": "node1"}
    path = str(tmp_path / dumpdir.node_states_name(1))
    dumpdir.write_json(path, documents.node_states_json("node1", "ours", packed=packed))
    got = documents.load(path)
    assert [(d.rank, d.gather_id, d.relayed_from, d.extra["answered_gather_id"]) for d in got] == [
        (2, "ours", "node1", "theirs"), (3, "ours", "node1", "theirs")]
    for damaged in (packed[:-8], "not base64 at all!", packed[::-1]):
        dumpdir.write_json(path, documents.node_states_json("node1", "ours", packed=damaged))
        with pytest.raises(documents.DocumentError):
            documents.load(path)
    assert wire.label_of("no label line") == (None, None) and wire.label_of("[1]\nx") == (None, None)


def _every_field_doc():
    """A state with a position of every shape (long ranks, p2p, a GPU's state, none in flight), overdue calls
    in flight and ended, and an extra field whose value is null."""
    ranks = tuple(range(0, 4096, 2))
    return RankDoc("state", 2, 4096, "node1", 1234, "job", 104.0, 90.0, True, None, False, 0.1, 0xab,
                   "/d/stacks-rank2-pid1234.txt", "=== stacks ===", None, "g1", 10,
                   (_position(ranks=ranks, backend="nccl", gpu_state="started", gpu_timing=True),
                    _position(stream="0:p2p:1->2", kind="p2p", src=1, dst=2, peer=1, in_flight=None, recent=()),
                    _position(stream="7", group="7", ranks=(2, 3), in_flight=None, last_started=3, last_completed=3,
                              recent=(Call(3, "broadcast", None, None),), ring_overflow=2, torch_timeout_s=600.0)),
                   (_overdue(group_ranks=ranks), _overdue(seq=3, in_flight=False, ended="completed",
                                                          completed_at=99.0, resolved_after_s=4.0)),
                   None, {"timeout": 3.0}, {"signal": "SIGUSR1"}, extra={"source": "patch", "note": None})


def test_a_state_as_a_bundle_carries_it_is_rows_without_nulls_and_reads_back_as_the_same_document():
    """Issue 44: a node's bundle carries each state as to_wire makes it (version 3, now 5): the positions as rows,
    no null field of its own, and reads back, through JSON and a node file's packing, as the state it was."""
    from c10d_observer import wire
    doc = _every_field_doc()
    w = doc.to_wire()
    assert w["version"] == documents.WIRE_VERSION == 5 and "groups" not in w
    assert [len(r) for r in w["group_rows"]] == [16, 14, 14]  # trailing nulls left out (ring_overflow 0)
    assert w["group_rows"][0][3] == {"runs": [[0, 2048, 2]]} and w["group_rows"][2][3] == [2, 3]
    assert not [k for k, v in w.items() if v is None and k in RankDoc._fields]
    assert all(v is not None for e in w["overdue"] for v in e.values())
    assert w["note"] is None  # an extra field keeps its null: the rank's own
    back = RankDoc.from_json(json.loads(json.dumps(w)))
    assert back == doc
    assert back.groups[0].ranks is RankDoc.from_json(doc.to_json()).groups[0].ranks  # one tuple per group
    unpacked = wire.unpack(wire.pack([w]))
    assert RankDoc.from_json(unpacked[0]) == doc
    assert len(json.dumps(w)) < 0.8 * len(json.dumps(doc.to_json()))


def _summary(rank, line=40):
    from c10d_observer import stackfile
    thread = 0x7f0000001000 + rank
    return stackfile.thread_summary(stackfile.format_dump("stacks of rank %d" % rank, [(thread, [
        ("/opt/torch/distributed/distributed_c10d.py", 3252, "all_reduce"), ("train.py", line, "step")])], thread),
        thread)


def test_a_bundle_carries_the_frames_its_ranks_share_once_and_each_summary_reads_back_whole(tmp_path):
    """Issue 44: the ranks of a node waiting in one call have one main-thread stack; a bundle carries those frames
    once (documents.shared_stacks: each later rank its own header and thread lines, and where its frames are),
    and documents.load reads every rank's summary back whole.  A rank whose frames differ (another line) carries
    its own; one without a summary is left as it is; the states given are not changed."""
    from c10d_observer import wire
    texts = {2: _summary(2), 3: _summary(3), 4: _summary(4, line=41), 5: None, 6: _summary(6)}
    states = [dict(RankDoc("state", r, 8, "node1", 100 + r, "job", gather_id="theirs").to_wire(), stacks_text=t)
              for r, t in texts.items()]
    before = json.dumps(states)
    bundle = documents.shared_stacks(states)
    assert json.dumps(states) == before
    assert [d.get(documents.FRAMES_OF, [None])[0] for d in bundle] == [None, 0, None, None, 0]
    assert [i for i, d in enumerate(bundle) if "train.py" in (d["stacks_text"] or "")] == [0, 2]
    path = str(tmp_path / dumpdir.node_states_name(1))
    dumpdir.write_json(path, documents.node_states_json("node1", "ours", packed=wire.labelled({}, bundle)
                                                        .partition("\n")[2]))
    got = documents.load(path)
    assert {d.rank: d.stacks_text for d in got} == texts
    assert not [d for d in got if documents.FRAMES_OF in d.extra]


@pytest.mark.parametrize("ref", [[1, 0], [0, 5], [3, 40], "x", [0]])
def test_a_reference_to_no_earlier_frames_keeps_the_lines_before_them(tmp_path, ref):
    """A damaged bundle's reference (to itself or a later state, to no frames, not a pair) is dropped: the rank's
    summary reads as the lines it carries, never another rank's frames at a wrong place, nor an error."""
    from c10d_observer import wire
    bundle = documents.shared_stacks([dict(RankDoc("state", r, 8, gather_id="g").to_wire(), stacks_text=_summary(r))
                                      for r in (2, 3)])
    bundle[1][documents.FRAMES_OF] = ref
    path = str(tmp_path / dumpdir.node_states_name(1))
    dumpdir.write_json(path, documents.node_states_json("node1", "g", packed=wire.pack(bundle)))
    got = documents.load(path)
    assert got[1].stacks_text == bundle[1]["stacks_text"] and "line 40" not in got[1].stacks_text
    assert got[0].stacks_text == _summary(2)


@pytest.mark.parametrize("row", [{"stream": "0"}, ["0"], ["0", "0"] + [None] * 15, ["0", "0", "collective", 7]])
def test_a_row_that_is_no_position_is_skipped_or_refused_by_name(tmp_path, row):
    """A row that is not a list is left out, as a position that is not a dict is; a list that is not one of
    Position's fields in order (too short, too long) refuses its document, a DocumentError naming the row, which
    a reader of dump_dir skips; one whose ranks are not a list reads as no ranks."""
    w = dict(_every_field_doc().to_wire(), group_rows=[row])
    if not isinstance(row, list):
        assert RankDoc.from_json(w).groups == ()
    elif 2 <= len(row) <= 16:
        assert RankDoc.from_json(w).groups[0].ranks is None
    else:
        with pytest.raises(documents.DocumentError, match="a position's row"):
            RankDoc.from_json(w)


def _history(n, t0=1796416616.5582929, ops=("all_reduce",) * 3 + ("broadcast",), step=0.0371):
    """n calls of one stream as a watchdog records them: seqs in order, a few ops in a period, real starts."""
    return tuple(Call(7 + i, ops[i % len(ops)], "1048576 x float32" if i % len(ops) else "4 x int64",
                      t0 + i * step + (i * 0.000123456789) ** 1.5) for i in range(n))


@pytest.mark.parametrize("n", [documents.RECORD_OVER + 1, 32])
def test_recent_calls_travel_as_one_record_and_read_back_as_the_same_floats(tmp_path, n):
    """Issue 44: a bundle carries a position's recent calls as one record (version 5: the first seq, each distinct
    (op, size) once and a character a call, each start as integer ns after the first) where the lists were most
    of a state's JSON at 32 calls a stream; every call reads back equal, its start the same float, through JSON
    and a node file's packing."""
    from c10d_observer import wire
    recent = _history(n)
    doc = RankDoc("state", 3, 8, "node1", 103, "job", groups=(_position(recent=recent, last_started=6 + n),))
    row = doc.to_wire()["group_rows"][0][12]
    assert row[0] == 7 and len(row[2]) == len(row[3]) == n and type(row[3][0]) is float
    assert all(type(d) is int for d in row[3][1:]) and len(row[1]) == 3
    path = str(tmp_path / dumpdir.node_states_name(1))
    dumpdir.write_json(path, documents.node_states_json("node1", "g", packed=wire.pack([doc.to_wire()])))
    back = documents.load(path)[0].groups[0].recent
    assert back == recent and [c.started_at for c in back] == [c.started_at for c in recent]
    assert len(json.dumps(row)) < 0.5 * len(json.dumps([[c.seq, c.op, c.size, c.started_at] for c in recent]))


@pytest.mark.parametrize("recent", [
    (Call(4, "all_reduce", "4 x float32", 99.0), Call(6, "all_reduce", "4 x float32", 100.5)),  # a seq missing
    (Call(4, "all_reduce", "4 x float32", None), Call(5, "all_reduce", "4 x float32", 100.5)),  # no start
    (Call(4, "all_reduce", "4 x float32", 99.0), Call(5, "", None, 100.5)),  # no op
    (Call(4, "all_reduce", None, 99), Call(5, "all_reduce", None, 100)),  # starts of ints
    (Call(4, "barrier", None, 1e-300), Call(5, "barrier", None, 1796416616.5582929)),  # not within a factor of 2
])
def test_recent_calls_the_record_cannot_carry_exactly_travel_as_lists(recent):
    """Where the seqs do not follow one another, a call has no start or no op, a start is no float, or a start
    would not read back as the same float, the calls go as [seq, op, size, started_at] lists, as before."""
    recent = _before(recent) + recent
    row = documents.recent_row(recent)
    assert row == [[c.seq, c.op, c.size, c.started_at] for c in recent]
    back = RankDoc.from_json(json.loads(json.dumps(RankDoc("state", 0, 2, groups=(_position(recent=recent),))
                                                   .to_wire())))
    assert [c.seq for c in back.groups[0].recent] == [c.seq for c in recent]


def _before(recent):
    """RECORD_OVER calls ahead of ``recent``'s first, of its op and start, so that a record would carry them all."""
    first = recent[0]
    return tuple(Call(first.seq - documents.RECORD_OVER + i, first.op or "barrier", first.size, first.started_at)
                 for i in range(documents.RECORD_OVER))


@pytest.mark.parametrize("row", [
    [7, [["all_reduce", None]], "00", [1.5]],  # more calls than starts
    [7, [["all_reduce", None]], "0", [1.5, 10]],  # fewer
    [7, [["all_reduce", None]], "00", [1.5, 2.5]],  # a start that is no integer of ns
    [7, [["all_reduce", None]], "01", [1.5, 10]],  # a call naming no (op, size) of the table
    [7, [["", None]], "0", [1.5]],  # no op
    [7, [["all_reduce"]], "0", [1.5]],  # no size
    [7, "table", "0", [1.5]],
    [7, [["all_reduce", None]], [0], [1.5]],  # the codes no string
    [7, [["all_reduce", None]], "0", [1]],  # the first start no float
    [7, [["all_reduce", None]], "0"],  # no starts
    [7, [["all_reduce", None]], "", []],
])
def test_a_damaged_record_of_recent_calls_reads_as_none(row):
    """A record that does not hold together reads as no recent calls (as a damaged list of them does), never
    as calls at other seqs or starts, nor as an error that would cost the merge the rank."""
    w = dict(RankDoc("state", 0, 2, groups=(_position(),)).to_wire())
    w["group_rows"] = [w["group_rows"][0][:12] + [row] + w["group_rows"][0][13:]]
    got = RankDoc.from_json(json.loads(json.dumps(w))).groups[0]
    assert got.recent == () and got.in_flight == _position().in_flight


def test_a_record_reads_as_the_tuple_of_its_calls_and_builds_them_only_when_used():
    """Issue 44: a position's record (documents.Record) is the tuple of Calls it stands for wherever it is used
    (length, iteration, index, added to a tuple from either side, equality and hash with that tuple), and its
    Calls are built at the first such use only: the merge of a hang asks most ranks' records nothing but their
    newest start (RankDoc.at_device), which comes without them."""
    recent = _history(32)
    w = RankDoc("state", 3, 8, groups=(_position(recent=recent, last_started=38, backend="nccl",
                                                 in_flight=recent[-1]),)).to_wire()
    got = RankDoc.from_json(json.loads(json.dumps(w)))
    rec = got.groups[0].recent
    assert type(rec) is documents.Record and len(rec) == 32 and rec
    assert got.at_device() == (got, {}) and rec._calls is None  # the usual case decided without the Calls
    assert rec.newest() == max(c.started_at for c in recent) == recent[-1].started_at
    assert rec == recent and recent == rec and not rec != recent and hash(rec) == hash(recent)
    assert list(rec) == list(recent) and rec[0] == recent[0] and rec[-1] == recent[-1] and rec[3:5] == recent[3:5]
    assert rec + (None,) == recent + (None,) and (None,) + rec == (None,) + recent
    assert got.groups[0] == _position(recent=recent, last_started=38, backend="nccl", in_flight=recent[-1])
    assert repr(rec) == repr(recent) and got.groups[0].call(20) == recent[13]
    assert documents.recent_row(rec) == w["group_rows"][0][12]  # passed on as it came
