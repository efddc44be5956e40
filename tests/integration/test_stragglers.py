"""The rank that arrives last, live (issues 26, 31): real gloo ranks, under the patch source (it records each
call's start on the call path) and the source auto picks (on torch 2.11+ the gloo recorder, whose calls' exact
starts come from torch's own creation times, read in batches)."""
import json
import os

import pytest

from harness import read_verdict, wait_until

pytestmark = pytest.mark.full  # tests/README.md: the full tier


def _stragglers(job):
    try:
        with open(os.path.join(job.dump_dir, "stragglers.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("source", ["patch", "auto"])
def test_a_rank_40_percent_slower_every_step_is_named_and_every_verdict_says_so(job_factory, source):
    job = job_factory("straggler", 3, timing=None, steps=250, step_s=0.04, slow=2, culprit=1, timeout=1.0, source=source)
    doc = wait_until(lambda: (_stragglers(job) or {}).get("groups") and _stragglers(job)["groups"][0]["straggler"]
                     and _stragglers(job), 90, "a straggler named in stragglers.json\n" + job.log_text())
    s = doc["groups"][0]["straggler"]
    assert s["rank"] == 2 and s["share"] >= 0.5 and s["median_lag_s"] > 0.004, doc
    v = read_verdict(job.dump_dir, 90, job.log_text())  # then rank 1 stalls: the verdict names the straggler too
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    assert v["culprit_ranks"] == [1] and v["stragglers"][0]["rank"] == 2, v
    assert "straggler: rank 2 arrived last at" in v["summary"], v["summary"]


@pytest.mark.parametrize("source", ["patch", "auto"])
def test_a_balanced_job_names_nobody(job_factory, source):
    job = job_factory("straggler", 3, timing=None, steps=250, step_s=0.04, timeout=30.0, source=source)
    assert job.finish(timeout=120) == [0, 0, 0], job.log_text()
    doc = _stragglers(job)
    assert doc and doc["groups"] and doc["groups"][0]["calls"] >= 50, doc  # enough for the rule to speak
    assert all(g["straggler"] is None for g in doc["groups"]), doc


@pytest.mark.parametrize("source", ["patch", "auto"])
def test_in_a_mesh_the_slow_rank_is_named_and_the_rank_it_held_is_not(job_factory, source):
    """Rank 3 is slow: rank 2 waits for it in their tp all_reduce and then arrives late at its dp all_reduce
    with rank 0, every step.  Rank 3 is named; rank 2 (and every other rank) never is: its lag there was rank
    3's (arrivals.Timelines)."""
    job = job_factory("mesh_straggler", 4, timing=None, steps=400, step_s=0.01, slow=3, source=source)
    assert job.finish(timeout=120) == [0, 0, 0, 0], job.log_text()
    doc = _stragglers(job)
    named = {g["stream"]: g["straggler"]["rank"] for g in (doc or {}).get("groups") or () if g["straggler"]}
    assert named and set(named.values()) == {3}, doc
    # its four groups made alike on every rank: none says its new_group is not the others' (sources/groups.py)
    assert "is not the same group on every rank" not in job.log_text(tail=None)
