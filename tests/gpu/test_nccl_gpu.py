"""NCCL on one GPU: every case a single GPU can make is found, on every NCCL plan this torch offers.

Run on a machine with a CUDA device (docs/support.md, "NCCL on GPUs"):

    PYTHONPATH=. python3 -m pytest tests/gpu tests/integration/test_nccl.py -v

Skipped without CUDA and NCCL, as on the CPU-only CI machines.  World size 1 (NCCL refuses two ranks on one
GPU): a hang is a ``torch.cuda._sleep`` kernel (about 10 s) queued ahead of the call.  What one GPU cannot
make: a rank that never arrives (there is no other rank), and send/recv or ``batch_isend_irecv`` (torch
refuses a peer that is the rank itself); those run on gloo in tests/integration.

A plan is (backend, source): the legacy ProcessGroupNCCL under ``auto`` (torch's NCCL recorder where it
records; on 2.5-2.10 turned on by enable() before init_process_group), under ``patch`` (Work.is_completed or
a completion marker) and under ``pg_hooks`` (2.14+); ProcessGroupNCCL2 (2.14 opt-in, 2.15 default) under
``auto`` (its recorder hook) and ``patch``.
"""
import os

import pytest
import torch
import torch.distributed as dist

import c10d_observer

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and dist.is_nccl_available()),
                                 reason="needs a CUDA device and NCCL"),
              pytest.mark.timeout(400)]  # NCCL's start, a 10-20 s sleep kernel, the case and its quick calls

TIMEOUT = 2.0
POLL = 0.2
SLEEP_CYCLES = 2e10  # torch.cuda._sleep spins this many GPU cycles: at 1-2 GHz, 10-20 s, far past the timeout
# found within timeout + 2 polls of the call (the target); the margin covers a loaded machine
LATEST = TIMEOUT + 2 * POLL + 0.5


def _plans():
    caps = c10d_observer.capabilities()
    nplan, nfeat = caps.get("nccl_plan") or {}, caps.get("nccl") or {}
    out = [("nccl", "auto"), ("nccl", "patch")]
    if caps["sources"]["pg_hooks"]["usable"]:
        out.append(("nccl", "pg_hooks"))
    if nfeat.get("nccl2") and nplan.get("nccl2_recorder"):
        out += [("nccl2", "auto"), ("nccl2", "patch")]
    return out


PLANS = _plans() if torch.cuda.is_available() else [("nccl", "auto")]
IDS = ["%s-%s" % p for p in PLANS]

