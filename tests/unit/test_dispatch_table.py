"""The dispatch table (c10d_observer/sources/table.py): one test per row, the plan's rules, and the tables
in the docs generated from it.  Capabilities records are built here, as compat.probe writes them, for
torch builds this machine does not have (NCCL ones included: nothing here needs a GPU or torch)."""
import json
import os

import pytest

from c10d_observer import sources as _sources
from c10d_observer.sources import table

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def caps(hooks=False, pg_hooks=False, fr=False, patch=True, funcol="native", nccl=None, nccl2=False):
    """A capabilities record: which sources probe usable, how functional collectives run (native, python,
    None), and the legacy NCCL recorder's state (None: no NCCL; "none": NCCL without a JSON recorder;
    "default", "env", "enable", "off")."""
    def src(ok):
        return {"usable": ok, "reason": "probed usable" if ok else "probed unusable"}
    if nccl is None:
        nplan = {"recorder": None, "recorder_on": None, "nccl2_recorder": False, "fallback": None,
                 "why": "no NCCL in this build"}
    else:
        nplan = {"recorder": None if nccl == "none" else "nccl_trace", "recorder_on": None if nccl == "none" else nccl,
                 "nccl2_recorder": nccl2, "fallback": "patch", "why": "recorder " + nccl}
    return {"sources": {"hooks": src(hooks), "pg_hooks": src(pg_hooks), "flight_recorder": src(fr),
                        "patch": src(patch)},
            "funcol": funcol, "nccl_plan": nplan, "nccl": {"trace_json": nccl not in (None, "none")}}


def cells(c, choice=None):
    return table.Plan(c, choice).view()["cells"]


def everywhere(cells_, row, kinds=table.KINDS, backends=table.BACKENDS):
    return all(cells_[k][b] == row for k in kinds for b in backends)


# -- one test per row -----------------------------------------------------------------------------------
def test_row_hooks_makes_every_backends_collectives_where_torch_has_the_module():
    c = cells(caps(hooks=True))
    assert everywhere(c, "hooks", ("collective", "barrier", "functional", "ddp_allreduce"))
    assert everywhere(c, "patch", ("p2p", "monitored_barrier"))  # its events carry no peer
    assert everywhere(cells(caps()), "patch", ("collective",))


def test_row_gloo_recorder_makes_gloos_collectives_at_no_cost_and_leaves_the_rest():
    c = cells(caps(fr=True))
    for kind in ("collective", "barrier", "functional", "ddp_allreduce"):
        assert c[kind]["gloo"] == "gloo_recorder", kind
        assert c[kind]["other"] != "gloo_recorder", kind  # it records gloo only
    assert c["p2p"]["gloo"] == c["monitored_barrier"]["gloo"] == "patch"  # gloo p2p is not recorded
    assert c["functional"]["other"] == "funcol"
    off = table.Plan(caps(fr=False), None).view()
    assert off["cells"]["collective"]["gloo"] == "patch"
    assert off["rows"]["gloo_recorder"] == {"usable": False, "why": "probed unusable", "cost": None}


@pytest.mark.parametrize("state,auto,explicit_fr,explicit_patch", [
    ("default", True, True, False), ("env", True, True, False),
    ("enable", True, True, False),  # enable() turns it on for auto and flight_recorder only
    ("off", False, False, False), ("none", False, False, False)])
def test_row_nccl_recorder_makes_legacy_nccls_events_where_it_records(state, auto, explicit_fr, explicit_patch):
    c = caps(fr=True, nccl=state)
    for choice, want in ((None, auto), ("flight_recorder", explicit_fr), ("patch", explicit_patch)):
        got = cells(c, choice)
        assert (got["collective"]["nccl"] == "nccl_recorder") is want, (state, choice)
        assert got["collective"]["nccl2"] != "nccl_recorder"
        assert got["p2p"]["nccl"] == "patch"
    if state == "enable":
        assert "only for source 'auto' or 'flight_recorder'" in table.Plan(c, "patch").probes["nccl_recorder"][1]


def test_row_nccl2_recorder_makes_nccl2s_events_where_its_dump_is_readable():
    assert cells(caps(nccl="default", nccl2=True))["collective"]["nccl2"] == "nccl2_recorder"
    assert cells(caps(nccl="default", nccl2=False))["collective"]["nccl2"] == "patch"
    assert cells(caps(nccl="default", nccl2=True), "patch")["collective"]["nccl2"] == "patch"


@pytest.mark.parametrize("kind,want", [("native", "funcol"), ("python", "patch"), (None, None)])
def test_row_funcol_makes_functional_collectives_where_torch_issues_them_from_cpp(kind, want):
    c = cells(caps(funcol=kind))
    assert everywhere(c, want, ("functional",))
    assert everywhere(c, "patch", ("collective",))
    # where a recorder records the group, it sees them itself (they reach ProcessGroup::allreduce in C++)
    if kind:
        assert cells(caps(fr=True, funcol=kind))["functional"]["gloo"] == "gloo_recorder"


def test_row_patch_fills_every_cell_no_cheaper_row_sees():
    c = cells(caps(funcol=None))
    assert everywhere(c, "patch", ("collective", "barrier", "p2p", "monitored_barrier", "ddp_allreduce"))
    for c in (cells(caps(fr=True, hooks=True, pg_hooks=True, nccl="default", nccl2=True)),
              cells(caps(pg_hooks=True), "pg_hooks")):
        assert everywhere(c, "patch", ("monitored_barrier",))  # no hook fires for it, no recorder numbers it


