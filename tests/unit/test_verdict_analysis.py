"""verdict.analyze on hand-made rank documents: the cases real ranks cannot be made to show reliably, and
each rule of the verdict on its own (issue 24).  Documents are built as JSON and read through
documents.RankDoc, as the watchdog's are."""
import os

import pytest

from c10d_observer import stackfile
from c10d_observer import documents, dumpdir, verdict
from c10d_observer.verdict import render


def _doc(rank, world, groups, written_at=100.0, **kw):
    d = {"format": documents.FORMAT, "version": documents.VERSION, "kind": "state", "rank": rank,
         "world_size": world, "written_at": written_at, "job_id": "j", "alive": True,
         "watchdog_started_at": 1.0, "config": {"timeout": 1.0}, "groups": groups, "overdue": []}
    d.update(kw)
    return d


def _g(stream, ranks, started, completed, op=None, since=None, recent=(), size=None):
    g = {"group": stream, "stream": stream, "kind": "collective", "ranks": ranks, "last_started": started,
         "last_completed": completed, "in_flight_seq": started if started > completed else None,
         "recent_ops": [list(r) for r in recent]}
    if g["in_flight_seq"] is not None:
        g.update(in_flight_op=op or "all_reduce", in_flight_since=since if since is not None else 90.0,
                 in_flight_size=size)
    return g


def _stacks(frames, thread=0xab):
    return "".join(['\n=== c10d_observer: stacks ===\nCurrent thread 0x%016x (most recent call first):\n' % thread]
                   + ['  File "%s", line %d in %s\n' % f for f in frames])


def test_a_rank_that_sent_nothing_is_unknown_not_a_culprit():
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 5, 4)]), 1: _doc(1, 3, [_g("0", [0, 1, 2], 5, 4)])}
    v = verdict.analyze(docs).to_json()
    h = v["hangs"][0]
    assert h["waiting_ranks"] == [0, 1] and h["missing_ranks"] == [2]
    assert h["missing"]["2"]["state"] == "unknown"
    assert v["culprit_ranks"] == [] and v["ranks_silent"] == [2]
    assert any("sent nothing" in u for u in v["undecided"])


def test_different_ops_with_no_majority_are_undecided():
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 5, 4, op="all_reduce")]),
            1: _doc(1, 2, [_g("0", [0, 1], 5, 4, op="broadcast")])}
    v = verdict.analyze(docs).to_json()
    assert v["hangs"][0]["mismatch"]["odd_ranks"] == []
    assert v["culprit_ranks"] == [] and any("none has a majority" in u for u in v["undecided"])


def test_two_groups_waiting_on_each_other_with_no_history_is_an_undecided_cycle():
    # rank 0 waits in group a for rank 1, which waits in group b for rank 0, and nothing shows an order
    docs = {0: _doc(0, 2, [_g("a", [0, 1], 3, 2), _g("b", [0, 1], 1, 1)]),
            1: _doc(1, 2, [_g("a", [0, 1], 2, 2), _g("b", [0, 1], 2, 1)])}
    v = verdict.analyze(docs).to_json()
    assert len(v["hangs"]) == 2 and all(h.get("cycle") for h in v["hangs"])
    assert v["culprit_ranks"] == [] and any("cycle" in u and "do not show who broke" in u for u in v["undecided"])


def _ordering_docs():
    """Issue 24, row 5: world group "0" (ranks 0-3) and group "1" (ranks 2, 3); every step a world
    all_reduce, then ranks 2 and 3 an all_reduce on group 1; rank 2 skips its group-1 call at step 3 (seq
    4) and goes on to world #5.  Each rank's clock is its own (offsets of hours)."""
    docs = {}
    for r in range(4):
        off = 3600.0 * r
        world = [[s, "all_reduce", "4 x float32", off + 10 * s] for s in range(1, 6)]
        groups = [_g("0", [0, 1, 2, 3], 5, 4, since=off + 50, recent=world)]
        if r in (2, 3):
            last = 3 if r == 2 else 4
            sub = [[s, "all_reduce", "4 x float32", off + 10 * s + 5] for s in range(1, last + 1)]
            groups.append(_g("1", [2, 3], last, 3, since=off + 45, recent=sub))
        if r == 3:
            groups[0] = _g("0", [0, 1, 2, 3], 4, 4, recent=world[:4])
        docs[r] = _doc(r, 4, groups, written_at=off + 60)
    return docs


def test_an_ordering_deadlock_names_the_rank_that_broke_the_order():
    v = verdict.analyze(_ordering_docs()).to_json()
    assert v["culprit_ranks"] == [2], v["summary"]
    [root] = [h for h in v["hangs"] if h["root"]]
    assert (root["stream"], root["seq"], root["missing_ranks"]) == ("1", 4, [2])
    assert root["missing"]["2"]["state"] == "out_of_order"
    text = root["missing"]["2"]["text"]
    assert text.startswith("rank 2 issued all_reduce #5 on group 0 without its all_reduce #4 on group 1, which "
                           "rank 3 issued between all_reduce #4 and #5 on group 0"), text
    [world] = [h for h in v["hangs"] if h["stream"] == "0"]
    assert not world["root"] and world["caused_by"] == [v["hangs"].index(root)]
    assert not any("cycle" in u for u in v["undecided"])
    assert "rank 2 broke the order of calls" in v["summary"]


def test_a_call_younger_than_the_timeout_is_not_stuck():
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 5, 4, since=99.5)]), 1: _doc(1, 2, [_g("0", [0, 1], 4, 4)])}
    assert verdict.analyze(docs).to_json()["hangs"] == []


def test_a_rank_that_finished_the_call_and_ended_later_never_counts_as_missing():
    """Issue 24, row 4: under on_timeout="abort" ranks 0 and 3 finished all_reduce #2, then were ended while
    waiting in #3; their ends must not make them 'never arrived' at #2."""
    overdue = [{"group": "0", "stream": "0", "group_ranks": [0, 1, 2, 3], "seq": 2, "op": "all_reduce",
                "started_at": 90.0, "detected_at": 93.0, "age_s": 3.0, "in_flight": True}]
    docs = {1: _doc(1, 4, [_g("0", [0, 1, 2, 3], 2, 1, size="2 x float32")], overdue=overdue)}
    for r in (0, 2, 3):
        docs[r] = _doc(r, 4, [_g("0", [0, 1, 2, 3], 3, 2)], kind="end", alive=r == 2,
                       exit_reason=None if r == 2 else "ended by the observer (on_timeout=abort)")
    v = verdict.analyze(docs).to_json()
    [h] = [h for h in v["hangs"] if h["seq"] == 2]
    assert h["missing_ranks"] == [] and h["finished_ranks"] == [0, 2, 3] and h["waiting_ranks"] == [1]
    assert h["finished_then_ended"] == [0, 2, 3]
    assert "finished it: ranks 0, 2, 3; then ended: ranks 0, 2, 3" in verdict.format_text(v)


def test_sizes_of_completed_calls_come_from_the_flight_recorders_entries():
    """Issue 24, row 3: rank 1 all_reduces 2 floats, the others 1, under the flight-recorder source (its
    channel words carry no size for calls that completed): the entries the rank wrote carry them."""
    overdue = [{"group": "0", "stream": "0", "group_ranks": [0, 1, 2, 3], "seq": 2, "op": "all_reduce",
                "size": "2 x float32", "started_at": 90.0, "detected_at": 93.0, "age_s": 3.0, "in_flight": True}]
    fr = {"0": [{"seq": 2, "op": "all_reduce", "size": "1 x float32", "in_flight": False,
                 "time_created_ns": 89 * 10 ** 9}]}
    docs = {1: _doc(1, 4, [_g("0", [0, 1, 2, 3], 2, 1, size="2 x float32")], overdue=overdue)}
    for r in (0, 2, 3):
        docs[r] = _doc(r, 4, [_g("0", [0, 1, 2, 3], 3, 2, size="4 x float32")], flight_recorder=fr)
    v = verdict.analyze(docs).to_json()
    [h] = [h for h in v["hangs"] if h["seq"] == 2]
    m = h["mismatch"]
    assert m["kind"] == "size" and m["odd_ranks"] == [1] and m["expected_op"] == "all_reduce of 1 x float32"
    assert v["culprit_ranks"] == [1]
    assert "every rank" not in v["summary"], v["summary"]
    assert "rank 1 all_reduce of 2 x float32, ranks 0, 2, 3 all_reduce of 1 x float32" in v["summary"]


def test_the_summary_never_says_every_rank_is_in_a_call_some_finished():
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 2, 1)]), 1: _doc(1, 2, [_g("0", [0, 1], 2, 2)])}
    v = verdict.analyze(docs).to_json()
    assert "every rank" not in v["summary"] and "rank 1 finished it and rank 0 waits in it" in v["summary"]


def test_files_of_an_earlier_job_in_the_same_dump_dir_are_ignored():
    def rd(d):
        return documents.RankDoc.from_json(d)
    old = rd(_doc(1, 2, [], written_at=10.0, job_id="old", alive=False))
    stale = rd(_doc(0, 2, [], written_at=20.0, watchdog_started_at=1.0))
    new = [rd(_doc(0, 2, [], written_at=5000.0, watchdog_started_at=4000.0)),
           rd(_doc(1, 2, [], written_at=5001.0, watchdog_started_at=4001.0))]
    assert verdict.per_rank([old, stale] + new) == {0: new[0], 1: new[1]}


def test_the_merge_takes_each_ranks_answer_to_its_gather_and_the_job_now_takes_its_end():
    def rd(**kw):
        return documents.RankDoc.from_json(_doc(0, 1, [], **kw))
    answer = rd(gather_id="g1", written_at=50.0)
    later = rd(gather_id="g2", written_at=60.0)
    end = rd(kind="end", written_at=55.0, exit_reason="the observer was disabled")
    assert verdict.per_rank([answer, later, end], gather_id="g1") == {0: answer}
    assert verdict.per_rank([answer, later, end]) == {0: end}


def test_main_thread_frames_come_from_the_last_dump(tmp_path):
    p = tmp_path / "stacks.txt"
    p.write_text('Thread 0x00000000000000ab (most recent call first):\n  File "/x/a.py", line 1 in old\n\n'
                 'Thread 0x00000000000000cd (most recent call first):\n  File "/x/t.py", line 9 in helper\n\n'
                 'Current thread 0x00000000000000ab (most recent call first):\n'
                 '  File "/x/a.py", line 7 in stall\n  File "/x/a.py", line 3 in main\n')
    doc = documents.RankDoc.from_json(_doc(0, 1, [], stack_dump=str(p), main_thread=0xab))
    assert verdict.main_thread_frames(doc) == [("/x/a.py", 7, "stall"), ("/x/a.py", 3, "main")]
    assert verdict.main_thread_frames(doc._replace(main_thread=0xef)) is None
    assert stackfile.thread_frames(p.read_text(), 0xcd) == [("/x/t.py", 9, "helper")]


def test_where_the_culprit_is_reads_as_the_users_code_and_names_a_dataloader_wait():
    """Issue 24: the first frame of user code, not select (selectors.py:415); 'waiting for a DataLoader
    worker' where that is the case."""
    lib = "/usr/lib/python3.11"
    frames = [(lib + "/selectors.py", 415, "select"), (lib + "/multiprocessing/connection.py", 930, "wait"),
              (lib + "/multiprocessing/queues.py", 113, "get"),
              ("/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 1133, "_try_get_data"),
              ("/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 1295, "_get_data"),
              ("/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 1339, "_next_data"),
              ("/home/me/train.py", 23, "<module>")]
    w = verdict.whereabouts(frames)
    assert w["main_thread"] == "<module> (train.py:23)" and w["innermost"] == "select (selectors.py:415)"
    assert w["activity"] == "waiting for a DataLoader worker"
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 2, 1)]),
            1: _doc(1, 2, [_g("0", [0, 1], 1, 1)], stacks_text=_stacks(frames), main_thread=0xab)}
    v = verdict.analyze(docs).to_json()
    text = v["hangs"][0]["missing"]["1"]["text"]
    assert "main thread at <module> (train.py:23), in select (selectors.py:415); waiting for a DataLoader worker" \
        in text, text


