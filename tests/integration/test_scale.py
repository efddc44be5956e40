"""benchmarks/scale.py at a size a test can afford: 3 nodes of 8 simulated ranks, each with a real channel
and Watchdog, the real relays of its node, a real TCPStore server in a process of its own.  Its verdicts
must stay right (the figures of docs/scale.md rest on them), and the costs that do not depend on the
machine hold exactly: one merge, the verdict on every node, one store connection per node, one store
operation per node per poll while idle.  Its timings are the benchmark's business, not this test's."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import scale  # noqa: E402


@pytest.mark.parametrize("scenario", ["culprit", "cascade", "two", "silent"])
def test_the_gather_across_three_nodes_names_the_culprit_once_on_every_node(scenario):
    r = scale.run(24, 8, scenario)
    assert r["verdicts_ok"], r  # exactly the culprit, exactly the silent ranks (silent: 1 of 24)
    assert r["merges"] == 1 and r["verdicts_written"] == 3, r
    assert r["server_connections"] == 3, r
    assert r["idle_store_ops_per_node_per_poll"] == pytest.approx(1.0, abs=0.15), r
