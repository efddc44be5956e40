"""Per-rank reports (``report-rank<R>-pid<P>.json``, written by the watchdog): reading them, and the
per-rank section of ``report DIR``.  The files are named and written by dumpdir.py, their contents typed
by documents.py (``RankDoc``); the cross-rank verdict is verdict.py.  The reader only ever parses JSON; it
never unpickles anything.
"""
import os

from . import documents as _documents
from . import dumpdir as _dumpdir
from .levels import CallEnd, Level
from .text import clock, describe_call


class ReportError(ValueError):
    pass


def load(path):
    """One report (a RankDoc).  Raises ReportError naming the file where it is not one."""
    try:
        docs = _documents.load(path)
    except _documents.DocumentError as e:
        raise ReportError(str(e))
    return docs[0]


def load_dir(directory):
    """(reports sorted by rank, problems): every report in ``directory`` (and its spill directory, on this
    node); unreadable ones are named."""
    if not os.path.isdir(directory):
        raise ReportError("%s is not a directory" % directory)
    reports, problems = [], []
    for path in _dumpdir.DumpDir(directory).glob(_dumpdir.REPORT_GLOB):
        try:
            reports.append(load(path))
        except (ReportError, OSError) as e:
            problems.append(str(e))
    reports.sort(key=lambda r: (r.rank, r.pid or -1))
    return reports, problems


def summarize(reports, problems=()):
    """A readable per-rank summary (text)."""
    lines = []
    if not reports:
        lines.append("no c10d-observer reports found")
    for rep in reports:
        extra = rep.extra or {}
        lines.append("rank %s/%s  host %s  pid %s  torch %s  source %s"
                     % (rep.rank, rep.world_size, rep.host, rep.pid, extra.get("torch_version"), extra.get("source")))
        for e in rep.overdue:
            if e.in_flight:
                after = ""
            elif e.ended == CallEnd.COMPLETED:
                after = "; completed later%s" % (" (resolved after %s s in flight)" % e.resolved_after_s
                                                 if e.resolved_after_s is not None else "")
            elif e.ended == CallEnd.RANK_ENDED:
                after = "; this rank ended while in it"
            else:
                after = "; it ended once other ranks of it had ended (not resolved)"
            deadline = ("soft: past its learned deadline of %g s" % e.deadline_s if e.level == Level.SOFT and e.deadline_s
                        else "timeout %g s" % rep.timeout)
            lines.append("  OVERDUE %s: started %s, detected %s (%.1f s in flight, %s)%s"
                         % (describe_call(e._asdict()), clock(e.started_at), clock(e.detected_at), e.age_s or 0.0,
                            deadline, after))
        done = ["%s=%s" % (g.stream, g.last_completed) for g in rep.groups]
        if done:  # the positions when the report was last written (after the calls above, where they ended)
            lines.append("  last completed seq: %s (as of %s, this report's last write)"
                         % (", ".join(done), clock(rep.written_at)))
        for g in rep.groups:
            if g.ring_overflow:
                lines.append("  %s: %d call(s) not tracked one by one (a burst of more calls in flight than the "
                             "channel holds per stream); the oldest call in flight is always kept"
                             % (g.stream, g.ring_overflow))
        if rep.stack_dump:
            lines.append("  stacks: %s" % rep.stack_dump)
    for p in problems:
        lines.append("unreadable: %s" % p)
    return "\n".join(lines)