def test_grouped_stacks_keep_each_ranks_own_line_numbers():
    """Ranks at line 20 and 21 of the same function are one group, and each keeps its own line (issue 13,
    case 6: they were shown as one group at line 20)."""
    docs = {}
    for r, line in ((0, 20), (1, 21), (2, 20), (3, 99)):
        frames = [("/w/train.py", line, "step"), ("/w/train.py", 5, "main")]
        if r == 3:
            frames = [("/w/data.py", line, "load"), ("/w/train.py", 5, "main")]
        docs[r] = _doc(r, 4, [], stacks_text=_stacks(frames), main_thread=0xab)
    v = verdict.analyze(docs).to_json()
    [same] = [g for g in v["stack_groups"] if g["ranks"] == [0, 1, 2]]
    assert [(var["ranks"], var["frames"][0]) for var in same["variants"]] == [
        ([0, 2], "step (train.py:20)"), ([1], "step (train.py:21)")]
    text = verdict.format_text(v)
    assert "ranks 0-2, at 2 different lines:" in text
    assert "ranks 0, 2: step (train.py:20)" in text and "rank 1: step (train.py:21)" in text
    assert "rank 3: load (data.py:99)" in text


def test_a_grouped_stack_deep_in_torch_ends_with_the_jobs_line_and_leaves_out_the_observers_frames():
    """A rank in new_group (torch 2.x: the factory five frames below the job, two of them the observer's
    wrappers): the four frames shown are torch's, the observer's own are left out, and the job's innermost
    frame follows them (which new_group it is); a stack whose job frame is among the four gets none."""
    import c10d_observer
    own = os.path.join(os.path.dirname(os.path.abspath(c10d_observer.__file__)), "sources", "groups.py")
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    deep = [(c10d, 2169, "_new_process_group_helper"), (own, 78, "helper"), (c10d, 6056, "_new_group_with_tag"),
            (own, 94, "with_tag"), (c10d, 5863, "new_group"),
            ("/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 97, "wrapper"),
            ("/w/train.py", 8, "<module>")]
    shallow = [(c10d, 3252, "all_reduce"), ("/w/train.py", 12, "<module>")]
    docs = {0: _doc(0, 2, [], stacks_text=_stacks(deep), main_thread=0xab),
            1: _doc(1, 2, [], stacks_text=_stacks(shallow), main_thread=0xab)}
    v = verdict.analyze(docs).to_json()
    [g0] = [g for g in v["stack_groups"] if g["ranks"] == [0]]
    [g1] = [g for g in v["stack_groups"] if g["ranks"] == [1]]
    assert g0["frames"][:4] == ["_new_process_group_helper (distributed_c10d.py:2169)",
                                "_new_group_with_tag (distributed_c10d.py:6056)", "new_group (distributed_c10d.py:5863)",
                                "wrapper (c10d_logger.py:97)"], g0
    assert g0["job_frame"] == "<module> (train.py:8)" and "job_frame" not in g1, (g0, g1)
    text = verdict.format_text(v)
    assert "rank 0: _new_process_group_helper (distributed_c10d.py:2169) < _new_group_with_tag" in text, text
    assert "< wrapper (c10d_logger.py:97) < ... < <module> (train.py:8)" in text, text
    assert text.rstrip().endswith("rank 1: all_reduce (distributed_c10d.py:3252) < <module> (train.py:12)"), text


def test_text_lists_read_as_lists_and_exits_are_shown():
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 2, 1)]),
            1: _doc(1, 3, [_g("0", [0, 1, 2], 1, 1)], kind="end", alive=False, exit_reason="killed"),
            2: _doc(2, 3, [_g("0", [0, 1, 2], 1, 1)], kind="end", alive=False, exit_reason="os._exit(3)")}
    text = verdict.format_text(verdict.analyze(docs).to_json())
    assert "dead: ranks 1, 2" in text and "waiting in it: rank 0" in text, text
    assert "ended: rank 1: killed" in text and "ended: rank 2: os._exit(3)" in text, text


def test_one_duration_per_hang_the_age_when_first_found():
    """Issue 13: the console said 'in flight for 3.1 s' when rank 0 found it; the verdict, merged later,
    says the same number, not its own age at merge time."""
    def overdue(age):
        return [{"group": "0", "stream": "0", "group_ranks": [0, 1, 2], "kind": "collective", "seq": 2,
                 "op": "all_reduce", "started_at": 90.0, "detected_at": 90.0 + age, "age_s": age,
                 "in_flight": True}]
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 2, 1)], written_at=100.0, overdue=overdue(3.14)),
            1: _doc(1, 3, [_g("0", [0, 1, 2], 1, 1)], written_at=100.0),
            2: _doc(2, 3, [_g("0", [0, 1, 2], 2, 1)], written_at=100.0, overdue=overdue(3.3))}
    v = verdict.analyze(docs).to_json()
    h = v["hangs"][0]
    assert h["stuck_s"] == 3.1 and h["missing_ranks"] == [1]
    assert "stuck 3.1 s" in v["summary"] and "stuck 3.1 s" in verdict.format_text(v)


# -- the record -----------------------------------------------------------------------------------------
def _merged(tmp_path):
    """A verdict merged at hang time (rank 1 late at all_reduce #2), written as the watchdog writes it."""
    overdue = [{"group": "0", "stream": "0", "group_ranks": [0, 1], "seq": 2, "op": "all_reduce",
                "started_at": 90.0, "detected_at": 93.0, "age_s": 3.0, "in_flight": True}]
    docs = {0: documents.RankDoc.from_json(_doc(0, 2, [_g("0", [0, 1], 2, 1)], overdue=overdue, gather_id="g")),
            1: documents.RankDoc.from_json(_doc(1, 2, [_g("0", [0, 1], 1, 1)], gather_id="g"))}
    v = verdict.analyze(docs).to_json()
    v.update(gather_id="g", verdict_at=100.0, gather_s=0.1)
    verdict.write(str(tmp_path), v, docs)
    return v, overdue


def _write(tmp_path, name, doc):
    dumpdir.write_json(str(tmp_path / name), doc)


def test_a_record_keeps_its_culprit_after_the_hang_resolved(tmp_path):
    v, overdue = _merged(tmp_path)
    done = [dict(overdue[0], in_flight=False, ended="completed", completed_at=160.3, resolved_after_s=70.3)]
    _write(tmp_path, "report-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 3, 3)], kind="report",
                                                    written_at=161.0, overdue=done))
    _write(tmp_path, "end-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 3, 3)], kind="end", written_at=170.0,
                                                 overdue=done, exit_reason="the observer was disabled"))
    _write(tmp_path, "end-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 3, 3)], kind="end", written_at=170.0,
                                                 exit_reason="the observer was disabled"))
    got, _, _ = verdict.load(str(tmp_path))
    got = got.to_json()
    assert got["recorded"] and got["culprit_ranks"] == [1] and got["summary"] == v["summary"]
    o = got["hangs"][0]["outcome"]
    assert o["state"] == "resolved" and o["text"].startswith("rank 1 was 70.3 s late at all_reduce #2, then caught up")
    assert got["exit_code"] == 3
    assert [a["text"] for a in got["after"]][-1].startswith("rank 1 ended")


def test_a_late_rank_that_called_another_op_at_the_seq_did_not_catch_up(tmp_path):
    # Lightning's SIGTERM handler on the culprit: a broadcast at the stuck all_reduce's seq, which gloo let a
    # waiting rank complete; the hang did not resolve (the record of a real 4-rank run, 2026-11-28)
    v, overdue = _merged(tmp_path)
    done = [dict(overdue[0], in_flight=False, ended="completed", completed_at=160.3, resolved_after_s=70.3)]
    _write(tmp_path, "end-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 2, 2)], kind="end", written_at=170.0,
                                                 overdue=done, exit_reason="the observer was disabled"))
    _write(tmp_path, "end-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 2, 2, recent=[(2, "broadcast", "1", 101.0)])],
                                                 kind="end", written_at=170.0, exit_reason="the observer was disabled"))
    got, _, _ = verdict.load(str(tmp_path))
    o = got.to_json()["hangs"][0]["outcome"]
    assert o["state"] == "ended" and "rank 1 called broadcast #2 there, not all_reduce: no catch-up" in o["text"], o
    assert got.exit_code == 1 and got.acts  # report exits 1; --exclude names the culprit's node


def test_a_record_whose_ranks_were_ended_stays_a_hang_and_names_the_abort(tmp_path):
    v, overdue = _merged(tmp_path)
    ended = [dict(overdue[0], in_flight=False, ended="rank ended", completed_at=101.0, resolved_after_s=11.0)]
    _write(tmp_path, "end-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 2, 1)], kind="end", alive=False,
                                                 written_at=101.0, overdue=ended,
                                                 exit_reason="ended by the observer (on_timeout=abort) after its "
                                                             "call was overdue"))
    _write(tmp_path, "end-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 1, 1)], kind="end", alive=False,
                                                 written_at=100.5, exit_reason="ended by the observer "
                                                                               "(on_timeout=abort): it was a culprit"))
    got, _, _ = verdict.load(str(tmp_path))
    got = got.to_json()
    h = got["hangs"][0]
    assert got["culprit_ranks"] == [1] and h["missing_ranks"] == [1] and h["missing"]["1"]["state"] != "dead"
    assert h["outcome"]["state"] == "ended" and h["outcome"]["aborted_ranks"] == [0, 1], h["outcome"]
    assert got["exit_code"] == 1 and got["summary"] == v["summary"]


def test_a_state_written_after_the_verdict_does_not_change_the_record(tmp_path):
    v, _ = _merged(tmp_path)
    # a later gather's answers, and the record's own states gone: the record still says what it said
    for r in (0, 1):
        _write(tmp_path, "state-rank%d-pid%d.json" % (r, r + 1), _doc(r, 2, [_g("0", [0, 1], 9, 9)],
                                                                      gather_id="later", written_at=300.0))
    got, _, _ = verdict.load(str(tmp_path))
    got = got.to_json()
    assert got["culprit_ranks"] == [1] and got["hangs"][0]["seq"] == 2 and got["summary"] == v["summary"]
    assert got["hangs"][0]["outcome"]["state"] == "resolved"  # every rank's position is now past it
    assert verdict.record_documents(str(tmp_path))[1].position("0").last_started == 1  # as at hang time


def test_another_nodes_state_relayed_after_the_verdict_is_news_of_then_not_of_now(tmp_path):
    """Two nodes: rank 0's state, relayed here during the gather but written after the verdict (its watchdog
    named its overdue call again), shows it still in the call; this node's rank 1 caught up and ended.  The
    relayed state is what rank 0 said then: the rank's later documents stayed on its node, so the outcome
    is resolved, rank 0 "nothing since", not "still stuck" (CI's two-node test, torch 2.13, 2026-11-26)."""
    _merged(tmp_path)
    stuck = dict(_doc(0, 2, [_g("0", [0, 1], 2, 1)], gather_id="g", written_at=100.4), host="node0")
    _write(tmp_path, dumpdir.node_states_name(1), documents.node_states_json("node0", "g", [
        dict(stuck, relayed_from="node0")]))
    _write(tmp_path, "end-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 3, 3)], kind="end", written_at=170.0,
                                                 exit_reason="the observer was disabled"))
    got = verdict.load(str(tmp_path))[0].to_json()
    o = got["hangs"][0]["outcome"]
    assert o["state"] == "resolved" and o["text"].endswith("(nothing since from rank 0)"), o
    assert got["culprit_ranks"] == [1] and got["exit_code"] == 3


def test_a_rank_that_issued_another_op_at_the_seq_never_entered_the_call():
    """Issue 24, row 6: rank 2 broadcast where the others all_reduce; its broadcast completed: it is not
    'finished it' but issued another op at this seq, the odd one out."""
    docs = {r: _doc(r, 3, [_g("0", [0, 1, 2], 2, 1)]) for r in (0, 1)}
    docs[2] = _doc(2, 3, [_g("0", [0, 1, 2], 2, 2, recent=[[2, "broadcast", "4 x float32", 91.0]])])
    v = verdict.analyze(docs).to_json()
    h = v["hangs"][0]
    assert h["op"] == "all_reduce" and h["other_op_ranks"] == [2]
    assert h["finished_ranks"] == [] and h["waiting_ranks"] == [0, 1] and v["culprit_ranks"] == [2]
    text = verdict.format_text(v)
    assert "finished it" not in text and "issued another op at this seq: rank 2 (broadcast, the odd one out)" in text


