"""The dispatch table: every event source in one place, and the plan computed from it.

A row says which calls one source sees (backend x kind of op), whether it can run on this torch and why
(its probe, read from the capabilities record), what it costs per call, and which choice of the user's
(``source=``) it belongs to.  For a choice, each (backend, kind) cell gets the usable rows that see it, in
order: the chosen source's rows first (none under ``auto``), then every other by cost.  The first makes
the cell's events; the next takes over where the first turns out, at run time, not to see a group (a
recorder that does not record it, an NCCL2 group torch attached no recorder hook to).

Everything else is a view of the plan: ``capabilities()["auto"]`` and ``["auto_plan"]``, the start-up
line, ``obs.plan`` and every report's ``source_plan``, the tables of docs/sources.md and docs/support.md
(``python -m c10d_observer.sources``; tests/unit/test_dispatch_table.py holds the files to it), and
what ``sources.build`` installs.  Pure: no torch here, so a plan can be computed from a recorded
capabilities record (compat/expected/) on any machine.
"""
import collections

from .. import compat

BACKENDS = ("gloo", "nccl", "nccl2", "other")
# collective: every collective but barrier; ddp_allreduce: DDP's gradient all-reduce, issued from C++
KINDS = ("collective", "barrier", "p2p", "monitored_barrier", "functional", "ddp_allreduce")
CHOICES = compat.SOURCES  # what source= accepts besides "auto": one list, in compat

_RECORDED = ("collective", "barrier", "functional", "ddp_allreduce")  # what a recorder or hook sees of a group

Row = collections.namedtuple("Row", "name choice events cost cost_text backends kinds probe")
# name: the row; choice: the source= value it belongs to; events: what Dispatch.native_for answers for a
# group whose collectives it makes (None: the patch wrappers make them); cost: rank, lower is cheaper;
# backends, kinds: what it sees (kinds may be a function of the capabilities); probe(caps, choice) ->
# (usable, reason)


def _source(name):
    def probe(caps, choice):
        r = (caps.get("sources") or {}).get(name) or {}
        return bool(r.get("usable")), r.get("reason") or "not probed"
    return probe


def _nccl_recorder(caps, choice):
    nplan = caps.get("nccl_plan") or {}
    if not nplan.get("recorder"):
        return False, nplan.get("why") or "no NCCL in this build"
    on = nplan.get("recorder_on")
    if on in (compat.RecorderOn.DEFAULT, compat.RecorderOn.ENV):
        return True, nplan.get("why")
    if on == compat.RecorderOn.ENABLE and choice in (None, "flight_recorder"):
        return True, nplan.get("why")
    if on == compat.RecorderOn.ENABLE:
        return False, "off by default on this torch; enable() turns it on only for source 'auto' or " \
                      "'flight_recorder'"
    return False, "turned off (%s)" % nplan.get("why")


def _nccl2_recorder(caps, choice):
    nplan = caps.get("nccl_plan") or {}
    if nplan.get("nccl2_recorder"):
        return True, "ProcessGroupNCCL2's FlightRecorderHook, read with _dump_fr_trace_json(backend='nccl2')"
    if not nplan.get("recorder"):
        return False, nplan.get("why") or "no NCCL in this build"
    return False, "no ProcessGroupNCCL2 recorder readable here (its _dump_fr_trace_json takes no backend)"


def _funcol(caps, choice):
    kind = caps.get("funcol")
    if kind == "native":
        return True, "torch.ops._c10d_functional ops wrapped; a call ends when its result is waited"
    if kind == "python":
        return False, "this torch issues functional collectives through torch.distributed: the patch " \
                      "wrappers see them"
    return False, "this torch has no functional collectives"


def _patch_kinds(caps):
    k = ("collective", "barrier", "p2p", "monitored_barrier", "ddp_allreduce")
    return k + ("functional",) if caps.get("funcol") == "python" else k


