"""The pytest plugin on PyTorch's own distributed test suite (torch.testing._internal.distributed.distributed_test,
gloo, 2 ranks per test, torch's MultiProcessTestCase spawning them): a test that deadlocks fails within the
timeout and a few seconds with the culprit named, and every other test keeps the outcome it has without the
plugin.  Needs the package installed from its wheel (the .pth, the pytest11 entry point) and expecttest, as
the tox envs have."""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from harness import HERE, ROOT, pid_alive
from test_pytest_plugin import _entry_point

from c10d_observer import _autostart

pytestmark = [pytest.mark.full]  # tests/README.md: the full tier
pytestmark.append(pytest.mark.skipif(not (_autostart.pth_installed() and _entry_point()),
                                     reason="the package is not installed from its wheel (no c10d_observer.pth or "
                                            "no pytest11 entry point), as the tox envs install it"))

DEADLOCK = "test_deadlock_rank1_skips_an_all_reduce"
# torch's own tests, on every line from 1.8: two that pass on gloo, one that skips there (CUDA only); each
# spawns its two ranks (5-10 s a test here), so a few
TORCH_TESTS = ("test_get_rank", "test_all_reduce_sum", "test_all_reduce_sum_cuda")
TIMEOUT = 3.0


def _run_suite(tmp_path, name, tests, plugin):
    work = tmp_path / name
    work.mkdir()
    shutil.copy(os.path.join(HERE, "torch_dist_suite.py"), str(work / "test_dist_suite.py"))
    (work / "temp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER")}
    env.update(BACKEND="gloo", WORLD_SIZE="2", TEMP_DIR=str(work / "temp"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    xml = work / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rA",
           "--junitxml", str(xml)] + ["test_dist_suite.py::TestDistBackendWithSpawn::" + t for t in tests]
    if plugin:
        cmd.append("--c10d-observer=%g" % TIMEOUT)
    out = subprocess.run(cmd, cwd=str(work), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=900)
    assert xml.exists(), out.stdout
    cases = {}
    for case in ET.parse(str(xml)).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        text = "".join((child.get("message") or "") + (child.text or "") for child in case)
        cases[case.get("name")] = (kinds[0] if kinds else "passed", float(case.get("time")), text)
    return out, cases


@pytest.mark.timeout(600)  # two inner pytest runs of spawned ranks: over the suite's 120 s on torch 2.15
def test_a_deadlocking_test_of_torchs_suite_fails_fast_and_the_others_keep_their_outcome(tmp_path):
    plain_out, plain = _run_suite(tmp_path, "plain", TORCH_TESTS, plugin=False)
    watched_out, watched = _run_suite(tmp_path, "watched", TORCH_TESTS + (DEADLOCK,), plugin=True)
    torchs = {k: v for k, v in watched.items() if k != DEADLOCK}

    assert sorted(plain) == sorted(TORCH_TESTS), plain_out.stdout
    outcomes = {k: v[0] for k, v in plain.items()}
    assert "passed" in outcomes.values() and "skipped" in outcomes.values(), outcomes
    assert {k: v[0] for k, v in torchs.items()} == outcomes, watched_out.stdout

    kind, took, text = watched[DEADLOCK]
    assert kind == "failure", watched_out.stdout
    assert "never arrived: rank 1" in text and "culprit ranks: 1" in text, text
    # within the timeout and a few seconds (spawning two ranks included), not torch's own 300 s
    assert took < TIMEOUT + 60, took
    print("%s failed after %.1f s: %s" % (DEADLOCK, took, text.splitlines()[0]))
    ended = [int(p) for p in text.split("ranks ended: ", 1)[1].split(";", 1)[0].split(",")]
    assert len(ended) == 2 and not any(pid_alive(p) for p in ended), ended  # nothing left running