def test_with_no_verdict_merged_report_uses_the_states_gathered_at_hang_time(tmp_path):
    """The late rank caught up (or the job ended) inside the gather window: no verdict was merged; the
    states each rank gave the gather still say who never arrived, and the ends since say it resolved."""
    overdue = [{"group": "0", "stream": "0", "group_ranks": [0, 1], "seq": 2, "op": "all_reduce",
                "started_at": 90.0, "detected_at": 93.0, "age_s": 3.0, "in_flight": True}]
    _write(tmp_path, "state-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 2, 1)], gather_id="g", written_at=93.1,
                                                   overdue=overdue))
    _write(tmp_path, "state-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 1, 1)], gather_id="g", written_at=93.2))
    done = [dict(overdue[0], in_flight=False, ended="completed", completed_at=94.0, resolved_after_s=4.0)]
    for r in (0, 1):
        _write(tmp_path, "end-rank%d-pid%d.json" % (r, r + 1), _doc(r, 2, [_g("0", [0, 1], 2, 2)], kind="end",
                                                                     written_at=95.0, overdue=done if r == 0 else [],
                                                                     exit_reason="the observer was disabled"))
    v, _, _ = verdict.load(str(tmp_path))
    v = v.to_json()
    assert v["culprit_ranks"] == [1] and v["merged"] is False and v["exit_code"] == 3
    assert v["hangs"][0]["outcome"]["text"].startswith("rank 1 was 4.0 s late at all_reduce #2, then caught up")
    assert "made now from the states gathered at" in verdict.format_text(v)


# -- what kind of hang (issue 33) ---------------------------------------------------------------------------

def _all_in(frozen=(), world=3):
    return {r: _doc(r, world, [_g("0", list(range(world)), 5, 4)],
                    **({"frozen": True, "heartbeat_age_s": 12.0} if r in frozen else {})) for r in range(world)}


def test_a_rank_frozen_inside_a_call_every_rank_entered_is_its_culprit():
    """SIGSTOP after entering: every rank is in all_reduce #5, rank 2's Python stopped; the others wait for it."""
    v = verdict.analyze(_all_in(frozen=(2,)))
    h = v.hangs[0]
    assert h.category is verdict.Category.ALL_ARRIVED and h.frozen_in_it == [2]
    assert v.culprit_ranks == [2] and "rank 2 is frozen in it" in v.summary and "12.0 s" in v.summary
    assert "kind: all arrived: every rank entered it; rank 2 is frozen" in v.text


def test_every_rank_in_a_call_none_frozen_none_completed_cannot_be_decided():
    v = verdict.analyze(_all_in())
    assert v.hangs[0].category is verdict.Category.ALL_ARRIVED and v.culprit_ranks == []
    assert any("none completed it; none is frozen" in u for u in v.undecided)


def test_every_rank_of_a_call_frozen_is_no_ones_fault_the_documents_show():
    v = verdict.analyze(_all_in(frozen=(0, 1, 2)))
    assert v.culprit_ranks == [] and any("all are frozen" in u for u in v.undecided)


def test_categories_of_a_rank_that_never_arrived_a_mismatch_and_an_order_break():
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 5, 4)]), 1: _doc(1, 3, [_g("0", [0, 1, 2], 5, 4)]),
            2: _doc(2, 3, [_g("0", [0, 1, 2], 4, 4)])}
    h = verdict.analyze(docs).hangs[0]
    # the kind line says the fact once, in words: "kind: never arrived: rank 2 is in no collective" (it said
    # "never arrived: rank 2 never arrived: rank 2 no_collective")
    assert h.category is verdict.Category.NEVER_ARRIVED and h.category_why == "rank 2 is in no collective"
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 5, 4, op="all_reduce")]),
            1: _doc(1, 3, [_g("0", [0, 1, 2], 5, 4, op="all_reduce")]),
            2: _doc(2, 3, [_g("0", [0, 1, 2], 5, 4, op="broadcast")])}
    assert verdict.analyze(docs).hangs[0].category is verdict.Category.MISMATCH
    root = [h for h in verdict.analyze(_ordering_docs()).hangs if h.root][0]
    assert root.category is verdict.Category.ORDER


def test_a_call_whose_missing_rank_waits_in_another_stuck_call_is_a_cascade():
    # rank 1 waits in group "a" (rank 2 never came); rank 0 waits in group "b" for rank 1
    docs = {0: _doc(0, 3, [_g("b", [0, 1], 3, 2)]),
            1: _doc(1, 3, [_g("b", [0, 1], 2, 2), _g("a", [1, 2], 7, 6)]),
            2: _doc(2, 3, [_g("a", [1, 2], 6, 6)])}
    v = verdict.analyze(docs)
    kinds = {h.stream: h.category for h in v.hangs}
    assert kinds == {"a": verdict.Category.NEVER_ARRIVED, "b": verdict.Category.CASCADE}, v.summary
    assert v.culprit_ranks == [2]


def test_a_send_whose_peer_never_posted_its_recv_is_an_unmatched_p2p():
    s = "0:p2p:0->1"
    docs = {0: _doc(0, 2, [dict(_g(s, [0, 1], 3, 2, op="send"), kind="p2p")]),
            1: _doc(1, 2, [dict(_g(s, [0, 1], 2, 2), kind="p2p")])}
    h = verdict.analyze(docs).hangs[0]
    assert h.category is verdict.Category.UNMATCHED_P2P and "rank 1 never posted its half" in h.category_why


def test_a_broadcast_from_another_root_names_the_odd_rank_and_says_roots():
    """The fault matrix's wrong_root: rank 1 broadcasts from root 1, ranks 0 and 2 from root 0 (the patch
    source writes the root into the call's word: callword.encode_root), all three in the call."""
    docs = {r: _doc(r, 3, [_g("0", [0, 1, 2], 7, 6, op="broadcast", size="1024 x float32, root %d" % (r == 1))])
            for r in range(3)}
    v = verdict.analyze(docs).to_json()
    [h] = v["hangs"]
    m = h["mismatch"]
    assert m["kind"] == "root" and m["odd_ranks"] == [1] and m["expected_op"] == "broadcast from root 0", m
    assert h["category"] == "mismatch" and h["size"] == "1024 x float32, root 0"
    assert v["culprit_ranks"] == [1]
    assert "different roots at the same seq: rank 1 broadcast from root 1, ranks 0, 2 broadcast from root 0" in \
        v["summary"], v["summary"]


def test_a_rank_whose_root_is_unknown_is_never_the_odd_one_out():
    """A source may not know one rank's root (the gloo recorder's entries carry none; the wrapper that notes it
    saw another thread's op in between): that rank is no culprit, and with two roots seen elsewhere the
    call is "cannot decide" (its root may be either); with one root seen, no desync at all."""
    sizes = {0: "8 x float32, root 0", 1: "8 x float32, root 0", 2: "8 x float32, root 1", 3: "8 x float32"}
    docs = {r: _doc(r, 4, [_g("0", [0, 1, 2, 3], 3, 2, op="broadcast", size=sizes[r])]) for r in range(4)}
    v = verdict.analyze(docs).to_json()
    m = v["hangs"][0]["mismatch"]
    assert m["kind"] == "root" and m["odd_ranks"] == [] and m["unknown"] == [3], m
    assert v["culprit_ranks"] == [] and any("different roots" in u and "the root of rank 3 is not known" in u
                                            for u in v["undecided"]), v["undecided"]
    sizes = {0: "8 x float32, root 0", 1: "8 x float32", 2: "8 x float32, root 0"}
    docs = {r: _doc(r, 3, [_g("0", [0, 1, 2], 3, 2, op="broadcast", size=sizes[r])]) for r in range(3)}
    v = verdict.analyze(docs).to_json()
    assert "mismatch" not in v["hangs"][0] and 1 not in v["culprit_ranks"], v["hangs"][0]


def test_roots_with_no_majority_are_undecided_and_sizes_still_come_first():
    docs = {r: _doc(r, 2, [_g("0", [0, 1], 3, 2, op="broadcast", size="8 x float32, root %d" % r)]) for r in (0, 1)}
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [] and any("different roots" in u and "none has a majority" in u
                                            for u in v["undecided"]), v["undecided"]
    # a size that differs is a size mismatch, whatever the roots say
    docs = {r: _doc(r, 3, [_g("0", [0, 1, 2], 3, 2, op="broadcast", size="%d x float32, root %d" % (
        16 if r == 2 else 8, r == 1))]) for r in range(3)}
    m = verdict.analyze(docs).to_json()["hangs"][0]["mismatch"]
    assert m["kind"] == "size"


def _record_job(tmp_path, later_still_stuck):
    """A hang that named rank 2 (ranks 0, 1 waiting at world #5), then a later verdict that names nobody (every
    rank in world #7, the ranks catching up on a loaded machine), both records written as the watchdog
    writes them; then the ranks' reports since: #7 completed, or still in flight."""
    from c10d_observer.verdict import files
    dd = dumpdir.DumpDir(str(tmp_path))
    world = [0, 1, 2]
    first = {0: _doc(0, 3, [_g("0", world, 5, 4)]), 1: _doc(1, 3, [_g("0", world, 5, 4)]),
             2: _doc(2, 3, [_g("0", world, 4, 4)])}
    later = {r: _doc(r, 3, [_g("0", world, 7, 6, since=150.0)], written_at=152.0) for r in world}
    for gid, docs, at in (("g1", first, 101.0), ("g2", later, 153.0)):
        v = verdict.analyze({r: documents.RankDoc.from_json(d) for r, d in docs.items()}).to_json()
        v.update(gather_id=gid, verdict_at=at, gather_s=0.1)
        files.write(dd, v, {r: documents.RankDoc.from_json(d) for r, d in docs.items()})
    done = 6 if later_still_stuck else 8
    for r in world:
        now = _doc(r, 3, [_g("0", world, 8 if not later_still_stuck else 7, done, since=150.0)], written_at=200.0,
                   kind="report")
        dumpdir.write_json(dd.path(dumpdir.report_name(r, 100 + r)), now)
    return str(tmp_path)


def test_a_later_verdict_that_names_nobody_never_takes_the_place_of_one_that_named_a_culprit(tmp_path):
    """A verdict is a record: later events are added, never erase the culprit.  The ranks catching up after a
    hang, slow on a loaded machine, made a second verdict ("every rank of it is in it", no culprit) that
    report, load_verdict and the page then showed instead of the one that named the culprit (the quick tier
    with a second job beside it, 2026-11-27)."""
    from c10d_observer.verdict import files
    v, _, _ = files.load(_record_job(tmp_path, later_still_stuck=False))
    assert v.gather_id == "g1" and v.culprit_ranks == [2], v.summary
    [o] = v.other_verdicts
    assert o["gather_id"] == "g2" and o["culprit_ranks"] == [] and o["outcome"] == "resolved", o
    assert v.exit_code == 3  # both resolved
    assert "another verdict of this job" in v.text and "(later; resolved)" in v.text


def test_a_later_verdict_still_stuck_keeps_the_exit_code_at_1(tmp_path):
    from c10d_observer.verdict import files
    v, _, _ = files.load(_record_job(tmp_path, later_still_stuck=True))
    assert v.gather_id == "g1" and v.culprit_ranks == [2], v.summary
    assert v.other_verdicts[0]["outcome"] == "stuck" and v.exit_code == 1