ROWS = (
    Row("hooks", "hooks", "hooks", 0, "none per call (torch's event thread)", BACKENDS, _RECORDED,
        _source("hooks")),
    Row("gloo_recorder", "flight_recorder", "gloo", 0, "none per call (pg_status read every poll/2)",
        ("gloo",), _RECORDED, _source("flight_recorder")),
    Row("nccl_recorder", "flight_recorder", "nccl", 0, "none per call (pg_status read every poll/2)",
        ("nccl",), _RECORDED, _nccl_recorder),
    Row("nccl2_recorder", "flight_recorder", "nccl2", 0, "none per call (pg_status read every poll/2)",
        ("nccl2",), _RECORDED, _nccl2_recorder),
    Row("funcol", "patch", None, 1, "a Python wrapper per functional call and per wait_tensor", BACKENDS,
        ("functional",), _funcol),
    Row("patch", "patch", None, 2, "+14,650 instructions per 4-byte gloo all_reduce (torch 2.13, Python 3.11; "
        "+26,400 on torch 1.8, Python 3.8)", BACKENDS, _patch_kinds, _source("patch")),
    Row("pg_hooks", "pg_hooks", "pg_hooks", 3, "+28,100 instructions per 4-byte gloo all_reduce (torch 2.15)",
        BACKENDS, ("collective", "barrier", "p2p", "functional", "ddp_allreduce"), _source("pg_hooks")),
)
BY_NAME = {r.name: r for r in ROWS}


def kinds_of(row, caps):
    return row.kinds(caps) if callable(row.kinds) else row.kinds


class Plan(object):
    """Which row makes the events of each (backend, kind) cell, and which follow it, for one choice.

    ``choice``: a source name, or None for ``auto``."""

    def __init__(self, caps, choice=None):
        self.choice = choice
        self.probes = {r.name: r.probe(caps, choice) for r in ROWS}
        usable = [r for r in ROWS if self.probes[r.name][0]]
        ordered = sorted(usable, key=lambda r: (r.choice != choice, r.cost))  # stable: table order
        self.cells = {}
        for kind in KINDS:
            for backend in BACKENDS:
                self.cells[(backend, kind)] = tuple(
                    r.name for r in ordered if backend in r.backends and kind in kinds_of(r, caps))
        self.fr_entries = bool(self.probes["gloo_recorder"][0])

    def first(self, backend, kind):
        """The row that makes the events of a cell, or None where no usable row sees it."""
        rows = self.cells[(backend, kind)]
        return rows[0] if rows else None

    def uses(self, row):
        """Whether ``row`` makes the events of some cell.  (The row next in line behind a recorder is
        always ``patch``, whose wrappers are always installed.)  A recorder that makes none is read for
        the entries reports carry only."""
        return any(rows[:1] == (row,) for rows in self.cells.values())

    def main_source(self):
        """The source= value of the row that makes gloo's collective events: what "the source" of a
        plan is called in capabilities()["auto"], obs.source and reports."""
        first = self.first("gloo", "collective")
        return BY_NAME[first].choice if first else None

    def view(self):
        """The plan as JSON-safe data: {kind: {backend: row}}, what follows each row, why each row is
        usable or not, and what each used one costs."""
        used = sorted({r for rows in self.cells.values() for r in rows[:1]}, key=lambda n: ROWS.index(BY_NAME[n]))
        return {
            "choice": self.choice or "auto",
            "cells": {k: {b: self.first(b, k) for b in BACKENDS} for k in KINDS},
            "fallback": {k: {b: self.cells[(b, k)][1] for b in BACKENDS if len(self.cells[(b, k)]) > 1
                             and BY_NAME[self.cells[(b, k)][0]].events in ("nccl2", "gloo", "nccl")}
                         for k in ("collective",)},
            "rows": {r.name: {"usable": self.probes[r.name][0], "why": self.probes[r.name][1],
                              "cost": r.cost_text if r.name in used else None} for r in ROWS},
            "report_fr_entries": self.fr_entries,
        }


def view_brief(view):
    """" (p2p: patch; NCCL: nccl_recorder)": what makes the events other than gloo's collectives, short."""
    cells = view["cells"]
    main = cells["collective"]["gloo"]
    bits = []
    for kind in ("functional", "p2p"):
        if cells[kind]["gloo"] not in (main, None):
            bits.append("%s: %s" % (kind, cells[kind]["gloo"]))
    nccl = [cells["collective"][b] for b in ("nccl", "nccl2") if view["rows"].get(b + "_recorder", {}).get("usable")
            or cells["collective"][b] != cells["collective"]["other"]]
    if nccl and nccl[0] != main:
        bits.append("NCCL: %s" % "/".join(sorted(set(nccl), key=nccl.index)))
    return " (%s)" % "; ".join(bits) if bits else ""


def view_text(view):
    """Every cell of the plan, for the log: "collective: gloo_recorder (gloo), patch (other); ..."."""
    parts = []
    for kind, by in view["cells"].items():
        rows = {}
        for b, r in by.items():
            rows.setdefault(r, []).append(b)
        if len(rows) > 1:
            parts.append("%s: %s" % (kind, ", ".join("%s (%s)" % (r, "/".join(bs)) for r, bs in rows.items())))
        else:
            parts.append("%s: %s" % (kind, next(iter(rows))))
    return "; ".join(parts)