def test_row_pg_hooks_is_never_auto_and_makes_what_it_sees_when_chosen():
    for c in (caps(pg_hooks=True), caps(pg_hooks=True, fr=True, nccl="default", nccl2=True),
              caps(pg_hooks=True, funcol="python")):
        auto = cells(c)
        assert all(r != "pg_hooks" for by in auto.values() for r in by.values())  # dearer than patch + funcol
        chosen = cells(c, "pg_hooks")
        assert everywhere(chosen, "pg_hooks", ("collective", "barrier", "p2p", "functional", "ddp_allreduce"))
    assert table.rejected(caps(pg_hooks=True, fr=True), None)["pg_hooks"].startswith("usable, but dearer")


# -- the plan's rules -----------------------------------------------------------------------------------
def test_auto_is_the_source_of_gloos_collectives_and_every_choice_covers_every_cell():
    assert table.Plan(caps(), None).main_source() == "patch"
    assert table.Plan(caps(fr=True, pg_hooks=True), None).main_source() == "flight_recorder"  # 2.14, 2.15
    assert table.Plan(caps(patch=False), None).main_source() is None
    for choice in (None,) + table.CHOICES:
        c = cells(caps(hooks=True, pg_hooks=True, fr=True, nccl="enable", nccl2=True), choice)
        assert all(r is not None for by in c.values() for r in by.values()), choice


def test_a_group_a_recorder_does_not_record_goes_to_the_next_row_in_its_cell():
    d = _sources.Dispatch(table.Plan(caps(fr=True), None), caps(fr=True))
    pg = object()
    gloo = {"backend": "gloo"}
    assert d.native_for(pg, gloo) == "gloo" and d.native_for(pg, gloo, "p2p") is None
    d.unrecorded.add(id(pg))
    assert d.native_for(pg, gloo) is None  # the patch wrappers take it
    chosen = _sources.Dispatch(table.Plan(caps(fr=True, pg_hooks=True), "pg_hooks"), caps())
    assert chosen.native_for(pg, gloo) == chosen.native_for(pg, gloo, "p2p") == "pg_hooks"
    assert chosen.native_for(pg, gloo, "monitored_barrier") is None


def test_a_recorder_behind_a_chosen_source_makes_no_events():
    """source="patch" on a torch whose recorders record: the wrappers make every event, the recorders are
    read for the entries reports carry only (their reader ignores groups whose events they make)."""
    c = caps(fr=True, pg_hooks=True, nccl="default", nccl2=True)
    chosen = table.Plan(c, "patch")
    assert not any(chosen.uses(r) for r in ("gloo_recorder", "nccl_recorder", "nccl2_recorder", "pg_hooks"))
    assert chosen.uses("patch") and chosen.uses("funcol")
    auto = table.Plan(c, None)
    assert auto.uses("gloo_recorder") and auto.uses("nccl2_recorder") and not auto.uses("pg_hooks")


def test_the_plan_view_is_json_and_says_why_and_at_what_cost():
    v = table.Plan(caps(fr=True, pg_hooks=True, nccl="default"), None).view()
    assert json.loads(json.dumps(v)) == v
    assert v["choice"] == "auto" and v["report_fr_entries"] is True
    assert v["rows"]["gloo_recorder"]["cost"].startswith("none per call")
    assert v["rows"]["pg_hooks"]["cost"] is None  # not used
    assert v["fallback"]["collective"]["nccl"] == "patch"
    assert table.view_brief(v) == " (p2p: patch; NCCL: nccl_recorder)"
    assert table.view_text(v).startswith("collective: gloo_recorder (gloo), nccl_recorder (nccl), patch (nccl2/other)")


# -- the docs -------------------------------------------------------------------------------------------
def _read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


def test_docs_sources_md_shows_the_table_rows():
    assert table.coverage_markdown() in _read("docs", "sources.md"), \
        "regenerate with: python -m c10d_observer.sources --rows"


def test_the_support_table_is_the_plans_recorded_per_line():
    plans = table.expected_plans(os.path.join(REPO, "compat", "expected"))
    assert len(plans) == 22  # one record per line of the matrix
    assert table.lines_markdown(plans) in _read("docs", "support.md"), \
        "regenerate with: python -m c10d_observer.sources --lines"


def test_recorder_on_is_an_enum_written_as_the_strings_the_capabilities_always_held(monkeypatch):
    from c10d_observer import compat
    for name in compat.FR_ENV:
        monkeypatch.delenv(name, raising=False)
    assert [m.value for m in compat.RecorderOn] == ["default", "env", "enable", "off"]
    plan = compat._nccl_plan({"available": True, "trace_json": True, "nccl2": False, "fr_hook": False,
                              "fr_backend_arg": False}, default_on=True)
    on = plan["recorder_on"]
    assert on is compat.RecorderOn.DEFAULT and json.loads(json.dumps(plan))["recorder_on"] == "default"
    assert table.CHOICES is compat.SOURCES  # one list of source names


def test_every_part_of_the_rank_side_is_a_source_that_builds_itself_and_every_row_has_its_part():
    from c10d_observer.sources import base
    parts = [_sources._part(row) for row, _ in _sources.PARTS]
    for cls in parts:
        assert issubclass(cls, base.Source) and cls.build is not base.Source.build, cls
    names = {cls.name for cls in parts}
    for row in table.BY_NAME:  # the recorders' rows are read by the one reader
        assert row in names or (row.endswith("_recorder") and "flight_recorder" in names), row
    assert [p.__name__ for p in parts][-1] == "FlightRecorderSource"  # installed last: every group announced
