"""torch's MultiProcessTestCase under c10d-observer: 2 ranks on gloo; in one test rank 1 stalls in a step.

Without the observer the hung test fails after MultiProcessTestCase's own timeout (300 s by default,
DISTRIBUTED_TESTS_DEFAULT_TIMEOUT); with the pytest plugin it fails within seconds, with the verdict as
its message, and the healthy test passes as before.  With the package installed from its wheel (the
plugin's entry point, and c10d_observer.pth, through which the spawned ranks are observed):

    python -m pytest --c10d-observer=5 examples/recipes/test_mptc_hang.py

Python 3.8+; needs pytest and expecttest.
"""
import os
import time

import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase
from torch.testing._internal.common_utils import run_tests

STALL_S = float(os.environ.get("STALL_S", "600"))


class AllReduceTest(MultiProcessTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super(AllReduceTest, self).setUp()
        self._spawn_processes()

    def _init(self):
        dist.init_process_group("gloo", init_method="file://" + self.file_name,
                                rank=self.rank, world_size=self.world_size)

    def test_healthy(self):
        self._init()
        t = torch.ones(4)
        dist.all_reduce(t)
        self.assertEqual(t[0].item(), 2.0)
        dist.destroy_process_group()

    def test_rank1_stalls(self):
        self._init()
        t = torch.ones(4)
        for step in range(30):
            if step == 20 and self.rank == 1:
                time.sleep(STALL_S)  # the culprit; rank 0 waits in all_reduce #21
            dist.all_reduce(t)
        dist.destroy_process_group()


if __name__ == "__main__":
    run_tests()
