"""``c10d-observer watch DIR``: the job's ranks x groups, redrawn every second while it runs.  No torch.

The view asks for live documents by ``watch-request.json`` in DIR (refreshed every second, valid a few
seconds): every watchdog that shares DIR then writes ``live-rank<R>-pid<P>.json`` once a second, its
rank's position in every group; nobody pays for a view that is not open.  Ranks whose watchdogs cannot
see DIR's request (another node's local DIR) show from the documents they left there: their reports, their
answers to a gather (``states-node*.json`` on the node that merges) and their ends.  Each cell says a rank's
call in flight on a group and for how long, or the last call it completed there; then the overdue calls,
the stragglers and the latest verdict.
"""
import os
import shutil
import sys
import textwrap
import time

from . import arrivals as _arrivals
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import requests as _requests
from . import verdict as _verdict
from .text import format_ranks, rank_list, short_clock

FRESH_S = 3.0  # a live document older than this: the rank's watchdog has not written for a while


def ask(dd, now):
    """(Re)write this view's request: watchdogs write live documents until ``until``."""
    _requests.WatchRequest.ask(dd, now)


def withdraw(dd):
    _requests.WatchRequest.withdraw(dd)


def current(directory):
    """{rank: RankDoc}: each rank's newest document of the newest job in ``directory`` (live ones included)."""
    docs, _ = _verdict.read_docs(_dumpdir.DumpDir(directory), live=True)  # a file being replaced: the next frame
    docs = [d for d in docs if d.rank >= 0]
    if not docs:
        return {}
    job = max(docs, key=lambda d: d.written_at or 0).job_id
    out = {}
    for d in docs:
        if d.job_id == job and (d.rank not in out or (d.written_at or 0) > (out[d.rank].written_at or 0)):
            out[d.rank] = d
    return out


def _column_name(p):
    if p.kind == "p2p":
        return "p2p %s->%s" % ("?" if p.src is None else p.src, "?" if p.dst is None else p.dst)
    return "group %s (%s)" % (p.group, format_ranks(p.members()))


def _cell(p, now, timeout):
    if p is None:
        return ""
    c = p.in_flight
    if c is None:
        return "done #%d" % p.last_completed if p.last_completed else "-"
    age = now - c.started_at if c.started_at else None
    mark = " !" if age is not None and timeout and age > timeout else ""
    # a recorder source names a call once it has read its entry (within 0.5 s while a view is open)
    return "#%d %s %s%s" % (c.seq, c.op if c.op != "unknown" else "call", "%.1fs" % age if age is not None else "?",
                            mark)


def _order(streams):
    def key(p):
        g = p.group
        return (p.kind == "p2p", 0 if g.isdigit() else 1, int(g) if g.isdigit() else 0, g, p.stream)
    return sorted(streams.values(), key=key)