def test_a_later_verdict_whose_ranks_had_all_finished_its_call_leaves_the_exit_code(tmp_path):
    """A late rank's watchdog gathered its own call after the others had finished it ("ranks 0, 1 finished it
    and none wait in it"): nobody was in it when it was merged, nothing there can still be stuck."""
    from c10d_observer.verdict import files
    d = _record_job(tmp_path, later_still_stuck=False)
    dd = dumpdir.DumpDir(d)
    rec = dd.read_json(dumpdir.record_name("g2"))
    v = dict(rec["verdict"], gather_id="g3", verdict_at=160.0)
    v["hangs"] = [dict(h, waiting_ranks=[], missing_ranks=[]) for h in v["hangs"]]
    files.write(dd, v)
    out, _, _ = files.load(d)
    assert out.gather_id == "g1" and out.exit_code == 3
    assert [o.get("outcome") for o in out.other_verdicts] == ["resolved", None]


def _records(tmp_path, merged, now):
    """Records written as the watchdog writes them: ``merged`` is [(gather id, verdict_at, docs, changes to the
    analysed verdict)], ``now`` the ranks' reports written since, by rank."""
    from c10d_observer.verdict import files
    dd = dumpdir.DumpDir(str(tmp_path))
    for gid, at, docs, changes in merged:
        parsed = {r: documents.RankDoc.from_json(d) for r, d in docs.items()}
        v = verdict.analyze(parsed).to_json()
        v.update(gather_id=gid, verdict_at=at, gather_s=0.1, **changes)
        if "level" in changes:
            v["hangs"] = [dict(h, level=changes["level"]) for h in v["hangs"]]
        files.write(dd, v, parsed)
    for r, d in now.items():
        dumpdir.write_json(dd.path(dumpdir.report_name(r, 100 + r)), dict(d, kind="report"))
    return files.load(str(tmp_path))[0]


_W = [0, 1, 2]
_LATE_1 = {0: _doc(0, 3, [_g("0", _W, 5, 4)]), 1: _doc(1, 3, [_g("0", _W, 4, 4)]),
           2: _doc(2, 3, [_g("0", _W, 5, 4)])}  # rank 1 never arrived at world #5: the culprit


def test_a_later_verdict_on_the_same_call_naming_another_rank_never_takes_the_first_ones_place(tmp_path):
    """The quick tier with a second job beside it: rank 1 skipped world #5 and was named; once released it entered
    the call, which its peers, starved of CPU, left slowly; a second merge saw every rank in #5 and rank 2's
    Python not running for 1.7 s ("rank 2 is frozen in it").  The record is the first hang's: rank 1."""
    caught_up = {r: _doc(r, 3, [_g("0", _W, 5, 4)], written_at=103.0) for r in _W}
    done = {r: _doc(r, 3, [_g("0", _W, 5, 5)], written_at=110.0) for r in _W}
    v = _records(tmp_path, [("g1", 101.0, _LATE_1, {}), ("g2", 104.0, caught_up, {"culprit_ranks": [2]})], done)
    assert v.gather_id == "g1" and v.culprit_ranks == [1], v.summary
    assert [o["gather_id"] for o in v.other_verdicts] == ["g2"]


def test_the_same_hang_grown_hard_takes_the_soft_ones_place(tmp_path):
    """A learned (soft) deadline named rank 1; the hard one, past the timeout, named it again: the record is
    the hard verdict, the one that acts."""
    v = _records(tmp_path, [("g1", 101.0, _LATE_1, {"level": "soft"}), ("g2", 120.0, _LATE_1, {"level": "hard"})],
                 {})
    assert v.gather_id == "g2" and v.culprit_ranks == [1] and v.acts, v.summary


def test_a_framework_teardown_after_the_hang_never_replaces_it(tmp_path):
    """Cancelled by SIGTERM to the launcher: the waiting ranks are still in world #5 when a verdict on another
    group's call is merged (a framework's handler, destroy_process_group), naming another rank: the record
    leads with the first hang, whose calls are still stuck."""
    teardown = {0: _doc(0, 3, [_g("0", _W, 5, 4), _g("1", [0, 1], 1, 0)], written_at=130.0),
                1: _doc(1, 3, [_g("0", _W, 4, 4), _g("1", [0, 1], 0, 0)], written_at=130.0),
                2: _doc(2, 3, [_g("0", _W, 5, 4)], written_at=130.0)}
    later = verdict.analyze({r: documents.RankDoc.from_json(d) for r, d in teardown.items()}).to_json()
    assert later["culprit_ranks"], later["summary"]  # the teardown's verdict names someone too
    stuck = {r: _doc(r, 3, [_g("0", _W, 5 if r != 1 else 4, 4)], written_at=140.0) for r in _W}
    v = _records(tmp_path, [("g1", 101.0, _LATE_1, {}),
                            ("g2", 131.0, {r: dict(d, groups=[g for g in d["groups"] if g["stream"] == "1"] or
                                                   d["groups"]) for r, d in teardown.items()},
                             {"culprit_ranks": [0]})], stuck)
    assert v.gather_id == "g1" and v.culprit_ranks == [1] and v.exit_code == 1, v.summary


def test_a_new_hang_after_the_first_resolved_is_the_record(tmp_path):
    """A slow eval was found overdue (soft, rank 0 named) and completed; much later a real stall elsewhere was
    named: the record is the stall, the eval one of the other verdicts, resolved."""
    eval_ = {0: _doc(0, 3, [_g("0", _W, 4, 4)]), 1: _doc(1, 3, [_g("0", _W, 5, 4)]), 2: _doc(2, 3, [_g("0", _W, 5, 4)])}
    stall = {r: _doc(r, 3, [_g("0", _W, 9 if r != 2 else 8, 8)], written_at=300.0) for r in _W}
    v = _records(tmp_path, [("g1", 101.0, eval_, {"level": "soft"}), ("g2", 301.0, stall, {})],
                 {r: dict(d, written_at=310.0) for r, d in stall.items()})
    assert v.gather_id == "g2" and v.culprit_ranks == [2], v.summary
    assert v.other_verdicts[0]["gather_id"] == "g1"


def _overdue(stream, seq, level, age, detected_at, op="all_reduce", kind="collective", peer=None, group_ranks=None):
    return {"stream": stream, "group": stream.split(":")[0], "seq": seq, "op": op, "kind": kind, "peer": peer,
            "group_ranks": group_ranks, "started_at": detected_at - age, "detected_at": detected_at, "age_s": age,
            "in_flight": True, "level": level, "deadline_s": 300.0 if level == "hard" else 10.0}


def test_a_skipped_recv_found_past_its_learned_deadline_is_soft_on_every_call_of_the_verdict():
    """Rank 0 sends rank 1 a tensor each step; rank 1 skipped one recv and waits in the next step's all_reduce,
    for rank 0 (4 ranks, no timeout: the hard deadline is 300 s).  Rank 0's watchdog found its send past the
    learned deadline (soft); the all_reduce, looked at because rank 1 waits in it, is 10 s old.  The verdict
    said "hard: past the timeout of 300 s" and acted (`report --exclude` named the culprit's node 10 s into the
    hang): one level per verdict, hard only past the hard deadline."""
    p2p = "0:p2p:0->1"
    world = [0, 1, 2, 3]
    cfg = {"timeout": 300.0}
    docs = {0: _doc(0, 4, [dict(_g(p2p, [0, 1], 31, 30, op="send", since=90.0), kind="p2p", peer=1),
                           _g("0", world, 30, 30)], config=cfg,
                    overdue=[_overdue(p2p, 31, "soft", 10.1, 100.1, op="send", kind="p2p", peer=1,
                                      group_ranks=[0, 1])], written_at=100.5),
            1: _doc(1, 4, [dict(_g(p2p, [0, 1], 30, 30), kind="p2p", peer=0),
                           _g("0", world, 31, 30, since=90.5)], config=cfg, written_at=100.5),
            2: _doc(2, 4, [_g("0", world, 31, 30, since=90.5)], config=cfg, written_at=100.5),
            3: _doc(3, 4, [_g("0", world, 31, 30, since=90.5)], config=cfg, written_at=100.5)}
    v = verdict.analyze(docs)
    assert v.level is verdict.Level.SOFT and v.hangs, v.summary
    assert all(h.level is verdict.Level.SOFT for h in v.hangs), [(h.call, h.level) for h in v.hangs]
    assert not v.acts and verdict.culprit_nodes(v.to_json()) == ""


def test_a_hard_verdict_carries_the_age_and_detection_of_the_rank_that_crossed_the_hard_deadline():
    """Ranks 0 and 2 were at 20.0 s, past the timeout of 20 s; rank 3's report, written earlier, was still soft
    at 11.3 s: the verdict said "stuck 11.3 s (hard: past the timeout of 20 s)"."""
    world = [0, 1, 2, 3]
    docs = {r: _doc(r, 4, [_g("0", world, 5 if r != 1 else 4, 4, since=80.0)], config={"timeout": 20.0},
                    written_at=101.0,
                    overdue=[_overdue("0", 5, "soft" if r == 3 else "hard", 11.3 if r == 3 else 20.0 + r / 100,
                                      91.3 if r == 3 else 100.0 + r / 100, group_ranks=world)] if r != 1 else [])
            for r in range(4)}
    [h] = verdict.analyze(docs).hangs
    assert h.level is verdict.Level.HARD and h.stuck_s == 20.0 and h.detected_at == 100.0, (h.stuck_s, h.detected_at)
    assert h.stuck_s >= 20.0


def test_a_send_whose_peer_went_on_to_a_call_that_waits_for_it_is_an_unmatched_p2p():
    """Rank 1 skipped its recv and waits in the next all_reduce, which waits for rank 0, in its send: the calls
    wait for each other, and the root is the send whose peer never posted its half (docs/diagnosis.md), not
    an "order" of groups."""
    p2p, world = "0:p2p:0->1", [0, 1, 2]
    docs = {0: _doc(0, 3, [dict(_g(p2p, [0, 1], 4, 3, op="send"), kind="p2p", peer=1), _g("0", world, 3, 3)]),
            1: _doc(1, 3, [dict(_g(p2p, [0, 1], 3, 3), kind="p2p", peer=0), _g("0", world, 4, 3)]),
            2: _doc(2, 3, [_g("0", world, 4, 3)])}
    v = verdict.analyze(docs)
    root = [h for h in v.hangs if h.stream == p2p][0]
    assert root.category is verdict.Category.UNMATCHED_P2P, (root.category, v.summary)
    assert root.category_why.startswith("rank 1 never posted its half: rank 1 waits in all_reduce #4"), \
        root.category_why


ABORTED = "process 42 ended without disable() (the rank closed its end; killed by signal 6 (SIGABRT))"


def _aborted_docs(stalled=True, sizes=("4 x float32", "4 x float32")):
    """Rank 0 waits in world #2; rank 1 stalled in Python (in no collective) or not there (waits in #2 too);
    rank 2 died of SIGABRT (as gloo aborts a rank that receives a collective of another size: the fuzzer's
    real programs).  ``sizes``: ranks 0 and 1's sizes for #2 (None: not known)."""
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 2, 1, size=sizes[0])]),
            2: _doc(2, 3, [_g("0", [0, 1, 2], 1, 1)], kind="end", alive=False, exit_reason=ABORTED)}
    if stalled:
        docs[1] = _doc(1, 3, [_g("0", [0, 1, 2], 1, 1)])
    else:
        docs[1] = _doc(1, 3, [_g("0", [0, 1, 2], 2, 1, size=sizes[1])])
    return docs


def test_a_rank_aborted_beside_a_rank_that_explains_the_hang_is_a_symptom_not_a_culprit():
    v = verdict.analyze(_aborted_docs()).to_json()
    h = v["hangs"][0]
    assert sorted(h["missing_ranks"]) == [1, 2]
    assert v["culprit_ranks"] == [1], v["summary"]
    assert "aborted (SIGABRT)" in h["missing"]["2"]["text"] and "not named" in h["missing"]["2"]["text"]


def test_a_rank_aborted_alone_beside_peers_that_issued_one_call_is_named():
    # gloo aborts the rank that receives more than it posted: with ranks 0 and 1 alike, rank 2 crashed before
    # all_reduce #2 or posted another size in it; either way the fault is its own
    v = verdict.analyze(_aborted_docs(stalled=False)).to_json()
    assert v["culprit_ranks"] == [2], v["summary"]
    assert "crashed, or posted another size" in v["hangs"][0]["missing"]["2"]["text"]