def rejected(caps, choice, plan=None):
    """{source: why it is not the one making gloo's collective events} for every choice that could have
    been and is not (``plan``: that choice's Plan, where it is made already)."""
    plan = plan if plan is not None else Plan(caps, choice)
    main = plan.main_source()
    out = {}
    for name in CHOICES:
        if name == main:
            continue
        rows = [r for r in ROWS if r.choice == name and "gloo" in r.backends and "collective" in kinds_of(r, caps)]
        if not rows:
            continue
        usable, why = plan.probes[rows[0].name]
        if not usable:
            out[name] = why
        elif choice is not None:
            out[name] = "usable, but %r was asked for" % (choice,)
        else:
            out[name] = "usable, but dearer: %s" % rows[0].cost_text
    return out


# -- the tables in the docs ---------------------------------------------------------------------------
# README's columns: kinds shown together where every line's plan agrees on them
_COLUMNS = ((("collective", "barrier", "ddp_allreduce"), "collectives, barrier, DDP gradients (C++)"),
            (("functional",), "functional collectives, DTensor"),
            (("p2p", "monitored_barrier"), "p2p, monitored_barrier"))


def coverage_markdown(caps_like=None):
    """docs/sources.md's table: what each row sees (independent of the torch line)."""
    caps = caps_like or {"funcol": "native"}
    lines = ["| row | `source=` | backends | sees | cost per call |", "|---|---|---|---|---|"]
    for r in ROWS:
        kinds = list(kinds_of(r, caps))
        if r.name == "patch":
            kinds.append("functional (torch 2.1-2.2, through torch.distributed)")
        lines.append("| `%s` | `%s` | %s | %s | %s |" % (r.name, r.choice, ", ".join(r.backends),
                                                          ", ".join(kinds), r.cost_text))
    return "\n".join(lines)


def lines_markdown(plans):
    """README's table: ``plans`` is [(torch line label, build, cells {kind: {backend: row}})], consecutive
    lines with the same plan merged.  Columns are gloo's and other CPU backends' cells; NCCL's last."""
    merged = []
    for label, build, cells in plans:
        if merged and merged[-1][1:] == (build, cells):
            merged[-1][0].append(label)
        else:
            merged.append(([label], build, cells))
    head = "| torch | %s | NCCL collectives (run on a GPU: 2.11 only) |" % " | ".join(t for _, t in _COLUMNS)
    lines = [head, "|---" * (len(_COLUMNS) + 2) + "|"]

    def join(pairs):
        by = collections.OrderedDict()
        for key, row in pairs:
            by.setdefault(row or "none", []).append(key)
        return next(iter(by)) if len(by) == 1 else "; ".join("%s: %s" % ("/".join(k), r) for r, k in by.items())

    for labels, build, cells in merged:
        span = labels[0] if len(labels) == 1 else "%s – %s" % (labels[0], labels[-1])
        cols = [join((("%s %s" % (k, b)) if len(kinds) > 1 else b, cells[k][b]) for k in kinds
                     for b in ("gloo", "other")) if len({(cells[k]["gloo"], cells[k]["other"]) for k in kinds}) > 1
                else join((b, cells[kinds[0]][b]) for b in ("gloo", "other"))
                for kinds, _ in _COLUMNS]
        nccl = join((b, cells["collective"][b]) for b in ("nccl", "nccl2")) if build == "cuda" else \
            "not recorded (CPU wheel only)"
        lines.append("| %s | %s | %s |" % (span, " | ".join(cols), nccl))
    return "\n".join(lines)


def expected_plans(expected_dir):
    """[(torch line label, build, auto's cells)] from compat/expected/*.json, oldest first: the CUDA
    build's where recorded (what users run), else the CPU build's."""
    import json
    import os
    out = []
    for fname in os.listdir(expected_dir):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(expected_dir, fname)) as f:
            rec = json.load(f)
        plans = rec.get("auto_plan") or {}
        build = "cuda" if "cuda" in plans else "cpu"
        if build not in plans:
            continue
        version = rec["torch_version"].split("+")[0]
        out.append((tuple(int(p) for p in version.split(".")[:3]), version, build, plans[build]))
    out.sort()
    return [(v, b, c) for _, v, b, c in out]