def frame(directory, now=None, width=80, height=24, since=None):
    """One screen of the view, as text.  ``since``: when this view first asked for live documents (its
    first seconds: the watchdogs have not answered yet, and no rank is called silent)."""
    now = time.time() if now is None else now
    docs = current(directory)
    lines = ["c10d-observer watch %s   %s   (Ctrl-C to stop)" % (directory, short_clock(now))]
    if not docs:
        lines.append("")
        lines.append("no rank has written here yet: the job's watchdogs write their positions once a second "
                     "while this view is open (is the job running with dump_dir %s?)" % directory)
        return "\n".join(lines)
    world = max([d.world_size or 0 for d in docs.values()] + [max(docs) + 1])
    live = [r for r, d in docs.items() if d.kind == "live" and now - (d.written_at or 0) <= FRESH_S]
    ended = [r for r, d in docs.items() if d.kind == "end"]
    quiet = sorted(set(docs) - set(live) - set(ended))
    timeout = max(d.timeout for d in docs.values())
    starting = since is not None and now - since < FRESH_S + 1.0
    parts = ["%s live" % rank_list(live) if live else
             "waiting for the ranks' first positions (their watchdogs write them once a second while a view is "
             "open)" if starting and quiet else "no rank live"]
    if ended:
        parts.append("%s ended" % rank_list(ended))
    if quiet and not starting:
        parts.append("%s silent for %g s or more" % (rank_list(quiet), FRESH_S))
    elif quiet and live:
        parts.append("%s not answered yet" % rank_list(quiet))
    lines.append("%d of %d ranks: %s; hard deadline (timeout) %g s" % (len(docs), world, ", ".join(parts), timeout))
    lines.append("")
    streams = {}
    for d in docs.values():
        for p in d.groups:
            streams.setdefault(p.stream, p)
    cols = _order(streams)
    left = 22
    cw = 24
    fit = max(1, (width - left) // cw)
    shown, hidden = cols[:fit], cols[fit:]
    lines.append("%-*s%s" % (left, "rank (host, pid)", "".join("%-*s" % (cw, _column_name(p)[:cw - 1])
                                                                for p in shown)))
    ranks = sorted(docs)
    room = max(3, height - 12)
    if len(ranks) > room:  # the ranks in a call longest first, then the others, in rank order
        def oldest(r):
            ts = [p.in_flight.started_at for p in docs[r].groups if p.in_flight is not None and p.in_flight.started_at]
            return min(ts) if ts else float("inf")
        ranks = sorted(sorted(ranks, key=oldest)[:room])
    for r in ranks:
        d = docs[r]
        who = "%d (%s, %s)" % (r, (d.host or "?")[:8], d.pid)
        if d.kind == "end":
            lines.append("%-*s%s" % (left, who[:left - 1], "ended: %s" % (d.exit_reason or "?")))
            continue
        pos = d.positions()
        row = "".join("%-*s" % (cw, _cell(pos.get(p.stream), now, d.timeout)[:cw - 1]) for p in shown)
        if d.kind != "live":
            row += "  (%s, %.0f s ago)" % (d.kind, now - (d.written_at or now))
        lines.append("%-*s%s" % (left, who[:left - 1], row))
    if len(docs) > len(ranks):
        lines.append("... %d more ranks (in no call, or in newer ones)" % (len(docs) - len(ranks)))
    if hidden:
        lines.append("... %d more groups: %s" % (len(hidden), ", ".join(p.stream for p in hidden[:6])))
    overdue = [(r, e) for r, d in sorted(docs.items()) for e in d.overdue if e.in_flight]
    if overdue:
        lines.append("")
        by_call = {}
        for r, e in overdue:
            by_call.setdefault((e.stream, e.seq), (e, []))[1].append(r)
        for (stream, seq), (e, rs) in sorted(by_call.items(), key=lambda x: x[1][0].started_at or 0):
            age = now - e.started_at if e.started_at else e.age_s
            lines += _wrap("OVERDUE (%s): %s, %s in it for %.1f s" % (e.level, e.describe(), rank_list(rs), age or 0),
                           width)
    for text in _arrivals.lines(_arrivals.read(directory), now):
        lines += _wrap("straggler: %s" % text, width)
    v = _verdict.read(_dumpdir.DumpDir(directory).path(_dumpdir.VERDICT_JSON))
    if v is not None and v.summary:
        lines.append("")
        lines += _wrap("verdict (%s): %s" % (short_clock(v.verdict_at), v.summary), width)
    return "\n".join(lines)


def _wrap(text, width):
    """A sentence over as many lines as it needs (the table's rows are cut at the edge instead)."""
    return textwrap.wrap(text, max(20, width - 1), subsequent_indent="    ") or [""]


def watch(directory, interval=1.0, once=False, out=None):
    """Redraw ``frame`` every ``interval`` seconds until Ctrl-C (exit 0); ``once``: one frame, as soon as
    the watchdogs have answered the request (at most a few seconds).  Exit 2 where DIR is not a folder."""
    out = sys.stdout if out is None else out
    if not os.path.isdir(directory):
        sys.stderr.write("c10d-observer watch: error: %s is not a directory (pass the job's dump_dir: "
                         "$C10D_OBSERVER_DIR, run --dump-dir or enable(dump_dir=...))\n" % directory)
        return 2
    dd = _dumpdir.DumpDir(directory)
    tty = hasattr(out, "isatty") and out.isatty()
    try:
        ask(dd, time.time())
        if once:
            _answered(dd, time.time() + 3.0)
            out.write(frame(directory) + "\n")
            return 0
        if tty:
            out.write("\x1b[?25l")  # no cursor while redrawing
        since = time.time()
        _answered(dd, since + 1.5)  # the first frame once the watchdogs answered (a second or so)
        while True:
            ask(dd, time.time())
            size = _size(out)
            text = "\n".join(line[:size.columns - 1] for line in  # a wrapped line would scroll the frame
                             frame(directory, width=size.columns, height=size.lines, since=since
                                   ).splitlines()[:size.lines - 1])
            out.write(("\x1b[H\x1b[2J" if tty else "\n") + text + ("" if tty else "\n"))
            out.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    finally:
        if tty and not once:
            out.write("\x1b[?25h\n")
            out.flush()
        withdraw(dd)


def _size(out):
    """The terminal's own size (not $COLUMNS, which a parent process may have set for itself)."""
    try:
        return os.get_terminal_size(out.fileno())
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size((100, 30))


def _answered(dd, deadline):
    """Wait (a view, not a test) until every rank of the job has a live document newer than the request,
    or the deadline (ranks on other nodes never answer a local request)."""
    asked = time.time()
    while time.time() < deadline:
        fresh, world = set(), 0
        for path in dd.glob(_dumpdir.LIVE_GLOB):
            try:
                if os.path.getmtime(path) >= asked:
                    d = _documents.load(path)[0]
                    fresh.add(d.rank)
                    world = max(world, d.world_size or 0)
            except (OSError, _documents.DocumentError, IndexError):
                pass
        if fresh and len(fresh) >= world:
            return True
        time.sleep(0.1)
    return False
