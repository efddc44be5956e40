"""One verdict across all ranks: which call is stuck, who waits in it, who never arrived and where they are.

Input: the per-rank documents in a dump_dir (``report-*.json``, written when a rank's call is overdue, and
``state-*.json``, written by every watchdog when a gather is requested and by a watchdog whose rank died).
Each says, per stream (a group's collectives, or one direction of a group's p2p calls), the last sequence
number started and completed and the call in flight.  No torch here: the watchdog runs this.

For a stuck (stream, seq), a member rank has either finished it (last completed >= seq), entered it and
waits (last started >= seq), or never entered it: it is *missing*, a suspect.  A missing rank that is
itself waiting in another stuck call is not the root: that call's missing ranks are (a cascade).  The
culprits are the missing ranks that wait in no stuck call (busy elsewhere, frozen, dead), plus the ranks
that issued a different op at the same seq as the majority (a desync).  Ranks with no document at all are
listed as silent: unknown, never guessed.
"""
import collections
import glob
import json
import os
import re

from . import report as _report

VERSION = 1
STATE_GLOB = "state-rank*.json"
NODE_GLOB = "states-node*.json"  # the states of another node's ranks, one file per node (relay.py)
VERDICT_JSON = "verdict.json"
VERDICT_TEXT = "verdict.txt"
SAME_JOB_S = 120.0  # watchdogs of one job start within this of each other (older files are another job's)


GATHER_NAME = "gather-request.json"


def stacks_arrived(doc):
    """Whether the stack dump a state's watchdog asked for has reached the rank's stacks file (a rank
    whose Python cannot run, one that was not signalled, or a dead one has none to wait for)."""
    before = doc.get("stacks_size_before")
    if before is None or doc.get("frozen") or doc.get("alive") is False:
        return True
    try:
        return os.path.getsize(doc.get("stack_dump") or "") > before
    except OSError:
        return False


def node_states_name(slot):
    return "states-node%d.json" % slot


def state_docs(path):
    """The state documents in one file: a rank's state file, or a node's (``docs``, written by relay.py
    on the merging node; their stacks come inline as ``stacks_text``).  Raises as report.load."""
    doc = _report.load(path)
    if doc.get("kind") != "node_states":
        return [doc]
    return [_report.expand_ranks(d) for d in doc.get("docs") or () if isinstance(d, dict)]


def state_name(rank, pid):
    return "state-rank%s-pid%d.json" % (rank if rank >= 0 else "unknown", pid)


# -- loading ------------------------------------------------------------------------------------------
def load_docs(directory, torch_dumps=False):
    """(one document per rank: the newest of the newest job, problems).

    ``torch_dumps``: also torch's own flight-recorder dumps in JSON (torch_fr.py), used where the
    directory holds no observer documents (their sequence numbers are torch's, not the observer's).
    """
    if not os.path.isdir(directory):
        raise _report.ReportError("%s is not a directory" % directory)
    docs, problems = [], []
    for pattern in (_report.REPORT_GLOB, STATE_GLOB, NODE_GLOB):
        for path in sorted(glob.glob(os.path.join(directory, pattern))):
            try:
                found = state_docs(path)
            except (_report.ReportError, OSError) as e:
                problems.append(str(e))
                continue
            for doc in found:
                doc["_path"] = path
                docs.append(doc)
    if torch_dumps:
        from . import torch_fr
        fr_docs, fr_problems = torch_fr.load_dir(directory)
        problems.extend(fr_problems)
        if fr_docs and docs:
            problems.append("%d torch flight-recorder dump(s) not used: the observer's own documents are"
                            % len(fr_docs))
        elif fr_docs:
            docs = fr_docs
    return latest_per_rank(docs), problems


