"""Where the call path's time goes: instructions per 4-byte gloo all_reduce, counted by callgrind.

    python benchmarks/callpath_profile.py [--calls 1000] [--configs ...] [--top 0] [--json PATH]

Timings of a few microseconds move by more than that from one block to the next on a shared machine;
instruction counts do not (the same binary and inputs give the same count, whatever else runs).  Each
configuration runs in its own process, world size 1 (gloo, FileStore), under
``valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes``; counting is switched on with
``callgrind_control`` only around ``--calls`` timed calls, after a warm-up.  Printed and written to
``results/callpath_profile.json``: the main thread's instructions per call, and what each configuration
adds to the baseline's.

Configurations (those this torch cannot run are left out, with the reason):

* ``baseline``: nothing.
* ``pass_wrappers``: Python wrappers on ``ProcessGroup.allreduce`` and ``Work.wait`` that only pass their
  arguments through: the floor of any tool that wraps in Python.
* ``noop_hooks``: ``register_pre_hook``/``register_post_hook`` with hooks that do nothing (torch 2.14+):
  torch's own cost of calling Python hooks, the floor of the ``pg_hooks`` source.
* ``observer:<source>``: ``c10d_observer.enable(source=...)`` for each source ``capabilities()`` calls
  usable.
* ``observer:auto``: ``enable()`` with its default choice, under torch's own defaults (no flight-recorder
  variable set, where the other configurations set ``TORCH_FR_BUFFER_SIZE=2000``): what a user of this
  line pays.  ``.ci/matrix`` runs it on every line with ``PROFILE=1`` (``results/callpath/``;
  ``benchmarks/callpath_lines.py`` makes the table).

``--top N`` also prints, per configuration, the N functions whose own instruction count grew most over the
baseline (``callgrind_annotate``).  Needs valgrind (``valgrind``, ``callgrind_control``,
``callgrind_annotate`` on PATH); a run takes about 20 s per configuration.
"""
import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, child_env, write_json  # noqa: E402


# -- the worker: runs under valgrind ---------------------------------------------------------------------
def _handshake(work_dir, name):
    open(os.path.join(work_dir, name), "w").close()
    ack = os.path.join(work_dir, name + ".ack")
    while not os.path.exists(ack):
        time.sleep(0.05)


def worker(config, calls, work_dir):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + os.path.join(work_dir, "store"), rank=0,
                            world_size=1)
    from torch._C import _distributed_c10d as C
    pg_cls = C.ProcessGroup
    work_cls = getattr(C, "Work", None) or pg_cls.Work
    pg = dist.distributed_c10d._get_default_group()
    if config == "pass_wrappers":
        ar, wait = vars(pg_cls)["allreduce"], vars(work_cls)["wait"]

        @functools.wraps(ar)
        def allreduce(self, *a, **k):
            return ar(self, *a, **k)

        @functools.wraps(wait)
        def wait_(self, *a, **k):
            return wait(self, *a, **k)

        pg_cls.allreduce = allreduce
        work_cls.wait = wait_
    elif config == "noop_hooks":
        pg.register_pre_hook(7, lambda args: None)
        pg.register_post_hook(7, lambda args: None)
    elif config.startswith("observer:"):
        import c10d_observer
        c10d_observer.enable(timeout=60, dump_dir=os.path.join(work_dir, "dump"), source=config.split(":", 1)[1])
    t = torch.zeros(1)
    for _ in range(300):
        dist.all_reduce(t)
    _handshake(work_dir, "ready")
    for _ in range(calls):
        dist.all_reduce(t)
    _handshake(work_dir, "done")
    if config.startswith("observer:"):
        import c10d_observer
        c10d_observer.disable()
    dist.destroy_process_group()
    return 0


# -- the driver ------------------------------------------------------------------------------------------
def usable_configs():
    import c10d_observer
    from torch._C import _distributed_c10d as C
    out, skipped = ["baseline", "pass_wrappers"], {}
    if hasattr(C.ProcessGroup, "register_pre_hook"):
        out.append("noop_hooks")
    else:
        skipped["noop_hooks"] = "ProcessGroup.register_pre_hook absent (it comes with torch 2.14)"
    for name, s in c10d_observer.capabilities()["sources"].items():
        if s["usable"]:
            out.append("observer:" + name)
        else:
            skipped["observer:" + name] = s["reason"]
    out.append("observer:auto")
    return out, skipped


