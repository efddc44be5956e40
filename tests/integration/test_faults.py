"""The observer's own faults never harm the job (issue 25): real ranks, real watchdogs, real filesystems.

A full /dev/shm is made in a private mount namespace of each rank (``unshare --mount``: the machine's own
/dev/shm is never touched); a full dump_dir is a small tmpfs mounted over the job's dump_dir for the test.
Both need root (CAP_SYS_ADMIN) and skip without it.  The killed and the stopped watchdog are in
test_lifecycle.py; torchrun's summary under on_timeout="abort" is here.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from harness import HERE, ROOT, free_port, read_verdict, wait_until


def _can_mount():
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs -o size=64k tmpfs /mnt"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_mount = pytest.mark.skipif(not _can_mount(), reason="mounting a tmpfs needs root (unshare --mount)")


def _full_dev_shm(extra=""):
    """A rank's command prefix: its own /dev/shm, 1 MiB, filled before the rank starts."""
    setup = ("mount -t tmpfs -o size=1m tmpfs /dev/shm && dd if=/dev/zero of=/dev/shm/fill bs=64k count=64 "
             "2>/dev/null; %s exec \"$@\"" % extra)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh"]


@needs_mount
def test_a_full_dev_shm_never_harms_the_rank_and_the_hang_is_still_reported(job_factory):
    """The channel's pages are reserved when it is made: on a full /dev/shm that is an error, and the
    channel goes to the temporary directory (the rank died of SIGBUS when they were first written)."""
    job = job_factory("skip", 2, culprit=1, step=2, timeout=1.0, wrap=_full_dev_shm())
    rep = job.wait_report(0)
    v = read_verdict(job.dump_dir, 60, job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert rep["overdue"][0]["seq"] == 3 and v["culprit_ranks"] == [1], v["summary"]
    assert "Bus error" not in job.log_text() and "not enabled" not in job.log_text()


OFF = r"""
import datetime, os, sys
import torch, torch.distributed as dist
import c10d_observer
from c10d_observer import channel
channel.directories = lambda: ["/dev/shm", sys.argv[2]]  # this machine's temporary directory is not full
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
obs = c10d_observer.enable(timeout=5, dump_dir=sys.argv[3])
t = torch.ones(2)
dist.all_reduce(t)
print("active", obs.active, "watchdog", obs.watchdog_pid, "result", t[0].item())
c10d_observer.disable()
"""


@needs_mount
def test_no_room_for_the_channel_anywhere_leaves_the_observer_off_in_one_line(tmp_path):
    """Both of the channel's places full (/dev/shm, and a full tmpfs standing in for the temporary
    directory): one line, an observer that is off, and the rank's collectives go on."""
    full = tmp_path / "full"
    full.mkdir()
    setup = ("mount -t tmpfs -o size=1m tmpfs /dev/shm && mount -t tmpfs -o size=64k tmpfs %s && "
             "dd if=/dev/zero of=/dev/shm/fill bs=64k count=64 2>/dev/null; "
             "dd if=/dev/zero of=%s/fill bs=64k count=2 2>/dev/null; exec \"$@\"" % (full, full))
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh", sys.executable,
                          "-c", OFF, str(tmp_path / "store"), str(full), str(tmp_path / "dumps")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=180,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stdout
    lines = [l for l in out.stdout.splitlines() if "c10d_observer" in l]
    assert len(lines) == 1 and lines[0].startswith("c10d_observer: not enabled: no room for the observer's "
                                                   "channel") and "the job goes on unobserved" in lines[0], out.stdout
    assert "active False watchdog None result 1.0" in out.stdout, out.stdout  # the all_reduce ran


@pytest.fixture
def full_dump_dir(tmp_path):
    if not _can_mount() or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "dumps"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], check=True)
    subprocess.run("dd if=/dev/zero of=%s/fill bs=64k count=2 2>/dev/null; true" % d, shell=True, check=True)
    from c10d_observer.dumpdir import spill_dir
    yield str(d)
    subprocess.run(["umount", "-l", str(d)], check=False)
    shutil.rmtree(spill_dir(str(d)), ignore_errors=True)


def test_a_full_dump_dir_is_said_once_and_the_culprit_still_named_on_the_console(job_factory, full_dump_dir):
    from c10d_observer import dumpdir
    job = job_factory("skip", 2, culprit=1, step=2, timeout=1.0)
    assert job.dump_dir == full_dump_dir
    spill = dumpdir.spill_dir(full_dump_dir)
    wait_until(lambda: "never arrived" in job.log_text(), 60, "the verdict on the console\n" + job.log_text())
    v = read_verdict(spill, 30, job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    log = job.log_text()
    assert v["culprit_ranks"] == [1] and "rank 1" in v["summary"]
    assert re.search(r"all_reduce #3 on group 0 \(ranks 0-1\), 4 x float32 stuck [\d.]+ s \(hard: past the timeout of [\d.]+ s\): rank 1 .*never arrived",
                     log), log
    for r in (0, 1):
        with open(job.logs[r].name) as f:
            said = [l for l in f.read().splitlines() if "is full" in l]
        assert len(said) == 1 and spill in said[0], said  # once per rank, by its watchdog
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", full_dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert '"culprit_ranks": [\n  1\n ]' in out.stdout, out.stdout  # report DIR reads the spilled files


def test_on_a_full_dump_dir_on_hang_still_hands_every_rank_the_verdict(job_factory, full_dump_dir):
    """The watchdogs spill; the rank's on_hang helper reads dump_dir through DumpDir and finds them there."""
    job = job_factory("on_hang", 2, timeout=1.0)
    assert job.dump_dir == full_dump_dir
    got = {r: job.wait_facts(r, "on_hang", timeout=90) for r in (0, 1)}
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    for r in (0, 1):
        assert got[r]["culprit_ranks"] == [1] and got[r]["exit_code"] == 1, (r, got[r])




def test_under_abort_torchruns_summary_names_the_culprit_and_the_verdict(tmp_path):
    """torchrun names its first failure the Root Cause: the culprit's watchdog ends the culprit first, and
    every rank's torchelastic error file carries the verdict (a waiting rank's names the culprit)."""
    try:
        import torch.distributed.run  # noqa: F401  (torch 1.9+)
    except ImportError:
        pytest.skip("torch 1.8 has no torchrun")
    release = tmp_path / "release"
    dump = tmp_path / "dumps"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=3",
           "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % free_port(), "--max_restarts=0",
           "-m", "c10d_observer", "run", "--timeout", "1", "--on-timeout", "abort", "--dump-dir", str(dump),
           os.path.join(HERE, "train_script.py"), str(release), "2"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                         timeout=240)
    text = out.stdout
    assert out.returncode != 0, text
    root = text[text.index("Root Cause"):] if "Root Cause" in text else ""
    assert root, text
    assert re.search(r"rank\s*:\s*2\b", root), text  # the culprit, not a rank that waited
    assert "c10d_observer: collective hang: rank 2 (this rank) is its culprit" in root, text
    assert "never arrived" in root and "verdict" in root, text
    rep = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", str(dump)],
                         stdout=subprocess.PIPE, universal_newlines=True, env=env)
    assert rep.returncode == 1 and '"culprit_ranks": [\n  2\n ]' in rep.stdout, rep.stdout
