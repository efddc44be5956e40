"""Per-rank reports: the writer (used by the watchdog, so no torch here) and the reader.

A report is versioned JSON, written to a temporary name and renamed into place.  The reader only ever
parses JSON; it never unpickles anything.  The cross-rank verdict is meant to grow in this module.
"""
import datetime
import glob
import json
import os

from . import channel as _ch

FORMAT = "c10d_observer.report"
VERSION = 1
REPORT_GLOB = "report-rank*.json"


def report_name(rank, pid):
    return "report-rank%s-pid%d.json" % (rank if rank >= 0 else "unknown", pid)


def stacks_name(rank, pid):
    return "stacks-rank%s-pid%d.txt" % (rank if rank >= 0 else "unknown", pid)


def py_spy_name(rank, pid):
    """py-spy's dump (native and Python frames of every thread) of a rank, where py-spy is installed."""
    return "pyspy-rank%s-pid%d.txt" % (rank if rank >= 0 else "unknown", pid)


def fr_name(rank, pid):
    """Flight-recorder entries of the calls in flight and their neighbours, as the rank converted them."""
    return "fr-rank%s-pid%d.json" % (rank if rank >= 0 else "unknown", pid)


def stack_request_name(pid):
    """The watchdog's request that the rank's helper thread write its stacks (no signal needed)."""
    return "stackreq-pid%d.json" % pid


def handler_name(rank, pid):
    """Written by the rank when the observer's signal handler was replaced: which handler replaced it."""
    return "signal-rank%s-pid%d.json" % (rank if rank >= 0 else "unknown", pid)


RUNS_OVER = 16  # a group's ranks list longer than this is written as runs (channel.rank_runs)
_EXPANDED = {}  # runs (JSON) -> the list they stand for: one list per group, however many documents


def compact_ranks(doc):
    """A rank's document with its groups' ranks as runs [first, count, step] where the list is long
    (``ranks`` -> ``ranks_runs``, ``group_ranks`` -> ``group_ranks_runs``): every document named all the
    job's ranks, so a gather read ranks x ranks numbers (16 million at 4,096 ranks).  In place; returns it."""
    for items, key in ((doc.get("groups"), "ranks"), (doc.get("overdue"), "group_ranks")):
        for d in items or ():
            ranks = d.get(key)
            if isinstance(ranks, list) and len(ranks) > RUNS_OVER:
                d[key], d[key + "_runs"] = None, _ch.rank_runs(ranks)
    return doc


def expand_ranks(doc):
    """The inverse of compact_ranks, as documents are read (documents of one job share each list)."""
    for items, key in ((doc.get("groups"), "ranks"), (doc.get("overdue"), "group_ranks")):
        for d in items or ():
            runs = d.pop(key + "_runs", None) if isinstance(d, dict) else None
            if runs is not None and d.get(key) is None:
                k = json.dumps(runs)
                if k not in _EXPANDED:
                    if len(_EXPANDED) > 1024:
                        _EXPANDED.clear()
                    _EXPANDED[k] = _ch.expand_runs(runs)
                d[key] = _EXPANDED[k]
    return doc


def write_atomic(path, obj):
    """Write JSON to a temporary name beside ``path``, then rename it into place.

    One line, through ``json.dumps`` without indent: the only form json encodes in C (``json.dump`` and any
    indent take the pure-Python encoder, 20 to 50 times slower: at 1,024 ranks it was most of the gather's
    time, benchmarks/scale.py).  ``report DIR`` and ``--json`` give the readable forms."""
    tmp = os.path.join(os.path.dirname(path) or ".", ".tmp-%d-%s" % (os.getpid(), os.path.basename(path)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(obj, sort_keys=True))
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def format_ranks(ranks):
    """[0, 1, 2, 3, 8] -> '0-3,8'."""
    if ranks is None:
        return "?"
    out = []
    ranks = sorted(ranks)
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else "%d-%d" % (ranks[i], ranks[j]))
        i = j + 1
    return ",".join(out)


def describe_call(entry):
    """'all_reduce #5 on group 0 (ranks 0-3), 1024 x float32' for one overdue entry (size where known)."""
    op = entry.get("op", "?")
    if entry.get("api"):
        op = "%s (in %s)" % (op, entry["api"])
    where = "group %s (ranks %s)" % (entry.get("group"), format_ranks(entry.get("group_ranks")))
    if entry.get("kind") == "p2p":
        peer = entry.get("peer")
        where += ", peer %s" % ("any" if peer is None else peer)
    size = ", %s" % entry["size"] if entry.get("size") else ""
    return "%s #%s on %s%s" % (op, entry.get("seq"), where, size)


# -- reader ------------------------------------------------------------------------------------------
class ReportError(ValueError):
    pass


def read_json(path):
    """The JSON in a file, or None if it is missing, partly written or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load(path):
    with open(path) as f:
        try:
            obj = json.load(f)
        except ValueError as e:
            raise ReportError("%s is not JSON: %s" % (path, e))
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ReportError("%s is not a c10d-observer report" % path)
    if obj.get("version") != VERSION:
        raise ReportError("%s has report version %r; this reader reads version %d"
                          % (path, obj.get("version"), VERSION))
    return expand_ranks(obj)


def load_dir(directory):
    """(reports sorted by rank, problems): every report in ``directory``; unreadable ones are named."""
    if not os.path.isdir(directory):
        raise ReportError("%s is not a directory" % directory)
    reports, problems = [], []
    for path in sorted(glob.glob(os.path.join(directory, REPORT_GLOB))):
        try:
            rep = load(path)
        except (ReportError, OSError) as e:
            problems.append(str(e))
            continue
        rep["_path"] = path
        reports.append(rep)
    reports.sort(key=lambda r: (_int(r.get("rank")), _int(r.get("pid"))))
    return reports, problems


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _clock(ts):
    if ts is None:
        return "?"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def summarize(reports, problems=()):
    """A readable per-rank summary (text)."""
    lines = []
    if not reports:
        lines.append("no c10d-observer reports found")
    for rep in reports:
        lines.append("rank %s/%s  host %s  pid %s  torch %s  source %s"
                     % (rep.get("rank"), rep.get("world_size"), rep.get("host"), rep.get("pid"),
                        rep.get("torch_version"), rep.get("source")))
        cfg = rep.get("config") if isinstance(rep.get("config"), dict) else {}
        for e in rep.get("overdue") or []:
            if not isinstance(e, dict):
                continue
            lines.append("  OVERDUE %s: started %s, detected %s (%.1f s in flight, timeout %g s)%s"
                         % (describe_call(e), _clock(e.get("started_at")), _clock(e.get("detected_at")),
                            e.get("age_s", 0.0), cfg.get("timeout", 0), "" if e.get("in_flight", True)
                            else "; completed later%s" % (" (resolved after %s s in flight)" % e["resolved_after_s"]
                                                          if e.get("resolved_after_s") is not None else "")))
        done = ["%s=%s" % (g.get("stream"), g.get("last_completed")) for g in rep.get("groups") or []
                if isinstance(g, dict)]
        if done:
            lines.append("  last completed seq: " + ", ".join(done))
        for g in rep.get("groups") or []:
            if isinstance(g, dict) and g.get("ring_overflow"):
                lines.append("  %s: %d call(s) not tracked one by one (a burst of more calls in flight than the "
                             "channel holds per stream); the oldest call in flight is always kept"
                             % (g.get("stream"), g["ring_overflow"]))
        if rep.get("stack_dump"):
            lines.append("  stacks: %s" % rep["stack_dump"])
    for p in problems:
        lines.append("unreadable: %s" % p)
    return "\n".join(lines)
