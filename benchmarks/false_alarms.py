"""No timeout to choose, on realistic loops (issues 26, 31): false alarms and detection times, per source.

    python benchmarks/false_alarms.py                        # every case, sources auto and patch, 4 ranks
    python benchmarks/false_alarms.py --cases stop --repeat 5 --sources auto
    python benchmarks/false_alarms.py --cpu [--seconds 60]   # the watchdog's CPU at ~1,000 calls/s

Each run launches ``--world`` ranks on gloo (torchrun; torch.distributed.launch on 1.8) with a SIGUSR1 handler
of the job's own and ``c10d_observer.enable(on_timeout="abort", source=...)`` with no timeout (learned soft
deadlines; the hard one is the default 300 s).  The loop, as users write it: a DDP model fed by a DataLoader
with 2 workers, jittered compute (5-30 ms a rank, drawn per step), an all_reduce on a pair group
(new_group([0, 1]), new_group([2, 3])) and one of the loss; every 50 steps rank 0 evaluates (0.3-1.5 s of
forward passes) while the others wait in a barrier, then the metrics are all_reduced; a checkpoint by rank 0
behind a barrier at step 5 and every 400 steps (torch.save, then 0.2-2.5 s more); a first step late by up to
3 s on each rank (a first compile); and, at each step with odds 1 in 150, a rank drawn at random pauses
0.5-3 s.  Cases:

- ``healthy``: the loop until the ranks together issued ``--collectives`` calls: the false alarms;
- ``pause``: the loop, with rank 1 pausing 30 s at step 300, then catching up (a pause that resolves);
- ``stop``: rank ``world - 1`` stops arriving at a step drawn from 100-130: how long until a verdict names it;
- ``early_stall``: 0.2 s steps; rank ``world - 1``'s DataLoader worker stalls 40 s on the batch of step 7;
- ``slow_eval``: 95 steps; at steps 30, 60 and 90 rank 0 evaluates for 15-60 s (drawn per eval) while the
  others wait in the barrier after it, no ``phase()`` declared: how many evals got a verdict (issue 41: at
  most the first);
- ``slow_eval_stall``: the same, and rank 0 stalls inside the third eval until a verdict names it (then
  goes on): how long until it is named, from the eval's start.

Counted from the verdicts the watchdogs merged (``verdict-*.json``) and the ranks' own records: soft verdicts
(where a rank it names was deliberately late over 1 s: justified; else a false alarm) and those on calls
stuck less than 10 s, hard verdicts, signals the job's handler received, each per 10^6 calls; for ``stop`` and
``early_stall`` the seconds from the fault to the first verdict naming the rank.  Targets (issue 31): 0 hard
verdicts, 0 signals and 0 soft verdicts on waits under 10 s in healthy loops; the stop and the early stall
named within 15 s.  Results: ``results/false_alarms.json`` (every run, and a summary per case and source).
"""
import argparse
import glob
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, child_env, free_port, machine, run_logged, summary, table, today, write_json  # noqa: E402

CASES = ("healthy", "pause", "stop", "early_stall", "slow_eval", "slow_eval_stall")
EVALS = ("slow_eval", "slow_eval_stall")
BATCH = 16


def _busy(seconds, x):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        x = (x @ x).clamp_(-1, 1)
    return x


