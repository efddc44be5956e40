"""The Python API: enable(on_hang=...) and load_verdict(), on real gloo ranks with real watchdogs."""
import json
import os
import shutil
import subprocess
import sys

from harness import ROOT, read_verdict, snapshot_dir

import c10d_observer
from c10d_observer import on_hang as _on_hang


def test_on_hang_hands_every_rank_the_verdict_on_a_helper_thread_once(job_factory):
    job = job_factory("on_hang", 2, timeout=1.0)
    got = {r: job.wait_facts(r, "on_hang", timeout=90) for r in (0, 1)}
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    for r in (0, 1):  # the culprit learns it too: it is in no collective, and is told it is the culprit
        g = got[r]
        assert g["culprit_ranks"] == [1] and g["missing"] == [1] and g["waiting"] == [0], g
        assert g["call"].startswith("all_reduce #2 on group"), g
        assert g["exit_code"] == 1
        assert g["thread"] == "c10d_observer-on-hang" and g["main_thread"] is False, g
        assert job.facts(r)["callback_calls"] == 1  # once per set of stuck calls, not every poll
        assert job.facts(r)["result"] == 4.0


def test_a_callback_that_raises_is_logged_and_the_job_goes_on(job_factory):
    job = job_factory("on_hang", 2, timeout=1.0, raise_in_callback=True)
    job.wait_facts(0, "on_hang", timeout=90)
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["result"] == 4.0 and job.facts(1)["result"] == 4.0
    log = job.log_text()
    assert "the on_hang callback" in log and "raised (the job goes on)" in log, log
    assert "the user's callback failed" in log


def test_load_verdict_is_report_json_typed(job_factory, tmp_path):
    job = job_factory("skip", 3, culprit=1, step=2, timeout=1.0)
    read_verdict(job.dump_dir, 60, job.log_text())
    for r in (0, 2):  # the merge reads the ranks' states: their reports may come a moment after it
        job.wait_report(r)
    copy = str(tmp_path / "while-stuck")
    snapshot_dir(job.dump_dir, copy)  # the documents while the hang lasts
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()

    v = c10d_observer.load_verdict(copy)
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", copy],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    want = json.loads(out.stdout)
    assert out.returncode == v.exit_code == 1
    assert set(v.to_dict()) == set(v.keys()) == set(want) | {"dump_dir"} and v.dump_dir == copy
    assert v.culprit_ranks == want["culprit_ranks"] == [1]
    assert isinstance(v, c10d_observer.Verdict) and len(v.hangs) == len(want["hangs"]) == 1
    h = v.hangs[0]
    assert (h.op, h.seq, h.waiting_ranks, h.missing_ranks) == ("all_reduce", 3, [0, 2], [1])
    assert h.missing["1"].state == "no_collective"  # nested objects by attribute; rank keys by item
    assert v.summary == want["summary"] and "never arrived" in v.text
    assert v.to_dict()["hangs"][0]["seq"] == 3

    # the job's folder (its dump_dir inside) is read too
    parent = tmp_path / "job"
    os.makedirs(str(parent))
    shutil.copytree(copy, str(parent / "c10d_observer"))
    assert c10d_observer.load_verdict(str(parent)).culprit_ranks == [1]

    # where no verdict was merged, on_hang's fallback makes it from the rank's own report and the rest
    for name in ("verdict.json", "verdict.txt"):
        os.remove(os.path.join(copy, name))
    pid0 = json.load(open([os.path.join(copy, n) for n in os.listdir(copy) if n.startswith("report-rank0-")][0]))["pid"]
    now = [0.0]
    handed = []
    cb = _on_hang.HangCallback(handed.append, copy, period=0.1, wait_s=5.0, pid=pid0, clock=lambda: now[0])
    assert cb.check() is None and handed == []  # the report is seen; the merged verdict may still come
    now[0] = 4.9
    assert cb.check() is None
    now[0] = 5.0
    got = cb.check()
    assert handed == [got] and got.culprit_ranks == [1] and got.hangs[0].seq == 3
    now[0] = 20.0
    assert cb.check() is None and len(handed) == 1  # the same stuck call is not handed over again