def load(directory, default_dir=None):
    """(verdict, problems, directory read) for ``report DIR`` and ``load_verdict``.

    Where DIR holds no document but DIR/<default_dir> does (the job's folder), that is read.  A folder with
    none is an error (ReportError), never an empty verdict: a check must not read it as a healthy job."""
    docs, problems = load_docs(directory, torch_dumps=True)
    reports, _ = _report.load_dir(directory)
    inner = os.path.join(directory, default_dir) if default_dir else None
    if not docs and not reports and inner and os.path.isdir(inner):
        directory = inner
        docs, problems = load_docs(directory, torch_dumps=True)
        reports, _ = _report.load_dir(directory)
    if not docs and not reports:
        raise _report.ReportError(
            "%s holds no c10d-observer report or state (report-rank*.json, state-rank*.json) and no torch "
            "flight-recorder dump in JSON%s.  Pass the job's dump_dir: ./%s unless enable(dump_dir=...), "
            "run --dump-dir or $C10D_OBSERVER_DIR chose another."
            % (directory, "".join("\n  unreadable: %s" % p for p in problems), default_dir or "c10d_observer"))
    return analyze(docs), problems, directory


def latest_per_rank(docs):
    docs = [d for d in docs if isinstance(d.get("rank"), int) and d["rank"] >= 0]
    if not docs:
        return {}
    newest = max(docs, key=lambda d: d.get("written_at") or 0)
    job = newest.get("job_id")
    starts = [d["watchdog_started_at"] for d in docs if d.get("job_id") == job and d.get("watchdog_started_at")]
    since = max(starts) - SAME_JOB_S if starts else None
    docs = [d for d in docs if d.get("job_id") == job and not (
        since is not None and d.get("watchdog_started_at") and d["watchdog_started_at"] < since)]
    # The newest gather is one snapshot of every rank: use it even where a report was rewritten later
    # (a call that completed once the culprit went on), so that the verdict can be made again afterwards.
    gathered = [d for d in docs if d.get("gather_id")]
    gid = max(gathered, key=lambda d: d.get("written_at") or 0)["gather_id"] if gathered else None
    out = {}
    for d in docs:
        cur = out.get(d["rank"])
        if cur is not None and gid is not None and (cur.get("gather_id") == gid) != (d.get("gather_id") == gid):
            if d.get("gather_id") == gid:
                out[d["rank"]] = d
            continue
        if cur is None or (d.get("written_at") or 0) >= (cur.get("written_at") or 0):
            out[d["rank"]] = d
    return out


# -- stacks -------------------------------------------------------------------------------------------
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>.+)$')


def main_thread_frames(path, main_thread, text=None):
    """Frames ('func (file:line)', innermost first) of the main thread in the last dump of a stacks file
    (or of ``text``, the summary relay.py brings from another node)."""
    if text is None:
        try:
            with open(path) as f:
                text = f.read()
        except (OSError, TypeError):
            return None
    if not main_thread:
        return None
    header = re.compile(r"^(Current thread|Thread) 0x0*%x \(most recent call first\):$" % main_thread, re.M)
    heads = list(header.finditer(text))
    if not heads:
        return None
    frames = []
    for line in text[heads[-1].end():].splitlines()[1:]:
        m = _FRAME.match(line)
        if not m:
            break
        frames.append("%s (%s:%s)" % (m.group("func"), os.path.basename(m.group("file")), m.group("line")))
    return frames


def _signature(frames):
    # frames without line numbers of the innermost few: ranks stuck at the same place share it
    return tuple(re.sub(r":\d+\)$", ")", f) for f in frames[:8])


# -- the analysis -------------------------------------------------------------------------------------
def _members(g):
    if g.get("kind") == "p2p" and g.get("src") is not None and g.get("dst") is not None:
        return sorted({g["src"], g["dst"]})
    return g.get("ranks") or []


def _positions(doc):
    return {g.get("stream"): g for g in doc.get("groups") or [] if isinstance(g, dict)}


def _timeout(doc):
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    return cfg.get("timeout") or 0


def _in_flight(g, seen_by, detected_at=None):
    """The call a rank has in flight on one stream (a group position), as a stuck-call entry."""
    return {"group": g.get("group"), "stream": g.get("stream"), "group_ranks": g.get("ranks"),
            "kind": g.get("kind"), "peer": g.get("peer"), "seq": g.get("in_flight_seq"),
            "op": g.get("in_flight_op"), "api": g.get("in_flight_api", ""), "size": g.get("in_flight_size"),
            "started_at": g.get("in_flight_since"), "detected_at": detected_at, "_seen_by": set(seen_by)}


