"""benchmarks/scale.py at a size a test can afford: 3 nodes of 8 simulated ranks, each with a real channel
and Watchdog, the real relays of its node, a real TCPStore server in a process of its own.  Its verdicts
must stay right (the figures of docs/scale.md rest on them), and the costs that do not depend on the
machine hold exactly: one merge, the verdict on every node, one store connection per node, one store
operation per node per poll while idle (the gather's; the straggler exchange's are counted apart).  Its timings are the benchmark's business, not this test's."""
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
    # the straggler exchange's shares, which fall in the idle time or not, are counted apart (its own load:
    # benchmarks/store_load.py)
    assert r["idle_gather_ops_per_node_per_poll"] == pytest.approx(1.0, abs=0.15), r


def test_without_the_straggler_exchange_the_gather_is_the_same_and_no_arrivals_key_is_touched():
    """``--no-arrivals`` (the gather alone, to set beside a run with the exchange, docs/scale.md): every relay's
    share is put off past the run, so no operation of the exchange reaches the store, and the verdict is the
    same."""
    r = scale.run(24, 8, "culprit", arrivals=False)
    assert r["verdicts_ok"] and r["merges"] == 1 and r["verdicts_written"] == 3, r
    assert r["idle_arrivals_ops_per_min"] == 0 and r["gather_arrivals_ops"] == 0, r
