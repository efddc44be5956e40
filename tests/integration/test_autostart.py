"""On by environment alone (C10D_OBSERVER=1): the .pth the package installs arms every process, and the
observer starts where a process group is made, in ranks started by torch.multiprocessing.spawn too.

Needs the package installed from its wheel (the tox envs): a source checkout on PYTHONPATH or an
editable install has no c10d_observer.pth, and the tests say so and skip."""
import glob
import json
import os
import site
import subprocess
import sys

import pytest

from harness import ROOT, read_verdict, wait_signal_sent

HERE = os.path.dirname(os.path.abspath(__file__))


def _pth():
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return [p for d in dirs for p in glob.glob(os.path.join(d, "c10d_observer.pth"))]


pytestmark = pytest.mark.skipif(not _pth(), reason="c10d_observer.pth is not installed (install the package "
                                                   "from its wheel, as the tox envs do)")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _job(tmp_path, cmd):
    """Run a job that knows nothing of the observer, with C10D_OBSERVER=1; (verdict, its ranks' records)."""
    work, dump = tmp_path / "work", tmp_path / "dumps"
    work.mkdir()
    env = _env(C10D_OBSERVER="1", C10D_OBSERVER_TIMEOUT="1", C10D_OBSERVER_DIR=str(dump))
    log = open(str(tmp_path / "job.log"), "w+")
    proc = subprocess.Popen(cmd + [os.path.join(HERE, "autostart_job.py"), str(tmp_path / "store"), str(work)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        v = read_verdict(str(dump), 90, "")
        wait_signal_sent(str(dump))  # at the hard verdict
        (work / "release").touch()
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
    assert v["culprit_ranks"] == [1] and v["hangs"][0]["waiting_ranks"] == [0], (v["summary"], out)
    ranks = [json.load(open(str(work / ("rank%d.json" % r)))) for r in (0, 1)]
    assert all(r["observed"] for r in ranks), ranks
    pids = {json.load(open(p))["pid"] for p in glob.glob(str(dump / "report-rank*.json")) + glob.glob(
        str(dump / "state-rank*.json"))}
    # the signal contract: the job's own SIGUSR1 handler ran on the rank that waited, never on the culprit for
    # the hang.  (Once released, the culprit's own all_reduce may take past the 1 s timeout on a loaded
    # machine: then it is a rank with an overdue call of its own, and its handler runs for that.)
    calls = [json.load(open(str(work / ("handler%d.json" % r))))["calls"] for r in (0, 1)]
    late = [e for p in glob.glob(str(dump / "report-rank1-*.json")) for e in json.load(open(p))["overdue"]
            if e["level"] == "hard"]
    assert calls[0] >= 1 and calls[1] <= len(late), (calls, late)  # signalled where still in flight at its verdict
    return work, ranks, pids


def test_c10d_observer_1_watches_ranks_started_by_mp_spawn(tmp_path):
    work, ranks, pids = _job(tmp_path, [sys.executable])
    parent = json.load(open(str(work / "parent.json")))
    assert parent["imported"] is False  # the launching process never made a group: untouched
    assert pids and parent["pid"] not in pids and pids <= {r["pid"] for r in ranks}


def test_c10d_observer_1_watches_torchrun_workers_and_leaves_the_launcher_alone(tmp_path):
    from test_cli import _launcher
    work, ranks, pids = _job(tmp_path, _launcher(2))
    assert pids == {r["pid"] for r in ranks}, (pids, ranks)  # the ranks, not the launcher


def test_unset_or_no_group_means_nothing_happens():
    probe = ("import sys, torch.distributed; print(sorted(m for m in sys.modules if m.startswith('c10d_observer')), "
             "[type(f).__name__ for f in sys.meta_path if 'c10d' in type(f).__module__])")
    cases = (("", []), ("0", []), ("1", ["c10d_observer", "c10d_observer._autostart", "c10d_observer._unset",
                                         "c10d_observer._version", "c10d_observer.console"]))
    probes = [subprocess.Popen([sys.executable, "-c", probe], env=_env(C10D_OBSERVER=value), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True) for value, _ in cases]  # at once
    for (value, imported), p in zip(cases, probes):
        out = p.communicate(timeout=120)[0]
        assert p.returncode == 0, out
        # set: the package's top, the autostart module and its stderr line's, no observer, no finder left once armed
        assert out.strip().splitlines()[-1] == "%r []" % (imported,), (value, out)


def test_a_bad_setting_is_one_line_and_the_job_goes_on(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "release").touch()  # nobody waits: the job just runs
    out = subprocess.run([sys.executable, os.path.join(HERE, "autostart_job.py"), str(tmp_path / "store"), str(work)],
                         env=_env(C10D_OBSERVER="1", C10D_OBSERVER_TIMEOUT="soon"), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 0, out.stdout
    lines = [ln for ln in out.stdout.splitlines() if "not enabled" in ln]
    assert len(lines) == 2 and all("C10D_OBSERVER_TIMEOUT" in ln for ln in lines), out.stdout  # one per rank
    assert "Traceback" not in out.stdout


@pytest.mark.full  # tests/README.md: the full tier
def test_c10d_observer_1_turns_the_recorder_on_where_torch_leaves_it_off(tmp_path):
    """Issue 31: on torch 2.5-2.10 torch's flight recorder records only where a buffer size is set before
    the first process group; under C10D_OBSERVER=1 it is set then, so that on 2.8-2.10 gloo's calls are read
    off the recorder (nothing per call) instead of the patch wrappers.  Elsewhere nothing is set."""
    import torch
    from c10d_observer import compat
    work, ranks, pids = _job(tmp_path, [sys.executable])
    rel = tuple(compat.release(torch.__version__)[:2])
    off = compat.FR_OFF_BY_DEFAULT[0] <= rel < compat.FR_OFF_BY_DEFAULT[1]
    for r in ranks:
        assert r["trace_env"] == ("2000" if off else None), (torch.__version__, r)
        if (2, 8) <= rel < (2, 11):
            assert r["source"] == "flight_recorder", r
