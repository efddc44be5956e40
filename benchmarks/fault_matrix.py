"""The fault matrix: every kind of hang, injected with real ranks, under each source, with and without a timeout;
how often the verdict names exactly the culprit, and how long after the fault.

    python benchmarks/fault_matrix.py [--quick] [--kinds skip,late] [--sources auto,patch] [--repeat 2]

Each run starts ``world`` gloo ranks (benchmarks/fault_job.py, one process each, a FileStore-free TCP store on a
free port) under ``C10D_OBSERVER=1`` with its own dump_dir, waits for the culprit's ``fault.json`` and then
for ``verdict.json`` to name culprits (at most ``--wait`` seconds after the fault), and ends the job.  A row:

    {"kind", "torch", "source", "world", "timeout", "expected_culprits", "named_culprits", "category",
     "outcome": "exact" | "undecided" | "wrong" | "missed" | "torch raised" | "not on this torch", "detect_s", "verdict_s", "level"}

``detect_s``: the first detection (a hang's ``detected_at``) minus the fault's start; ``verdict_s``: the first
verdict that named culprits (or the last verdict) minus the fault's start.  ``wrong``: a verdict named a rank
that is not the culprit, at any time.  ``undecided``: verdicts came and named nobody.  ``missed``: no verdict.
``torch raised``: every other rank ended by itself first (torch raised in them: gloo sees a dead peer's closed
connection), so there was nothing to find; ``not on this torch``: the kind needs what this torch lacks on CPU
(FSDP, functional collectives, DTensor) or a framework this env lacks (lightning, accelerate: installed in the
torch 2.13 full tier): ``why`` says what; both are left out of the shares.
Healthy runs (kind ``healthy``) count calls and verdicts (soft, hard) and signals sent.

Results go to benchmarks/results/fault_matrix[_<tag>].json (or ``--out``) with the command, machine and date;
a table is printed.  ``--quick``: one run per kind of a smaller set, the default source, no timeout.
``--gate``: exit 1 where a promise broke: a verdict named a wrong rank, a hanging kind was missed, a run with
no timeout had a hard verdict (before the default hard deadline: soft informs, hard acts), or a healthy run
had a verdict or a signal, or a rank said its new_group is not the others' (every kind makes its groups alike)
(tests/integration/test_fault_matrix.py runs ``--quick --gate``).
"""
from __future__ import print_function

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (RESULTS, child_env, end_sessions, free_port, machine, says_apart, summary, table, today,  # noqa: E402
                      write_json)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from c10d_observer import _autostart  # noqa: E402
from c10d_observer.dumpdir import read_json as _read  # noqa: E402  (the file may be mid-write: None)

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "fault_job.py")
JOB3D = os.path.join(HERE, "job3d.py")

# kind -> (world, culprit(s) expected, the rank that does the fault)
KINDS = {
    "skip": (3, [1], 1),
    "early_stall": (3, [1], 1),
    "dataloader_stall": (3, [2], 2),
    "late": (3, [1], 1),
    "exit": (3, [1], 1),
    "sigkill": (3, [1], 1),
    "frozen_before": (3, [2], 2),
    "frozen_inside": (3, [2], 2),
    "gil_c": (3, [1], 1),
    "op_mismatch": (3, [1], 1),
    "size_mismatch": (3, [1], 1),
    "dtype_mismatch": (3, [1], 1),
    "subgroup_skip": (4, [2], 2),
    "order": (2, [1], 1),
    "unmatched_recv": (3, [0], 0),
    "unmatched_send": (3, [1], 1),
    "wrong_root": (3, [1], 1),
    "async_burst": (3, [1], 1),
    "ddp_stall": (3, [1], 1),
    "checkpoint": (3, [0], 0),
    "checkpoint_phase": (3, [0], 0),
    "eval_one_rank": (3, [0], 0),
    "batch_p2p": (3, [1], 1),
    "batch_drop_send": (3, [1], 1),  # issue 42's "Why": one op left out of a batch_isend_irecv ring
    "batch_drop_recv": (3, [1], 1),
    "subgroup_skip_early": (4, [2], 2),  # the "Why" cases of issue 42, too
    "mesh_skip": (4, [3], 3),
    "coalesced": (3, [1], 1),
    "straggler": (3, [1], 1),
    "nodes2_skip": (4, [3], 3),
    "nodes4_skip": (4, [2], 2),
    "fsdp_stall": (3, [1], 1),
    "funcol_skip": (3, [1], 1),
    "dtensor_skip": (3, [1], 1),
    "lightning_stall": (2, [1], 1),
    "accelerate_stall": (2, [1], 1),
    "healthy": (3, [], -1),
    # issue 42's 3D job (benchmarks/job3d.py): 8 ranks, pp 2 x dp 2 x tp 2; rank 5 is stage 1, dp 0, tp 1
    "3d_pp_stall": (8, [5], 5),
    "3d_tp_skip": (8, [5], 5),
    "3d_fsdp_skip": (8, [5], 5),
}
NODES = {"nodes2_skip": 2, "nodes4_skip": 4}  # the ranks spread over this many nodes, each its own dump_dir
QUICK = ("skip", "early_stall", "dataloader_stall", "late", "sigkill", "frozen_inside", "subgroup_skip",
         "unmatched_recv", "batch_p2p", "nodes2_skip", "dtensor_skip", "healthy")


