"""False alarms and detection with no timeout chosen (issue 26): learned (soft) deadlines on a realistic loop.

    torchrun --standalone --nproc_per_node=4 benchmarks/false_alarms.py [--collectives 100000]
    python benchmarks/false_alarms.py --cpu [--seconds 60]     # the watchdog's CPU at ~1,000 calls/s

(torch 1.8: python -m torch.distributed.launch --use_env --nproc_per_node=4 --master_port=PORT ...)

Each rank runs ``c10d_observer.enable()`` with no timeout (the hard deadline is the default, 300 s; soft
deadlines are learned) and ``on_timeout="abort"``, then a training loop on CPU until the ranks together
have issued ``--collectives`` calls: a DDP step (its gradient all-reduce) with jittered compute (5-30 ms a
rank, drawn per step), an all_reduce on a pair group (new_group([0, 1]), new_group([2, 3])), every 50 steps
an evaluation (5 steps of forward passes and an all_reduce of metrics: other signatures, after a pause),
every 400 steps a checkpoint on rank 0 behind a barrier (torch.save, then 0.2-2.5 s more), and a warm-up
(step 0: each rank late by up to 3 s, as a first compile).  Each rank records when it was deliberately
late by more than 1 s.  Then the detection: rank ``world - 1`` stops arriving; it polls dump_dir for the
soft verdict that names it and records when it came.

Counted from every verdict the watchdogs merged (``verdict-*.json``): hard verdicts (target 0), and soft
verdicts on calls where no rank was more than 1 s late (target 0), per 10^6 calls; the detection time of a
rank that stops arriving (target: within 10 s).  Rank 0 prints a table and writes
``results/false_alarms.json``.  ``--cpu``: two ranks, ~1,000 all_reduces a second for ``--seconds``, the
watchdog's CPU time per second of wall time (target under 1 % of a core), soft deadlines on and off.
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, child_env, free_port, machine, today, write_json  # noqa: E402


def _busy(seconds, x):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        x = (x @ x).clamp_(-1, 1)
    return x


def loop(args):
    import torch
    import torch.distributed as dist
    import c10d_observer
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dump = args.dump_dir
    dist.barrier()
    obs = c10d_observer.enable(dump_dir=dump, on_timeout="abort")
    rng = random.Random(1000 + rank)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pairs = [dist.new_group([r, r + 1]) for r in range(0, world - 1, 2)]
    pair = pairs[min(rank // 2, len(pairs) - 1)] if rank < 2 * len(pairs) else None
    x, y = torch.randn(16, 64), torch.randn(16, 8)
    work = torch.ones(32, 32)
    late = []  # (from, to) wall times this rank was deliberately late by more than 1 s
    calls = step = 0
    t0 = time.time()
    per_step = 2 + (1 if pair is not None else 0)
    while True:
        total = torch.tensor([float(calls)])
        dist.all_reduce(total)  # how many calls the job made so far (every 10 steps)
        calls += 1
        if total.item() >= args.collectives:
            break
        for _ in range(10):
            if step == 0:  # warm-up: as a first compile, each rank late by up to 3 s
                d = rng.uniform(0.0, 3.0)
                if d > 1.0:
                    late.append((time.time(), time.time() + d))
                time.sleep(d)
            work = _busy(rng.uniform(0.005, 0.03), work)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()  # DDP's gradient all-reduce
            opt.step()
            opt.zero_grad()
            if pair is not None:
                dist.all_reduce(torch.ones(8), group=pair)
            dist.all_reduce(torch.ones(1))  # the step's loss, averaged
            calls += per_step
            step += 1
            if step % 50 == 0:  # an evaluation: a pause, then other signatures
                with torch.no_grad():
                    for _ in range(5):
                        work = _busy(rng.uniform(0.01, 0.05), work)
                        model(x)
                        dist.all_reduce(torch.ones(4))
                        calls += 1
            if step % 400 == 0:  # a checkpoint on rank 0, the others wait in barrier()
                if rank == 0:
                    began = time.time()
                    torch.save(model.state_dict(), os.path.join(args.work, "ckpt.pt"))
                    time.sleep(rng.uniform(0.2, 2.5))
                    if time.time() - began > 1.0:
                        late.append((began, time.time()))
                dist.barrier()
                calls += 1
    loop_s = time.time() - t0
    # the detection: the last rank stops arriving; it watches for the verdict that names it
    dist.barrier()
    stopped = None
    if rank == world - 1:
        stopped = time.time()
        named = None
        while time.time() - stopped < 60:
            for path in glob.glob(os.path.join(dump, "verdict-*.json")):
                with open(path) as f:
                    v = json.load(f)["verdict"]
                if rank in (v.get("culprit_ranks") or ()) and (v.get("verdict_at") or 0) > stopped:
                    named = v
            if named:
                break
            time.sleep(0.05)
        facts = {"stopped": stopped, "named_at": named and named["verdict_at"], "level": named and named["level"]}
    else:
        facts = {}
    dist.all_reduce(torch.ones(1))  # the others waited here
    facts.update(rank=rank, calls=calls, steps=step, late=late, loop_s=loop_s, source=obs.source)
    with open(os.path.join(args.work, "rank%d.json" % rank), "w") as f:
        json.dump(facts, f)
    dist.barrier()
    c10d_observer.disable()
    if rank == 0:
        _summarize(args, world)


def _summarize(args, world):
    ranks = [json.load(open(os.path.join(args.work, "rank%d.json" % r))) for r in range(world)]
    stop = ranks[-1]
    verdicts = []
    for path in glob.glob(os.path.join(args.dump_dir, "verdict-*.json")):
        with open(path) as f:
            verdicts.append(json.load(f)["verdict"])
    before = [v for v in verdicts if (v.get("verdict_at") or 0) < stop["stopped"]]
    late = {r["rank"]: r["late"] for r in ranks}
    calls = sum(r["calls"] for r in ranks)
    hard = [v for v in before if v.get("level") == "hard"]
    false_soft, justified = [], []
    for v in before:
        if v.get("level") != "soft":
            continue
        h = v["hangs"][0]
        began, seen = h.get("started_at") or 0, h.get("detected_at") or v["verdict_at"]
        why = [r for r in v.get("culprit_ranks") or () for a, b in late.get(r, ()) if a <= seen and b >= began]
        (justified if why else false_soft).append(v["summary"])
    detect = (stop["named_at"] - stop["stopped"]) if stop.get("named_at") else None
    out = {"benchmark": "false_alarms", "date": today(), "machine": machine(), "world_size": world,
           "torch": __import__("torch").__version__, "source": ranks[0]["source"],
           "collectives": calls, "steps": ranks[0]["steps"], "loop_s": round(max(r["loop_s"] for r in ranks), 1),
           "verdicts_before_the_stop": len(before), "hard_verdicts": len(hard),
           "soft_verdicts_where_a_rank_was_late_over_1s": len(justified),
           "soft_verdicts_where_no_rank_was_late_over_1s": len(false_soft),
           "false_soft_per_million_calls": round(1e6 * len(false_soft) / calls, 2) if calls else None,
           "hard_per_million_calls": round(1e6 * len(hard) / calls, 2) if calls else None,
           "detection_s": round(detect, 2) if detect is not None else None, "detection_level": stop.get("level"),
           "false_soft_summaries": false_soft[:10], "hard_summaries": [v["summary"] for v in hard][:10],
           "justified_summaries": justified[:10]}
    print("collectives %d over %.0f s on %d ranks (%s); verdicts before the stop: %d" % (
        calls, out["loop_s"], world, out["source"], len(before)))
    print("hard verdicts: %d (%s per 10^6 calls); soft verdicts where no rank was > 1 s late: %d (%s per 10^6); "
          "soft verdicts where one was: %d" % (len(hard), out["hard_per_million_calls"], len(false_soft),
                                              out["false_soft_per_million_calls"], len(justified)))
    print("a rank that stops arriving, no timeout set: named (%s) %s s after it stopped" % (
        out["detection_level"], out["detection_s"]))
    write_json(args.out, out)


def cpu(args):
    """Two ranks, ~1,000 all_reduces a second: the watchdog's CPU per second, soft deadlines on and off."""
    results = {}
    for soft in ("1", "0"):
        work = tempfile.mkdtemp(prefix="c10d-cpu-")
        env = child_env(C10D_OBSERVER_SOFT=soft, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                        WORLD_SIZE="2")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--cpu-rank", "--seconds",
                                   str(args.seconds), "--work", work], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
                 for r in (0, 1)]
        for p in procs:
            p.wait()
        facts = [json.load(open(os.path.join(work, "cpu%d.json" % r))) for r in (0, 1)]
        results["soft_on" if soft == "1" else "soft_off"] = {
            "calls_per_s": [round(f["calls_per_s"]) for f in facts],
            "watchdog_cpu_pct": [round(f["watchdog_cpu_pct"], 3) for f in facts]}
        print("soft deadlines %s: %s calls/s per rank, watchdog CPU %s %% of a core" % (
            "on" if soft == "1" else "off", results[list(results)[-1]]["calls_per_s"],
            results[list(results)[-1]]["watchdog_cpu_pct"]))
    source = os.environ.get("C10D_OBSERVER_SOURCE", "auto")
    write_json(os.path.join(RESULTS, "false_alarms_cpu_%s.json" % source), dict(
        benchmark="false_alarms --cpu", date=today(), machine=machine(), seconds=args.seconds, source=source,
        torch=__import__("torch").__version__, **results))


