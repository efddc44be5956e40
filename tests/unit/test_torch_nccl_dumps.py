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