def _torch_version(env):
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], env=env,
                         stdout=subprocess.PIPE, universal_newlines=True)
    return out.stdout.strip()


def run_one(kind, source, timeout, wait_s, tmp, fault_step=30, step_s=0.1, verbose=False):
    world, expected, culprit = KINDS[kind]
    out = tempfile.mkdtemp(prefix="fm-%s-" % kind, dir=tmp)
    dumps = os.path.join(out, "dumps")
    port = free_port()
    env = child_env(C10D_OBSERVER="1", C10D_OBSERVER_DIR=dumps, C10D_OBSERVER_SOURCE=source,
                    C10D_OBSERVER_TIMEOUT=timeout, C10D_OBSERVER_QUIET="1", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=port, WORLD_SIZE=world)
    # mesh_skip hangs only at the job's end (gloo matches by order): a short tail after the fault
    steps = 120 if kind == "healthy" else fault_step + {"straggler": 400, "mesh_skip": 20}.get(kind, 200)
    nodes = NODES.get(kind, 1)
    local = world // nodes
    dirs = [dumps] if nodes == 1 else [os.path.join(dumps, "node%d" % n) for n in range(nodes)]
    procs, logs = [], []
    for r in range(world):
        log = open(os.path.join(out, "rank%d.log" % r), "w")
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r % local))
        if nodes > 1:  # as torchrun sets them on each node; a dump_dir of each node's own
            e.update(LOCAL_WORLD_SIZE=str(local), GROUP_RANK=str(r // local), C10D_OBSERVER_DIR=dirs[r // local])
        job = JOB3D if kind.startswith("3d_") else JOB
        procs.append(subprocess.Popen([sys.executable, job, "--kind", kind, "--out", out, "--culprit", str(culprit),
                                       "--fault-step", str(fault_step), "--steps", str(steps), "--step-s",
                                       str(step_s)], env=e, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        logs.append(log)
    row = {"kind": kind, "source": source, "world": world, "timeout": timeout,
           "expected_culprits": expected, "named_culprits": [], "category": None, "outcome": "missed",
           "detect_s": None, "verdict_s": None, "level": None}
    t0 = time.time()
    fault = None
    named_at = None
    last = None
    try:
        if kind == "healthy":
            for p in procs:
                p.wait(timeout=steps * step_s * 3 + 120)
        else:
            deadline = t0 + 120  # the fault comes after fault_step steps
            while fault is None and time.time() < deadline:
                fault = _read(os.path.join(out, "fault.json"))
                if fault is None and all(p.poll() is not None for p in procs):
                    break
                time.sleep(0.1)
            if fault is None:
                gone = _read(os.path.join(out, "unavailable.json"))
                row["outcome"] = "not on this torch" if gone else "no fault"
                if gone:
                    row["why"] = gone["reason"]
                return row
            end = fault["at"] + wait_s
            others = [pr for r, pr in enumerate(procs) if r != culprit]
            while time.time() < end:
                if all(pr.poll() is not None for pr in others) and last is None and kind != "straggler":
                    # every other rank ended by itself: torch raised in them (gloo sees a peer's closed
                    # connection at once): a failed job, not a hang
                    row["outcome"] = "torch raised"
                    row["rcs"] = [pr.returncode for pr in procs]
                    return row
                if kind == "straggler":
                    v = _straggler_verdict(dirs)
                else:
                    v = next((x for x in (_read(os.path.join(d, "verdict.json")) for d in dirs) if x), None)
                if v is not None and v.get("hangs") and v != last:
                    last = v
                    named = sorted(v.get("culprit_ranks") or [])
                    if named and named_at is None:
                        named_at = v
                    if named and set(named) - set(expected):
                        break  # wrong: said at once
                    if named and set(named) == set(expected):
                        break
                time.sleep(0.1)
    finally:
        end_sessions(procs)
        for log in logs:
            log.close()
        # every kind makes its groups alike on every rank: a rank that says its new_group is not the others' is
        # a false alarm (--gate)
        row["said_apart"] = [r for r in range(world) if says_apart(os.path.join(out, "rank%d.log" % r))]
    if kind == "healthy":
        verdicts = [_read(f) for f in glob.glob(os.path.join(dumps, "verdict-*.json"))]
        named = (_read(os.path.join(dumps, "stragglers.json")) or {}).get("groups") or []
        row["stragglers"] = sorted({g["straggler"]["rank"] for g in named if g.get("straggler")})
        levels = [((d or {}).get("verdict") or {}).get("level") for d in verdicts]
        calls = sum((_read(os.path.join(out, "rank%d.json" % r)) or {}).get("calls", 0) for r in range(world))
        signals = sum((_read(os.path.join(out, "rank%d.json" % r)) or {}).get("signals", 0) for r in range(world))
        row.update(calls=calls, soft=levels.count("soft"), hard=levels.count("hard"), signals=signals,
                   outcome="exact" if not verdicts and not row["stragglers"] else "false alarm", rcs=[p.returncode for p in procs])
        return row
    v = named_at or last
    if v is None:
        return row
    first = v["hangs"][0]
    detected = [h.get("detected_at") for h in v["hangs"] if h.get("detected_at")]
    row["named_culprits"] = sorted(v.get("culprit_ranks") or [])
    row["category"] = first.get("category")
    row["level"] = v.get("level")
    row["detect_s"] = round(min(detected) - fault["at"], 2) if detected else None
    row["verdict_s"] = round(v.get("verdict_at", 0) - fault["at"], 2) if v.get("verdict_at") else None
    named = set(row["named_culprits"])
    row["outcome"] = ("wrong" if named - set(expected) else "exact" if named == set(expected) else
                      "undecided" if not named else "partial")
    row["summary"] = v.get("summary")
    row["undecided"] = v.get("undecided") or []
    return row


def _straggler_verdict(dirs):
    """stragglers.json of any node as a verdict-like dict: the ranks it names, since when (no hang: the
    straggler rule, arrivals.py)."""
    for d in dirs:
        doc = _read(os.path.join(d, "stragglers.json"))
        named = [g["straggler"] for g in (doc or {}).get("groups") or () if g.get("straggler")]
        if named:
            since = min(s.get("since") or 0 for s in named)
            return {"hangs": [{"category": "straggler", "detected_at": since}],
                    "culprit_ranks": sorted({s["rank"] for s in named}), "verdict_at": since,
                    "summary": "; ".join(s.get("text") or "rank %d" % s["rank"] for s in named)}
    return None


SKIPPED = ("no fault", "torch raised", "not on this torch")  # runs that count in no share


def summary_rows(rows):
    """Per (torch, source, timeout): runs, exact / undecided / wrong / missed shares, p50 and p90 seconds from
    the fault to the verdict that named the culprit (exact runs of the kinds that hang: not the straggler)."""
    out = []
    keys = sorted({(r["torch"], r["source"], -1 if r["timeout"] is None else r["timeout"]) for r in rows
                   if r["kind"] != "healthy"})
    for tv, source, timeout in keys:
        timeout = None if timeout == -1 else timeout
        rs = [r for r in rows if r["kind"] != "healthy" and r["outcome"] not in SKIPPED
              and r["torch"] == tv
              and r["source"] == source and r["timeout"] == timeout]
        if not rs:
            continue
        n = float(len(rs))
        # the straggler is not a hang: its time (the slowdown to its naming) is not a time to a hang's culprit
        times = [r["verdict_s"] for r in rs if r["outcome"] == "exact" and r["verdict_s"] is not None
                 and r["kind"] != "straggler"]
        s = summary(times, keys=("median", "p90")) if times else {"median": None, "p90": None}
        out.append([tv, source, "none" if timeout is None else "%g s" % timeout, len(rs),
                    "%.0f %%" % (100 * sum(r["outcome"] == "exact" for r in rs) / n),
                    "%.0f %%" % (100 * sum(r["outcome"] == "undecided" for r in rs) / n),
                    "%.0f %%" % (100 * sum(r["outcome"] == "wrong" for r in rs) / n),
                    "%.0f %%" % (100 * sum(r["outcome"] in ("missed", "partial") for r in rs) / n),
                    None if s["median"] is None else "%.1f" % s["median"],
                    None if s["p90"] is None else "%.1f" % s["p90"]])
    return out


SUMMARY_HEAD = ("torch", "source", "timeout", "runs", "exact", "undecided", "wrong", "missed", "p50 s", "p90 s")


def _line(r):
    return (r["torch"], r["source"], r["timeout"], r["kind"])


def _repeated(rows):
    """Whether some kind ran more than once on one line, source and timeout (--repeat)."""
    lines = [_line(r) for r in rows]
    return len(set(lines)) < len(lines)


def _span(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return "%g" % lo if lo == hi else "%g-%g" % (lo, hi)


def repeats_markdown(rows):
    """Repeated runs, one row per kind and line: how many runs, their outcomes and categories (with counts
    where they differ) and the range of their times."""
    head = ("kind", "torch", "source", "timeout", "runs", "outcomes", "categories", "detect s", "verdict s")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = {}
    for r in rows:
        if r["kind"] != "healthy":
            groups.setdefault(_line(r), []).append(r)

    def counted(values):
        seen = []
        for v in values:
            if v not in seen:
                seen.append(v)
        return "-" if seen == ["-"] else ", ".join("%s x%d" % (v, values.count(v)) for v in seen)

    for (tv, source, timeout, kind), rs in groups.items():
        out.append("| " + " | ".join(str(c) for c in (
            kind, tv, source, "none" if timeout is None else "%g s" % timeout, len(rs),
            counted([r["outcome"] for r in rs]), counted([r.get("category") or "-" for r in rs]),
            _span([r["detect_s"] for r in rs]), _span([r["verdict_s"] for r in rs]))) + " |")
    return out


def markdown(paths):
    """The stored results as markdown: the summary, then every run (one row per kind where runs were
    repeated: repeats_markdown)."""
    rows, made = [], []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        rows += doc["rows"]
        made.append("`%s` (%s, %s, %d cores)" % (doc["command"], doc["date"], doc["machine"]["platform"],
                                                 doc["machine"]["cpu_count"]))
    lines = ["Made by " + "; ".join(made) + ".", "", "| " + " | ".join(SUMMARY_HEAD) + " |",
             "|" + "---|" * len(SUMMARY_HEAD)]
    lines += ["| " + " | ".join("-" if c is None else str(c) for c in r) + " |" for r in summary_rows(rows)]
    head = ("kind", "torch", "source", "timeout", "world", "expected", "named", "category", "outcome", "detect s",
            "verdict s")
    if _repeated(rows):
        lines += [""] + repeats_markdown(rows)
        rows = []
    else:
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["kind"] == "healthy":
            continue
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in (
            r["kind"], r["torch"], r["source"], "none" if r["timeout"] is None else "%g s" % r["timeout"], r["world"],
            r["expected_culprits"], r["named_culprits"], r.get("category"), r["outcome"], r["detect_s"],
            r["verdict_s"])) + " |")
    healthy = [r for r in rows if r["kind"] == "healthy"]
    if healthy:
        lines += ["", "| healthy runs: torch | source | timeout | calls | soft verdicts | hard verdicts | signals |",
                  "|---|---|---|---|---|---|---|"]
        for r in healthy:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["torch"], r["source"], "none" if r["timeout"] is None else "%g s" % r["timeout"], r.get("calls"),
                r.get("soft"), r.get("hard"), r.get("signals")))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one run per kind of %s, default source, no timeout" %
                   ", ".join(QUICK))
    p.add_argument("--kinds", default=None, help="comma-separated kinds (default: all): %s" % ", ".join(KINDS))
    p.add_argument("--sources", default="auto,patch", help="comma-separated sources (default auto,patch)")
    p.add_argument("--timeouts", default="none,5", help="'none' (no timeout given) and seconds (default none,5)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--wait", type=float, default=45.0, help="seconds after the fault to wait for a culprit")
    p.add_argument("--tag", default="", help="results file suffix")
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/fault_matrix[_TAG].json)")
    p.add_argument("--gate", action="store_true", help="exit 1 on a wrong culprit, a missed hang or a healthy "
                   "run's verdict or signal")
    p.add_argument("--markdown", nargs="+", metavar="RESULTS.json", help="print stored results as markdown "
                   "tables (docs/fault-matrix.md) and run nothing")
    a = p.parse_args()
    if a.markdown:
        print(markdown(a.markdown))
        return
    kinds = list(QUICK) if a.quick else (a.kinds.split(",") if a.kinds else list(KINDS))
    for k in kinds:
        if k not in KINDS:
            p.error("--kinds: %r is not one of %s" % (k, ", ".join(KINDS)))
    sources = ["auto"] if a.quick else a.sources.split(",")
    timeouts = [None] if a.quick else [None if t == "none" else float(t) for t in a.timeouts.split(",")]
    if not _autostart.pth_installed():  # the ranks would run unobserved: every hang "missed"
        p.exit(2, "fault_matrix.py: c10d_observer.pth is not in this interpreter's site-packages (a source "
               "checkout or an editable install), so C10D_OBSERVER=1 starts no observer in the ranks; install "
               "the package from its wheel (pip install .) into %s\n" % sys.executable)
    env = child_env()
    tv = _torch_version(env)
    tmp = tempfile.mkdtemp(prefix="fault-matrix-")
    rows = []
    for rep in range(a.repeat):
        for kind in kinds:
            for source in sources:
                for timeout in timeouts:
                    row = run_one(kind, source, timeout, a.wait, tmp)  # None: no C10D_OBSERVER_TIMEOUT
                    row["timeout"] = timeout
                    row["torch"] = tv
                    rows.append(row)
                    print("%-17s %-6s timeout %-4s -> %-9s named %-6s expected %-4s detect %-6s verdict %-6s %s" % (
                        kind, source, timeout, row["outcome"], row["named_culprits"], row["expected_culprits"],
                        row["detect_s"], row["verdict_s"], row.get("category")), flush=True)
    lines = summary_rows(rows)
    table(SUMMARY_HEAD, lines, "lll")
    healthy = [r for r in rows if r["kind"] == "healthy"]
    for r in healthy:
        print("healthy %s timeout %s: %d calls, %d soft, %d hard verdicts, %d signals" % (
            r["source"], r["timeout"], r.get("calls", 0), r.get("soft", 0), r.get("hard", 0), r.get("signals", 0)))
    path = a.out or os.path.join(RESULTS, "fault_matrix%s.json" % ("_" + a.tag if a.tag else ""))
    write_json(path, {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "machine": machine(), "date": today(),
        "torch": tv, "rows": rows, "table": lines})
    print("results: %s" % os.path.relpath(path))
    if a.gate:
        broken = gate(rows)
        for line in broken:
            print("GATE: " + line)
        if broken:
            sys.exit(1)