def rank_run(args):
    """One rank of one run (under the launcher)."""
    calls_seen = []
    signal.signal(signal.SIGUSR1, lambda s, f: calls_seen.append(time.time()))  # the job's own handler
    import torch
    import torch.distributed as dist
    import c10d_observer
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dump, work = args.dump_dir, args.work
    case = args.case
    stall_step = 7 if case == "early_stall" else None
    shared = random.Random(args.seed)  # the same draws on every rank: who pauses, when the stop comes
    stop_step = shared.randint(100, 130) if case == "stop" else None
    last = world - 1

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            if stall_step is not None and rank == last and i == stall_step * BATCH:  # the first item of that batch
                time.sleep(40.0)
            return torch.randn(64), torch.randn(8)

    loader = iter(torch.utils.data.DataLoader(Data(), batch_size=BATCH, num_workers=2))
    dist.barrier()
    obs = c10d_observer.enable(dump_dir=dump, on_timeout="abort", source=args.source)
    rng = random.Random(1000 + rank)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pairs = [dist.new_group([r, r + 1]) for r in range(0, world - 1, 2)]
    pair = pairs[min(rank // 2, len(pairs) - 1)] if rank < 2 * len(pairs) else None
    work_t = torch.ones(32, 32)
    late = []  # (from, to) wall times this rank was deliberately late by more than 1 s
    facts = {"rank": rank}
    calls = step = 0
    t0 = time.time()
    per_step = 2 + (1 if pair is not None else 0)
    steps = {"healthy": None, "early_stall": 30, "stop": 200, "slow_eval": 95, "slow_eval_stall": 95}.get(
        case, args.steps)
    eval_s = [shared.uniform(15.0, 60.0) for _ in range(3)] if case in EVALS else None

    waits = {}  # call site -> the time each of its calls took on this rank (ms): the healthy waits

    def timed(site, fn, *a, **kw):
        t = time.perf_counter()
        out = fn(*a, **kw)
        waits.setdefault(site, []).append(round(1e3 * (time.perf_counter() - t), 2))
        return out

    def pause(seconds, why):
        began = time.time()
        time.sleep(seconds)
        if seconds > 1.0:
            late.append((began, time.time(), why))

    while True:
        if case == "healthy" and step % 10 == 0:
            total = torch.tensor([float(calls)])
            dist.all_reduce(total)  # how many calls the job made so far
            calls += 1
            if total.item() >= args.collectives:
                break
        elif steps is not None and step >= steps:
            break
        if step == stall_step and rank == last:
            facts["fault_at"] = time.time()
        x, y = next(loader)
        if step == 0:
            pause(rng.uniform(0.0, 3.0), "first step")  # as a first compile
        if shared.random() < 1.0 / 150:  # a rank drawn at random pauses (its data, a collection, I/O)
            who, d = shared.randrange(world), shared.uniform(0.5, 3.0)
            if who == rank:
                pause(d, "random pause")
        if case == "pause" and step == 300 and rank == 1:
            pause(30.0, "the pause that resolves")
        if step == stop_step and rank == last:
            facts["fault_at"] = time.time()
            _wait_named(dump, rank, facts["fault_at"], 60.0)
            late.append((facts["fault_at"], time.time(), "the stop"))
        step_s = 0.2 if case == "early_stall" else rng.uniform(0.005, 0.03)
        work_t = _busy(step_s, work_t)
        loss = torch.nn.functional.mse_loss(model(x), y)
        timed("backward", loss.backward)  # DDP's gradient all-reduce (and the backward pass)
        opt.step()
        opt.zero_grad()
        if pair is not None:
            timed("pair", dist.all_reduce, torch.ones(8), group=pair)
        timed("loss", dist.all_reduce, loss.detach().reshape(1))
        calls += per_step
        step += 1
        if eval_s is not None and step % 30 == 0 and step // 30 <= 3:  # the slow evaluations
            if rank == 0:
                began = time.time()
                if case == "slow_eval_stall" and step == 90:
                    facts["fault_at"] = began  # a stall inside the third eval: until a verdict names it
                    _wait_named(dump, rank, began, 280.0)
                else:
                    time.sleep(eval_s[step // 30 - 1])
                late.append((began, time.time(), "slow evaluation"))
                facts.setdefault("evals", []).append([began, time.time()])
            timed("eval barrier", dist.barrier)
            timed("metrics", dist.all_reduce, torch.ones(4))
            calls += 2
        elif step % 50 == 0:  # rank 0 evaluates; the others wait for it in a barrier, then the metrics
            if rank == 0:
                began = time.time()
                with torch.no_grad():
                    until = time.monotonic() + rng.uniform(0.3, 1.5)
                    while time.monotonic() < until:
                        model(x)
                if time.time() - began > 1.0:
                    late.append((began, time.time(), "evaluation"))
            timed("eval barrier", dist.barrier)
            timed("metrics", dist.all_reduce, torch.ones(4))
            calls += 2
        if step == 5 or step % 400 == 0:  # a checkpoint by rank 0, the others wait in barrier()
            if rank == 0:
                began = time.time()
                torch.save(model.state_dict(), os.path.join(work, "ckpt.pt"))
                time.sleep(rng.uniform(0.2, 2.5))
                if time.time() - began > 1.0:
                    late.append((began, time.time(), "checkpoint"))
            timed("checkpoint barrier", dist.barrier)
            calls += 1
    facts.update(calls=calls, steps=step, late=late, loop_s=time.time() - t0, source=obs.source)
    dist.barrier()  # every rank is past every hang: what the observer sent has been handled
    facts["signals"] = len(calls_seen)
    facts["waits_ms"] = waits
    with open(os.path.join(work, "rank%d.json" % rank), "w") as f:
        json.dump(facts, f)
    dist.barrier()
    c10d_observer.disable()


def _wait_named(dump, rank, since, limit):
    """Until a verdict merged after ``since`` names ``rank`` (at most ``limit`` s)."""
    while time.time() - since < limit:
        for path in glob.glob(os.path.join(dump, "verdict-*.json")):
            try:
                with open(path) as f:
                    v = json.load(f)["verdict"]
            except (OSError, ValueError, KeyError):
                continue
            if rank in (v.get("culprit_ranks") or ()) and (v.get("verdict_at") or 0) > since:
                return v
        time.sleep(0.05)
    return None


def evaluate(work, dump, world, case):
    """One run's row from its ranks' records and the merged verdicts."""
    ranks = [json.load(open(os.path.join(work, "rank%d.json" % r))) for r in range(world)]
    verdicts = []
    for path in glob.glob(os.path.join(dump, "verdict-*.json")):
        with open(path) as f:
            verdicts.append(json.load(f)["verdict"])
    verdicts.sort(key=lambda v: v.get("verdict_at") or 0)
    late = {r["rank"]: r["late"] for r in ranks}
    calls = sum(r["calls"] for r in ranks)
    fault = next((r.get("fault_at") for r in ranks if r.get("fault_at")), None)
    row = {"case": case, "source": ranks[0]["source"], "world": world, "collectives": calls,
           "steps": ranks[0]["steps"], "loop_s": round(max(r["loop_s"] for r in ranks), 1),
           "signals": sum(r["signals"] for r in ranks), "soft": 0, "soft_justified": 0, "soft_false": 0,
           "soft_under_10s": 0, "hard": 0, "summaries": []}
    evals = next((r.get("evals") for r in ranks if r.get("evals")), None)
    if evals:  # per slow eval: the verdicts merged while it lasted (and 5 s after)
        row["evals_s"] = [round(b - a, 1) for a, b in evals]
        row["verdicts_per_eval"] = [len([v for v in verdicts if a <= (v.get("verdict_at") or 0) <= b + 5.0])
                                    for a, b in evals]
    culprit = 0 if case in EVALS else world - 1
    for v in verdicts:
        h = v["hangs"][0]
        named_fault = fault is not None and (v.get("verdict_at") or 0) > fault and (
            culprit in (v.get("culprit_ranks") or ()))
        if named_fault and row.get("detect_s") is None:
            row["detect_s"] = round(v["verdict_at"] - fault, 2)
            row["detect_level"] = v["level"]
            continue
        row["hard" if v.get("level") == "hard" else "soft"] += 1
        if v.get("level") == "soft":
            began, seen = h.get("started_at") or 0, h.get("detected_at") or v["verdict_at"]
            why = [r for r in v.get("culprit_ranks") or () for a, b, _ in late.get(r, ()) if a <= seen and b >= began]
            row["soft_justified" if why else "soft_false"] += 1
            if (h.get("stuck_s") or 0) < 10.0:
                row["soft_under_10s"] += 1
        row["summaries"].append(v["summary"][:300])
    for k in ("soft", "soft_false", "soft_under_10s", "hard", "signals"):
        row[k + "_per_million_calls"] = round(1e6 * row[k] / calls, 2) if calls else None
    if case == "healthy":
        row["waits"] = healthy_waits([r.get("waits_ms") or {} for r in ranks])
    return row


RULES = {  # (floor s, margin(n)): the rule in deadlines.py, and variants it was chosen against
    "floor 10 s, 3 + 7/sqrt(n) (deadlines.py)": (10.0, lambda n: 3.0 + 7.0 / math.sqrt(n)),
    "floor 5 s, 3 + 7/sqrt(n)": (5.0, lambda n: 3.0 + 7.0 / math.sqrt(n)),
    "floor 10 s, 2 + 3/sqrt(n)": (10.0, lambda n: 2.0 + 3.0 / math.sqrt(n)),
    "floor 5 s, 4 (issue 26's, with 20 samples first)": (5.0, lambda n: 4.0 if n >= 20 else float("inf")),
}


def healthy_waits(per_rank):
    """What the ranks' calls took, per call site, measured in the rank (the learned deadlines' samples are the
    ages the watchdog saw at its polls: never longer): the longest, how many took over 1, 3 and 10 s; and, for
    each rule in RULES, how many of these calls would have been past the deadline the rule learns from the
    calls of the same site before them (the site's first call is a change of phase, not a sample): false
    alarms of that rule on healthy waits (benchmarks/README.md, "Learned deadlines")."""
    import bisect
    out = {"sites": {}, "past_the_deadline": {k: 0 for k in RULES}, "calls": 0}
    for waits in per_rank:
        for site, ms in waits.items():
            s = out["sites"].setdefault(site, {"calls": 0, "max_s": 0.0, "over_1s": 0, "over_3s": 0, "over_10s": 0})
            s["calls"] += len(ms)
            out["calls"] += len(ms)
            s["max_s"] = round(max(s["max_s"], max(ms) / 1e3 if ms else 0.0), 3)
            for k, t in (("over_1s", 1e3), ("over_3s", 3e3), ("over_10s", 1e4)):
                s[k] += len([m for m in ms if m > t])
            seen = []
            for i, m in enumerate(ms):
                if seen:
                    n = len(seen)
                    q = seen[-1] if n < 1000 else seen[-int(n * 0.001) - 1]
                    for name, (floor, margin) in RULES.items():
                        if m / 1e3 > max(floor, margin(n) * q / 1e3):
                            out["past_the_deadline"][name] += 1
                if i:
                    bisect.insort(seen, m)
    return out


def launcher(world, port):
    try:
        import torch.distributed.run  # noqa: F401  (torch 1.9+)
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=%d" % world,
                "--master_addr=127.0.0.1", "--master_port=%d" % port]
    except ImportError:
        return [sys.executable, "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node=%d" % world,
                "--master_addr=127.0.0.1", "--master_port=%d" % port]


def run(case, source, world, args, seed):
    base = tempfile.mkdtemp(prefix="c10d-fa-%s-%s-" % (case, source))
    work, dump = os.path.join(base, "work"), os.path.join(base, "dumps")
    os.makedirs(work)
    os.makedirs(dump)
    cmd = launcher(world, free_port()) + [os.path.abspath(__file__), "--rank-run", "--case", case, "--source",
                                          source, "--work", work, "--dump-dir", dump, "--seed", str(seed),
                                          "--collectives", str(args.collectives), "--steps", str(args.steps)]
    env = child_env(**{k: None for k in os.environ if k.startswith("C10D_OBSERVER")})
    rc, secs = run_logged(cmd, env, args.run_timeout, os.path.join(base, "run.log"))
    if rc != 0:
        return {"case": case, "source": source, "error": "rc %d after %.0f s; log %s" % (
            rc, secs, os.path.join(base, "run.log"))}
    row = evaluate(work, dump, world, case)
    row["seed"] = seed
    return row


def summarize(rows):
    out = []
    for case in CASES:
        for source in sorted({r["source"] for r in rows if r.get("case") == case}):
            rs = [r for r in rows if r.get("case") == case and r.get("source") == source and "error" not in r]
            if not rs:
                continue
            calls = sum(r["collectives"] for r in rs)
            det = [r["detect_s"] for r in rs if r.get("detect_s") is not None]
            s = {"case": case, "source": source, "runs": len(rs), "collectives": calls,
                 "missed": len([r for r in rs if case in ("stop", "early_stall", "slow_eval_stall")
                                and r.get("detect_s") is None])}
            for k in ("soft", "soft_false", "soft_under_10s", "hard", "signals"):
                n = sum(r[k] for r in rs)
                s[k] = n
                s[k + "_per_million_calls"] = round(1e6 * n / calls, 2) if calls else None
            if det:
                s["detect_s"] = summary(det, keys=("n", "min", "median", "p90", "max"))
            if case in EVALS:
                s["evals_s"] = [r.get("evals_s") for r in rs]
                s["verdicts_per_eval"] = [r.get("verdicts_per_eval") for r in rs]
            out.append(s)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--sources", default="auto,patch")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each stop / early_stall case")
    ap.add_argument("--collectives", type=int, default=100000, help="calls the ranks issue in a healthy run")
    ap.add_argument("--steps", type=int, default=450, help="steps of the pause case")
    ap.add_argument("--run-timeout", type=float, default=1800.0)
    ap.add_argument("--out", default=os.path.join(RESULTS, "false_alarms.json"))
    ap.add_argument("--cpu", action="store_true", help="the watchdog's CPU at ~1,000 calls/s instead")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rank-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cpu-rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--source", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--dump-dir", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_run:
        return rank_run(args)
    if args.cpu:
        return cpu(args)
    if args.cpu_rank:
        return cpu_rank(args)
    import torch
    rows = []
    for case in args.cases.split(","):
        for source in args.sources.split(","):
            for i in range(args.repeat if case in ("stop", "early_stall") + EVALS else 1):
                row = run(case, source, args.world, args, seed=1 + i)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "summaries"}), flush=True)
    summ = summarize(rows)
    table(["case", "source", "runs", "calls", "soft", "soft false", "soft <10 s", "hard", "signals",
           "detect p50 s", "detect max s", "missed"],
          [[s["case"], s["source"], s["runs"], s["collectives"], s["soft"], s["soft_false"], s["soft_under_10s"],
            s["hard"], s["signals"], "%.1f" % s["detect_s"]["median"] if s.get("detect_s") else None,
            "%.1f" % s["detect_s"]["max"] if s.get("detect_s") else None, s["missed"]] for s in summ])
    write_json(args.out, {"benchmark": "false_alarms", "date": today(), "machine": machine(),
                          "torch": torch.__version__, "world_size": args.world, "command": " ".join(sys.argv),
                          "summary": summ, "runs": rows})
    print("written:", args.out)


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


if __name__ == "__main__":
    main()