# case -> the ops its stuck call may be reported as (the name users write)
CASES = {
    "sync": {"all_reduce"}, "async": {"all_reduce"}, "coalesced": {"all_reduce", "all_reduce_coalesced"},
    "ddp": {"all_reduce"}, "fsdp": {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce"},
    "funcol": {"all_reduce"}, "dtensor": {"all_gather_into_tensor"}, "subgroup": {"all_reduce"},
    "barrier": {"barrier"}, "graph": {"all_reduce"}, "healthy": {"all_reduce"},
}


def _run(gpu_job, case, kind, source, **extra):
    nplan = c10d_observer.capabilities().get("nccl_plan") or {}
    env = {"TORCH_DIST_USE_NCCL2": "1"} if kind == "nccl2" else {}
    job = gpu_job(case, env=env, kind=kind, source=source, timeout=TIMEOUT, poll=POLL, sleep_cycles=SLEEP_CYCLES,
                  enable_first=kind == "nccl" and source == "auto" and nplan.get("recorder_on") == "enable",
                  **extra)
    return job


def _finish(job):
    assert job.finish(timeout=300) == [0], job.log_text()
    return job.facts(0), job.reports().get(0)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind,source", PLANS, ids=IDS)
def test_a_call_behind_a_busy_gpu_is_found_and_nothing_else(gpu_job, case, kind, source):
    if case in ("funcol", "dtensor") and source == "patch":
        pytest.skip("the patch source does not see functional collectives (they reach ProcessGroup in C++): "
                    "issue 14")
    job = _run(gpu_job, case, kind, source)
    facts, rep = _finish(job)
    if facts.get("issues_no_collective"):
        pytest.skip("at world size 1 this torch issues no collective for %s" % case)
    assert facts["nccl_kind"] == kind, facts
    assert rep is not None, "no report: the stuck call was never found\n%s" % job.log_text()
    overdue = rep["overdue"]
    assert len(overdue) == 1, overdue  # the stuck call; none of the quick ones (nor graph's or healthy's)
    e = overdue[0]
    assert e["op"] in CASES[case], e
    assert e["started_at"] >= facts["stuck_at"] - 0.5, (e, facts)
    assert e["detected_at"] - facts["stuck_at"] <= LATEST, (e, facts)
    if case == "subgroup":
        assert e["group"] == facts["sub_group"] != facts["world_group"], (e, facts)
    else:
        assert e["group"] == facts["world_group"], (e, facts)
    numbered_by_torch = (c10d_observer.capabilities().get("nccl") or {}).get("trace_json")
    if case == "sync" and kind == "nccl" and source in ("auto", "patch") and numbered_by_torch:
        # torch's own collective number: the warm-up call before enable() was #1, the case's warm-up #2
        assert e["seq"] == 3, e
    if case == "graph":  # 50 replays of a captured all_reduce: no error, no report
        assert facts["replays"] == 50
    if case == "healthy":  # 10,000 quick mixed calls: none reported
        assert facts["healthy_calls"] == 10000
    assert facts["gpu_free_after_s"] > e["detected_at"] - facts["stuck_at"]  # found while it was stuck


@pytest.mark.parametrize("wait", ["item", "cpu", "synchronize"])
@pytest.mark.parametrize("kind,source", PLANS, ids=IDS)
def test_a_rank_waiting_for_the_gpu_in_cpp_still_gets_its_stacks_dumped(gpu_job, wait, kind, source):
    job = _run(gpu_job, wait, kind, source)
    stacks = job.wait_stacks(0, "_stuck_%s" % wait, timeout=120)
    facts, rep = _finish(job)
    assert rep is not None and rep["overdue"][0]["op"] == "all_reduce", rep
    assert "gpu_scenarios.py" in stacks


def test_under_raise_the_nccl_group_is_aborted_and_the_rank_gets_the_verdict(gpu_job):
    """on_timeout="raise" on NCCL (docs/contracts.md): at the hard verdict the rank's helper aborts the hang's
    group, and the observer's signal handler raises CollectiveHang once the synchronisation returns (the
    job's signal goes with it).  At world size 1 the wait is on a sleep kernel ahead of the call, which no
    abort ends: this checks that the abort runs on a real ProcessGroupNCCL and the exception arrives with the
    verdict, not how soon an abort ends a peer's wait.  (Its first run, H200, 2026-11-27, found the exception
    scheduled only once the abort had returned, after the wait: the job ran on with a broken group.)"""
    job = _run(gpu_job, "synchronize", "nccl", "auto", on_timeout="raise")
    facts, _ = _finish(job)
    assert facts.get("raised") and "on_timeout=raise" in facts["raised"], (facts, job.log_text())
    assert facts["ended"] == [facts["world_group"]], (facts, job.log_text())
    assert "aborted" in job.log_text(), job.log_text()
    print("raise on NCCL: raised after %.1f s; %s" % (facts["raised_after_s"], facts["raised"][:300]))


def test_the_plans_under_test_are_those_capabilities_names():
    caps = c10d_observer.capabilities()
    assert ("nccl", "patch") in PLANS
    assert caps["nccl"]["available"] is True
    print("NCCL plans:", IDS, "recorder:", caps["nccl_plan"], "torch", torch.__version__,
          "NCCL", ".".join(str(x) for x in torch.cuda.nccl.version()), os.uname().nodename)
