"""NCCL on a GPU: a call ends when the GPU has finished it.  Runs where a CUDA device and NCCL exist
(one GPU is enough: world size 1); skipped elsewhere, such as the CPU-only CI machines.  Every NCCL case
and plan: tests/gpu."""
import pytest
import torch
import torch.distributed as dist

import c10d_observer

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and dist.is_nccl_available()),
                                reason="needs a CUDA device and NCCL")


def test_nccl_call_is_in_flight_until_the_gpu_has_finished(job_factory):
    timeout = 1.0
    # torch.cuda._sleep spins for this many GPU cycles: at 1-2 GHz, 10-20 s, far past the timeout
    job = job_factory("nccl_gpu_completion", 1, timeout=timeout, sleep_cycles=2e10)
    returned_after_s = job.wait_facts(0, "returned_after_s")  # the fact's value
    rep = job.wait_report(0)
    job.release()
    assert job.finish(timeout=180) == [0], job.log_text()
    assert returned_after_s < timeout  # Python's call returned long before it was reported
    [e] = rep["overdue"]
    # numbered by torch's own collective counter (2.5+: the call before enable() was #1), else from enable()
    numbered_by_torch = (c10d_observer.capabilities().get("nccl") or {}).get("trace_json")
    assert e["op"] == "all_reduce" and e["backend"] == "nccl" and e["seq"] == (2 if numbered_by_torch else 1)
    assert job.facts(0)["quick_done"] is True
    assert len(job.reports()[0]["overdue"]) == 1  # the quick all_reduce afterwards was not reported
