"""The command line: `run` under a real launcher (no code change), `report`, `demo`."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from harness import ROOT, free_port, no_timeout_env, timings, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    for k in list(env):
        if k.startswith("C10D_OBSERVER_"):
            del env[k]
    env.update(extra)
    return env




def _launcher(nproc):
    """torchrun --standalone (a free port) where torch has it; else torch.distributed.launch (torch 1.8)."""
    try:
        import torch.distributed.run  # noqa: F401  (torch 1.9+)
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % nproc]
    except ImportError:
        return [sys.executable, "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node=%d" % nproc,
                "--master_addr=127.0.0.1", "--master_port=%d" % free_port()]


def _reports(d):
    return sorted(n for n in os.listdir(d) if n.startswith("report-rank"))


def test_run_under_the_launcher_needs_no_code_change(tmp_path):
    dump = tmp_path / "dumps"
    release = tmp_path / "release"
    cmd = _launcher(2) + ["-m", "c10d_observer", "run", "--timeout", "1", "--dump-dir", str(dump),
                          os.path.join(HERE, "train_script.py"), str(release)]
    log = open(str(tmp_path / "launcher.log"), "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env())
    try:
        wait_until(lambda: dump.is_dir() and _reports(str(dump)), 90, "a report from the waiting rank")
        wait_until(lambda: (dump / "verdict.json").exists(), 60, "the verdict")
        release.touch()
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
    assert _reports(str(dump)) == [n for n in _reports(str(dump)) if n.startswith("report-rank0-")], out
    assert "rank 0 finished: 4.0" in out and "rank 1 finished: 4.0" in out, out

    rep = subprocess.run([sys.executable, "-m", "c10d_observer", "report", str(dump)], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert rep.returncode == 3, rep.stdout  # a hang was found, and it resolved once the script was released
    assert "OVERDUE all_reduce #2 on group" in rep.stdout and "ranks 0-1" in rep.stdout, rep.stdout
    assert "never arrived: rank 1" in rep.stdout and "completed later" in rep.stdout, rep.stdout
    assert "after: rank 1 was" in rep.stdout and "late at all_reduce #2, then caught up" in rep.stdout, rep.stdout


def test_a_bad_variable_under_the_launcher_is_said_once_per_node_and_the_job_runs_unobserved(tmp_path):
    """Issue 32: every rank reads the same bad C10D_OBSERVER_TIMEOUT: one line for the node (local rank 0)
    naming it and what is accepted, not one per rank; the observer stays off and the script runs (the job is
    never harmed by the observer's own faults), as under C10D_OBSERVER=1 and enable()."""
    ran = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text("open(%r, 'a').write('x')\n" % str(ran))
    cmd = _launcher(2) + ["-m", "c10d_observer", "run", str(script)]
    out = subprocess.run(cmd, env=_env(C10D_OBSERVER_TIMEOUT="soon"), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 0 and ran.read_text() == "xx", out.stdout
    lines = [ln for ln in out.stdout.splitlines() if "c10d_observer: not enabled:" in ln]
    assert len(lines) == 1 and "C10D_OBSERVER_TIMEOUT" in lines[0] and "'soon'" in lines[0], out.stdout
    assert "goes on unobserved" in lines[0] and "Traceback" not in out.stdout, out.stdout


def test_report_of_a_job_without_hangs(job_factory, tmp_path):
    """A job that ran without a hang leaves each rank's final state: report says so, exit 0 (an empty
    folder is an error: tests/unit/test_report_command.py)."""
    # no step 99: nobody stalls; at the defaults users get (a healthy job waits for nothing)
    job = job_factory("skip", 2, culprit=1, step=99, timeout=30.0, timing=None)
    assert job.finish() == [0, 0], job.log_text()
    rep = subprocess.run([sys.executable, "-m", "c10d_observer", "report", job.dump_dir], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert rep.returncode == 0, rep.stdout
    assert "0 stuck call(s); ranks reporting 0-1 of 2" in rep.stdout, rep.stdout
    missing = subprocess.run([sys.executable, "-m", "c10d_observer", "report", str(tmp_path / "nope")],
                             env=_env(), stderr=subprocess.PIPE, universal_newlines=True)
    assert missing.returncode == 2 and "not a directory" in missing.stderr


def test_run_rejects_bad_input_before_running_the_script(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("open(%r, 'w').close()\n" % str(tmp_path / "ran"))
    bad = subprocess.run([sys.executable, "-m", "c10d_observer", "run", "--timeout", "-1", str(script)],
                         env=_env(), stderr=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path))
    assert bad.returncode != 0 and "timeout" in bad.stderr
    assert not (tmp_path / "ran").exists()
    env_bad = subprocess.run([sys.executable, "-m", "c10d_observer", "run", str(script)],
                             env=_env(C10D_OBSERVER_TIMEOUT="soon"), stderr=subprocess.PIPE,
                             universal_newlines=True, cwd=str(tmp_path))
    # a bad variable is not run's option: one line, and the script runs unobserved (issue 32)
    assert env_bad.returncode == 0 and "C10D_OBSERVER_TIMEOUT" in env_bad.stderr, env_bad.stderr
    assert (tmp_path / "ran").exists()


def test_demo_shows_the_detection(tmp_path):
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "demo", "--ranks", "3", "--culprit", "1",
                          "--timeout", "1", "--dump-dir", str(tmp_path)], env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 0, out.stdout
    assert "waiting in it: ranks 0, 2" in out.stdout, out.stdout
    assert "never arrived: rank 1 (" in out.stdout and "culprit ranks: 1\n" in out.stdout
    assert "all 3 ranks finished" in out.stdout


@pytest.mark.skipif(shutil.which("c10d-observer") is None, reason="the package is not installed (tox installs it)")
def test_console_script_has_the_same_subcommands():
    out = subprocess.run(["c10d-observer", "--help"], stdout=subprocess.PIPE, universal_newlines=True)
    assert out.returncode == 0
    for sub in ("run", "report", "demo"):
        assert sub in out.stdout


@pytest.mark.full  # tests/README.md: the full tier
def test_two_nodes_on_loopback_gather_through_the_c10d_store(tmp_path):
    """Two torchrun agents (--nnodes=2, c10d rendezvous on loopback), two ranks each, each node with its
    own dump_dir: the node that merges the verdict gets the other node's states through the store."""
    try:
        import torch.distributed.run  # noqa: F401  (torch 1.9+)
    except ImportError:
        pytest.skip("torch 1.8 has no torchrun with c10d rendezvous")
    release = tmp_path / "release"
    port = free_port()
    dumps = [tmp_path / ("node%d" % n) for n in (0, 1)]
    procs, logs = [], []
    for n in (0, 1):
        log = open(str(tmp_path / ("agent%d.log" % n)), "w+")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=2",
               "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=two-nodes",
               "--max_restarts=0", "-m", "c10d_observer", "run", "--timeout", "1", "--dump-dir", str(dumps[n]),
               os.path.join(HERE, "train_script.py"), str(release), "3"]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env()))
        logs.append(log)

    def verdicts():
        return [str(d / "verdict.json") for d in dumps if (d / "verdict.json").exists()]

    def text():
        out = []
        for log in logs:
            log.seek(0)
            out.append(log.read())
        return "\n----\n".join(out)

    try:
        # one node merges (both may have detected at once: the request numbered first wins), and its
        # verdict goes back to the other node through the store
        wait_until(lambda: len(verdicts()) == 2, 120, "the verdict on both nodes\n" + text())
        found = {}
        for path in verdicts():
            found[path] = wait_until(lambda: _complete(path), 30, "the verdict in %s to hear from all 4 ranks"
                                     % os.path.dirname(path))
        # read before the release: on a busy machine a later call may be overdue too and gathered again
        relayed = {p: _relayed_ranks(os.path.dirname(p)) for p in found}
        release.touch()
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        out = text()
        for log in logs:
            log.close()
    assert codes == [0, 0], out
    for d in dumps:  # after the job, on either node: the same culprit, and the hang resolved (issue 24)
        from harness import assert_caught_up
        # each rank's watchdog writes its end document once it sees the rank gone, after the agent's exit
        wait_until(lambda: len([n for n in os.listdir(str(d)) if n.startswith("end-rank")]) >= 2, 30,
                   "the end documents of the two ranks of %s\n%s" % (d, out))
        assert_caught_up(str(d), 3)
    for path, v in found.items():
        assert v["culprit_ranks"] == [3], (path, v["summary"], out)
        assert v["ranks_reporting"] == [0, 1, 2, 3] and v["ranks_silent"] == [], (path, v)
        h = [h for h in v["hangs"] if h["root"]][0]
        assert h["missing_ranks"] == [3] and h["waiting_ranks"] == [0, 1, 2]
        assert h["missing"]["3"]["state"] == "no_collective", h["missing"]
    merged = [p for p, v in found.items() if not v.get("relayed_from")]
    assert len(merged) == 1, found  # one merge for the job, not one per node
    for path, v in found.items():
        if path not in merged:
            assert v["relayed_from"].startswith("the node of rank") and relayed[path] == [], (path, relayed)
            assert v["summary"] == found[merged[0]]["summary"]
            continue
        # the other node's states came through the store (the nodes share no dump_dir)
        assert len(relayed[path]) == 2, relayed
        if 3 in relayed[path]:  # the culprit's stack came along with its state
            assert any("train_script.py" in f for g in v["stack_groups"] if 3 in g["ranks"] for f in g["frames"])


