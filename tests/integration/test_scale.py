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


def test_with_a_history_every_state_carries_a_full_record_of_each_stream_and_the_verdict_is_the_same(tmp_path):
    """``--history N`` (docs/scale.md: the states of a job some steps in, where the harness's own are 1 to 3 calls
    a stream): each rank's four groups carry rank_docs.HISTORY calls in the bundles the merging node fetched, as
    version 5's record (documents.recent_row), and the verdict names the same culprit once on every node."""
    from c10d_observer import documents, dumpdir, rank_docs
    kept = str(tmp_path / "kept")
    r = scale.run(24, 8, "culprit", history=rank_docs.HISTORY + 8, keep=kept)
    assert r["verdicts_ok"] and r["merges"] == 1 and r["verdicts_written"] == 3, r
    bundles = dumpdir.DumpDir(kept).glob(dumpdir.NODE_GLOB)
    states = [d for p in bundles for d in documents.load(p)]
    assert len(bundles) == 2 and len(states) == 16
    assert {len(g.recent) for d in states for g in d.groups} == {rank_docs.HISTORY}
    from c10d_observer import wire
    rows = [row for p in bundles for st in wire.unpack(dumpdir.read_json(p)["packed"]) for row in st["group_rows"]]
    assert len(rows) == 64 and all(type(row[12][0]) is int and len(row[12][2]) == rank_docs.HISTORY for row in rows)