def _candidates(by_rank):
    """Every (stream, seq) a rank has had in flight for longer than its timeout."""
    found = collections.OrderedDict()
    for r, doc in sorted(by_rank.items()):
        # a rank that died after its watchdog found a call overdue still counts (on_timeout="abort" ends it)
        for e in doc.get("overdue") or []:
            if isinstance(e, dict) and e.get("in_flight", True):
                key = (e.get("stream"), e.get("seq"))
                c = found.setdefault(key, dict(e, _seen_by={r}))
                c["_seen_by"].add(r)
                if e.get("age_s") is not None:  # the first detection's age: the number the console printed
                    c["age_s"] = min(c.get("age_s") or e["age_s"], e["age_s"])
        if doc.get("alive") is False:
            continue
        for g in _positions(doc).values():
            seq, since = g.get("in_flight_seq"), g.get("in_flight_since")
            if seq is None or since is None:
                continue
            age = (doc.get("written_at") or since) - since
            # a torch dump's ages are lower bounds (torch_fr.py) and its timeout is 0: every call in it counts
            if age > _timeout(doc) or doc.get("ages_at_least"):
                key = (g.get("stream"), seq)
                found.setdefault(key, _in_flight(g, (), doc.get("written_at")))["_seen_by"].add(r)
    return found


def _resolved(by_rank, stuck):
    """Calls that were overdue on some rank and completed later (the hang resolved): one entry per
    (stream, seq) still not stuck, with the longest time it was in flight and the ranks that reported it."""
    out = collections.OrderedDict()
    for r, doc in sorted(by_rank.items()):
        for e in doc.get("overdue") or []:
            if not isinstance(e, dict) or e.get("in_flight", True) or not e.get("resolved"):
                continue
            key = (e.get("stream"), e.get("seq"))
            if key in stuck:
                continue
            item = out.get(key)
            if item is None:
                item = out[key] = {k: e.get(k) for k in ("group", "stream", "group_ranks", "kind", "peer", "seq",
                                                         "op", "api", "size", "started_at")}
                item.update(resolved=True, resolved_after_s=e.get("resolved_after_s"), reported_by=[])
            item["resolved_after_s"] = max(item["resolved_after_s"] or 0, e.get("resolved_after_s") or 0)
            item["reported_by"].append(r)
    return list(out.values())


def _where(doc, now):
    """Where a rank that never entered a stuck call is instead."""
    if doc is None:
        return {"state": "unknown", "text": "sent nothing: dead, unreachable or not observed; unknown"}
    if doc.get("alive") is False:
        return {"state": "dead", "text": "dead: %s" % (doc.get("exit_reason") or "its process is gone")}
    out = {"state": "no_collective", "calls": []}
    for g in _positions(doc).values():
        if g.get("in_flight_seq") is None:
            continue
        call = {k: v for k, v in _in_flight(g, ()).items()
                if k in ("group", "stream", "seq", "op", "group_ranks", "kind", "peer")}
        if g.get("in_flight_since"):
            call["for_s"] = round((doc.get("written_at") or now) - g["in_flight_since"], 1)
            call["for_at_least"] = bool(doc.get("ages_at_least"))
        out["calls"].append(call)
    if out["calls"]:
        out["state"] = "in_collective"
        out["text"] = "it is in " + "; ".join(
            "%s%s" % (_report.describe_call(c), " for %s%g s" % ("at least " if c.get("for_at_least") else "",
                                                                 c["for_s"]) if "for_s" in c else "")
            for c in out["calls"])
    else:
        out["text"] = "it is in no collective"
    if doc.get("frozen"):
        out["state"] = "frozen"
        out["text"] += ("; its Python has not run for %.1f s (a thread holds the GIL, or the process is "
                        "stopped): a frozen process, not a collective hang" % (doc.get("heartbeat_age_s") or 0))
    frames = doc.get("_frames")
    if frames:
        out["main_thread"] = frames[0]
        out["text"] += "; main thread at %s" % frames[0]
    return out