def _wait_for(path, proc, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("the worker exited (%s) before %s" % (proc.returncode, os.path.basename(path)))
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for %s" % os.path.basename(path))
        time.sleep(0.2)


def _totals(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"(?:totals|summary):\s+(\d+)", line)
            if m and int(m.group(1)):
                return int(m.group(1))
    return 0


def _self_costs(path):
    """{function: own instructions} from callgrind_annotate."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2):
            name = m.group(2).split(" [")[0]
            name = name.split(":", 1)[1] if name[:1] in "/.?" else name
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out


def run_config(config, calls, timeout):
    work_dir = tempfile.mkdtemp(prefix="c10d_observer-cg-")
    try:
        env = child_env(OMP_NUM_THREADS=1, PYTHONHASHSEED=0,
                        TORCH_FR_BUFFER_SIZE=os.environ.get("TORCH_FR_BUFFER_SIZE", "2000"))
        if config == "observer:auto":  # torch's defaults: what auto does for a user who set nothing
            for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
                env.pop(name, None)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               "--callgrind-out-file=" + os.path.join(work_dir, "cg.%p"), sys.executable, os.path.abspath(__file__),
               "--worker", config, str(calls), work_dir]
        with open(os.path.join(work_dir, "log"), "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                _wait_for(os.path.join(work_dir, "ready"), proc, timeout)
                subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                open(os.path.join(work_dir, "ready.ack"), "w").close()
                _wait_for(os.path.join(work_dir, "done"), proc, timeout)
                subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                open(os.path.join(work_dir, "done.ack"), "w").close()
                proc.wait(timeout=timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        main = os.path.join(work_dir, "cg.%d-01" % proc.pid)
        if proc.returncode != 0 or not os.path.exists(main):
            with open(os.path.join(work_dir, "log")) as f:
                raise RuntimeError("%s: worker failed (%s): %s" % (config, proc.returncode, f.read()[-2000:]))
        return _totals(main), _self_costs(main)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1], int(argv[2]), argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="counted calls per configuration (default 1000)")
    ap.add_argument("--configs", default=None, help="comma-separated (default: every usable one)")
    ap.add_argument("--top", type=int, default=0, help="also print the N functions that grew most")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per configuration step")
    ap.add_argument("--json", default=os.path.join(RESULTS, "callpath_profile.json"))
    args = ap.parse_args(argv)
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if shutil.which(tool) is None:
            print("callpath_profile: %s not found on PATH (install valgrind)" % tool, file=sys.stderr)
            return 2
    import torch
    configs, skipped = usable_configs()
    if args.configs:
        wanted = args.configs.split(",")
        configs = [c for c in wanted if c in configs or c == "baseline"]
        if "baseline" not in configs:
            configs.insert(0, "baseline")
    res, costs = {}, {}
    for c in configs:
        total, costs[c] = run_config(c, args.calls, args.timeout)
        res[c] = total / float(args.calls)
        print("%-26s %8.0f instructions per call (main thread)" % (c, res[c]), flush=True)
    base = res["baseline"]
    print("added to the baseline's %.0f instructions per call:" % base)
    for c in configs[1:]:
        print("  %-26s %+8.0f" % (c, res[c] - base))
        if args.top:
            b = costs["baseline"]
            grew = sorted(costs[c], key=lambda k: -(costs[c][k] - b.get(k, 0)))[:args.top]
            for k in grew:
                print("      %+7.0f  %s" % ((costs[c][k] - b.get(k, 0)) / float(args.calls), k[-100:]))
    for n, why in sorted(skipped.items()):
        print("left out: %s: %s" % (n, why))
    import platform
    auto = None
    if "observer:auto" in configs:  # the plan auto follows under torch's defaults, from a fresh probe
        code = ("import json, os\n[os.environ.pop(n, None) for n in ('TORCH_FR_BUFFER_SIZE', "
                "'TORCH_NCCL_TRACE_BUFFER_SIZE')]\nimport c10d_observer\nc = c10d_observer.capabilities()\n"
                "print(json.dumps([c['auto'], c['auto_plan']['cells']['collective']['gloo']]))")
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, universal_newlines=True,
                             env=child_env())
        auto = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    write_json(args.json, {
        "benchmark": "callpath_profile", "format_version": 1, "torch_version": torch.__version__,
        "python_version": platform.python_version(), "calls": args.calls, "backend": "gloo", "world_size": 1,
        "unit": "instructions per call, main thread (callgrind)", "instructions_per_call": res,
        "added_per_call": dict((c, res[c] - base) for c in configs[1:]), "skipped_configs": skipped,
        "auto": {"source": auto[0], "gloo_collectives": auto[1]} if auto else None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
