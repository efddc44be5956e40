"""`report DIR` on torch's own NCCL flight-recorder dumps: the real JSON dumps recorded on one H100
(torch 2.11.0+cu128, NCCL 2.28.9, world size 1, ../shared/data/nccl-fr-dumps-torch2.11/, copied to
tests/data/nccl/dumps-torch2.11/).  Each was taken while a call was held behind a busy GPU
(``torch.cuda._sleep``), except ``fsdp-during``, taken after FSDP's calls had completed."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from c10d_observer import torch_fr, verdict

DUMPS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "nccl",
                     "dumps-torch2.11")
# case -> (op users write, its seq: torch's own collective number, its size), read off each file
STUCK = {"sync-during": ("all_reduce", 2, "4 x float32"), "async-during": ("all_reduce", 2, "4 x float32"),
         "ddp-during": ("all_reduce", 10, "4160 x float32")}


def _one(tmp_path, case):
    d = tmp_path / case
    d.mkdir()
    shutil.copy(os.path.join(DUMPS, case + ".json"), str(d))
    return str(d)


def _raw(case):
    with open(os.path.join(DUMPS, case + ".json")) as f:
        return json.load(f)


@pytest.mark.parametrize("case", sorted(STUCK))
def test_the_call_in_flight_is_named_as_users_write_it_with_its_size(tmp_path, case):
    docs, problems = torch_fr.load_dir(_one(tmp_path, case))
    assert problems == [] and len(docs) == 1
    v = verdict.analyze({d.rank: d for d in docs}).to_json()
    assert len(v["hangs"]) == 1
    h = v["hangs"][0]
    assert (h["op"], h["seq"], h["size"]) == STUCK[case]
    assert h["waiting_ranks"] == [0] and h["group_ranks"] == [0]
    assert h["torch_timeout_s"] == 600.0


def test_a_dump_with_nothing_in_flight_reports_nothing(tmp_path):
    docs, _ = torch_fr.load_dir(_one(tmp_path, "fsdp-during"))
    assert verdict.analyze({d.rank: d for d in docs}).to_json()["hangs"] == []


@pytest.mark.parametrize("case", sorted(STUCK))
def test_the_age_counts_from_the_dumps_own_time_not_the_files_mtime(tmp_path, case):
    d = _one(tmp_path, case)
    path = os.path.join(d, case + ".json")
    os.utime(path, (2e9, 2e9))  # a copy made years later: its mtime says nothing of when torch wrote it
    raw = _raw(case)
    newest = max(int(e.get(k) or 0) for e in raw["entries"]
                 for k in ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns"))
    stuck = [e for e in raw["entries"] if not e["retired"]][0]
    docs, _ = torch_fr.load_dir(d)
    assert docs[0].written_at == newest / 1e9 and docs[0].extra["file_mtime"] == 2e9
    h = verdict.analyze({0: docs[0]}).to_json()["hangs"][0]
    assert h["stuck_s"] == round((newest - stuck["time_created_ns"]) / 1e9, 1)
    assert h["stuck_at_least"] is True
    assert "stuck at least" in verdict.format_text(verdict.analyze({0: docs[0]}).to_json())


def test_rank_comes_from_a_one_rank_default_group_when_the_file_names_none(tmp_path):
    docs, problems = torch_fr.load_dir(_one(tmp_path, "sync-during"))  # no 'rank' field, no number in the name
    assert problems == [] and docs[0].rank == 0


def test_a_dump_of_a_bigger_job_with_no_rank_is_refused_with_a_hint(tmp_path):
    raw = _raw("sync-during")
    raw["pg_config"]["0"]["ranks"] = "[0, 1]"
    (tmp_path / "dump.json").write_text(json.dumps(raw))
    docs, problems = torch_fr.load_dir(str(tmp_path))
    assert docs == [] and len(problems) == 1
    assert "no rank" in problems[0] and "_rank<N>.json" in problems[0]


def test_report_command_on_a_real_nccl_dump_names_op_size_and_exits_1(tmp_path):
    d = _one(tmp_path, "ddp-during")
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", d], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 1, out.stdout
    assert "all_reduce #10 on group 0 (ranks 0), 4160 x float32, stuck at least" in out.stdout, out.stdout
    assert "nccl:" not in out.stdout


# -- NCCL's per-call states (issue 33): which rank's work never started on its GPU -----------------------
# NCCL refuses two ranks on one GPU, so the recorded dumps are of one rank.  A job of three is made here from
# the recorded sync-during dump, one file per rank, with the stuck call's entry set as NCCL writes it on each
# rank: "scheduled" (as recorded: its kernel queued behind a busy stream) or "started" (what an entry reads
# once its start event fired, under TORCH_NCCL_ENABLE_TIMING=1, with its time_discovered_started_ns and the
# group's last_started_collective set).  The started state itself was not recorded on a GPU.

def _job(tmp_path, states, timing=True):
    for rank, state in enumerate(states):
        raw = _raw("sync-during")
        raw["pg_config"]["0"]["ranks"] = json.dumps(list(range(len(states))))
        stuck = [e for e in raw["entries"] if not e["retired"]][0]
        stuck["state"] = state
        if timing:
            done = [e for e in raw["entries"] if e["retired"]][0]
            done["time_discovered_started_ns"] = done["time_created_ns"] + 1000
            if state == "started":
                stuck["time_discovered_started_ns"] = stuck["time_created_ns"] + 1000
            raw["pg_status"]["0"]["last_started_collective"] = str(stuck["op_id"] if state == "started" else
                                                                   done["op_id"])
        (tmp_path / ("nccl_trace_rank_%d.json" % rank)).write_text(json.dumps(raw))
    docs, problems = torch_fr.load_dir(str(tmp_path))
    assert problems == [] and sorted(d.rank for d in docs) == list(range(len(states)))
    return verdict.analyze({d.rank: d for d in docs}).to_json()


def test_the_recorded_stuck_call_reads_scheduled_with_timing_off():
    """As recorded on the H100 (timing off by default): the state is kept, and says no start was seen."""
    doc = torch_fr.to_state(_raw("sync-during"), os.path.join(DUMPS, "sync-during.json"))
    g = doc["groups"][0]
    assert (g["in_flight_gpu_state"], g["gpu_timing"]) == ("scheduled", False)


def test_a_rank_whose_nccl_work_never_started_while_the_others_did_is_the_culprit(tmp_path):
    v = _job(tmp_path, ["started", "scheduled", "started"])
    h = v["hangs"][0]
    assert v["culprit_ranks"] == [1] and h["gpu_not_started"] == [1] and h["category"] == "all_arrived"
    assert "on rank 1 its work never started on the GPU" in v["summary"], v["summary"]
    assert "ranks 0, 2 started it and wait for it" in h["category_why"]


@pytest.mark.parametrize("states,why", [
    (["started", "started", "started"], "started on every rank's GPU and none completed"),
    (["scheduled", "scheduled", "scheduled"], "started on no rank's GPU"),
], ids=["all-started", "none-started"])
def test_every_rank_in_the_same_nccl_state_cannot_be_decided(tmp_path, states, why):
    v = _job(tmp_path, states)
    assert v["culprit_ranks"] == [] and why in v["hangs"][0]["category_why"]
    assert any(why in u for u in v["undecided"]), v["undecided"]


def test_with_timing_off_scheduled_says_nothing_and_the_verdict_says_how_to_know(tmp_path):
    """Without start events every call reads scheduled until it completes: a rank that reads scheduled beside
    ranks that read started cannot happen, and "scheduled" everywhere names no one."""
    v = _job(tmp_path, ["scheduled", "scheduled", "scheduled"], timing=False)
    assert v["culprit_ranks"] == [] and "TORCH_NCCL_ENABLE_TIMING=1" in v["hangs"][0]["category_why"]
