"""The cross-rank verdict: real gloo ranks and real watchdogs; each kind of hang names exactly its culprit.

The firing watchdog asks every watchdog sharing dump_dir for its rank's state, merges them and writes
verdict.json; ``report --json`` merges the same files again afterwards.
"""
import json
import os
import signal
import subprocess
import sys

import pytest

from c10d_observer.streams import GUARD_ADVICE
from harness import ROOT, assert_caught_up, read_verdict, timings, wait_until


def _verdict(job, timeout=60):
    v = read_verdict(job.dump_dir, timeout, job.log_text())
    detected = [h["detected_at"] for h in v["hangs"] if h.get("detected_at")]
    # shown with `pytest -s`: the time from the first detection to the merged verdict
    print("VERDICT %s: culprits %s, %.2f s after detection: %s" % (
        job.scenario, v["culprit_ranks"], v["verdict_at"] - min(detected), v["summary"]))
    return v


def _usable():
    import c10d_observer
    return [s for s, r in c10d_observer.capabilities()["sources"].items() if r["usable"]]


def _root(v):
    roots = [h for h in v["hangs"] if h["root"]]
    assert len(roots) == 1, v["hangs"]
    return roots[0]


def _kill_pid(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def test_skipped_collective(job_factory):
    job = job_factory("skip", 3, culprit=1, step=2, timeout=1.0)
    v = _verdict(job)
    # the same verdict again from the files, while the hang lasts (once released, a busy machine may make
    # a later call of the job overdue too, and report reads the newest gather)
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", job.dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    # the state gathered while the hang lasts (disable() leaves a final one in its place)
    state = [json.load(open(os.path.join(job.dump_dir, n))) for n in os.listdir(job.dump_dir)
             if n.startswith("state-rank0-")][0]
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    assert_caught_up(job.dump_dir, 1, v)  # after the job: the same culprit, resolved
    h = _root(v)
    assert (h["op"], h["seq"], h["group_ranks"]) == ("all_reduce", 3, [0, 1, 2])
    assert h["waiting_ranks"] == [0, 2] and h["missing_ranks"] == [1]
    assert h["missing"]["1"]["state"] == "no_collective"
    assert "stall_until_released" in h["missing"]["1"]["main_thread"]
    assert v["culprit_ranks"] == [1]
    assert v["ranks_reporting"] == [0, 1, 2] and v["ranks_silent"] == []
    odd = [g for g in v["stack_groups"] if g["ranks"] == [1]]
    assert odd and "stall_until_released" in odd[0]["frames"][0]
    assert "rank 1" in v["summary"] and "never arrived" in v["summary"]
    if job.facts(0)["source"] == "flight_recorder":  # the gathered state carries the recorder's entries
        entries = [e for g in (state["flight_recorder"] or {}).values() for e in g]
        assert any(e["in_flight"] and e["profiling_name"].endswith("all_reduce") for e in entries), state
    # the JSON contract and the exit code
    assert out.returncode == 1, out.stdout
    again = json.loads(out.stdout)
    assert again["version"] == 1
    for key in ("hangs", "culprit_ranks", "ranks_reporting", "ranks_silent"):
        assert key in again
    assert again["culprit_ranks"] == [1]
    for key in ("group", "group_ranks", "seq", "op", "waiting_ranks", "missing_ranks", "started_at",
                "detected_at"):
        assert again["hangs"][0][key] == h[key]


def _local_sync():
    import inspect
    import torch.distributed as dist
    return "use_local_synchronization" in inspect.signature(dist.new_group).parameters


def _making_root(v, missing):
    root = _root(v)
    assert (root["op"], root["group"], root["group_ranks"]) == ("new_group", "new_group:world", [0, 1, 2, 3]), root
    assert root["missing_ranks"] == [missing], root
    return root


def test_a_new_group_one_rank_left_out_names_that_rank(job_factory):
    """Rank 0 leaves out a new_group of every rank (under an if): ranks 1-3 wait in its making (gloo's
    rendezvous, inside torch's group factory), rank 0 in the world's next all_reduce.  Before 2026-12-06 the
    verdict named ranks 1-3, "in no collective"; each factory call is now a call on the world's making stream
    (sources/groups.py), and the rank that issued its all_reduce without it is named."""
    job = job_factory("new_group_left_out", 4, culprit=0, members=[0, 1, 2, 3], timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [0], (v["summary"], v["undecided"])
    root = _making_root(v, 0)
    assert root["waiting_ranks"] == [1, 2, 3] and root["category"] == "order", root
    # "rank 0 issued all_reduce #4 on group 0 without its new_group #1 ..." (its history's order), or, where the
    # merge came before rank 0's history showed it, "rank 0 issued #4 on group 0 before #1 on group
    # new_group:world, which every other rank of both groups (1, 2, 3) issued first" (the majority: CI at 428aec3,
    # torch 2.15, 2026-12-06): rank 0 named for the making either way
    text = root["missing"]["0"]["text"]
    assert text.startswith("rank 0 issued") and "#1 on group new_group:world" in text, text
    world = [h for h in v["hangs"] if h["op"] == "all_reduce"]
    assert len(world) == 1 and world[0]["missing_ranks"] == [1, 2, 3], v["hangs"]
    assert all(world[0]["missing"][str(r)]["state"] != "no_collective" for r in (1, 2, 3)), world[0]["missing"]


def test_a_new_group_a_member_left_out_names_that_member_not_its_peer(job_factory):
    """Rank 3 leaves out new_group([2, 3]): rank 2 waits in its making (gloo's rendezvous; on 1.x ranks 0 and 1
    in torch's store-based barrier after it), ranks 0, 1 and 3 in the world's all_reduce.  Ranks 0 and 1 made
    the group too (a non-member passes the factory at once): rank 3 is the one that went on without it.
    Before 2026-12-06 rank 2, the peer that waited, was named, "in no collective"."""
    job = job_factory("new_group_left_out", 4, culprit=3, members=[2, 3], timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [3], (v["summary"], v["undecided"])
    making = [h for h in v["hangs"] if h["op"] == "new_group" and 3 in h["missing_ranks"]]
    assert making and 2 in making[0]["waiting_ranks"], v["hangs"]


def test_a_rank_dead_before_a_new_group_is_named_dead(job_factory):
    """Rank 3 dies before new_group([0..3]): the others wait in its making, in no collective (no deadline of the
    observer's could pass before 2026-12-06: nothing was in flight); now the making's call is past it and rank 3
    is named, dead."""
    job = job_factory("new_group_left_out", 4, culprit=3, members=[0, 1, 2, 3], die=True, timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [3] and v["ranks_dead"] == [3], (v["summary"], v["undecided"])
    root = _making_root(v, 3)
    assert root["waiting_ranks"] == [0, 1, 2] and root["missing"]["3"]["state"] == "dead", root


@pytest.mark.skipif(not _local_sync(), reason="new_group has no use_local_synchronization before torch 2.1")
def test_a_group_its_members_alone_make_takes_no_number_of_the_worlds_making(job_factory):
    """Ranks 2 and 3 make a group with use_local_synchronization=True (the others never call it), then rank 0
    leaves out the next new_group of every rank: the making the world numbers is #1 on every rank, and rank 0
    is named (had the local one counted, ranks 2 and 3 would wait in #2, the others in #1)."""
    job = job_factory("new_group_left_out", 4, culprit=0, members=[0, 1, 2, 3], local_first=[2, 3], timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [0], (v["summary"], v["undecided"])
    root = _making_root(v, 0)
    assert root["seq"] == 1 and root["waiting_ranks"] == [1, 2, 3], root


@pytest.mark.parametrize("reverse", [0, 1])
def test_a_rank_that_made_its_groups_in_another_order_is_named(job_factory, reverse):
    """Every rank makes new_group([0, 1]) and new_group([2, 3]), rank ``reverse`` in the other order: torch
    names a group by its place in that order, so the ranks that made [0, 1] at different places wait for each
    other (under two names; gloo may also wire a member to a rank of the other group made under the same name:
    where each waits varies from run to run).  Each making call carries its group's members (callword
    .encode_members): at the first making the odd rank made another group than the three others, and it is
    named (before: "cannot decide: ... no rank is missing and no op or size differs").  The stacks name the
    job's line of the new_group a rank waits in, five frames deep in torch."""
    job = job_factory("new_groups_in_another_order", 4, groups=[[0, 1], [2, 3]], reverse=[reverse], timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [reverse], (v["summary"], v["undecided"])
    making = [h for h in v["hangs"] if h["op"] == "new_group" and h.get("mismatch")]
    assert making and making[0]["seq"] == 1 and making[0]["mismatch"]["odd_ranks"] == [reverse], v["hangs"]
    assert making[0]["mismatch"]["text"].startswith("rank %d new_group of members 2, 3, " % reverse), making[0]
    assert making[0]["size"] == "members 0, 1" and making[0]["category"] == "mismatch", making[0]
    assert "different groups" in making[0]["category_why"], making[0]
    in_making = [r for h in v["hangs"] if h["op"] == "new_group" for r in h["waiting_ranks"]]
    shown = [g for g in v["stack_groups"] if set(g["ranks"]) & set(in_making)]
    # the job's frame among the four a report shows (torch 1.x), else given after them (2.x: torch's logging
    # wrapper and _new_group_with_tag are deeper)
    assert shown and all(any("scenarios.py" in f for f in var["frames"][:4] + [var.get("job_frame", "")])
                         for g in shown for var in g["variants"]), v["stack_groups"]
    assert not any("groups.py" in f for g in v["stack_groups"] for f in g["frames"]), v["stack_groups"]


def test_a_rank_that_made_another_group_than_the_others_is_named(job_factory):
    """Rank 3 calls new_group([0, 1, 2]) where the others call new_group([0, 1, 2, 3]) (the list computed on each
    rank, one rank's wrong): ranks 0-2 wait in the making for rank 3, which passed it (a non-member of its own
    group) and waits in the world's all_reduce.  Before the making carried its members: "cannot decide: ...
    no rank is missing or frozen"; now rank 3 is named by the group it made."""
    job = job_factory("new_groups_in_another_order", 4, groups=[[0, 1, 2, 3]], instead={"3": [[0, 1, 2]]},
                      timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [3], (v["summary"], v["undecided"])
    root = _root(v)  # rank 3 passed the making: not missing from it, the odd one in it
    assert root["op"] == "new_group" and root["waiting_ranks"] == [0, 1, 2] and root["finished_ranks"] == [3], root
    assert root["mismatch"]["odd_ranks"] == [3] and "rank 3 new_group of members 0-2" in root["mismatch"]["text"], root


def test_two_ranks_against_two_in_the_order_of_their_groups_name_nobody(job_factory):
    """Ranks 0, 3 make [0, 1] first, ranks 1, 2 [2, 3] first: two against two, no majority says which order the
    program meant; the verdict says it cannot decide, and why (never a wrong culprit).  (Ranks 0, 3 against 1,
    2, not 0, 1 against 2, 3: then [0, 1] and [2, 3] are made under one name, and gloo may wire them across
    into two groups that complete, where this job hangs in every run.)"""
    job = job_factory("new_groups_in_another_order", 4, groups=[[0, 1], [2, 3]], reverse=[1, 2], timeout=1.0)
    v = _verdict(job, timeout=90)
    job.kill()
    assert v["culprit_ranks"] == [], (v["summary"], v["undecided"])
    assert any("issued different groups" in u and "none has a majority" in u for u in v["undecided"]), v["undecided"]


MADE_APART = "is not the same group on every rank"


def _made_apart_lines(job):
    return [l for l in job.log_text(tail=None).splitlines() if MADE_APART in l]


def test_a_group_made_apart_is_said_though_the_job_runs_on(job_factory):
    """Ranks 0-2 make new_group([0, 1]), rank 3 new_group([0, 2]) (the list computed on each rank, one rank's
    wrong; neither rank 2 nor 3 is a member of the group it made, so gloo waits for nobody and no call hangs):
    the job runs on, and a rank says, as the group is made, that its new_group #1 is not the group another rank
    made there (torch 2.x: compared in the store as it is made; 1.x: once torch's store-based barrier after it
    passed, counted).  The job ends as it would have, with no verdict."""
    job = job_factory("new_groups_in_another_order", 4, groups=[[0, 1]], instead={"3": [[0, 2]]}, timeout=5.0)
    for r in range(4):
        job.wait_facts(r, "past_new_group")
    lines = wait_until(lambda: _made_apart_lines(job), 30, job.log_text)
    job.release()
    assert job.finish() == [0, 0, 0, 0], job.log_text()
    import torch.distributed as dist
    line = lines[0]
    assert "new_group #1 " in line and "use_local_synchronization=True" in line, line
    if hasattr(dist.Store, "compare_set"):  # the first rank's members stay: one side says what the other made
        assert ("this rank made ranks 0, 2 where rank " in line and line.endswith(
            " made ranks 0, 1; groups made apart may share a name, and their collectives hang or complete "
            "across the wrong ranks (wrong results, no error): " + GUARD_ADVICE)) or (
            "this rank made ranks 0, 1 where rank 3 made ranks 0, 2;" in line), line
    else:
        assert ("this rank made ranks 0, 1; 3 of the world's 4 ranks made that group there;" in line
                or "this rank made ranks 0, 2; 1 of the world's 4 ranks made that group there;" in line), line
    assert len(lines) == len(set(lines)) <= 4, lines  # one line a rank at most
    assert not os.path.exists(os.path.join(job.dump_dir, "verdict.json"))


@pytest.mark.skipif(not hasattr(__import__("torch.distributed").distributed.Store, "compare_set"),
                    reason="torch 1.x: each rank's own pair made under one name raises in gloo's rendezvous "
                           "(connection refused), and no barrier passes to count them")
def test_pairs_each_made_by_their_own_ranks_are_said(job_factory):
    """Ranks 0, 1 make new_group([0, 1]) and ranks 2, 3 new_group([2, 3]), each only the group it is in (``if rank
    in ranks: new_group(ranks)``): both pairs take the name "1", and on torch 2.13 gloo wires them across, their
    all_reduces completing with the other pair's tensors (no hang, no error: sources/groups.py).  A rank of one
    pair says so as the group is made.  (Killed after: whether the job hangs is gloo's wiring.)"""
    job = job_factory("new_groups_in_another_order", 4, groups=[[0, 1]], instead={"2": [[2, 3]], "3": [[2, 3]]},
                      timeout=5.0)
    lines = wait_until(lambda: _made_apart_lines(job), 60, job.log_text)
    job.kill()
    assert any("this rank made ranks 2, 3 where rank " in l and " made ranks 0, 1;" in l for l in lines) or any(
        "this rank made ranks 0, 1 where rank " in l and " made ranks 2, 3;" in l for l in lines), lines


def test_a_hang_that_resolves_is_reported_resolved(job_factory):
    """Rank 1 is late past the timeout, then catches up: the verdict merged at hang time stays the record
    (rank 1 named), its outcome says the hang resolved and how late rank 1 was, the exit code is 3, and the
    console says when (issue 13, case 4; issue 24: a resolved hang keeps its late rank)."""
    job = job_factory("skip", 2, culprit=1, step=2, timeout=1.0)
    v = _verdict(job)
    assert _root(v)["missing_ranks"] == [1]  # while it lasts: stuck
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", job.dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 3, out.stdout  # every stuck call resolved
    after = json.loads(out.stdout)
    assert after["recorded"] is True and after["gather_id"] == v["gather_id"]
    assert after["culprit_ranks"] == [1] and after["summary"] == v["summary"]  # the record, as merged
    [h] = after["hangs"]
    assert (h["op"], h["seq"], h["missing_ranks"]) == ("all_reduce", 3, [1])
    o = h["outcome"]
    assert o["state"] == "resolved" and o["late_ranks"] == [1] and o["after_s"] > 1.0, o
    assert o["text"].startswith("rank 1 was %.1f s late at all_reduce #3, then caught up" % o["after_s"]), o
    [r] = [r for r in after["resolved"] if r["seq"] == 3]
    assert r["op"] == "all_reduce" and r["resolved"] is True and 0 in r["reported_by"]
    assert r["resolved_after_s"] > 1.0
    rep = job.reports()[0]
    [e] = [e for e in rep["overdue"] if e["seq"] == 3]
    assert e["in_flight"] is False and e["resolved"] is True and e["ended"] == "completed"
    assert e["resolved_after_s"] > 1.0
    assert "completed after" in job.log_text() and "resolved" in job.log_text()
    text = subprocess.run([sys.executable, "-m", "c10d_observer", "report", job.dump_dir],
                          stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    print(text.stdout)
    assert "never arrived: rank 1" in text.stdout and "culprit ranks: 1" in text.stdout, text.stdout
    assert "after: rank 1 was" in text.stdout and "then caught up" in text.stdout, text.stdout


def test_rank_stalled_in_computation(job_factory):
    job = job_factory("compute", 3, culprit=2, timeout=1.0)
    v = _verdict(job)
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    assert_caught_up(job.dump_dir, 2, v)  # after the job: the same culprit, resolved
    h = _root(v)
    assert h["waiting_ranks"] == [0, 1] and h["missing_ranks"] == [2]
    assert h["category"] == "never_arrived" and h["missing"]["2"]["state"] == "no_collective", h
    assert v["culprit_ranks"] == [2]
    odd = [g for g in v["stack_groups"] if g["ranks"] == [2]]  # innermost frame: matmul or release check
    assert odd and any(f.startswith("compute (") for f in odd[0]["frames"]), v["stack_groups"]
    assert v["frozen_ranks"] == []  # busy, but its Python runs


@pytest.mark.parametrize("timing", timings())
def test_hang_in_subgroup_names_no_bystander(job_factory, timing):
    job = job_factory("subgroup", 3, timeout=1.0, timing=timing)
    v = _verdict(job)
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    assert_caught_up(job.dump_dir, 1, v)  # after the job: the same culprit, resolved
    h = _root(v)
    assert h["group_ranks"] == [0, 1] and h["waiting_ranks"] == [0] and h["missing_ranks"] == [1]
    assert v["culprit_ranks"] == [1]  # rank 2, idle outside the group, is not named
    from torch._C import _distributed_c10d as C
    from torch.distributed import distributed_c10d
    # the world group has 120 s (rank_main); new_group without timeout= gets torch's default, which the
    # verdict states; torch 1.x does not expose it
    expected = distributed_c10d.default_pg_timeout.total_seconds() if hasattr(C.ProcessGroup, "_get_backend") else None
    assert h["torch_timeout_s"] == expected
    with open(os.path.join(job.dump_dir, "verdict.txt")) as f:
        assert ("torch's own timeout of the group: %s" % ("%g s" % expected if expected else "unknown")) in f.read()


def test_cascade_names_the_root(job_factory):
    job = job_factory("cascade", 3, timeout=1.0)
    _verdict(job)
    # rank 0 enters its world call at once, rank 1 its subgroup call: on a loaded machine the first merge
    # may come before rank 0's call is overdue (a verdict of the root alone); rank 0's detection then
    # gathers the cascade
    v = wait_until(lambda: (lambda x: x if any(h["group_ranks"] == [0, 1, 2] for h in x["hangs"]) else None)(
        read_verdict(job.dump_dir, 60)), 60, "the verdict with the world group's call\n" + job.log_text())
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    # after the job: the same culprit, resolved; the record is the first verdict merged that named a culprit
    # (outcome._main_record): the root's alone where the first merge came before rank 0's call was overdue, the
    # cascade's verdict then what happened after (CI, 2026-12-05: the report led with the first, as it should,
    # and this test compared it with the second)
    merged = []
    for name in sorted(os.listdir(job.dump_dir)):
        if name.startswith("verdict-") and name.endswith(".json"):
            with open(os.path.join(job.dump_dir, name)) as f:
                merged.append(json.load(f)["verdict"])
    first = min((x for x in merged if x["culprit_ranks"]), key=lambda x: x["verdict_at"])
    doc = assert_caught_up(job.dump_dir, 2, first)
    assert v["gather_id"] in [doc["gather_id"]] + [o["gather_id"] for o in doc.get("other_verdicts") or []], doc
    root = _root(v)
    assert root["group_ranks"] == [1, 2] and root["waiting_ranks"] == [1] and root["missing_ranks"] == [2]
    world = [h for h in v["hangs"] if h["group_ranks"] == [0, 1, 2]]
    assert len(world) == 1 and not world[0]["root"] and world[0]["caused_by"] == [v["hangs"].index(root)]
    assert world[0]["missing"]["1"]["state"] == "stuck"  # rank 1 is a victim, not a culprit
    assert (world[0]["category"], root["category"]) == ("cascade", "never_arrived"), (world[0], root)
    assert v["culprit_ranks"] == [2]


@pytest.mark.parametrize("source", [s for s in ("pg_hooks", "patch") if s in _usable()])
def test_mismatched_op_at_the_same_seq(job_factory, source):
    # These sources record every call's op.  The flight-recorder source names a call's op once it has been in
    # flight a quarter of the timeout: a member whose all_reduce completed against the broadcast (gloo lets
    # it, now and then) leaves one op against one, which decides nothing (the next test; CI's loaded 2.15
    # run of 2026-11-26 drew that case: "rank 2 all_reduce, rank 1 broadcast", culprit none).
    job = job_factory("mismatch", 3, culprit=1, timeout=1.0, source=source)
    v = _verdict(job)
    job.kill()  # a desynchronised job does not recover
    mism = [h for h in v["hangs"] if h.get("mismatch")]
    assert mism, v["hangs"]
    assert mism[0]["mismatch"]["odd_ranks"] == [1]
    assert mism[0]["mismatch"]["ops"]["1"] == "broadcast" and mism[0]["mismatch"]["expected_op"] == "all_reduce"
    assert mism[0]["category"] == "mismatch", mism[0]
    assert v["culprit_ranks"] == [1]


def test_a_mismatched_op_under_the_default_source_never_names_a_wrong_rank(job_factory):
    job = job_factory("mismatch", 3, culprit=1, timeout=1.0)
    v = _verdict(job)
    job.kill()
    assert v["hangs"] and set(v["culprit_ranks"]) <= {1}, v["summary"]  # rank 1, or "cannot decide"
    for h in v["hangs"]:
        if h.get("mismatch"):
            assert h["mismatch"]["ops"].get("1") == "broadcast", h["mismatch"]  # the culprit's call, long in flight


@pytest.mark.parametrize("source", [s for s in ("pg_hooks", "patch") if s in _usable()])
def test_mismatched_size_at_the_same_seq(job_factory, source):
    # gloo raises when a rank receives more than it expects; with half the elements the culprit's call
    # completes and the others hang.  The patch and pg_hooks sources record every call's size (the
    # flight-recorder source only that of calls long in flight, so not the culprit's completed one).
    job = job_factory("mismatch", 3, culprit=1, kind="size", timeout=1.0, source=source)
    v = _verdict(job)
    job.kill()
    mism = [h for h in v["hangs"] if h.get("mismatch")]
    assert mism, v["hangs"]
    m = mism[0]["mismatch"]
    assert m["kind"] == "size" and m["odd_ranks"] == [1], m
    assert m["ops"]["1"] == "all_reduce of 2 x float32" and m["expected_op"] == "all_reduce of 4 x float32", m
    assert v["culprit_ranks"] == [1]


def _sees_roots():
    """The sources that see a broadcast's root on this torch: patch (the call's options), and torch's gloo
    recorder where it records (its entries carry no root; the patch wrapper notes it by their op id)."""
    import c10d_observer
    caps = c10d_observer.capabilities()
    return ["patch"] + (["flight_recorder"] if caps["sources"]["flight_recorder"]["usable"]
                        and caps["features"].get("flight_recorder_records_gloo") else [])


@pytest.mark.parametrize("source", _sees_roots())
def test_a_broadcast_from_another_root_is_named_where_the_source_sees_roots(job_factory, source):
    """Rank 1 broadcasts from itself, ranks 0 and 2 from rank 0: "different roots", rank 1."""
    job = job_factory("mismatch", 3, culprit=1, kind="root", timeout=1.0, source=source)
    v = _verdict(job)
    job.kill()
    mism = [h for h in v["hangs"] if h.get("mismatch")]
    assert mism, (v["summary"], v["hangs"])
    m = mism[0]["mismatch"]
    assert m["kind"] == "root" and m["odd_ranks"] == [1], m
    assert m["ops"]["1"] == "broadcast from root 1" and m["expected_op"] == "broadcast from root 0", m
    assert v["culprit_ranks"] == [1] and "different roots" in v["summary"], v["summary"]


@pytest.mark.parametrize("source", [s for s in ("pg_hooks", "flight_recorder") if s in _usable()
                                    and s not in _sees_roots()])
def test_a_broadcast_from_another_root_never_names_a_wrong_rank_where_roots_are_unseen(job_factory, source):
    job = job_factory("mismatch", 3, culprit=1, kind="root", timeout=1.0, source=source)
    v = _verdict(job)
    job.kill()
    assert v["hangs"] and set(v["culprit_ranks"]) <= {1}, v["summary"]


def test_recv_with_no_sender(job_factory):
    job = job_factory("recv_nosender", 2, timeout=1.0)
    v = _verdict(job)
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert_caught_up(job.dump_dir, 0, v)  # after the job: the same culprit, resolved
    h = _root(v)
    assert h["kind"] == "p2p" and h["op"] == "recv" and h["waiting_ranks"] == [1] and h["missing_ranks"] == [0]
    assert h["category"] == "unmatched_p2p", h
    assert v["culprit_ranks"] == [0]


def test_ddp_step_skipped_by_one_rank(job_factory):
    job = job_factory("ddp", 2, culprit=1, step=1, timeout=1.0)
    v = _verdict(job)
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert_caught_up(job.dump_dir, 1, v)  # after the job: the same culprit, resolved
    h = _root(v)
    assert h["op"] == "all_reduce" and h["waiting_ranks"] == [0] and h["missing_ranks"] == [1]
    assert v["culprit_ranks"] == [1]


def test_rank_that_died(job_factory):
    job = job_factory("dead", 3, culprit=1, timeout=1.0)
    holder = job.wait_facts(1, "holder_pid")
    try:
        v = _verdict(job)
    finally:
        _kill_pid(holder)
    job.kill()
    h = _root(v)
    assert h["waiting_ranks"] == [0, 2] and h["missing_ranks"] == [1]
    assert h["missing"]["1"]["state"] == "dead"
    assert v["ranks_dead"] == [1] and v["culprit_ranks"] == [1]


def _verdict_then_continue(job, rank):
    """The verdict on a job whose rank ``rank`` stops itself (SIGSTOP), then that rank continued (SIGCONT)."""
    pid = job.wait_facts(rank, "pid")
    try:
        return _verdict(job)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_frozen_process(job_factory):
    job = job_factory("frozen", 2, culprit=1, timeout=3.0)
    v = _verdict_then_continue(job, 1)
    assert job.finish() == [0, 0], job.log_text()
    h = _root(v)
    # rank 1 stops as its first all_reduce returns: gloo may still owe rank 0 that call's last message (a
    # loaded machine, 1 run in 3 with a second job beside: "every rank entered it; rank 1 is frozen in it"),
    # else rank 0 waits in the next call, which rank 1 never entered; the frozen rank is the culprit either way
    if h["missing_ranks"]:
        assert h["waiting_ranks"] == [0] and h["missing_ranks"] == [1], v["summary"]
        assert h["missing"]["1"]["state"] == "frozen" and h["category"] == "never_arrived"
    else:
        assert h["category"] == "all_arrived" and h["frozen_in_it"] == [1], v["summary"]
    assert v["frozen_ranks"] == [1] and v["culprit_ranks"] == [1]


def test_a_rank_frozen_inside_a_call_every_rank_entered_is_named(job_factory):
    """Issue 33: SIGSTOP 0.1 s into a 1 s all_reduce every rank entered (a frozen host, a debugger): the frozen
    one is the culprit, not "every rank of it is in it" with no culprit.  Under source="patch", whose start is
    written on the call path; a recorder source learns of the call when its helper reads the entries, so a
    rank frozen before that read is "never arrived; frozen" there (the same culprit, benchmarks/fault_matrix)."""
    job = job_factory("frozen_inside", 3, culprit=2, timeout=3.0, source="patch")
    v = _verdict_then_continue(job, 2)
    assert job.finish() == [0, 0, 0], job.log_text()
    h = _root(v)
    assert h["missing_ranks"] == [] and sorted(h["waiting_ranks"]) == [0, 1, 2], v["summary"]
    assert h["category"] == "all_arrived" and h["frozen_in_it"] == [2], h
    assert v["culprit_ranks"] == [2] and "rank 2 is frozen in it" in v["summary"]


def test_a_rank_stopped_inside_a_call_with_a_short_timeout_is_named_not_merged_a_moment_too_early(job_factory):
    """Issue 42, "Why": SIGSTOP 0.1 s into a call every rank entered, timeout 2 s, the default source.  The
    hard detection comes 2 s into the call, about when the rank's watchdog can first say it is frozen (3 polls
    and 1 s with no beat of its helper): the merge came first and said "none is frozen ... cannot decide" (1.8.1,
    and 2.15 on a busy machine).  The merge now waits for a rank whose helper fell silent to be frozen or beat
    again, and its watchdog answers again once it is frozen (tests/unit/test_watchdog_decide.py holds the rule;
    this run passed here before the change too, on 1.8.1 and 2.15 with the fuzzer running beside it)."""
    job = job_factory("frozen_inside", 3, culprit=2, timeout=2.0)
    v = _verdict_then_continue(job, 2)
    assert job.finish() == [0, 0, 0], job.log_text()
    assert v["culprit_ranks"] == [2] and v["frozen_ranks"] == [2], v["summary"]


def _py_spy():
    import shutil
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.path.exists(beside) else None)


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.skipif(_py_spy() is None, reason="py-spy is not installed (the tox envs install it)")
def test_py_spy_dumps_native_and_python_stacks_where_installed(job_factory):
    job = job_factory("skip", 2, culprit=1, step=1, timeout=1.0)
    v = _verdict(job)
    try:
        spied = v["hosts"]["1"]["py_spy_dump"]
        assert spied and os.path.basename(spied).startswith("pyspy-rank1-"), v["hosts"]
        with open(os.path.join(job.dump_dir, "verdict.txt")) as f:
            assert "py-spy (native and Python frames of every thread) of rank 1: " + spied in f.read()
        # py-spy runs beside the watchdog, not waited for: its dumps are complete once they name the frames
        wait_until(lambda: "stall_until_released" in _read(spied), 60, "py-spy's dump of rank 1")
        waiting = os.path.join(job.dump_dir, os.path.basename(spied).replace("rank1", "rank0").replace(
            "pid%d" % v["hosts"]["1"]["pid"], "pid%d" % v["hosts"]["0"]["pid"]))
        wait_until(lambda: "all_reduce" in _read(waiting), 60, "py-spy's dump of rank 0")
        assert "Thread" in _read(waiting) and "(libtorch" in _read(waiting)  # native frames of torch's C++
    finally:
        job.release()
    assert job.finish() == [0, 0], job.log_text()


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _has_fr_json_dump():
    from torch._C import _distributed_c10d as C
    return hasattr(C, "_dump_fr_trace_json")


@pytest.mark.skipif(not _has_fr_json_dump(), reason="torch < 2.8 has no _dump_fr_trace_json")
def test_report_reads_torchs_own_flight_recorder_dumps(job_factory):
    # TORCH_FR_BUFFER_SIZE: torch 2.8-2.10 record gloo only when it is set
    job = job_factory("fr_dump", 2, env={"TORCH_FR_BUFFER_SIZE": "2000"})
    try:
        for r in (0, 1):
            job.wait_facts(r, "dumped")
        with open(os.path.join(job.dump_dir, "torch_fr_rank_9.pkl"), "wb") as f:
            f.write(b"\x80\x04\x95")  # a pickled dump: named, never loaded
        out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", job.dump_dir],
                             stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert out.returncode == 1, out.stdout
    v = json.loads(out.stdout)
    h = v["hangs"][0]
    assert (h["op"], h["waiting_ranks"], h["missing_ranks"]) == ("all_reduce", [0], [1]), v
    assert v["culprit_ranks"] == [1] and v["ranks_reporting"] == [0, 1]
    assert any("torch_fr_rank_9.pkl" in p and "never loaded" in p for p in v["unreadable"]), v["unreadable"]


def _recorder_records_gloo():
    import c10d_observer
    return c10d_observer.capabilities()["sources"]["flight_recorder"]["usable"]


@pytest.mark.skipif(not _recorder_records_gloo(), reason="torch's flight recorder does not record gloo here")
def test_the_recorders_entries_reach_the_state_whatever_source_makes_the_events(job_factory):
    """source="patch" where the recorder records: the wrappers make the events, the recorder is read for
    the entries reports and gathered states carry (the plan's recorder rows behind the chosen source make
    no events; before that was mended their reader ignored every group)."""
    job = job_factory("skip", 2, culprit=1, step=2, timeout=1.0, source="patch")
    _verdict(job)
    state = [json.load(open(os.path.join(job.dump_dir, n))) for n in os.listdir(job.dump_dir)
             if n.startswith("state-rank0-")][0]
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["source"] == "patch"
    entries = [e for g in (state["flight_recorder"] or {}).values() for e in g]
    assert any(e["in_flight"] and e["profiling_name"].endswith("all_reduce") for e in entries), state
