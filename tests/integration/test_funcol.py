"""Functional collectives and DTensor (torch 2.3+ issues them from C++, past the ProcessGroup wrappers):
a hang in one is reported, with the rank that never arrived, on every source this torch offers."""
import pytest

import c10d_observer
from harness import assert_caught_up, read_verdict


def _usable():
    return [s for s, r in c10d_observer.capabilities()["sources"].items() if r["usable"]]


def _has(module):
    try:
        __import__(module)
        return True
    except Exception:
        return False


HAS_FUNCOL = _has("torch.distributed._functional_collectives")
HAS_DTENSOR = _has("torch.distributed.tensor") and _has("torch.distributed.tensor.placement_types") or \
    _has("torch.distributed._tensor")


@pytest.mark.skipif(not HAS_FUNCOL, reason="this torch has no functional collectives")
@pytest.mark.parametrize("source", _usable())
def test_a_functional_all_reduce_hang_names_the_late_rank(job_factory, source):
    job = job_factory("funcol_skip", 2, timeout=1.0, source=source)
    rep = job.wait_report(0, timeout=90)
    v = read_verdict(job.dump_dir, 60, job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["result"] == job.facts(1)["result"] == 2.0 ** 4  # ones, doubled by each of the four all_reduces after the first
    first = rep["overdue"][0]
    assert first["op"] == "all_reduce" and first["group_ranks"] == [0, 1], rep["overdue"]
    assert v["culprit_ranks"] == [1] and v["hangs"][0]["missing_ranks"] == [1], v["summary"]
    assert v["hangs"][0]["waiting_ranks"] == [0]
    assert_caught_up(job.dump_dir, 1, v)  # after the job: the same culprit, resolved (issue 24)
    native = c10d_observer.capabilities()["funcol"] == "native"
    if source == "patch":  # its own numbering: the three healthy calls after enable(), then the stuck one
        # labelled by the funcol wrappers (2.3+); on 2.1-2.2 a plain all_reduce through torch.distributed
        assert first["seq"] == 4 and first["api"] == ("funcol" if native else ""), first
    # the op's packet calls our wrapper where the plan has the funcol wrappers make some cell's events
    # (2.3+; not under pg_hooks, whose hooks see these calls on every group) ...
    from c10d_observer.sources import table
    plan = table.Plan(c10d_observer.capabilities(), None if source == "auto" else source)
    assert job.facts(0)["wrapped"] is (native and plan.uses("funcol"))
    assert job.facts(0)["restored"] is True  # ... until disable() puts torch's back


@pytest.mark.skipif(not HAS_DTENSOR, reason="this torch has no DTensor")
@pytest.mark.parametrize("source", _usable())
def test_a_dtensor_redistribution_hang_names_the_late_rank(job_factory, source):
    job = job_factory("dtensor_skip", 2, timeout=1.0, source=source)
    rep = job.wait_report(0, timeout=90)
    v = read_verdict(job.dump_dir, 60, job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["result"] == job.facts(1)["result"] == sum(range(16))
    assert "all_gather" in rep["overdue"][0]["op"], rep["overdue"]
    assert v["culprit_ranks"] == [1] and v["hangs"][0]["missing_ranks"] == [1], v["summary"]
    assert_caught_up(job.dump_dir, 1, v)  # after the job: the same culprit, resolved (issue 24)


def _sees_compiled(source):
    """Whether this source sees calls a compiled graph makes: a row that sees the group's calls in C++
    (a recorder, pg_hooks) makes gloo's functional cell, not the funcol wrappers."""
    from c10d_observer.sources import table
    caps = c10d_observer.capabilities()
    row = table.Plan(caps, None if source == "auto" else source).first("gloo", "functional")
    return bool(row) and table.BY_NAME[row].events is not None


NATIVE_FUNCOL = HAS_FUNCOL and c10d_observer.capabilities()["funcol"] == "native"


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.skipif(not NATIVE_FUNCOL, reason="no native functional collectives: nothing compiled calls them")
@pytest.mark.parametrize("source", [s for s in _usable() if NATIVE_FUNCOL and _sees_compiled(s)])
def test_a_functional_all_reduce_in_a_compiled_graph_hang_names_the_late_rank(job_factory, source):
    """The compiled graph calls the op past the funcol wrappers (packet_calls == 0); the recorder (gloo
    2.11+, or 2.8-2.10 when turned on) or pg_hooks still see the call in C++.  Where only the wrappers
    make gloo's functional cell (auto on 2.3-2.10, source="patch"), compiled calls are not seen: the
    parametrization leaves those sources out, as docs/sources.md says."""
    job = job_factory("compiled_funcol_skip", 2, timeout=1.0, source=source)
    compiled = job.wait_facts(0, "compiled", timeout=180)
    if compiled != "yes":
        job.finish()
        pytest.skip("torch.compile cannot trace a functional all_reduce here: %s" % compiled)
    rep = job.wait_report(0, timeout=90)
    v = read_verdict(job.dump_dir, 60, job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["packet_calls"] == 0  # the graph went past the op packet and its wrapper
    assert job.facts(0)["result"] == job.facts(1)["result"] == 2.0 ** 5  # 1 compiled before enable, 4 after
    assert rep["overdue"][0]["op"] == "all_reduce", rep["overdue"]
    assert v["culprit_ranks"] == [1] and v["hangs"][0]["missing_ranks"] == [1], v["summary"]