def test_a_rank_aborted_alone_beside_peers_of_unknown_or_different_sizes_is_not_named():
    # either peer may have sent rank 2 more than it posted: nothing says whether rank 2 crashed or was aborted
    for sizes in ((None, None), ("4 x float32", "8 x float32")):
        v = verdict.analyze(_aborted_docs(stalled=False, sizes=sizes)).to_json()
        assert 2 not in v["culprit_ranks"], (sizes, v["summary"])
        assert any("died of SIGABRT" in u for u in v["undecided"]) or v["hangs"][0].get("mismatch"), v["undecided"]


def _aborted_pair_docs(peer_size, like_size="4 x float32", likes=2, history=5):
    """Four ranks in pairs ([0, 1], [2, 3], [4, 5]: groups "1", "2", "3"), each pair all_reducing ``history``
    calls and then one more; rank 3 died of SIGABRT after its call #``history``, and rank 2 waits in #history+1
    with ``peer_size``, where the other pairs (``likes`` of them) issued ``like_size`` and went past it.  The
    fuzzer's real programs, seed 8000076 on 2.15: a pair's root broadcast 2,097,153 elements, gloo aborted
    the receiver before its source read its entry for the call."""
    n = history + 1
    done = [(s, "all_reduce", "4 x float32", 80.0 + s) for s in range(1, n)]
    docs = {2: _doc(2, 6, [_g("2", [2, 3], n, n - 1, size=peer_size, recent=done)]),
            3: _doc(3, 6, [_g("2", [2, 3], n - 1, n - 1, recent=done)], kind="end", alive=False, exit_reason=ABORTED)}
    for stream, pair in (("1", [0, 1]), ("3", [4, 5]))[:likes]:
        for r in pair:
            docs[r] = _doc(r, 6, [_g(stream, pair, n, n, recent=done + [(n, "all_reduce", like_size, 80.0 + n)])])
    return docs


def test_a_rank_aborted_alone_in_a_pair_is_not_named_where_nothing_tells_who_changed_the_size():
    for docs in (_aborted_pair_docs("8 x float32", likes=0), _aborted_pair_docs("8 x float32", history=1),
                 _aborted_pair_docs("4 x float32", likes=1)):
        v = verdict.analyze(docs).to_json()
        assert v["culprit_ranks"] == [], v["summary"]
        [why] = [u for u in v["undecided"] if "SIGABRT" in u]
        assert "rank 3 may have crashed before it or been aborted by its peer's call" in why, why
        assert "not named" in v["hangs"][0]["missing"]["3"]["text"]


def test_a_rank_aborted_alone_in_a_pair_is_told_apart_by_the_pairs_like_it():
    v = verdict.analyze(_aborted_pair_docs("8 x float32")).to_json()
    assert v["culprit_ranks"] == [2], v["summary"]  # it sent more than the program's call: rank 3 a symptom
    m = v["hangs"][0]["mismatch"]
    assert m["kind"] == "size" and m["odd_ranks"] == [2] and m["expected_op"] == "all_reduce of 4 x float32", m
    assert "groups 1, 3, like this one" in m["evidence"] and "died of SIGABRT" in m["evidence"], m
    assert "a symptom, not named" in v["hangs"][0]["missing"]["3"]["text"]
    v = verdict.analyze(_aborted_pair_docs("4 x float32")).to_json()
    assert v["culprit_ranks"] == [3], v["summary"]  # rank 2 issued the program's call: rank 3 crashed, or changed
    assert "crashed, or posted another size" in v["hangs"][0]["missing"]["3"]["text"]


def _death_docs(raised=True):
    """4 ranks: world "0" and a subgroup "1" of ranks 0 and 3.  Rank 3 exited (ended without disable) after
    its subgroup call #2; ranks 1 and 2 wait in world #4; rank 0 is in no collective.  ``raised``: rank 0's
    last call was subgroup #3, which rank 3 never entered, and it is over (gloo raised it when rank 3 died:
    the fuzzer's real programs, seed 5000001 on 2.15); else rank 0 stopped before it, a stall of its own."""
    gone = "process 47 ended without disable() (the rank closed its end; exit code 1)"
    docs = {1: _doc(1, 4, [_g("0", [0, 1, 2, 3], 4, 3)]), 2: _doc(2, 4, [_g("0", [0, 1, 2, 3], 4, 3)]),
            3: _doc(3, 4, [_g("0", [0, 1, 2, 3], 3, 3), _g("1", [0, 3], 2, 2)], kind="end", alive=False,
                    exit_reason=gone),
            0: _doc(0, 4, [_g("0", [0, 1, 2, 3], 3, 3), _g("1", [0, 3], 3 if raised else 2, 3 if raised else 2,
                                                              recent=[(3, "all_reduce", "4 x float32", 95.0)])])}
    return docs


def test_a_rank_whose_call_a_dead_culprit_never_entered_is_over_is_a_symptom_of_the_death():
    v = verdict.analyze(_death_docs()).to_json()
    h = v["hangs"][0]
    assert sorted(h["missing_ranks"]) == [0, 3]
    assert v["culprit_ranks"] == [3], v["summary"]
    m = h["missing"]["0"]
    assert m["state"] == "raised" and "rank 3 never entered" in m["text"] and "not named" in m["text"], m


def test_a_group_the_dead_ranks_document_does_not_hold_is_one_it_never_entered():
    """The fuzzer's real seed 19000025 on 1.8.1 (the patch source: a stream is in a document from its first
    call): rank 3 exited before its subgroup's first call, which raised in rank 0; rank 3's document holds
    the world only.  A dead rank's document with no group at all says nothing of the subgroup."""
    docs = _death_docs()
    docs[3]["groups"] = [g for g in docs[3]["groups"] if g["stream"] != "1"]
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [3], v["summary"]
    assert v["hangs"][0]["missing"]["0"]["state"] == "raised"
    docs[3]["groups"] = []
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [0, 3], v["summary"]


def test_a_rank_that_stopped_before_the_call_the_dead_rank_missed_is_still_named():
    v = verdict.analyze(_death_docs(raised=False)).to_json()
    assert v["culprit_ranks"] == [0, 3], v["summary"]
    assert v["hangs"][0]["missing"]["0"]["state"] == "no_collective"


def _raised_past_an_abort_docs():
    """The fuzzer's real seed 37000018 on torch 2.15, a machine loaded by three more jobs (2026-12-04): rank 2
    posted the prologue's broadcast with another dtype and gloo aborted it inside the call (its document holds no
    call on the world); ranks 0 and 3 went past the broadcast, their next call raised ("Connection closed by
    peer") before their source recorded it, and they stayed in their error path (tearing down) past the
    deadline; ranks 1 and 4 wait in the world's all_reduce #2.  5 ranks: the world "0" and a subgroup "1" of
    ranks 0 and 3."""
    docs = {1: _doc(1, 5, [_g("0", [0, 1, 2, 3, 4], 2, 1)]), 4: _doc(4, 5, [_g("0", [0, 1, 2, 3, 4], 2, 1)])}
    for r in (0, 3):
        docs[r] = _doc(r, 5, [_g("0", [0, 1, 2, 3, 4], 1, 1), _g("1", [0, 3], 1, 1)])
    docs[2] = _doc(2, 5, [_g("0", [0, 1, 2, 3, 4], 0, 0)], kind="end", alive=False, exit_reason=ABORTED)
    return docs


def test_ranks_past_a_call_an_aborted_rank_never_entered_are_symptoms_of_its_death_not_culprits():
    """Ranks in no collective, missing from the stuck call beside a rank gloo aborted, whose last call on its
    group is one the aborted rank never entered: their next call raised when it died (a symptom), whether or not
    the aborted rank is named.  On the real run, ranks 0, 4 and 6 were named: a wrong culprit."""
    v = verdict.analyze(_raised_past_an_abort_docs()).to_json()
    assert v["culprit_ranks"] == [], v["summary"]
    h = v["hangs"][0]
    assert sorted(h["missing_ranks"]) == [0, 2, 3]
    for r in ("0", "3"):
        m = h["missing"][r]
        assert m["state"] == "raised" and "rank 2 never entered" in m["text"] and "not named" in m["text"], m


def _died_inside_docs(odd_size=None):
    """The fuzzer's real seed 43000042 on torch 1.8.1 (the patch source), 2026-12-04: 5 ranks, the world's
    broadcast #1 from root 0; rank 1 posted it as float16 and gloo aborted it inside the call; the broadcast
    raised in rank 3 ("Connection reset by peer"), whose source counts a call that raised as over, and rank 3
    ended (its script caught the error, the observer disabled); ranks 2 and 4 wait in broadcast #2, rank 0 in
    #1.  ``odd_size``: rank 3's broadcast #1 was of this size (it is the odd one of the mismatch)."""
    world = [0, 1, 2, 3, 4]
    big, small = "1048576 x float32", "1048576 x float16"
    first = [(1, "broadcast", big, 80.0)]
    docs = {0: _doc(0, 5, [_g("0", world, 1, 0, op="broadcast", size=big)]),
            1: _doc(1, 5, [_g("0", world, 1, 0, op="broadcast", size=small)], kind="end", alive=False,
                    exit_reason=ABORTED),
            3: _doc(3, 5, [_g("0", world, 1, 1, recent=[(1, "broadcast", odd_size or big, 80.0)])], kind="end",
                    exit_reason="the observer was disabled")}
    for r in (2, 4):
        docs[r] = _doc(r, 5, [_g("0", world, 2, 1, op="broadcast", size=big, recent=first)])
    return docs


def test_a_rank_whose_call_a_dead_rank_died_inside_is_over_is_a_symptom_of_the_death_not_a_culprit():
    """Rank 3 is missing from broadcast #2 and in no collective; its last call is the broadcast rank 1 died
    inside, over for rank 3: gloo raised it there.  Rank 1, the odd one of the mismatch, is the culprit; rank 3
    is not named (on the real run it was: a wrong culprit)."""
    v = verdict.analyze(_died_inside_docs()).to_json()
    assert v["culprit_ranks"] == [1], v["summary"]
    [second] = [h for h in v["hangs"] if h["seq"] == 2]
    m = second["missing"]["3"]
    assert m["state"] == "raised" and "the one rank 1 died inside" in m["text"] and "not named" in m["text"], m


def test_an_aborted_rank_its_peers_name_alone_stays_named_though_a_later_call_took_it_for_a_symptom():
    """The same seed on torch 2.13 (gloo's recorder): rank 1's document holds no call of the world (the recorder
    did not see its broadcast before gloo aborted it).  Broadcast #1 names it (its peers issued one call alike);
    broadcast #2 took it for a symptom beside rank 3, in no collective, a symptom itself: nobody was named.
    Broadcast #2 now names it too: ranks 2 and 4 completed #1, and rank 3 issued it alike and raised on the
    death (deaths.raised_before)."""
    docs = _died_inside_docs()
    docs[1] = _doc(1, 5, [_g("0", [0, 1, 2, 3, 4], 0, 0)], kind="end", alive=False, exit_reason=ABORTED)
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [1], v["summary"]
    first, second = sorted(v["hangs"], key=lambda h: h["seq"])
    assert "issued alike" in first["missing"]["1"]["text"]
    assert "which ranks 2, 4 completed and rank 3 issued alike and raised on its death" in second["missing"]["1"][
        "text"], second["missing"]["1"]
    assert second["missing"]["3"]["state"] == "raised"


def test_the_odd_rank_of_a_mismatch_is_named_though_a_rank_died_inside_its_call():
    """Where the rank whose last call a dead rank died inside is the odd one of that call's mismatch (its size
    made the other die), it stays named."""
    docs = _died_inside_docs(odd_size="1048576 x float64")
    docs[1] = _doc(1, 5, [_g("0", [0, 1, 2, 3, 4], 1, 0, op="broadcast", size="1048576 x float32")], kind="end",
                   alive=False, exit_reason=ABORTED)
    v = verdict.analyze(docs).to_json()
    assert 3 in v["culprit_ranks"], v["summary"]
    assert all(h["missing"].get("3", {}).get("state") != "raised" for h in v["hangs"]), v["hangs"]