def analyze(by_rank, world_size=None, now=None):
    """The verdict (a dict, the JSON contract) from one document per rank."""
    for r, doc in by_rank.items():
        if "_frames" not in doc:
            doc["_frames"] = main_thread_frames(doc.get("stack_dump"), doc.get("main_thread"), doc.get("stacks_text"))
    if world_size is None:
        world_size = max([d.get("world_size") or 0 for d in by_rank.values()] or [0])
    now = now if now is not None else max([d.get("written_at") or 0 for d in by_rank.values()] or [0])
    cands = _candidates(by_rank)

    hangs, seen = [], set()
    todo = list(cands.items())
    while todo:
        (stream, seq), e = todo.pop(0)
        if (stream, seq) in seen:
            continue
        seen.add((stream, seq))
        h = _evaluate(by_rank, stream, seq, e, now)
        if e.get("_derived") and not h["missing_ranks"] and "mismatch" not in h:
            continue  # a call everyone is in: under way, not stuck
        hangs.append(h)
        # a rank that never arrived may be waiting in a call of its own, younger than the timeout: look
        # at that call too, so that a cascade is named by its root even before the root is overdue
        for r in h["missing_ranks"]:
            doc = by_rank.get(r)
            if doc is None or doc.get("alive") is False:
                continue
            for g in _positions(doc).values():
                key = (g.get("stream"), g.get("in_flight_seq"))
                if key[1] is None or key in seen or key in cands:
                    continue
                todo.append((key, dict(_in_flight(g, {r}), _derived=True)))

    waiting_in = {}  # rank -> index of the stuck call it waits in
    for i, h in enumerate(hangs):
        for r in h["waiting_ranks"]:
            waiting_in.setdefault(r, i)
    culprits, undecided = set(), []
    for i, h in enumerate(hangs):
        h["missing"] = {}
        h["caused_by"] = []
        for r in h["missing_ranks"]:
            j = waiting_in.get(r)
            if j is not None and j != i:
                h["caused_by"].append(j)
                other = hangs[j]
                h["missing"][str(r)] = {"state": "stuck", "text": "it waits in %s" % _report.describe_call(other),
                                        "in_hang": j}
            else:
                h["missing"][str(r)] = _where(by_rank.get(r), now)
                if by_rank.get(r) is not None:
                    culprits.add(r)
        h["caused_by"] = sorted(set(h["caused_by"]))
        if "mismatch" in h:
            if h["mismatch"]["odd_ranks"]:
                culprits.update(h["mismatch"]["odd_ranks"])
            else:
                undecided.append("%s: the ranks in it issued different ops (%s) and no op has a majority"
                                 % (_report.describe_call(h), h["mismatch"]["text"]))
    for i, h in enumerate(hangs):
        h["root"] = not h["caused_by"]
        if h["caused_by"] and _in_cycle(hangs, i):
            h["cycle"] = True
            undecided.append("%s is part of a cycle of stuck calls (ranks wait for each other in different "
                             "groups: an ordering deadlock)" % _report.describe_call(h))
    silent = sorted(set(range(world_size)) - set(by_rank))
    for h in hangs:
        unknown = [r for r in h["missing_ranks"] if by_rank.get(r) is None]
        if unknown:
            undecided.append("%s: rank(s) %s sent nothing; whether they are dead, unreachable or elsewhere is "
                             "unknown" % (_report.describe_call(h), _report.format_ranks(unknown)))
    hangs_sorted = sorted(range(len(hangs)), key=lambda i: (not hangs[i]["root"], hangs[i].get("started_at") or 0))
    order = {old: new for new, old in enumerate(hangs_sorted)}
    hangs = [hangs[i] for i in hangs_sorted]
    for h in hangs:
        h["caused_by"] = sorted(order[j] for j in h["caused_by"])
        for m in h["missing"].values():
            if "in_hang" in m:
                m["in_hang"] = order[m["in_hang"]]
    frozen = sorted(r for r, d in by_rank.items() if d.get("frozen"))
    v = {"version": VERSION, "hangs": hangs, "culprit_ranks": sorted(culprits),
         "ranks_reporting": sorted(by_rank), "ranks_silent": silent,
         "ranks_dead": sorted(r for r, d in by_rank.items() if d.get("alive") is False),
         "exits": {str(r): d.get("exit_reason") for r, d in sorted(by_rank.items()) if d.get("alive") is False},
         "frozen_ranks": frozen, "world_size": world_size, "undecided": undecided,
         "stack_groups": _stack_groups(by_rank), "resolved": _resolved(by_rank, cands),
         "hosts": {str(r): {"host": d.get("host"), "pid": d.get("pid"), "py_spy_dump": _existing(d.get("py_spy_dump"))}
                   for r, d in sorted(by_rank.items())}}
    v["summary"] = summary_line(v)
    return v