def gate(rows):
    """The promises a run can break: never a wrong culprit, no hang left unfound, no false alarm."""
    out = []
    for r in rows:
        where = "%s (%s, timeout %s)" % (r["kind"], r["source"], r["timeout"])
        if r["outcome"] == "wrong":
            out.append("%s: named %s, the culprit is %s" % (where, r["named_culprits"], r["expected_culprits"]))
        elif r["outcome"] == "missed":
            out.append("%s: no verdict" % where)
        elif r["kind"] != "healthy" and r["timeout"] is None and r.get("level") == "hard":
            # no timeout given: the hard deadline is the default 300 s, beyond any run's wait
            out.append("%s: a hard verdict %s s after the fault, before the default hard deadline: soft verdicts "
                       "inform, only hard ones act" % (where, r.get("verdict_s")))
        elif r.get("said_apart"):
            out.append("%s: ranks %s said a new_group is not the same group on every rank, where every rank makes "
                       "them alike" % (where, r["said_apart"]))
        elif r["kind"] == "healthy" and (r["outcome"] != "exact" or r.get("signals")):
            out.append("%s: %s soft, %s hard verdicts, %s signals, stragglers %s in a healthy run" % (
                where, r.get("soft"), r.get("hard"), r.get("signals"), r.get("stragglers")))
    return out


if __name__ == "__main__":
    main()