@pytest.mark.parametrize("record", [0, 3])
def test_a_rank_aborted_inside_a_call_whose_mismatch_names_its_odd_rank_is_a_symptom_wherever_its_record_stopped(
        record):
    """The fuzzer's real seed 46000136 on torch 2.15 (gloo's recorder), 2026-12-04, six runs of six: 8 ranks, the
    world's broadcast from root 0 each step; at step 3 rank 3 posted broadcast #4 three times as large; gloo
    aborted rank 7 (SIGABRT), whose document held no call of the world (its source had not read the recorder:
    ``record`` 0), or, as it may as well, held #3 (``record`` 3).  The broadcast's mismatch names rank 3 from
    the peers' own calls (6 of 7 alike); rank 7 is its symptom, not named (it was named beside rank 3: a wrong
    culprit)."""
    world, big = list(range(8)), "1048576 x float32"
    earlier = [(s, "broadcast", big, 80.0 + s) for s in (1, 2, 3)]
    docs = {r: _doc(r, 8, [_g("0", world, 4, 3, op="broadcast", size="3145728 x float32" if r == 3 else big,
                                recent=earlier)]) for r in range(7)}
    docs[7] = _doc(7, 8, [_g("0", world, record, record, recent=earlier[:record])], kind="end", alive=False,
                   exit_reason=ABORTED)
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [3], v["summary"]
    h = v["hangs"][0]
    assert h["missing_ranks"] == [7] and "not named" in h["missing"]["7"]["text"], h["missing"]
    assert "the odd one of broadcast #4" in h["missing"]["7"]["text"] and not v["undecided"], v["undecided"]


def test_a_rank_aborted_beside_peers_that_issued_one_call_alike_is_named_though_its_record_is_empty():
    """Without a mismatch among the peers (all seven issued broadcast #4 alike), the aborted rank is the one that
    left the program, whatever its record holds: it crashed, or posted another size.  Named, as before."""
    world, big = list(range(8)), "1048576 x float32"
    docs = {r: _doc(r, 8, [_g("0", world, 4, 3, op="broadcast", size=big)]) for r in range(7)}
    docs[7] = _doc(7, 8, [_g("0", world, 0, 0)], kind="end", alive=False, exit_reason=ABORTED)
    v = verdict.analyze(docs).to_json()
    assert v["culprit_ranks"] == [7], v["summary"]


def test_a_freeze_found_after_the_merge_is_added_to_the_record_and_changes_nothing_it_said(tmp_path):
    """Item 6 of issue 42: rank 1 was stopped from 95.0 to 103.5 (SIGSTOP inside the call); the merge at 100
    did not see it frozen; its watchdog's later document carries the span.  The record says it after."""
    v, overdue = _merged(tmp_path)
    span = [{"since": 95.0, "until": 103.5}]
    _write(tmp_path, "end-rank1-pid2.json", _doc(1, 2, [_g("0", [0, 1], 3, 3)], kind="end", written_at=170.0,
                                                 exit_reason="the observer was disabled", frozen_spans=span))
    _write(tmp_path, "end-rank0-pid1.json", _doc(0, 2, [_g("0", [0, 1], 3, 3)], kind="end", written_at=170.0,
                                                 exit_reason="the observer was disabled",
                                                 frozen_spans=[{"since": 10.0, "until": 20.0}]))  # before it
    got, _, _ = verdict.load(str(tmp_path))
    got = got.to_json()
    assert got["culprit_ranks"] == [1] and got["summary"] == v["summary"] and got["frozen_ranks"] == []
    late = [a for a in got["after"] if "found frozen" in a["text"]]
    assert len(late) == 1 and late[0]["rank"] == 1 and late[0]["at"] == 103.5, got["after"]
    assert "(8.5 s)" in late[0]["text"] and "did not know it" in late[0]["text"], late


def test_the_watchdog_notes_each_span_its_ranks_python_did_not_run():
    import types

    from c10d_observer import rank_docs
    beat = [0]
    docs = types.SimpleNamespace(reader=types.SimpleNamespace(heartbeat_ns=lambda: beat[0]), frozen_spans=[],
                                 windows=types.SimpleNamespace(frozen_after=1.0))
    watch = rank_docs.RankDocs.watch_frozen

    def poll(t, last_beat):  # now t s; the helper last beat at last_beat s (wall == monotonic here)
        beat[0] = int(last_beat * 1e9)
        watch(docs, int(t * 1e9), t)
    poll(1.0, 0.9)
    poll(2.0, 1.9)
    assert docs.frozen_spans == []
    poll(3.5, 2.0)  # no beat for 1.5 s: frozen since 2.0
    poll(6.0, 2.0)
    assert docs.frozen_spans == [{"since": 2.0, "until": None}]
    poll(7.0, 6.8)  # it beat again at 6.8
    poll(8.0, 7.9)
    assert docs.frozen_spans == [{"since": 2.0, "until": 6.8}]


def _frozen_p2p():
    """A real gloo job's documents at its first merge (tests/data/frozen-p2p-real-17000008.json: torch 2.13,
    the fuzzer's real mode, seed 17000008 --kind freeze): rank 3 stopped at step 5 of a p2p program, its
    document showing every p2p call since its source last recorded a completion still in flight (#1)."""
    import json
    import os
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "frozen-p2p-real-17000008.json")) as f:
        raw = json.load(f)["documents"]
    return raw, documents.RankDoc.from_json


def test_a_send_and_its_recv_at_one_seq_are_one_p2p_call_never_a_desync_of_ops():
    """Found by the fuzzer's real mode: the merge read rank 6's send #1 and frozen rank 3's recv #1 on stream
    6->3 as "different ops at the same seq" and named nobody; a p2p stream's two halves are one call: rank 3,
    frozen in it while rank 6 completed its part, is named."""
    raw, doc = _frozen_p2p()
    v = verdict.analyze({int(r): doc(j) for r, j in raw.items()})
    assert v.culprit_ranks == [3], v.summary
    assert "rank 3 is frozen in it" in v.summary and "rank 6 completed its part" in v.summary, v.summary
    assert not any(h.mismatch for h in v.hangs if ":p2p:" in str(h.stream)), v.summary


def test_the_halves_of_a_p2p_call_of_different_sizes_are_a_desync():
    raw, doc = _frozen_p2p()
    for c in raw["6"]["groups"]:
        if c["stream"] == "0:p2p:6->3":
            c["recent_ops"] = [[s, op, "4096 x bfloat16" if s == 1 else size, t] for s, op, size, t in c["recent_ops"]]
    v = verdict.analyze({int(r): doc(j) for r, j in raw.items()})
    [h] = [h for h in v.hangs if h.stream == "0:p2p:6->3" and h.seq == 1]
    assert h.mismatch and h.mismatch.kind.value == "size", h.mismatch
    assert "rank 6 send of 4096 x bfloat16" in h.mismatch.text and "rank 3 recv of 1024 x bfloat16" in h.mismatch.text


def test_ranks_gloo_aborted_beside_the_rank_that_broke_the_order_are_symptoms_not_culprits():
    """A real gloo job's documents at its merge (tests/data/aborted-beside-order-real-66000021.json: torch 2.13,
    the fuzzer's real mode, seed 66000021, 2026-12-06): rank 1 skipped the world's broadcast #6 of 1 x float32 at
    step 1, its broadcast of 4096 met the others' #6, and gloo aborted ranks 3 and 5 (SIGABRT) before their source
    recorded their calls (#0 and #1 on the world in their documents); ranks 4 and 6 raised and ended; rank 0 waits
    in broadcast #7, ranks 1 and 2 in their half's all_gather #2.  The order rule names rank 1; the aborted ranks,
    "never arrived" at #7, were named beside it (a wrong culprit): they are symptoms, not named."""
    import json
    import os
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "aborted-beside-order-real-66000021.json")) as f:
        raw = json.load(f)["documents"]
    v = verdict.analyze({int(r): documents.RankDoc.from_json(j) for r, j in raw.items()})
    assert v.culprit_ranks == [1], v.summary
    assert "rank 1 issued #2 on group 1 before #7 on group 0" in v.summary, v.summary
    [h] = [h for h in v.to_json()["hangs"] if h["stream"] == "0"]
    for r in ("3", "5"):
        assert "SIGABRT" in h["missing"][r]["text"] and "not named" in h["missing"][r]["text"], h["missing"][r]


def test_a_rank_gloo_aborted_whose_record_stops_before_calls_its_peer_completed_with_it_is_not_named():
    """A real gloo job's documents at its merge (tests/data/aborted-behind-real-66000013.json: torch 2.13, the
    fuzzer's real mode, seed 66000013, 2026-12-06): in tp pair [2, 3], root rank 3 broadcast #3 as int64 where the
    program broadcasts bfloat16; gloo aborted rank 2 ("8388608 vs 2097152") before its source recorded any of its
    calls, and rank 2 was named, dead before #3 by its record (a wrong culprit), though rank 3 completed #1 and #2
    with it.  Where it died is not known: nobody is named, and the verdict says why."""
    v = verdict.analyze(_real_docs("aborted-behind-real-66000013.json"))
    assert v.culprit_ranks == [], v.summary
    [why] = [u for u in v.undecided if "SIGABRT" in u]
    assert "rank 2 died of SIGABRT; its record holds no call on this group, where rank 3 completed #2" in why, why
    assert "not named" in why


def _made_apart_docs(**words):
    """tests/data/made-apart-real-74000073.json's documents (torch 2.13, the fuzzer's real mode, ``--kind
    make_members``, seed 74000073, 2026-12-06): rank 1 made ``new_group([1, 2])`` where ranks 0, 2 and 3 made
    ``new_group([1, 2, 3])``; gloo wired the two across and every making completed, and the job hung at group 1's
    first all_reduce (ranks 1 and 2 in it, rank 3 in it under the members it made, rank 0 in the world's
    all_gather)."""
    return _real_docs("made-apart-real-74000073.json", **words)


def _real_docs(name, **words):
    """The documents a real job's merge read (tests/data/``name``); ``words``: rank (as "r0") -> the members its
    makings carry instead."""
    import json
    import os
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", name)) as f:
        raw = json.load(f)["documents"]
    for key, members in words.items():
        for g in raw[key[1:]]["groups"]:
            if g["stream"] == "new_group:world":
                if isinstance(members, list):  # one making a text, numbered from 1, each completed
                    t = g["recent_ops"][0][3]
                    g["recent_ops"] = [[i + 1, "new_group", m, t + i] for i, m in enumerate(members)]
                    g["last_started"] = g["last_completed"] = len(members)
                else:
                    g["recent_ops"] = [[s, op, members, t] for s, op, _, t in g["recent_ops"]]
    return {int(r): documents.RankDoc.from_json(j) for r, j in raw.items()}


def test_a_rank_that_made_another_group_before_the_hang_is_named_from_its_making():
    """The hang came after the makings, which all completed: the verdict named rank 3 (never arrived in a call it
    was in, under the members it made: a wrong culprit).  The world's making stream shows rank 1's making of other
    members: the groups were made apart there, and that decides, whatever the calls on them show."""
    v = verdict.analyze(_made_apart_docs())
    assert v.culprit_ranks == [1], v.summary
    assert v.made_apart == ("new_group #1: rank 1 new_group of members 1, 2, ranks 0, 2, 3 new_group of members "
                            "1-3; the odd one out: rank 1"), v.made_apart
    assert not v.undecided, v.undecided
    text = render.worded(v)
    assert "groups made apart before it: new_group #1: rank 1 new_group of members 1, 2" in text.summary
    assert "\ngroups made apart: new_group #1: " in render.format_text(v)


def test_the_making_compared_as_a_bundle_carries_it(monkeypatch):
    """The merging node reads each rank's positions as rows (to_wire): its recent calls a Record (a stream of more
    than RECORD_OVER calls; here every one), compared by their words without building them (Record.words); the
    same verdict."""
    monkeypatch.setattr(documents, "RECORD_OVER", 0)
    docs = _made_apart_docs()
    wired = {r: documents.RankDoc.of(d.to_wire()) for r, d in docs.items()}
    assert any(type(p.recent) is documents.Record for d in wired.values() for p in d.groups)
    assert verdict.analyze(wired).to_json() == verdict.analyze(docs).to_json()