def _evaluate(by_rank, stream, seq, e, now):
    members = _members(dict(e, ranks=e.get("group_ranks"), **_p2p_ends(stream)))
    waiting, missing, finished, ops, sizes, raw, died = [], [], [], {}, {}, {}, []
    for r in members:
        doc = by_rank.get(r)
        pos = _positions(doc).get(stream) or {} if doc is not None else {}
        if doc is None or (pos.get("last_started") or 0) < seq:
            missing.append(r)
            continue
        if doc.get("alive") is False:
            if (pos.get("last_completed") or 0) < seq:  # it was in the call when it died: not a culprit
                waiting.append(r)
                died.append(r)
            else:
                missing.append(r)
            continue
        (finished if (pos.get("last_completed") or 0) >= seq else waiting).append(r)
        op, size = _op_at(doc, stream, seq)
        if op:
            ops[r] = op
            if size:
                sizes[r], raw[r] = "%s of %s" % (op, size), size
    h = {"group": e.get("group"), "stream": stream, "group_ranks": e.get("group_ranks"),
         "kind": e.get("kind"), "peer": e.get("peer"), "seq": seq, "op": e.get("op"),
         "api": e.get("api") or "", "size": e.get("size") or next((raw[r] for r in sorted(raw)), None),
         "waiting_ranks": waiting, "died_waiting": died, "missing_ranks": missing,
         "finished_ranks": finished, "started_at": e.get("started_at"), "detected_at": e.get("detected_at"),
         "detected_by": sorted(e["_seen_by"]), "overdue": not e.get("_derived"),
         "timeout": _timeout(by_rank[min(e["_seen_by"])])}
    # torch's own timeout of this group: it ends the job then (a subgroup does not inherit the world's)
    h["torch_timeout_s"] = next((p["torch_timeout_s"] for p in (_positions(by_rank[r]).get(stream) or {}
                                                                 for r in sorted(e["_seen_by"]))
                                 if p.get("torch_timeout_s") is not None), None)
    if e.get("age_s") is not None:
        # one duration per hang everywhere: its age when first found overdue, as the console, the report
        # and the verdict all say it ("stuck 3.1 s"); a later merge does not make it a different number
        h["stuck_s"] = round(e["age_s"], 1)
        h["stuck_at_least"] = False
    elif h["started_at"] is not None:
        h["stuck_s"] = round(now - h["started_at"], 1)
        # torch dumps carry no time of their own: ages count from the newest time in them (torch_fr.py)
        h["stuck_at_least"] = any(by_rank[r].get("ages_at_least") for r in e["_seen_by"])
    if len(set(ops.values())) > 1:
        h["mismatch"] = _mismatch(ops)
    elif len(set(sizes.values())) > 1:  # same op, different dtype or element count: also a desync
        h["mismatch"] = _mismatch(sizes, "size")
    return h


def _p2p_ends(stream):
    m = re.search(r":p2p:(\d+)->(\d+)$", stream or "")
    return {"src": int(m.group(1)), "dst": int(m.group(2)), "kind": "p2p"} if m else {}


