"""What a job whose groups were made apart does when it does not hang: 4 gloo ranks (spawned, a FileStore), ranks
0 and 1 make new_group([0, 1]) and ranks 2 and 3 new_group([2, 3]), each only the group it is in (``if rank in
ranks: new_group(ranks)``), then all_reduce ``rank + 1`` on that group.  Made right (every rank makes both, in
one order: ``--right``) the sums are 3 and 7.  With ``--observe`` the observer is enabled first and its line
about the groups is on stderr.

    python benchmarks/made_apart.py [--right] [--observe] [--wait S]

No timing: what torch computes.  Prints the line of the sums, and the ranks still in the job after ``--wait``
(gloo's wiring of the two pairs is a race: they complete across, complete right, or hang).
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def rank_main(rank, world, path, right, observe, out):
    import torch
    import torch.distributed as dist
    if observe:
        import c10d_observer
        c10d_observer.enable(timeout=30, dump_dir=os.path.join(os.path.dirname(path), "dumps"))
    dist.init_process_group("gloo", init_method="file://" + path, rank=rank, world_size=world)
    if right:
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        group = pairs[rank // 2]
    else:
        group = dist.new_group([0, 1] if rank < 2 else [2, 3])
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=group)
    out.put((rank, t.item()))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--right", action="store_true", help="every rank makes both groups, in one order")
    ap.add_argument("--observe", action="store_true", help="c10d_observer.enable() in each rank first")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the ranks; then they are killed")
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    path = os.path.join(tempfile.mkdtemp(), "store")
    procs = [ctx.Process(target=rank_main, args=(r, 4, path, args.right, args.observe, out)) for r in range(4)]
    for p in procs:
        p.start()
    deadline = time.time() + args.wait
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    sums = {}
    while not out.empty():
        r, v = out.get()
        sums[r] = v
    hung = [r for r in range(4) if r not in sums]  # not past the pair's all_reduce (a finished pair waits in the
    # world's barrier for the other)
    print("torch %s, groups %s: all_reduce of rank + 1 on each rank's pair: %s%s (made right: 3, 3, 7, 7)" % (
        torch.__version__, "made right" if args.right else "each made by its own ranks only",
        ", ".join("rank %d: %g" % (r, sums[r]) for r in sorted(sums)) or "none completed",
        "; ranks %s not past it after %g s (hung)" % (", ".join(map(str, hung)), args.wait) if hung else ""))
    return 0 if len(sums) == 4 else 1


if __name__ == "__main__":
    sys.exit(main())