def test_two_ranks_against_two_at_a_making_before_the_hang_name_nobody():
    """Ranks 0 and 1 made members 1, 2; ranks 2 and 3 members 1-3: no majority says which the program meant, and
    the calls on the groups made apart decide nothing: nobody is named, and the verdict says why."""
    v = verdict.analyze(_made_apart_docs(r0="members 1, 2"))
    assert v.culprit_ranks == [], v.summary
    assert v.made_apart.startswith("new_group #1: "), v.made_apart
    assert any(u.startswith("new_group #1: the ranks made different groups there (") and
               u.endswith("none has a majority") for u in v.undecided), v.undecided


def test_ranks_that_each_made_only_their_own_groups_are_none_of_them_named():
    """``if rank in ranks: new_group(ranks)`` on every rank (the fuzzer's ``make_own``): rank 0 made only a group
    of itself, ranks 1-3 only theirs.  Three against one at new_group #1, but no rank is the odd one: the
    documents of a program whose groups came in the other order are the same.  Nobody is named, and the verdict
    says what to change."""
    v = verdict.analyze(_made_apart_docs(r0="members 0"))
    assert v.culprit_ranks == [], v.summary
    assert any("each rank made only the groups it is in" in u and "no one rank is at fault" in u
               for u in v.undecided), v.undecided
    assert "every rank calls new_group for every group" in v.made_apart, v.made_apart
    assert "the odd one out" not in v.made_apart, v.made_apart


def test_real_ranks_that_each_made_only_their_own_half_are_none_of_them_named():
    """tests/data/made-own-real-82000019.json (torch 2.13, the fuzzer's real mode, ``--kind make_own``, seed
    82000019, 2026-12-06): halves [0, 1, 2] and [3, 4, 5, 6], each rank made only its own; both groups took
    the name 1, and ranks 3-6 were stuck in their making.  The making's desync named ranks 0-2 by the majority
    of ranks 3-6 (a wrong culprit: the documents of the program with its halves made the other way round are
    the same).  Nobody is named, and the stuck call says why."""
    v = verdict.analyze(_real_docs("made-own-real-82000019.json"))
    assert v.culprit_ranks == [], v.summary
    assert "each rank made only the groups it is in" in render.worded(v).summary, render.worded(v).summary
    assert any("no one rank is at fault" in u for u in v.undecided), v.undecided


def test_a_rank_that_left_out_a_group_it_is_not_in_is_named_with_what_to_change():
    """Rank 0 left out ``new_group([1, 2])`` (it is not in it) where ranks 1-3 made it, then ``[1, 2, 3]``: its
    makings are the others' one place ahead.  It is named, and the verdict says that it left that group out."""
    v = verdict.analyze(_made_apart_docs(r0=["members 1-3"], r1=["members 1, 2", "members 1-3"],
                                         r2=["members 1, 2", "members 1-3"], r3=["members 1, 2", "members 1-3"]))
    assert v.culprit_ranks == [0], v.summary
    assert ("rank 0 left out new_group #1 (of ranks 1, 2, a group it is not in), so its later groups took the next "
            "names; torch names a group by its place") in v.made_apart, v.made_apart
    assert v.made_apart.endswith("use_local_synchronization=True)"), v.made_apart


def test_a_rank_that_left_out_a_group_is_said_to_have_where_each_making_is_two_calls():
    """torch 1.x: each new_group is the factory's call and the store-based barrier's, both carrying the members:
    rank 0's makings are the others' two calls on."""
    two = ["members 1, 2", "members 1, 2", "members 1-3", "members 1-3"]
    v = verdict.analyze(_made_apart_docs(r0=["members 1-3", "members 1-3"], r1=two, r2=two, r3=two))
    assert v.culprit_ranks == [0], v.summary
    assert "rank 0 left out new_group #1 (of ranks 1, 2, a group it is not in)" in v.made_apart, v.made_apart


def test_a_rank_whose_other_making_is_not_one_place_ahead_is_not_said_to_have_left_one_out():
    """Rank 0's new_group #1 is the others' #2, but its #2 is not their #3: another fault than a making left out
    (made in another order); it is named, and only said not to be in the group the others made there."""
    v = verdict.analyze(_made_apart_docs(r0=["members 1-3", "members 1, 2", "members 0-3"],
                                         r1=["members 1, 2", "members 1-3", "members 0, 1"],
                                         r2=["members 1, 2", "members 1-3", "members 0, 1"],
                                         r3=["members 1, 2", "members 1-3", "members 0, 1"]))
    assert v.culprit_ranks == [0], v.summary
    assert "left out" not in v.made_apart and "the odd one out: rank 0" in v.made_apart, v.made_apart
    assert "rank 0 is not in the group the others made there (ranks 1, 2): where it left that new_group out, " \
        "torch names" in v.made_apart, v.made_apart


def test_a_real_rank_that_left_out_a_group_on_1_8_is_named_and_the_words_say_it_may_have():
    """tests/data/made-skip-real-86000040.json (torch 1.8.1, the fuzzer's real mode, ``--kind make_skip``, seed
    86000040, 2026-12-06): rank 2 left out ``new_group([0, 1])`` and made ``[2, 3]`` under its name; on 1.x each
    new_group is two calls of the making stream (the factory, then torch's store-based barrier), and every rank
    waits in the first group's: no making past it shows that rank 2 left one out.  Rank 2 is named; the words
    say it is not in the group the others made there, and what to change where it left it out."""
    v = verdict.analyze(_real_docs("made-skip-real-86000040.json"))
    assert v.culprit_ranks == [2], v.summary
    assert ("rank 2 is not in the group the others made there (ranks 0, 1): where it left that new_group out, "
            "torch names a group") in render.worded(v).summary, render.worded(v).summary


def _digest_docs(makings, groups=None, world=30):
    """Documents of a ``world``-rank job (past 24 ranks a making carries a digest of its members) whose ranks
    made ``makings`` ({rank: [members, ...]}, the last one in flight where ``groups`` does not say the rank went
    past it: {rank: (made, in flight)}); ``groups``: {rank: [members of a group it called on, ...]}."""
    from c10d_observer import callword
    ranks, docs = list(range(world)), {}
    for r, made in makings.items():
        done = len(made) if r not in (groups or {}) or groups[r] is None else groups[r][0]
        words = ["members of digest %06x" % callword.members_digest(m) for m in made]
        g = _g("new_group:world", ranks, len(made), done, op="new_group", since=90.0,
               recent=[(i + 1, "new_group", w, 50.0 + i) for i, w in enumerate(words[:done])],
               size=words[-1] if done < len(made) else None)
        pos = [g] + [_g(str(i + 1), list(m), 3, 3, recent=[(k, "all_reduce", "4 x float32", 60.0 + k)
                                                           for k in (1, 2, 3)])
                     for i, m in enumerate((groups or {}).get(r, (None, []))[1])]
        docs[r] = documents.RankDoc.from_json(_doc(r, world, pos))
    return docs


def test_past_24_ranks_ranks_that_each_made_only_their_own_groups_are_none_of_them_named():
    """30 ranks: ranks 0-19 made only ``new_group(range(20))`` and called on it, ranks 20-29 only
    ``new_group(range(20, 30))``, in whose making they wait (the guard on every rank).  The makings carry digests;
    the first group's members are known from ranks 0-19's documents, the second's from its makers (their digest
    is the group's).  Twenty against ten named ranks 20-29 (the program with its two groups made the other way
    round leaves the same documents): nobody is named, and the verdict says why."""
    a, b = list(range(20)), list(range(20, 30))
    makings = dict([(r, [a]) for r in a] + [(r, [b]) for r in b])
    groups = dict([(r, (1, [a])) for r in a] + [(r, (0, [])) for r in b])
    v = verdict.analyze(_digest_docs(makings, groups))
    assert v.culprit_ranks == [], v.summary
    assert any("each rank made only the groups it is in" in u for u in v.undecided), v.undecided


def test_past_24_ranks_a_majority_of_makings_whose_members_are_unknown_names_nobody():
    """As above, but rank 29's document shows no making: the makers of the second group are not all its members,
    as far as the documents tell, and no document shows that group: whether each rank made only its own groups is
    not known, and the majority could name the wrong ranks: nobody is named."""
    a, b = list(range(20)), list(range(20, 30))
    makings = dict([(r, [a]) for r in a] + [(r, [b]) for r in range(20, 29)])
    groups = dict([(r, (1, [a])) for r in a] + [(r, (0, [])) for r in range(20, 29)])
    docs = _digest_docs(makings, groups)
    docs[29] = documents.RankDoc.from_json(_doc(29, 30, []))
    v = verdict.analyze(docs)
    assert v.culprit_ranks == [], v.summary
    assert any("no making shown is of a group its rank is not in" in u for u in v.undecided), v.undecided


def test_past_24_ranks_a_group_the_whole_world_made_that_is_not_the_world_rules_the_guard_out():
    """30 ranks, no rank called on a group yet: every rank made ``new_group(range(10))``, then rank 29 left out
    ``new_group(range(10, 20))`` (it is not in it) and made ``[20, 29]`` where the others made that one, in
    whose making ranks 20-28 wait.  No document shows whose the digests are, but a group all 30 ranks made that
    is not the world's has a maker not in it: the guard on every rank is ruled out, and rank 29 is named (with no
    word of a group left out: whose the group it left out is, nothing tells)."""
    a, b, c = list(range(10)), list(range(10, 20)), list(range(20, 30))
    makings = dict([(r, [a, b, c]) for r in range(29)] + [(29, [a, c])])
    groups = dict([(r, (3, [])) for r in range(20)] + [(r, (2, [])) for r in range(20, 29)] + [(29, (2, []))])
    v = verdict.analyze(_digest_docs(makings, groups))
    assert v.culprit_ranks == [29], v.summary
    assert v.made_apart.endswith("the odd one out: rank 29"), v.made_apart


def test_past_24_ranks_a_rank_that_left_out_a_group_others_are_not_in_is_named():
    """30 ranks: rank 29 left out ``new_group(range(20))`` (it is not in it); ranks 20-28 made it (not in it
    either: known from ranks 0-19's documents, which show that group) and wait in the next making, of ranks 20-29,
    whose name rank 29 took.  The guard on every rank is ruled out; rank 29 is named, and said to have left one out."""
    a, b = list(range(20)), list(range(20, 30))
    makings = dict([(r, [a, b]) for r in range(29)] + [(29, [b])])
    groups = dict([(r, (2, [a])) for r in a] + [(r, (1, [])) for r in range(20, 29)] + [(29, (1, []))])
    v = verdict.analyze(_digest_docs(makings, groups))
    assert v.culprit_ranks == [29], v.summary
    assert "rank 29 left out new_group #1" in render.worded(v).summary, render.worded(v).summary


def test_past_24_ranks_a_group_known_only_as_not_the_worlds_gives_no_words_of_a_group_left_out():
    """30 ranks: every rank made ``new_group(range(10))``, then ranks 0-28 made it again where rank 29 made
    ``[20, 29]``; ranks 0-28 wait in that making.  That the whole world made the first tells only that it is not
    the world's, not whose it is: rank 29 is named, with no word of a group it is not in ("of none" before)."""
    a, c = list(range(10)), [20, 29]
    makings = dict([(r, [a, a]) for r in range(29)] + [(29, [a, c])])
    groups = dict([(r, (1, [])) for r in range(29)] + [(29, (2, []))])
    v = verdict.analyze(_digest_docs(makings, groups))
    assert v.culprit_ranks == [29], v.summary
    assert "not in" not in render.worded(v).summary and "none" not in render.worded(v).summary, v.summary


