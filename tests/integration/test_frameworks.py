"""In the frameworks users run (issue 41): a hung job cancelled as users cancel it (Ctrl-C, scancel, a time
limit: SIGTERM to the launcher) keeps the first hang's verdict, whatever the framework does on the way down.

PyTorch Lightning's SIGTERM handler runs on the culprit (in Python) and calls ``dist.broadcast`` while the
others still wait in their call at the same seq: that used to be merged as a new verdict ("different ops at
the same seq") and replace the right one (no culprit with 2 ranks; with 4, rank 1 only as the odd one out).
The record, ``report``, ``--json``, ``--exclude`` and the page lead with the first verdict; a later merge is
said as what happened after.  Real Lightning and Accelerate (installed from PyPI in the torch 2.13 full tier),
a plain DDP job with ``destroy_process_group`` in a ``finally``; the full tier (tests/README.md)."""
import glob
import json
import os
import signal
import site
import subprocess
import sys

import pytest

from harness import ROOT, TEST_TIMING, free_port, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPES = os.path.join(ROOT, "examples", "recipes")

pytestmark = [pytest.mark.full, pytest.mark.timeout(600)]


def _pth():
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return [p for d in dirs for p in glob.glob(os.path.join(d, "c10d_observer.pth"))]


def _needs(module):
    try:
        __import__(module)
    except ImportError:
        return pytest.mark.skip(reason="%s is not installed (the torch 2.13 full tier installs it)" % module)
    return pytest.mark.skipif(not _pth(), reason="c10d_observer.pth is not installed (install the package from "
                                                 "its wheel, as the tox envs do)")


def _torchrun(world, script):
    """torchrun (torch.distributed.launch --use_env on 1.8, which has no torch.distributed.run)."""
    try:
        import torch.distributed.run  # noqa: F401
        launch = ["torch.distributed.run"]
    except ImportError:
        launch = ["torch.distributed.launch", "--use_env"]
    return [sys.executable, "-m"] + launch + ["--nproc_per_node=%d" % world, "--master_addr=127.0.0.1",
                                              "--master_port=%d" % free_port(), script]


def _named(dump, culprit):
    """The first hard record that names ``culprit``, or None."""
    for p in sorted(glob.glob(os.path.join(dump, "verdict-*.json"))):
        try:
            v = json.load(open(p))["verdict"]
        except (OSError, ValueError, KeyError):
            continue
        if culprit in (v.get("culprit_ranks") or ()) and v.get("level") == "hard":
            return v
    return None


def _cancel_hung_job(tmp_path, cmd, culprit, **env_extra):
    """Run ``cmd`` under C10D_OBSERVER=1 (timeout 3 s, the tests' timing) until a hard verdict names
    ``culprit``, then SIGTERM the launcher as a user's Ctrl-C or scancel does; (first verdict, console)."""
    dump = str(tmp_path / "dumps")
    env = {k: v for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER")}
    env.update(C10D_OBSERVER="1", C10D_OBSERVER_TIMEOUT="3", C10D_OBSERVER_DIR=dump,
               C10D_OBSERVER_TIMING=TEST_TIMING, STALL_STEP="5", STALL_S="3600", CULPRIT=str(culprit),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p), **env_extra)
    log = open(str(tmp_path / "job.log"), "w+")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(tmp_path),
                            start_new_session=True)
    first = []
    try:
        def named():
            v = _named(dump, culprit)
            if v is not None:
                first.append(v)
            return first or proc.poll() is not None
        wait_until(named, 240, "a hard verdict naming rank %d in %s" % (culprit, dump))
        assert first, "the job ended before a verdict: %s" % open(str(tmp_path / "job.log")).read()
        proc.send_signal(signal.SIGTERM)  # to the launcher only: it ends its workers, as torchrun does
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
    return dump, first[0], out


def _report(dump, *args):
    return subprocess.run([sys.executable, "-m", "c10d_observer", "report", dump] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)


def _assert_the_first_verdict_stays(tmp_path, dump, first, out, culprit):
    doc = json.loads(_report(dump, "--json").stdout)
    assert doc["gather_id"] == first["gather_id"] and doc["culprit_ranks"] == [culprit], (
        doc["summary"], [o.get("summary") for o in doc.get("other_verdicts") or ()], out[-3000:])
    nodes = _report(dump, "--exclude").stdout.split()
    assert nodes == [first["culprits"][0]["node"]], nodes
    page = str(tmp_path / "page.html")
    _report(dump, "--html", page)
    html = open(page).read()
    assert first["summary"].split(":")[1].strip()[:30].replace("&", "&amp;") in html or "rank %d" % culprit in html
    # any verdict merged after it (the framework's teardown) is said as what happened after, never instead
    later = [line for line in out.splitlines() if "c10d_observer[watchdog]" in line and "(verdict: " in line]
    assert len(later) >= 1 and "rank %d" % culprit in later[0], out[-3000:]
    for o in doc.get("other_verdicts") or ():
        if (o.get("verdict_at") or 0) > first["verdict_at"]:
            assert "stays the job's verdict (culprit ranks: %d)" % culprit in out, out[-3000:]


@_needs("lightning")
@pytest.mark.parametrize("world", [2, 4])
def test_a_hung_lightning_job_cancelled_by_sigterm_keeps_its_first_verdict(tmp_path, world):
    dump, first, out = _cancel_hung_job(tmp_path, _torchrun(world, os.path.join(RECIPES, "lightning_hang.py")), 1,
                                        LOCAL_WORLD_SIZE=str(world))
    _assert_the_first_verdict_stays(tmp_path, dump, first, out, 1)


@_needs("accelerate")
def test_a_hung_accelerate_job_cancelled_by_sigterm_keeps_its_first_verdict(tmp_path):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
           str(free_port()), os.path.join(RECIPES, "accelerate_hang.py")]
    dump, first, out = _cancel_hung_job(tmp_path, cmd, 1)
    _assert_the_first_verdict_stays(tmp_path, dump, first, out, 1)


@pytest.mark.skipif(not _pth(), reason="c10d_observer.pth is not installed (the tox envs install it)")
def test_a_hung_ddp_job_with_destroy_process_group_in_finally_keeps_its_first_verdict(tmp_path):
    dump, first, out = _cancel_hung_job(tmp_path, _torchrun(2, os.path.join(HERE, "ddp_finally_job.py")), 1)
    _assert_the_first_verdict_stays(tmp_path, dump, first, out, 1)
