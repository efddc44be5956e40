"""The one rank of a tests/gpu job: ``gpu_rank.py CASE 0 1 WORK_DIR ARGS_JSON`` (harness.Job's command line)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import gpu_scenarios  # noqa: E402
from rank_main import Ctx  # noqa: E402


def main():
    case, rank, world, work_dir, args = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        json.loads(sys.argv[5])
    ctx = Ctx(rank, world, work_dir, dict(args, case=case))
    gpu_scenarios.run(ctx)
    ctx.record(finished=True)


if __name__ == "__main__":
    main()
