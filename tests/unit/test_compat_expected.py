"""The installed torch shows the capabilities compat/expected/ records for its line, so a wrong probe
fails in the version matrix (every tox env runs this against its own torch)."""
import json
import os

import pytest
import torch

import c10d_observer
from c10d_observer import compat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPS = c10d_observer.capabilities()
REL = compat.release(CAPS["torch_version"]) or (0, 0)
LINE = "torch%d%d" % (REL[0], REL[1])
PATH = os.path.join(REPO, "compat", "expected", LINE + ".json")
BUILD = "cuda" if torch.version.cuda else "cpu"


@pytest.fixture(scope="module")
def expected():
    if not os.path.exists(PATH):
        pytest.skip("no expected capabilities recorded for torch %s.%s: run compat/record_expected.py in "
                    "its tox env and review the file" % REL[:2])
    with open(PATH) as f:
        return json.load(f)


def test_features_match_the_record_of_this_torch_line(expected):
    want = dict(expected["features"])
    for name, value in want.items():
        if isinstance(value, dict):  # a feature of the build, not of the release
            if BUILD not in value:
                pytest.skip("%s not recorded for %s builds of %s" % (name, BUILD, LINE))
            want[name] = value[BUILD]
    assert CAPS["features"] == want


def test_auto_source_and_usable_sources_match_the_record(expected):
    assert CAPS["auto"] == expected["auto"]
    assert sorted(s for s, r in CAPS["sources"].items() if r["usable"]) == expected["usable_sources"]


def test_functional_collectives_kind_matches_the_record(expected):
    """native (C++ ops, wrapped by sources/funcol.py), python (through torch.distributed) or none."""
    if "funcol" not in expected:
        pytest.skip("functional collectives not recorded for %s" % LINE)
    assert CAPS["funcol"] == expected["funcol"]


def test_autos_plan_matches_the_record_of_this_build(expected):
    """The dispatch table's plan for source="auto" on this line (sources/table.py): which source makes
    the events of each kind of call on each backend.  The support table (docs/support.md) is generated from these
    records (tests/unit/test_dispatch_table.py)."""
    recorded = (expected.get("auto_plan") or {}).get(BUILD)
    if recorded is None:
        pytest.skip("auto's plan not recorded for %s builds of %s" % (BUILD, LINE))
    if any(os.environ.get(name, "").strip() for name in compat.FR_ENV):
        pytest.skip("a flight-recorder variable is set: the record is of torch's defaults")
    assert CAPS["auto_plan"]["cells"] == recorded


@pytest.mark.parametrize("key", ["nccl", "nccl_plan"])
def test_nccl_probes_and_plan_match_the_record_of_this_build(expected, key, monkeypatch):
    """The NCCL plan of this line (recorder on by default, turned on by enable(), or the patch source with
    completion markers), recorded per build: CUDA wheels probed on a CPU-only machine (no GPU is needed to
    probe bindings and configuration)."""
    for name in compat.FR_ENV:  # the record is of torch's defaults
        monkeypatch.delenv(name, raising=False)
    recorded = (expected.get(key) or {}).get(BUILD)
    if recorded is None:
        pytest.skip("%s not recorded for %s builds of %s" % (key, BUILD, LINE))
    caps = compat.probe()
    assert caps[key] == recorded