def _op_at(doc, stream, seq):
    """(op, size signature or None) of a rank's call ``seq`` on ``stream``, or (None, None)."""
    g = _positions(doc).get(stream) or {}
    if g.get("in_flight_seq") == seq:
        return g.get("in_flight_op"), g.get("in_flight_size")
    for e in doc.get("overdue") or []:
        if isinstance(e, dict) and e.get("stream") == stream and e.get("seq") == seq:
            return e.get("op"), e.get("size")
    for item in g.get("recent_ops") or []:
        if item and item[0] == seq:
            return item[1], (item[2] if len(item) > 2 else None)
    return None, None


def _mismatch(ops, kind="op"):
    """Different calls at one seq: the majority's is expected, the others are the odd ones out."""
    counts = collections.Counter(ops.values())
    (top, n), = counts.most_common(1)
    unique_top = list(counts.values()).count(n) == 1
    odd = sorted(r for r, op in ops.items() if op != top) if unique_top else []
    return {"kind": kind, "ops": {str(r): op for r, op in sorted(ops.items())},
            "expected_op": top if unique_top else None, "odd_ranks": odd,
            "text": ", ".join("rank %d %s" % (r, op) for r, op in sorted(ops.items()))}


def _in_cycle(hangs, start):
    seen, todo = set(), list(hangs[start]["caused_by"])
    while todo:
        j = todo.pop()
        if j == start:
            return True
        if j not in seen:
            seen.add(j)
            todo.extend(hangs[j]["caused_by"])
    return False


def _stack_groups(by_rank):
    """Main-thread stacks grouped by their frames (functions and files, not line numbers), each group with
    its line-number variants and the ranks at each: ranks one line apart stay one group, but each rank's
    own lines are kept (the difference may be what the user looks for)."""
    groups = collections.OrderedDict()
    for r, doc in sorted(by_rank.items()):
        frames = doc.get("_frames")
        if not frames:
            continue
        g = groups.setdefault(_signature(frames), {"frames": frames[:8], "ranks": [], "variants": []})
        g["ranks"].append(r)
        for v in g["variants"]:
            if v["frames"] == frames[:8]:
                v["ranks"].append(r)
                break
        else:
            g["variants"].append({"frames": frames[:8], "ranks": [r]})
    return sorted(groups.values(), key=lambda g: (len(g["ranks"]), g["ranks"]))


# -- text ---------------------------------------------------------------------------------------------
def _existing(path):
    return path if path and os.path.exists(path) else None


def _who(v, r):
    h = v["hosts"].get(str(r)) or {}
    if h.get("host"):
        return "rank %d (%s, pid %s)" % (r, h["host"], h.get("pid"))
    return "rank %d" % r


def summary_line(v):
    if not v["hangs"]:
        line = "c10d_observer: no stuck collective in the reports of ranks %s" % _report.format_ranks(
            v["ranks_reporting"])
        if v.get("resolved"):
            r = v["resolved"][0]
            line += "; %d call(s) were overdue and completed later (resolved), first %s after %s s" % (
                len(v["resolved"]), _report.describe_call(r), r.get("resolved_after_s"))
        return line
    h = v["hangs"][0]
    stuck = " stuck %s%.1f s" % ("at least " if h.get("stuck_at_least") else "", h["stuck_s"]) \
        if h.get("stuck_s") is not None else ""
    parts = []
    for r in h["missing_ranks"]:
        m = h["missing"].get(str(r)) or {}
        parts.append("%s never arrived; %s" % (_who(v, r), m.get("text", "unknown")))
    if h.get("mismatch"):
        parts.append("different %s at the same seq: %s" % (
            "sizes" if h["mismatch"].get("kind") == "size" else "ops", h["mismatch"]["text"]))
    if not parts:
        parts.append("every rank of it is in it (waiting: %s)" % _report.format_ranks(h["waiting_ranks"]))
    return "c10d_observer: %s%s: %s" % (_report.describe_call(h), stuck, "; ".join(parts))


