"""``python -m c10d_observer demo``: a few CPU ranks on gloo; one skips an all_reduce; watch it be found.

The parent starts the ranks (a FileStore in a temporary directory: no port), waits for the reports of the
ranks left waiting, prints them and the verdict the firing watchdog merged from every rank's state (who
never arrived, where it is, the main-thread stacks grouped), then lets the culprit go on so that the job
ends cleanly.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from . import stackfile as _stackfile
from . import dumpdir as _dumpdir
from . import report as _report

STEP = 30  # the step at which the culprit stalls: the steps before teach each watchdog its deadlines


def main(args):
    if not 2 <= args.ranks <= 16:
        sys.stderr.write("demo: --ranks must be between 2 and 16, got %d\n" % args.ranks)
        return 2
    if args.culprit is None:  # the default: rank 2, or the last rank of a smaller job
        args.culprit = min(2, args.ranks - 1)
    if not 0 <= args.culprit < args.ranks:
        sys.stderr.write("demo: --culprit must be a rank in 0..%d, got %d\n" % (args.ranks - 1, args.culprit))
        return 2
    work = tempfile.mkdtemp(prefix="c10d_observer-demo-")
    dump_dir = os.path.abspath(args.dump_dir) if args.dump_dir else os.path.join(work, "dumps")
    os.makedirs(dump_dir, exist_ok=True)
    print("c10d-observer demo: %d ranks on gloo (CPU), %s; rank %d will skip the all_reduce of step %d.\n"
          "reports go to %s\n" % (args.ranks, "observer timeout %g s" % args.timeout if args.timeout else
                                   "no timeout chosen (deadlines learned from the steps before)", args.culprit,
                                   STEP, dump_dir))
    sys.stdout.flush()
    t0 = time.monotonic()
    procs = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH")) if p))
    for rank in range(args.ranks):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "c10d_observer.demo", json.dumps({
                "rank": rank, "world": args.ranks, "work": work, "dump_dir": dump_dir,
                "timeout": args.timeout, "culprit": args.culprit})], env=dict(env, LOCAL_RANK=str(rank))))
    waiting = [r for r in range(args.ranks) if r != args.culprit]
    found = {}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (len(found) < len(waiting) or not _stacks_ready(dump_dir, waiting)):
            if any(p.poll() not in (None, 0) for p in procs):
                sys.stderr.write("demo: a rank failed\n")
                return 1
            reports, _ = _report.load_dir(dump_dir)
            found = {r.rank: r for r in reports if r.overdue}
            time.sleep(0.1)
        if len(found) < len(waiting):
            sys.stderr.write("demo: no detection within 60 s\n")
            return 1
        elapsed = time.monotonic() - t0
        reports, problems = _report.load_dir(dump_dir)
        print("\n=== detected %.1f s after the demo started: the per-rank reports ===" % elapsed)
        print(_report.summarize(reports, problems))
        dd = _dumpdir.DumpDir(dump_dir)
        while time.monotonic() < deadline + 30 and not dd.exists(_dumpdir.VERDICT_TEXT):
            time.sleep(0.1)
        text = dd.read_text(_dumpdir.VERDICT_TEXT)
        if text is None:
            sys.stderr.write("demo: the watchdogs wrote no verdict\n")
            return 1
        verdict_path = dd.path(_dumpdir.VERDICT_TEXT)
        print("\n=== the verdict across all ranks, %.1f s after the demo started (%s) ===" % (
            time.monotonic() - t0, verdict_path))
        print(text.rstrip())
        print("\nThe job was not killed: the culprit now goes on and every rank finishes.")
        sys.stdout.flush()
    finally:
        open(os.path.join(work, "release"), "w").close()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        if not args.dump_dir:
            shutil.rmtree(work, ignore_errors=True)
    print("all %d ranks finished; total %.1f s" % (args.ranks, time.monotonic() - t0))
    return 0


def _stacks_ready(dump_dir, ranks):
    for r in ranks:
        paths = _dumpdir.DumpDir(dump_dir).glob(_dumpdir.STACKS.replace("%d", "*") % r)
        if not paths or not _stackfile.has_dump(open(paths[0]).read()):
            return False
    return True


def _worker(spec):
    import datetime
    import torch
    import torch.distributed as dist
    import c10d_observer

    rank, world = spec["rank"], spec["world"]
    dist.init_process_group("gloo", init_method="file://" + os.path.join(spec["work"], "store"), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=600))
    dist.barrier()
    kw = {"timeout": spec["timeout"]} if spec["timeout"] else {}  # none: learned deadlines (soft), 300 s hard
    c10d_observer.enable(dump_dir=spec["dump_dir"], **kw)
    grad = torch.ones(1024)
    for step in range(STEP + 2):
        if rank == spec["culprit"] and step == STEP:
            _busy_until_released(spec["work"])  # e.g. a slow data loader, or a branch only this rank takes
        dist.all_reduce(grad)
    c10d_observer.disable()
    dist.destroy_process_group()


def _busy_until_released(work, limit=120.0):
    deadline = time.monotonic() + limit
    while not os.path.exists(os.path.join(work, "release")) and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    _worker(json.loads(sys.argv[1]))
