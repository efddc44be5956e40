import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Job  # noqa: E402


@pytest.fixture
def job_factory(tmp_path):
    """Start jobs of real ranks; every one is killed (if still running) when the test ends."""
    jobs = []

    def make(scenario, world_size, **args):
        job = Job(scenario, world_size, tmp_path, **args)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.close()
