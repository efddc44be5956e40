"""verdict.analyze on hand-made rank documents: the cases real ranks cannot be made to show reliably."""
from c10d_observer import verdict


def _doc(rank, world, groups, written_at=100.0, **kw):
    d = {"rank": rank, "world_size": world, "written_at": written_at, "job_id": "j", "alive": True,
         "watchdog_started_at": 1.0, "config": {"timeout": 1.0}, "groups": groups, "overdue": []}
    d.update(kw)
    return d


def _g(stream, ranks, started, completed, op=None, since=None):
    g = {"group": stream, "stream": stream, "kind": "collective", "ranks": ranks, "last_started": started,
         "last_completed": completed, "in_flight_seq": started if started > completed else None}
    if g["in_flight_seq"] is not None:
        g.update(in_flight_op=op or "all_reduce", in_flight_since=since if since is not None else 90.0)
    return g


def test_a_rank_that_sent_nothing_is_unknown_not_a_culprit():
    docs = {0: _doc(0, 3, [_g("0", [0, 1, 2], 5, 4)]), 1: _doc(1, 3, [_g("0", [0, 1, 2], 5, 4)])}
    v = verdict.analyze(docs)
    h = v["hangs"][0]
    assert h["waiting_ranks"] == [0, 1] and h["missing_ranks"] == [2]
    assert h["missing"]["2"]["state"] == "unknown"
    assert v["culprit_ranks"] == [] and v["ranks_silent"] == [2]
    assert any("sent nothing" in u for u in v["undecided"])


def test_different_ops_with_no_majority_are_undecided():
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 5, 4, op="all_reduce")]),
            1: _doc(1, 2, [_g("0", [0, 1], 5, 4, op="broadcast")])}
    v = verdict.analyze(docs)
    assert v["hangs"][0]["mismatch"]["odd_ranks"] == []
    assert v["culprit_ranks"] == [] and any("no op has a majority" in u for u in v["undecided"])


def test_two_groups_waiting_on_each_other_is_a_cycle():
    # rank 0 waits in group a for rank 1, which waits in group b for rank 0: an ordering deadlock
    docs = {0: _doc(0, 2, [_g("a", [0, 1], 3, 2), _g("b", [0, 1], 1, 1)]),
            1: _doc(1, 2, [_g("a", [0, 1], 2, 2), _g("b", [0, 1], 2, 1)])}
    v = verdict.analyze(docs)
    assert len(v["hangs"]) == 2 and all(h.get("cycle") for h in v["hangs"])
    assert v["culprit_ranks"] == [] and any("cycle" in u for u in v["undecided"])


def test_a_call_younger_than_the_timeout_is_not_stuck():
    docs = {0: _doc(0, 2, [_g("0", [0, 1], 5, 4, since=99.5)]), 1: _doc(1, 2, [_g("0", [0, 1], 4, 4)])}
    assert verdict.analyze(docs)["hangs"] == []


def test_files_of_an_earlier_job_in_the_same_dump_dir_are_ignored():
    old = _doc(1, 2, [], written_at=10.0, job_id="old", alive=False)
    stale = _doc(0, 2, [], written_at=20.0, watchdog_started_at=1.0)
    new = [_doc(0, 2, [], written_at=5000.0, watchdog_started_at=4000.0),
           _doc(1, 2, [], written_at=5001.0, watchdog_started_at=4001.0)]
    out = verdict.latest_per_rank([old, stale] + new)
    assert out == {0: new[0], 1: new[1]}


def test_main_thread_frames_come_from_the_last_dump(tmp_path):
    p = tmp_path / "stacks.txt"
    p.write_text('Thread 0x00000000000000ab (most recent call first):\n  File "/x/a.py", line 1 in old\n\n'
                 'Thread 0x00000000000000cd (most recent call first):\n  File "/x/t.py", line 9 in helper\n\n'
                 'Current thread 0x00000000000000ab (most recent call first):\n'
                 '  File "/x/a.py", line 7 in stall\n  File "/x/a.py", line 3 in main\n')
    assert verdict.main_thread_frames(str(p), 0xab) == ["stall (a.py:7)", "main (a.py:3)"]
    assert verdict.main_thread_frames(str(p), 0xef) is None


def test_grouped_stacks_keep_each_ranks_own_line_numbers():
    """Ranks at line 20 and 21 of the same function are one group, and each keeps its own line (issue 13,
    case 6: they were shown as one group at line 20)."""
    docs = {}
    for r, line in ((0, 20), (1, 21), (2, 20), (3, 99)):
        frames = ["step (train.py:%d)" % line, "main (train.py:5)"]
        if r == 3:
            frames = ["load (data.py:%d)" % line, "main (train.py:5)"]
        docs[r] = _doc(r, 4, [], _frames=frames)
    v = verdict.analyze(docs)
    [same] = [g for g in v["stack_groups"] if g["ranks"] == [0, 1, 2]]
    assert [(var["ranks"], var["frames"][0]) for var in same["variants"]] == [
        ([0, 2], "step (train.py:20)"), ([1], "step (train.py:21)")]
    text = verdict.format_text(v)
    assert "ranks 0-2, at 2 different lines:" in text
    assert "ranks 0,2: step (train.py:20)" in text and "rank 1: step (train.py:21)" in text
    assert "rank 3: load (data.py:99)" in text


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
    v = verdict.analyze(docs)
    h = v["hangs"][0]
    assert h["stuck_s"] == 3.1 and h["missing_ranks"] == [1]
    assert "stuck 3.1 s" in v["summary"] and "stuck 3.1 s" in verdict.format_text(v)