def _two_agents_with_a_straggler(tmp_path, rdzv_id, mesh=False):
    """Two torchrun agents on loopback, two ranks each, each node with its own dump_dir, running
    straggler_script.py with rank 3 (on the second node) 40 % slower every step (``mesh``: its 2x2 mesh): (the
    first node's dump_dir that named a straggler, that group, every (stream, rank) any node's join named while
    the job ran, the dump_dirs, the work dir, the agents' output).  Skips on torch 1.8 (no torchrun)."""
    try:
        import torch.distributed.run  # noqa: F401  (torch 1.9+)
    except ImportError:
        pytest.skip("torch 1.8 has no torchrun with c10d rendezvous")
    port = free_port()
    dumps = [tmp_path / ("node%d" % n) for n in (0, 1)]
    work = tmp_path / "work"
    work.mkdir()
    procs, logs = [], []
    for n in (0, 1):
        log = open(str(tmp_path / ("agent%d.log" % n)), "w+")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=2",
               "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=%s" % rdzv_id,
               "--max_restarts=0", "-m", "c10d_observer", "run", "--dump-dir", str(dumps[n]),
               os.path.join(HERE, "straggler_script.py"), str(work), "400", "0.1", "3", "1.4"] + (["mesh"] if mesh
                                                                                                else [])
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env()))
        logs.append(log)
    every = set()  # (stream, rank) named by any node's join at any time

    def named():
        found = None
        for d in dumps:
            try:
                with open(str(d / "stragglers.json")) as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                continue
            for g in doc.get("groups") or ():
                if g.get("straggler"):
                    every.add((g["stream"], g["straggler"]["rank"]))
                    if found is None and (mesh or len(g["ranks"]) == 4):
                        found = d, g
        return found

    try:
        here, g = wait_until(named, 300, "the straggler named on a node")
        deadline = time.time() + 150
        for p in procs:  # the job runs on: whoever else a join names meanwhile
            while p.poll() is None and time.time() < deadline:
                named()
                try:
                    p.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    pass
        named()
        codes = [p.wait(timeout=150) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.seek(0)
        out = "\n----\n".join(log.read() for log in logs)
        for log in logs:
            log.close()
    assert codes == [0, 0], out
    return here, g, every, dumps, work, out


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.timeout(480)
def test_a_straggler_on_another_node_is_named(tmp_path):
    """Issue 31: two torchrun agents on loopback, two ranks each, each node with its own dump_dir; rank 3 (on
    the second node) computes 40 % longer every step.  Its starts reach the first node's join through the
    store (relay.py), in that node's clock (arrivals.clock_offsets), and it is named well before the end; and
    (issue 44) that join reaches the other node too, whose report and watch name it (arrivals.read)."""
    from c10d_observer import arrivals
    here, g, _, dumps, work, out = _two_agents_with_a_straggler(tmp_path, "two-nodes-s")
    assert g["straggler"]["rank"] == 3 and g["straggler"]["median_lag_s"] > 0.02, (g, out)
    for d in dumps:  # every node names it: its own join, or the one the relay brought
        seen = [x for x in (arrivals.read(str(d)) or {}).get("groups") or () if len(x["ranks"]) == 4]
        assert seen and (seen[0].get("straggler") or {}).get("rank") == 3, (str(d), seen, out)
    # the other node's starts came through the store (no shared dump_dir)
    assert [n for n in os.listdir(str(here)) if n.startswith("arrivals-node-")], os.listdir(str(here))
    with open(str(work / "rank3.json")) as f:
        step_at = json.load(f)["step_at"]
    steps_before = len([s for s, t in step_at.items() if t <= g["straggler"]["since"]])
    # the target (named within 100 steps) is a timing figure: measured alone it held (issue 31's note); under
    # a loaded machine (this suite beside it, 2 cores) a run took 113, and CI's run on 2.15 more than 150 (the
    # job then ended unnamed).  The rule needs 20 calls to agree on the other node's clock and 50 calls apart
    # before it names anyone, plus a join period: a generous margin here, in a job long enough for it
    print("straggler named after %d steps of rank 3" % steps_before)
    assert steps_before <= 250, (steps_before, g)


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.timeout(480)
def test_in_a_mesh_over_two_nodes_the_slow_rank_is_named_and_the_rank_it_held_on_its_node_never(tmp_path):
    """A data-parallel job over two nodes with tensor parallelism within each (straggler_script.py's mesh: tp
    [2, 3] on the second node, dp [0, 2] and [1, 3] across), rank 3 slow.  Rank 2 waits for it in tp and is last
    at its dp call with rank 0 by rank 3's lateness; the first node, which joins the dp groups, has no tp call of
    the second node's, and named nobody (95b8dc5): the second node's relay now sends what its ranks went
    through in between (relay_arrivals.NodeWalks), and rank 3 is named, rank 2 never, on every node."""
    from c10d_observer import arrivals
    here, g, every, dumps, _, out = _two_agents_with_a_straggler(tmp_path, "two-nodes-mesh", mesh=True)
    assert {r for _, r in every} == {3}, (every, out)
    for d in dumps:  # every node names it: its own join, or the one the relay brought
        seen = [x["straggler"]["rank"] for x in (arrivals.read(str(d)) or {}).get("groups") or () if x.get("straggler")]
        assert seen and set(seen) == {3}, (str(d), seen, out)


def _complete(path):
    """The verdict at ``path`` once it hears from all 4 ranks, else None."""
    try:
        with open(path) as f:
            v = json.load(f)
        return v if v["ranks_reporting"] == [0, 1, 2, 3] else None
    except (OSError, ValueError, KeyError):
        return None


def _relayed_ranks(here):
    """Ranks whose states came from the other node (written there as one file per node)."""
    from c10d_observer import documents
    docs = [d for n in os.listdir(here) if n.startswith("state") for d in documents.load(os.path.join(here, n))]
    return sorted(d.rank for d in docs if d.relayed_from)


def test_run_keeps_the_handler_the_script_installs_at_its_top(tmp_path):
    """Issue 31: under run, the SIGUSR1 handler a script installs at its top (PyTorch Lightning's, for Slurm's
    requeue) runs on each rank that waited, at the hard verdict, as under C10D_OBSERVER=1; never on the
    culprit.  (run enables the observer once the script's process group exists.)"""
    dump = tmp_path / "dumps"
    release = tmp_path / "release"
    cmd = _launcher(2) + ["-m", "c10d_observer", "run", "--timeout", "1", "--dump-dir", str(dump),
                          os.path.join(HERE, "handler_script.py"), str(release), "1"]
    log = open(str(tmp_path / "launcher.log"), "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env())
    try:
        wait_until(lambda: (dump / "verdict.json").exists(), 90, "the verdict")
        wait_until(lambda: any(n.startswith("notify-pid") for n in os.listdir(str(dump))), 30,
                   "the signal to the rank that waited")
        release.touch()
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
    assert "rank 0 handler calls: 1" in out and "rank 1 handler calls: 0" in out, out
    assert "handler was replaced" not in out, out


def test_run_a_module_and_keep_runs_own_options_out_of_the_script(tmp_path):
    """Issue 13: `run -m package.module args...`; run's own options after the script are refused (they
    would go to the script), unless after '--'."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(  # the observer starts with the module's process group
        "import os, sys, torch.distributed as dist\n"
        "dist.init_process_group('gloo', init_method='file://' + os.path.abspath('store'), rank=0, world_size=1)\n"
        "print('module args', sys.argv[1:])\n")
    (tmp_path / "s.py").write_text("import sys\nprint('script args', sys.argv[1:])\n")
    dump = str(tmp_path / "dumps")

    def run(*argv):
        return subprocess.run([sys.executable, "-m", "c10d_observer", "run", "--dump-dir", dump] + list(argv),
                              env=_env(), cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)

    out = run("--timeout", "1m", "-m", "pkg.train", "--lr", "3")
    assert out.returncode == 0 and "module args ['--lr', '3']" in out.stdout, out
    # one start-up line by default (local rank 0): the source, the timeout, where reports go
    assert out.stderr.count("c10d_observer: watching collectives with source") == 1, out.stderr
    assert "timeout 60 s" in out.stderr and dump in out.stderr, out.stderr
    out = run("s.py", "--timeout", "5")
    assert out.returncode == 2 and "script args" not in out.stdout, out
    assert out.stderr.count("\n") == 1 and "--timeout after the script" in out.stderr, out.stderr
    out = run("s.py", "--", "--timeout", "5")
    assert out.returncode == 0 and "script args ['--timeout', '5']" in out.stdout, out
    out = run("s.py", "--epochs", "2")  # the script's own options pass
    assert out.returncode == 0 and "script args ['--epochs', '2']" in out.stdout, out


def test_run_and_ranks_started_with_mp_spawn(tmp_path):
    """Where the package is installed with its .pth (the tox envs), run hands its settings to the ranks the
    script starts with mp.spawn, which are then observed; else it says once that they are not."""
    from c10d_observer import _autostart
    (tmp_path / "spawner.py").write_text(
        "import os, sys, torch.distributed as dist, torch.multiprocessing as mp\n"
        "def rank_fn(i, store):\n"
        "    dist.init_process_group('gloo', init_method='file://' + store, rank=0, world_size=1)\n"
        "    obs = sys.modules.get('c10d_observer.observer')\n"
        "    print('observed' if obs is not None and obs.active() is not None else 'not observed', flush=True)\n"
        "    print('dir', obs.active().config.dump_dir if obs and obs.active() else None, flush=True)\n"
        "    dist.destroy_process_group()\n"
        "if __name__ == '__main__':\n"
        "    mp.spawn(rank_fn, args=(sys.argv[1],), nprocs=1)\n"
        "    print('spawned')\n")
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "run", "--dump-dir", str(tmp_path / "d"),
                          "--timeout", "45", "spawner.py", str(tmp_path / "store")], env=_env(), cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=180)
    assert out.returncode == 0 and "spawned" in out.stdout, out
    if _autostart.pth_installed():
        assert "\nobserved\n" in "\n" + out.stdout, out
        assert "dir %s" % (tmp_path / "d") in out.stdout, out  # run's settings, not the defaults
        assert "are not watched" not in out.stderr, out.stderr
    else:
        assert "not observed" in out.stdout, out
        assert out.stderr.count("torch.multiprocessing.spawn are not watched") == 1, out.stderr
        assert "c10d_observer.enable()" in out.stderr


@pytest.mark.parametrize("timing", timings())
def test_the_demo_needs_no_timeout(tmp_path, timing):
    """The README's demo: no timeout chosen; the deadlines are learned from the steps before the stall, and
    the verdict (soft) names the rank that never arrived."""
    extra = dict(no_timeout_env(timing), C10D_OBSERVER_TIMING=timing) if timing else {}
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "demo", "--ranks", "3", "--culprit", "2",
                          "--dump-dir", str(tmp_path)], env=_env(**extra), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=180)
    assert out.returncode == 0, out.stdout
    assert "no timeout chosen" in out.stdout and "(soft: past its learned deadline of" in out.stdout, out.stdout
    assert "never arrived: rank 2 (" in out.stdout and "culprit ranks: 2\n" in out.stdout, out.stdout
