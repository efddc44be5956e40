"""pytest --c10d-observer: a distributed test whose ranks hang in a collective fails within the timeout and a
few seconds, with the verdict naming the rank that never arrived, and leaves no process running.  The
inner pytest runs real ranks (mp.spawn, gloo); it needs the package's .pth, as the tox envs have."""
import os
import re
import subprocess
import sys
import time

import pytest

from harness import ROOT, pid_alive

from c10d_observer import _autostart



def _entry_point():
    """Whether pytest finds the plugin by its pytest11 entry point (the package installed from its wheel)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 is not supported anyway
        return False
    eps = metadata.entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    return any(ep.value == "c10d_observer.pytest_plugin" for ep in group)


pytestmark = [pytest.mark.full,  # tests/README.md: the full tier
              pytest.mark.skipif(not (_autostart.pth_installed() and _entry_point()),
                                 reason="the package is not installed from its wheel (no c10d_observer.pth or no "
                                        "pytest11 entry point), as the tox envs install it")]

INNER = '''
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

def _rank(rank, store, hang):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    t = torch.ones(4)
    dist.all_reduce(t)
    if hang and rank == 1:
        time.sleep(600)  # skips the second all_reduce: rank 0 waits in it
    dist.all_reduce(t)
    dist.destroy_process_group()

def test_hangs(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), True), nprocs=2)

def test_healthy(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), False), nprocs=2)
'''


def test_a_hung_distributed_test_fails_fast_with_the_verdict(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest", "--c10d-observer=3",
                          "-p", "no:cacheprovider", "-o", "addopts=", "-q", str(tmp_path / "test_inner.py")],
                         cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=300)
    took = time.monotonic() - t0
    text = out.stdout
    assert out.returncode == 1, text
    assert re.search(r"1 failed, 1 passed", text), text
    assert "FAILED" in text and "test_hangs" in text and "test_healthy" not in text.split("short test summary")[-1]
    assert "never arrived: rank 1" in text and "culprit ranks: 1" in text, text
    assert took < 120, took  # not the 600 s the culprit sleeps
    pids = [int(p) for p in re.findall(r"ranks ended: ([\d, ]+)", text)[0].split(",")]
    assert len(pids) == 2 and not any(pid_alive(p) for p in pids), pids  # nothing left running
