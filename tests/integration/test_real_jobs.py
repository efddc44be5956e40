"""No timeout to choose, in a real job (issue 31): a DDP loop with a DataLoader worker, jittered steps, p2p and
subgroups beside, with the observer as a user leaves it (no timeout: learned deadlines, the hard one 300 s,
the source auto picks).  Each test is a row of the issue's table.  Timing bounds are generous; what the times
are is measured in benchmarks/false_alarms.py."""
import json
import os
import subprocess
import sys

import pytest

from harness import ROOT, read_verdict, report_after, wait_until

pytestmark = pytest.mark.full  # tests/README.md: the full tier


def _verdicts(job):
    out = []
    for name in sorted(os.listdir(job.dump_dir)):
        if name.startswith("verdict-") and name.endswith(".json"):
            with open(os.path.join(job.dump_dir, name)) as f:
                out.append(json.load(f)["verdict"])
    return out


def _stragglers(job):
    try:
        with open(os.path.join(job.dump_dir, "stragglers.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _exclude(job):
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--exclude", job.dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    return out.returncode, out.stdout


def test_a_stall_in_the_first_steps_is_named_softly_within_seconds(job_factory):
    """A 4-rank DDP loop of 0.2 s steps whose rank 3 stalls in its DataLoader at step 7: no verdict came
    during its 40 s stall (20 calls were needed to learn; the hard default is 300 s)."""
    job = job_factory("ddp_loop", 4, timing=None, steps=12, step_s=0.2, stall=[3, 7], handler=True)
    stalled = job.wait_facts(3, "stalled_at", 90)
    v = read_verdict(job.dump_dir, 60, job.log_text())
    job.release()
    assert job.finish(timeout=120) == [0, 0, 0, 0], job.log_text()
    assert v["level"] == "soft" and v["culprit_ranks"] == [3], v["summary"]
    assert v["hangs"][0]["missing_ranks"] == [3] and "DataLoader" in v["summary"], v["summary"]
    assert v["verdict_at"] - stalled < 15, v["verdict_at"] - stalled  # target: within 15 s
    assert [job.facts(r)["handler_calls"] for r in range(4)] == [0, 0, 0, 0]  # soft: no signal


def test_the_first_checkpoint_behind_a_barrier_under_abort_is_at_most_a_soft_verdict_and_no_signal(job_factory):
    """Rank 0 checkpoints 20 s at step 5, the others wait in barrier(); on_timeout="abort" and a handler of the
    job's own: the job survives, the handler never runs, and nothing names a node to exclude."""
    job = job_factory("ddp_loop", 3, timing=None, steps=10, step_s=0.05, ckpt=[5, 20.0], handler=True, on_timeout="abort")
    assert job.finish(timeout=150) == [0, 0, 0], job.log_text()
    vs = _verdicts(job)
    assert all(v["level"] == "soft" and v["culprit_ranks"] == [0] for v in vs), [v["summary"] for v in vs]
    assert all(v["hangs"][0]["op"] == "barrier" for v in vs), [v["summary"] for v in vs]
    assert [job.facts(r)["handler_calls"] for r in range(3)] == [0, 0, 0]
    assert _exclude(job) == (0, "\n")


def test_a_30_s_pause_that_resolves_sends_no_signal_and_the_report_says_who_was_late(job_factory):
    job = job_factory("ddp_loop", 3, timing=None, steps=40, step_s=0.05, pause=[2, 20, 30.0], handler=True)
    assert job.finish(timeout=150) == [0, 0, 0], job.log_text()
    assert [job.facts(r)["handler_calls"] for r in range(3)] == [0, 0, 0]
    doc, rc = report_after(job.dump_dir)
    assert rc == 3 and doc["level"] == "soft" and doc["culprit_ranks"] == [2], doc["summary"]
    outcome = doc["hangs"][0]["outcome"]
    assert outcome["state"] == "resolved" and outcome["late_ranks"] == [2], outcome
    assert 25 < outcome["after_s"] < 40 and "rank 2 was" in outcome["text"], outcome
    assert _exclude(job) == (0, "\n")


def _named_by_step(job, rank, world, within_steps):
    """The straggler named in stragglers.json, and the step the job was at on the slow rank when it was.
    The claim is in steps, not seconds: on a loaded machine (CI runs this beside nothing, but after a suite's
    worth of processes) the job may start and step slowly, so the wait is bounded by the job's end (then
    nobody was named: a failure that says so) and by a wall clock far past the job's nominal 30 s."""
    def named():
        ended = all(p.poll() is not None for p in job.procs)  # before the read: a last write is seen
        doc = _stragglers(job) or {}
        if any(g["straggler"] for g in doc.get("groups") or ()):
            return doc
        return {"ended": True} if ended else None

    doc = wait_until(named, 300, "a straggler in stragglers.json\n" + job.log_text())
    assert not doc.get("ended"), ("the job ended and no straggler was named", _stragglers(job), job.log_text())
    named = [g["straggler"] for g in doc["groups"] if g["straggler"]]
    assert {s["rank"] for s in named} == {rank}, doc
    since = min(s["since"] for s in named)
    step_at = {int(k): t for k, t in job.wait_facts(rank, "step_at").items()}
    assert job.finish(timeout=120) == [0] * world, job.log_text()
    step_at = {int(k): t for k, t in job.facts(rank)["step_at"].items()}
    steps_before = len([s for s, t in step_at.items() if t <= since])
    print("straggler named after %d steps of rank %d" % (steps_before, rank))
    assert steps_before <= within_steps, (steps_before, doc)
    return doc


# Issue 31's figure was "within 100 steps": a timing figure (the project's rule: those live in benchmarks/, tests keep
# generous margins).  The rule names after 50 calls apart (one a step here), joined every 2 s from each rank's
# documents: at times one rank's starts are missing from them for 2-8 s and the leader's join waits (2026-12-03, each
# join's incomplete calls logged; the cause not found: the recorder's reader hands starts over in batches at times).
# Alone on this 2-core VM, the 40 % job named after 68-120 steps in 14 runs (2.15: 69, 70, 76, 80, 93, 98, 106, 115;
# 2.13: 68, 69, 72, 73, 82, 120), the 50 ms job after 66, 68, 68, 96, 132, 139 (2.15): 100 failed about a run in four.
# What is held here: the straggler named while the job runs, within a margin of that spread (the job ending unnamed
# fails, and says so).
WITHIN_STEPS, JOB_STEPS = 220, 300


@pytest.mark.timeout(420)
def test_a_rank_40_percent_slower_is_named_within_220_steps(job_factory):
    job = job_factory("ddp_loop", 4, timing=None, steps=JOB_STEPS, step_s=0.1, jitter=0.2, slow=[3, 1.4])
    _named_by_step(job, 3, 4, WITHIN_STEPS)


@pytest.mark.timeout(420)
def test_a_rank_50_ms_late_every_step_of_three_is_named_within_220_steps(job_factory):
    """Each step has two calls (DDP's gradients, the loss): the late rank is last at the first by 50 ms,
    at the second by chance; it was last at 66 % of the calls and never named."""
    job = job_factory("ddp_loop", 3, timing=None, steps=JOB_STEPS, step_s=0.1, jitter=0.2, late=[1, 0.05])
    _named_by_step(job, 1, 3, WITHIN_STEPS)


@pytest.mark.timeout(300)
def test_a_balanced_loop_names_nobody(job_factory):
    # 400 steps: the join needs 100 calls joined (a period behind the job); 200 steps gave 87 on CI's 2 cores
    job = job_factory("ddp_loop", 3, timing=None, steps=400, step_s=0.04, jitter=0.5)
    assert job.finish(timeout=240) == [0, 0, 0], job.log_text()
    doc = _stragglers(job)
    assert doc and all(g["straggler"] is None for g in doc["groups"]), doc
    assert max(g["calls"] for g in doc["groups"]) >= 100, doc  # enough joined calls for the rule to speak


def test_a_skipped_recv_in_a_ddp_loop_names_the_rank_that_skipped_it_never_a_phantom(job_factory):
    """Rank 0 sends rank 1 a tensor every step; rank 1 skips one recv: rank 0 waits in send, ranks 1 and 2 in
    the step's all_reduce.  The default source said "all_reduce #109 ... ranks 1, 2 finished it and rank 0
    waits in it; no rank is missing" (its numbers counted the sends); patch said it could not decide."""
    job = job_factory("ddp_loop", 3, timing=None, steps=60, step_s=0.02, p2p=True, skip_recv=40, timeout=5.0)
    v = read_verdict(job.dump_dir, 90, job.log_text())
    job.kill()
    assert v["culprit_ranks"] == [1], v["summary"]
    root = v["hangs"][0]
    assert root["root"] and root["kind"] == "p2p" and root["op"] == "send" and root["waiting_ranks"] == [0], root
    assert root["missing"]["1"]["state"] == "out_of_order", root["missing"]
    for h in v["hangs"]:  # never "finished it" for ranks that are in it, never "no rank is missing"
        assert not (set(h["finished_ranks"]) & set(h["waiting_ranks"])), h
        assert h["missing_ranks"] or h.get("mismatch"), h
    assert not v["undecided"], v["undecided"]


def test_a_subgroup_skip_in_a_ddp_loop_names_the_rank_that_skipped_it_also_after_the_job(job_factory):
    job = job_factory("ddp_loop", 4, timing=None, steps=60, step_s=0.02, pairs=True, pair_skip=40, timeout=5.0)
    v = read_verdict(job.dump_dir, 90, job.log_text())
    job.kill()
    # the whole verdict where it fails (once in a loaded CI run: "culprit none", not reproduced in 8 runs since)
    assert v["culprit_ranks"] == [2], json.dumps({k: v.get(k) for k in ("summary", "undecided", "hangs",
                                                                        "ranks_silent")}, indent=1)
    assert v["hangs"][0]["group_ranks"] == [2, 3] and v["hangs"][0]["root"], v["hangs"][0]
    doc, rc = report_after(job.dump_dir)
    assert doc["culprit_ranks"] == [2] and rc == 1 and not doc["undecided"], doc["summary"]