def format_text(v, problems=()):
    lines = ["c10d_observer verdict: %d stuck call(s)%s; ranks reporting %s of %d; silent: %s; dead: %s" % (
        len(v["hangs"]), ", %d resolved" % len(v["resolved"]) if v.get("resolved") else "",
        _report.format_ranks(v["ranks_reporting"]) or "none", v["world_size"],
        _report.format_ranks(v["ranks_silent"]) or "none", _report.format_ranks(v["ranks_dead"]) or "none")]
    for i, h in enumerate(v["hangs"]):
        tag = "ROOT" if h["root"] else "SYMPTOM (of #%s)" % ",".join(str(j) for j in h["caused_by"])
        lines.append("")
        lines.append("#%d %s: %s, stuck %s%s s (timeout %g s; torch's own timeout of the group: %s)" % (
            i, tag, _report.describe_call(h), "at least " if h.get("stuck_at_least") else "", h.get("stuck_s", "?"),
            h.get("timeout") or 0,
            "%g s" % h["torch_timeout_s"] if h.get("torch_timeout_s") is not None else "unknown"))
        lines.append("  waiting in it: %s" % (_report.format_ranks(h["waiting_ranks"]) or "none"))
        for r in h.get("died_waiting") or []:
            lines.append("  ended while waiting in it: %s: %s" % (
                _who(v, r), (v.get("exits") or {}).get(str(r)) or "its process is gone"))
        if h["finished_ranks"]:
            lines.append("  finished it: %s" % _report.format_ranks(h["finished_ranks"]))
        for r in h["missing_ranks"]:
            lines.append("  never arrived: %s: %s" % (_who(v, r), h["missing"][str(r)]["text"]))
        if h.get("mismatch"):
            lines.append("  MISMATCH at this seq: %s%s" % (h["mismatch"]["text"], "; odd one(s) out: %s" % (
                _report.format_ranks(h["mismatch"]["odd_ranks"])) if h["mismatch"]["odd_ranks"] else ""))
    for r in v.get("resolved") or []:
        lines.append("")
        lines.append("RESOLVED: %s was in flight %s s on rank(s) %s, past the timeout, then completed" % (
            _report.describe_call(r), r.get("resolved_after_s"), _report.format_ranks(r["reported_by"])))
    lines.append("")
    lines.append("culprit ranks: %s" % (_report.format_ranks(v["culprit_ranks"]) or "none found"))
    if v["frozen_ranks"]:
        lines.append("frozen processes (no Python progress): %s" % _report.format_ranks(v["frozen_ranks"]))
    if v["stack_groups"]:
        lines.append("main-thread stacks, grouped (innermost frame first; the odd one out is usually the culprit):")
        for g in v["stack_groups"]:
            variants = g.get("variants") or [g]
            if len(variants) > 1:  # one place, different lines: each rank's own
                lines.append("  ranks %s, at %d different lines:" % (_report.format_ranks(g["ranks"]), len(variants)))
            for var in variants:
                lines.append("%s%s %s: %s" % ("    " if len(variants) > 1 else "  ",
                                              "ranks" if len(var["ranks"]) > 1 else "rank",
                                              _report.format_ranks(var["ranks"]), " < ".join(var["frames"][:4])))
    spied = [(r, v["hosts"][str(r)]["py_spy_dump"]) for r in v["culprit_ranks"]
             if (v["hosts"].get(str(r)) or {}).get("py_spy_dump")]
    for r, path in spied:
        lines.append("py-spy (native and Python frames of every thread) of rank %d: %s" % (r, path))
    for u in v["undecided"]:
        lines.append("cannot decide: %s" % u)
    for p in problems:
        lines.append("unreadable: %s" % p)
    return "\n".join(lines)


def public(v):
    """The verdict without private keys, ready for json.dump."""
    return json.loads(json.dumps(v, default=str))


def write(directory, v):
    """verdict.txt, then verdict.json: whoever waits for the JSON (the on_hang callback, the pytest plugin,
    users' scripts) finds the text beside it."""
    tmp = os.path.join(directory, ".tmp-%d-%s" % (os.getpid(), VERDICT_TEXT))
    with open(tmp, "w") as f:
        f.write(format_text(v) + "\n")
    os.replace(tmp, os.path.join(directory, VERDICT_TEXT))
    _report.write_atomic(os.path.join(directory, VERDICT_JSON), public(v))
