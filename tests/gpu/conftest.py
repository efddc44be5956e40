import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from harness import Job  # noqa: E402


class GpuJob(Job):
    main = os.path.join(HERE, "gpu_rank.py")


@pytest.fixture
def gpu_job(tmp_path):
    """Start one NCCL rank running a case of gpu_scenarios.py; killed (if still running) when the test ends."""
    jobs = []

    def make(case, **args):
        job = GpuJob(case, 1, tmp_path, **args)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.close()
