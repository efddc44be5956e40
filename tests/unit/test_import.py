"""Importing c10d_observer does nothing: checked in a fresh interpreter, where nothing else ran first."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r"""
import glob, json, logging, os, signal, sys, threading

def tasks():
    return sorted(os.listdir("/proc/self/task"))

def children():
    pids = []
    for path in glob.glob("/proc/self/task/*/children"):
        with open(path) as f:
            pids.extend(f.read().split())
    return sorted(pids)

before = {"usr1": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL, "tasks": tasks(),
          "threads": threading.active_count(), "children": children(), "root_handlers": len(logging.root.handlers)}
import c10d_observer
after = {"usr1": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL, "tasks": tasks(),
         "threads": threading.active_count(), "children": children(), "root_handlers": len(logging.root.handlers)}
print(json.dumps({
    "file": c10d_observer.__file__,
    "before": before,
    "after": after,
    "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")),
    "package_handlers": [type(h).__name__ for h in logging.getLogger("c10d_observer").handlers],
    "handlers_once_enable_is_loaded": (__import__("c10d_observer.observer") and
                                       [type(h).__name__ for h in logging.getLogger("c10d_observer").handlers]),
}))
"""


@pytest.fixture(scope="module")
def probe():
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("PYTHONSTARTUP", None)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=60, check=True)
    res = json.loads(out.stdout.decode())
    assert os.path.dirname(res["file"]) == os.path.join(REPO, "c10d_observer")  # this checkout's package
    return res


def test_import_does_not_import_torch(probe):
    assert probe["torch"] == []


def test_import_installs_no_signal_handler(probe):
    assert probe["before"]["usr1"], "the probe must start with SIGUSR1 at its default"
    assert probe["after"]["usr1"]


def test_import_starts_no_thread(probe):
    assert probe["after"]["tasks"] == probe["before"]["tasks"]
    assert probe["after"]["threads"] == probe["before"]["threads"] == 1


def test_import_starts_no_process(probe):
    assert probe["after"]["children"] == probe["before"]["children"] == []


def test_import_configures_no_logging_and_the_library_adds_only_a_null_handler(probe):
    assert probe["after"]["root_handlers"] == probe["before"]["root_handlers"]
    assert probe["package_handlers"] == []  # importing the package does not even touch logging
    assert probe["handlers_once_enable_is_loaded"] == ["NullHandler"]


WATCHDOG_SIDE = ("c10d_observer.watchdog", "c10d_observer.watchdog_io", "c10d_observer.verdict",
                 "c10d_observer.requests", "c10d_observer.supervisor", "c10d_observer.channel",
                 "c10d_observer.dumpdir", "c10d_observer.documents", "c10d_observer.live", "c10d_observer.page")

BLOCKER = r"""
import importlib, json, sys

class NoTorch(object):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("blocked for the test: %s" % name)
        return None

    find_module = None

sys.meta_path.insert(0, NoTorch())
failed = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError as e:
        failed[name] = str(e)
print(json.dumps({"failed": failed, "torch": sorted(m for m in sys.modules if m.split(".")[0] == "torch")}))
"""


def test_the_watchdog_side_imports_without_torch():
    """The watchdog process, its supervisor and the verdict's readers never import torch: an import of torch
    fails in this interpreter, and every module of that side still loads."""
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKER] + list(WATCHDOG_SIDE), cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=True)
    res = json.loads(out.stdout.decode())
    assert res == {"failed": {}, "torch": []}, res


def test_the_torch_blocker_of_that_test_blocks_torch():
    """The guard above can fail: the rank side's torch.distributed does not load under it."""
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKER, "torch.distributed"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=True)
    res = json.loads(out.stdout.decode())
    assert "torch.distributed" in res["failed"] and res["torch"] == [], res