def test_27_real_ranks_one_of_which_left_out_a_group_name_it_from_digests():
    """tests/data/made-skip-real-95000004-27.json (torch 2.13, the fuzzer's real mode, ``--kind make_skip --shape
    mesh3d``, seed 95000004, 2026-12-06): 27 ranks, whose makings carry digests of their members; rank 11 left out
    ``new_group([6, 7, 8])``, the third, and every rank waits in a making before any call on a group.  The first
    two groups, made by every rank, are not the world: the guard on every rank is ruled out, and rank 11 is named."""
    v = verdict.analyze(_real_docs("made-skip-real-95000004-27.json"))
    assert v.culprit_ranks == [11], v.summary


def test_27_real_ranks_that_each_made_only_their_own_groups_name_nobody_and_say_what_to_change():
    """tests/data/made-own-real-95000004-27.json (as above, ``--kind make_own``): each rank made only its own tp, dp
    and pp groups; nine makings of three ranks each at new_group #1."""
    v = verdict.analyze(_real_docs("made-own-real-95000004-27.json"))
    assert v.culprit_ranks == [], v.summary
    assert "every rank calls new_group for every group" in render.worded(v).summary, render.worded(v).summary


def test_ranks_that_made_the_same_groups_are_not_said_to_have_made_them_apart():
    v = verdict.analyze(_made_apart_docs(r1="members 1-3"))
    assert v.made_apart is None and "made apart" not in (v.summary or "")


def test_a_rank_that_raised_on_groups_made_apart_at_the_stuck_making_is_no_culprit():
    """tests/data/made-apart-real-76000010.json (torch 1.8.1, the fuzzer's real mode, ``--kind make_members``, seed
    76000010, 2026-12-06): rank 2 made ``new_group([1, 2, 3])`` where ranks 0, 1 and 3 made ``new_group([1, 3])``;
    gloo wired rank 2 to rank 1 in the making, which rank 3 still waits in, and ranks 1 and 2 raised on the crossed
    groups and ended.  The making's desync names rank 2; rank 1, "in no collective" at the store-based barrier
    after it, was named beside it (a wrong culprit).  The groups were made apart at the stuck making itself:
    that decides the verdict, as before the hang."""
    v = verdict.analyze(_real_docs("made-apart-real-76000010.json"))
    assert v.culprit_ranks == [2], v.summary
    assert v.made_apart is None  # the stuck call's own desync says it
    assert "different groups at the same seq: rank 2 new_group of members 1-3" in render.worded(v).summary


def _raised_beside_an_exit_elsewhere_docs(raised=True):
    """The fuzzer's real seed 363000187 on torch 2.15, this VM loaded by three more fuzzer runs (2026-12-07): in a
    mesh of 8, rank 7 exited before a call at step 2; its tp peers' calls raised, and rank 5, in no collective
    past the deadline (its error path), was named as never arriving in its dp pair's broadcast, where rank 1
    waited: a wrong culprit (the dead rank in none of the stuck calls, so not counted as the death it raised on).
    Rebuilt in 3 ranks: the world "0", the pair "1" of ranks 0 and 1 (dp), "2" of ranks 1 and 2 (tp).  Rank 2
    exited after its tp call #3; rank 1's tp #4, which rank 2 never entered, is over (``raised``: gloo raised it;
    else rank 1 stopped before it, a stall of its own); rank 0 waits in the pair's #4."""
    gone = "process 47 ended without disable() (the rank closed its end; exit code 1)"
    world = [0, 1, 2]
    return {0: _doc(0, 3, [_g("0", world, 2, 2), _g("1", [0, 1], 4, 3, op="broadcast")]),
            1: _doc(1, 3, [_g("0", world, 2, 2), _g("1", [0, 1], 3, 3),
                           _g("2", [1, 2], 4 if raised else 3, 4 if raised else 3,
                              recent=[(4 if raised else 3, "all_reduce", "4 x float32", 95.0)])]),
            2: _doc(2, 3, [_g("0", world, 2, 2), _g("2", [1, 2], 3, 3)], kind="end", alive=False, exit_reason=gone)}


def test_a_rank_whose_call_raised_on_a_death_in_another_group_is_no_culprit():
    """A rank in no collective, missing from a stuck call, whose last call on another group is one a dead rank
    never entered, and over: it raised when that rank died (a symptom), whether or not the dead rank is missing
    from a stuck call.  Not a wrong culprit: nobody is named, or the dead rank."""
    v = verdict.analyze(_raised_beside_an_exit_elsewhere_docs()).to_json()
    assert 1 not in v["culprit_ranks"], v["summary"]
    assert set(v["culprit_ranks"]) <= {2}, v["summary"]
    m = v["hangs"][0]["missing"]["1"]
    assert m["state"] == "raised" and "rank 2 never entered" in m["text"], m


def test_a_rank_that_stopped_before_a_call_of_a_group_with_a_dead_rank_is_still_named():
    """The same ranks, rank 1 stopped before its tp #4: a stall of its own, named as before."""
    v = verdict.analyze(_raised_beside_an_exit_elsewhere_docs(raised=False)).to_json()
    assert 1 in v["culprit_ranks"], v["summary"]
    assert v["hangs"][0]["missing"]["1"]["state"] == "no_collective"


def _aborted_before_docs(sizes=None, waiting=(2, 3), record=0):
    """The fuzzer's real seed 363000078 on torch 2.15 (2026-12-06, four runs at once), in its five ranks: the
    world's broadcast from root 0 of 4 x float32; rank 4 posted #1 of another size, gloo aborted it (SIGABRT) with
    ``record`` calls in its record; ranks 0 and 1 raised in #1 (in no collective, #1 over in their records);
    ``waiting`` completed #1 and wait in #2; ``record`` 1: rank 4 died inside #1 by its record.  ``sizes``: {rank: its #1's size} where not 4 x float32 (None: not
    shown)."""
    sizes, world, ok = sizes or {}, [0, 1, 2, 3, 4], "4 x float32"
    one = lambda r: [(1, "broadcast", sizes.get(r, ok), 90.0)] if sizes.get(r, ok) else [(1, "broadcast", None, 90.0)]
    docs = {}
    for r in range(4):
        if r in waiting:
            docs[r] = _doc(r, 5, [_g("0", world, 2, 1, op="broadcast", size=ok, recent=one(r))])
        else:
            docs[r] = _doc(r, 5, [_g("0", world, 1, 1, recent=one(r))])
    docs[4] = _doc(4, 5, [_g("0", world, record, 0, op="broadcast")], kind="end", alive=False, exit_reason=ABORTED)
    return docs


def test_a_rank_aborted_in_the_call_before_the_stuck_one_that_others_completed_alike_is_named():
    """Ranks 2 and 3 completed broadcast #1 and wait in #2; the root and rank 1 raised in #1 on rank 4's death: a
    receiver of the size they all posted did not abort, so rank 4, aborted, posted another size (or crashed).  It
    is named, the ranks that raised are symptoms (nobody was named: each side took the other for symptoms)."""
    for record in (0, 1):
        v = verdict.analyze(_aborted_before_docs(record=record)).to_json()
        assert v["culprit_ranks"] == [4], (record, v["summary"])
        text = v["hangs"][0]["missing"]["4"]["text"]
        assert "broadcast #1 on group 0 (ranks 0-4), 4 x float32, which ranks 2, 3 completed and ranks 0, 1" in text
        for r in ("0", "1"):
            assert v["hangs"][0]["missing"][r]["state"] == "raised", v["hangs"][0]["missing"][r]


def test_a_rank_aborted_beside_a_rank_that_raised_with_another_or_no_size_is_not_named():
    """Rank 1 raised in #1, its own #1 of another size, or not shown: a relay of the broadcast's tree sends what it
    posted, so it may be the one that sent rank 4 more than rank 4 posted.  Rank 4 is not named; and with one rank
    alone waiting in #2, one completed #1: not enough to say the call's size."""
    for docs in (_aborted_before_docs(sizes={1: "8 x float32"}), _aborted_before_docs(sizes={1: None}),
                 _aborted_before_docs(waiting=(2,))):
        v = verdict.analyze(docs).to_json()
        assert 4 not in v["culprit_ranks"], v["summary"]


def _next_call_docs():
    """A real gloo job's documents at its merge (tests/data/mismatch-next-call-real-368000174.json: torch 2.15, the
    fuzzer's real mode, seed 368000174): a 2 x 2 mesh whose dp pairs [0, 2] and [1, 3] all_reduce 1024 x float32
    each step and broadcast 1 x float32 after it at step 5; rank 1 left its all_reduce of step 5 out and issued
    the broadcast as its #6 on pair [1, 3], where rank 3 issued the all_reduce; pair [0, 2] issued the all_reduce
    as its #6 and the broadcast as its #7."""
    import json
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "mismatch-next-call-real-368000174.json")) as f:
        return json.load(f)["documents"]


def test_a_call_the_like_pair_issued_next_is_no_new_kind_and_the_rank_that_issued_it_early_is_named():
    """The broadcast rank 1 issued at #6 was read as a kind no record showed before #6 (a slot its pair might run
    alone, analogs.new_kind), and nobody was named; pair [0, 2], like it call for call, issued that very call
    next, at #7: rank 1 left the all_reduce out, one call ahead.  It is named, with that evidence."""
    raw = _next_call_docs()
    v = verdict.analyze({int(r): documents.RankDoc.from_json(j) for r, j in raw.items()})
    assert v.culprit_ranks == [1], v.summary
    [h] = [h for h in v.hangs if h.mismatch]
    assert "rank 1 issued broadcast of 1 x float32, root 0, the call group 3 issued next, at #7" in h.mismatch.evidence


def test_a_call_the_like_pair_did_not_issue_next_stays_a_new_kind_that_names_nobody():
    """The same documents with pair [0, 2]'s #7 another broadcast (4 x float32): no record shows rank 1's call, which
    may be a slot its pair runs alone, first run there, that rank 3 left out; nobody is named."""
    raw = _next_call_docs()
    for r in ("0", "2"):
        for g in raw[r]["groups"]:
            if g["group"] == "3" and g.get("in_flight_seq") == 7:
                g["in_flight_size"] = "4 x float32, root 0"
            if g["group"] == "3":
                g["recent_ops"] = [[s, op, "4 x float32, root 0" if s == 7 else size, t] for s, op, size, t in
                                   g["recent_ops"]]
    v = verdict.analyze({int(r): documents.RankDoc.from_json(j) for r, j in raw.items()})
    assert v.culprit_ranks == [], v.summary
    assert any("of a kind no record showed" in u for u in v.undecided), v.undecided


def _chain_docs():
    """A real gloo job's documents at its merge (tests/data/ordering-chain-links-real-376000094.json: torch 2.15, the
    fuzzer's real mode, seed 376000094): 4 ranks, each step a world all_gather of 4 x float32, a chain 3 -> 2 -> 1 -> 0
    of 1 x float32, every nine steps a world broadcast, then a world all_gather of 1 x int64; rank 3 left its send of
    step 29 out and waits in the world's #64; ranks 2, 1, 0 wait in their recvs #30, each after the world's #63."""
    import json
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "ordering-chain-links-real-376000094.json")) as f:
        return json.load(f)["documents"]


def test_the_chain_s_other_links_say_where_its_last_link_goes_and_the_rank_that_left_its_send_out_is_named():
    """Rank 0, in its recv #30 with the world's #63 its last call, was "maybe out of order" on the pair (world, 1 -> 0):
    the broadcast of step 27 broke the pattern of places, and rank 1 had not sent #30 yet; one undecided pair left
    the whole cycle undecided.  Ranks 1 and 2 issued their own links' #30 after the world's #63 too, the links'
    places the same as 1 -> 0's at every seq shown (ordering._links): rank 0 is in order, and rank 3, which issued
    the world's #64 without its send #30, is named."""
    raw = _chain_docs()
    v = verdict.analyze({int(r): documents.RankDoc.from_json(j) for r, j in raw.items()})
    assert v.culprit_ranks == [3], v.summary
    [h] = [h for h in v.hangs if h.stream == "0:p2p:3->2" and h.ordering]  # the root: the send rank 3 left out
    assert "rank 3 issued all_gather #64 on group 0 without its send #30 on group 0 (p2p 3->2), which rank 2 issued " \
        "between all_gather #63 and #64" in h.ordering.text, h.ordering.text