def cpu_rank(args):
    import torch
    import torch.distributed as dist
    import c10d_observer
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    obs = c10d_observer.enable(dump_dir=os.path.join(args.work, "dumps"))
    t = torch.ones(4)
    for _ in range(200):  # warm-up
        dist.all_reduce(t)
    dist.barrier()

    def cpu_s(pid):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, w0, n = cpu_s(obs.watchdog_pid), time.monotonic(), 0
    while time.monotonic() - w0 < args.seconds:
        t0 = time.monotonic()
        for _ in range(100):
            dist.all_reduce(t)
        n += 100
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))  # ~1,000 calls a second
    wall = time.monotonic() - w0
    used = cpu_s(obs.watchdog_pid) - c0
    with open(os.path.join(args.work, "cpu%d.json" % rank), "w") as f:
        json.dump({"calls_per_s": n / wall, "watchdog_cpu_pct": 100.0 * used / wall}, f)
    c10d_observer.disable()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collectives", type=int, default=100000, help="calls issued by all ranks together")
    ap.add_argument("--dump-dir", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=os.path.join(RESULTS, "false_alarms.json"))
    ap.add_argument("--cpu", action="store_true", help="the watchdog's CPU at ~1,000 calls/s instead")
    ap.add_argument("--cpu-rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    if args.cpu:
        return cpu(args)
    if args.cpu_rank:
        return cpu_rank(args)
    base = os.environ.get("C10D_FA_DIR") or args.work
    if base is None:  # every rank of one launch must agree: torchrun's run id names the folder
        base = os.path.join(tempfile.gettempdir(), "c10d-false-alarms-%s" % os.environ.get("TORCHELASTIC_RUN_ID",
                                                                                          os.environ.get("MASTER_PORT")))
    args.work = base
    args.dump_dir = args.dump_dir or os.path.join(base, "dumps")
    os.makedirs(args.dump_dir, exist_ok=True)
    loop(args)


if __name__ == "__main__":
    main()
