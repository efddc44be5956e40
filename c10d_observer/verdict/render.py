"""The verdict in words: its one-line summary (the console's) and the text ``report`` prints, formatted from the
values the analysis built (types.Verdict, read as attributes), as torch's flight-recorder analyser formats its
records apart from building them.  It stands on the enums and the words for ranks and calls only; the
analysis builds values without words, and the verdict's front and files add the summary here (``worded``);
``types`` asks it for ``Verdict.text``."""
from ..levels import Level, Where, mismatch_word
from ..text import clock, describe, format_ranks, rank_list, short_clock

SHOWN = 4  # the innermost frames a grouped stack shows, its job frame added where further in (stacks.py)


def _who(v, r):
    h = v.host(r)
    if h is not None and h.host:
        return "rank %d (%s, pid %s)" % (r, h.host, h.pid)
    return "rank %d" % r


def _level_words(h):
    """What a hang's level says: '(soft: ...)' for a soft or held one, '(hard: ...)' for a hard one."""
    if h.level == Level.SOFT:
        return "soft: %s" % ("the hard verdict is held: %s" % h.held_why if h.held_why else
                             "past its learned deadline of %g s" % h.deadline_s if h.deadline_s
                             else "past its learned deadline")
    return "hard: past the timeout of %g s" % (h.deadline_s or h.timeout or 0)


def worded(v):
    """The verdict ``v`` (a Verdict, as the analysis built it) with its one-line summary (report --json's
    ``summary``, the console's line)."""
    return v.replace(summary=summary_line(v))


def summary_line(v):
    """The verdict (a Verdict) in one line (the console's, the summary of report --json)."""
    if not v.hangs:
        line = "c10d_observer: no stuck collective in the reports of %s" % rank_list(v.ranks_reporting)
        if v.resolved:
            r = v.resolved[0]
            line += "; %d call(s) were overdue and completed later (resolved), first %s after %s s" % (
                len(v.resolved), describe(r), r.resolved_after_s)
        return line
    h = v.hangs[0]
    stuck = " stuck %s%.1f s" % ("at least " if h.stuck_at_least else "", h.stuck_s) if h.stuck_s is not None else ""
    stuck += " (%s)" % _level_words(h)
    parts = []
    for r in h.missing_ranks:
        m = h.whereabouts(r)
        if m is not None and m.state == Where.OUT_OF_ORDER:
            parts.append("%s broke the order of calls: %s" % (_who(v, r), m.text))
        else:
            parts.append("%s never arrived; %s" % (_who(v, r), m.text if m is not None else "unknown"))
    if h.mismatch:
        m = h.mismatch
        parts.append("different %s at the same seq: %s%s" % (
            mismatch_word(m.kind, h.op), m.text,
            "; the odd one out: %s" % rank_list(m.odd_ranks) if m.odd_ranks else ""))
    if h.ordering and not any((h.whereabouts(r) is not None and h.whereabouts(r).state == Where.OUT_OF_ORDER)
                              for r in h.missing_ranks):
        parts.append("an ordering deadlock: %s" % h.ordering.text)
    if not parts:
        if (set(h.frozen_in_it or ()) | set(h.gpu_not_started or ())) & set(v.culprit_ranks or ()):
            parts.append(h.category_why)
        elif h.finished_ranks:
            parts.append("%s finished it and %s wait%s in it; no rank is missing and no op or size differs that "
                         "the documents show" % (rank_list(h.finished_ranks), rank_list(h.waiting_ranks),
                                                 "s" if len(h.waiting_ranks) == 1 else ""))
        else:
            parts.append("every rank of it is in it (waiting: %s)" % rank_list(h.waiting_ranks))
    if v.made_apart:  # the ranks made different groups before it (mismatch.made_apart): that decides
        parts.append("groups made apart before it: %s" % v.made_apart)
    if v.straggler_lines:  # who has been arriving last, live (arrivals.py)
        parts.append("straggler: %s" % v.straggler_lines[0])
    return "c10d_observer: %s%s: %s" % (h.call, stuck, "; ".join(parts))


def format_text(v, problems=()):
    """The verdict (a Verdict) as ``report`` prints it (without the per-rank section)."""
    head = "c10d_observer verdict"
    if v.recorded and v.merged is False:
        head += " (made now from the states gathered at %s: the job went on before a verdict was merged)" % (
            clock(v.verdict_at))
    elif v.recorded:
        head += " (as merged at %s, %s after the first detection)" % (
            clock(v.verdict_at), "%.2f s" % v.gather_s if v.gather_s is not None else "?")
    elif v.recorded is False and (v.hangs or v.resolved):
        head += " (made now from the documents: no verdict was merged while the job ran)"
    lines = ["%s: %d stuck call(s)%s; ranks reporting %s of %d; silent: %s; dead: %s" % (
        head, len(v.hangs), ", %d resolved" % len(v.resolved) if v.resolved and not v.hangs else "",
        format_ranks(v.ranks_reporting) or "none", v.world_size or 0, rank_list(v.ranks_silent),
        rank_list(v.ranks_dead))]
    for i, h in enumerate(v.hangs):
        lines += _hang_lines(v, i, h)
    recorded = {(h.stream, h.seq) for h in v.hangs}
    for r in v.resolved or []:
        if (r.stream, r.seq) in recorded:
            continue  # said in its hang's "after"
        lines.append("")
        lines.append("RESOLVED: %s was in flight %s s on %s, past the timeout, then completed" % (
            describe(r), r.resolved_after_s, rank_list(r.reported_by)))
    lines.append("")
    return "\n".join(lines + _tail_lines(v, problems))


def _hang_lines(v, i, h):
    """The lines of stuck call #i of verdict ``v``: what it is, who waits, who is missing and why, after."""
    lines = []
    tag = "ROOT" if h.root else "SYMPTOM (of #%s)" % ",".join(str(j) for j in h.caused_by)
    lines.append("")
    deadline = ("soft: past its learned deadline of %g s; hard deadline %g s" % (h.deadline_s, h.timeout or 0)
                if h.level == Level.SOFT and h.deadline_s else "hard: timeout %g s" % (h.timeout or 0))
    lines.append("#%d %s: %s, stuck %s%s s (%s; torch's own timeout of the group: %s)" % (
        i, tag, h.call, "at least " if h.stuck_at_least else "", h.stuck_s if h.stuck_s is not None else "?",
        deadline, "%g s" % h.torch_timeout_s if h.torch_timeout_s is not None else "unknown"))
    if h.held_why:
        lines.append("  hard verdict held until %s: %s" % (short_clock(h.held_until), h.held_why))
    if h.category:
        lines.append("  kind: %s: %s" % (str(h.category).replace("_", " "), h.category_why))
    odd = set(h.mismatch.odd_ranks if h.mismatch else ())
    op_of = h.mismatch.op_of if h.mismatch else (lambda r: None)

    def note(ranks):
        return "".join(" (rank %d issued %s: the odd one out)" % (r, op_of(r)) for r in ranks if r in odd)

    lines.append("  waiting in it: %s%s" % (rank_list(h.waiting_ranks), note(h.waiting_ranks)))
    for r in h.died_waiting or []:
        lines.append("  ended while waiting in it: %s: %s" % (
            _who(v, r), v.exit_reason(r) or "its process is gone"))
    for r in h.other_op_ranks or []:
        lines.append("  issued another op at this seq: %s (%s, the odd one out)" % (_who(v, r), op_of(r)))
    if h.finished_ranks:
        then = h.finished_then_ended or []
        lines.append("  finished it: %s%s%s" % (rank_list(h.finished_ranks), note(h.finished_ranks),
                                                "; then ended: %s" % rank_list(then) if then else ""))
    lines.extend(_missing_lines(v, h))
    if h.mismatch:
        lines.append("  MISMATCH at this seq: %s%s%s" % (h.mismatch.text, "; the odd one(s) out: %s" % (
            rank_list(h.mismatch.odd_ranks)) if h.mismatch.odd_ranks else "",
            " (%s)" % h.mismatch.evidence if h.mismatch.evidence else ""))
    if h.ordering and str(h.ordering.rank) not in (h.missing or {}):
        lines.append("  ordering deadlock: %s" % h.ordering.text)
    if h.outcome:
        lines.append("  after: %s" % h.outcome.text)
    return lines


MISSING_LINES_UP_TO = 16  # a stuck call's missing ranks each on its own line up to this many


def _missing_lines(v, h):
    """A line for each rank the call misses, where and why; past MISSING_LINES_UP_TO of them, one line for the ranks
    whose whereabouts read alike (the 2,047 data-parallel peers of a world call at 16,384 ranks, each waiting
    in its group's call, were 2,047 lines, 300 kB of verdict.txt on every node, 2026-12-01)."""
    said, alike = [], {}  # said: (rank, word, whereabouts); alike: (word, whereabouts) -> its ranks
    for r in h.missing_ranks:
        m = h.whereabouts(r)
        said.append((r, "broke the order" if m.state == Where.OUT_OF_ORDER else "never arrived", m.text))
        alike.setdefault(said[-1][1:], []).append(r)
    if len(said) <= MISSING_LINES_UP_TO:
        return ["  %s: %s: %s" % (word, _who(v, r), text) for r, word, text in said]
    return ["  %s: %s: %s" % (word, _who(v, rs[0]), text) if len(rs) == 1 else
            "  %s: %s (%d ranks; their hosts and pids in verdict.json), each: %s" % (word, rank_list(rs), len(rs), text)
            for (word, text), rs in alike.items()]


def _tail_lines(v, problems):
    """The culprits, the nodes to exclude, ends, stacks, what cannot be decided, and what happened after."""
    lines = []
    if v.made_apart:
        lines.append("groups made apart: %s (torch names a group by its place in each rank's new_group calls: "
                     "the calls on the groups made from there on may be between ranks that made different groups)"
                     % v.made_apart)
    lines.append("culprit ranks: %s" % (format_ranks(v.culprit_ranks) or "none found"))
    named = [c for c in v.culprits or () if c.node and c.node_from != "hostname"]
    if named:  # the scheduler's name differs from the host's, or may: say which to exclude
        from ..scheduler import hostlist
        lines.append("culprit nodes (%s): %s%s" % (", ".join(sorted(set(c.node_from for c in named))),
                                                   hostlist(c.node for c in named),
                                                   "" if v.acts else " (not to exclude: the verdict is %s)" % (
                                                       "soft" if v.level != Level.HARD else "resolved or held")))
    for r, why in sorted((v.exits or {}).items(), key=lambda x: int(x[0])):
        lines.append("ended: rank %s: %s" % (r, why or "its process is gone"))
    if v.frozen_ranks:
        lines.append("frozen processes (no Python progress): %s" % rank_list(v.frozen_ranks))
    for text in v.straggler_lines or ():
        lines.append("straggler: %s" % text)
    if v.stack_groups:
        lines.append("main-thread stacks, grouped (innermost frame first; the odd one out is usually the culprit):")
        for g in v.stack_groups:
            variants = g.variants or [g]
            if len(variants) > 1:  # one place, different lines: each rank's own
                lines.append("  %s, at %d different lines:" % (rank_list(g.ranks), len(variants)))
            for var in variants:
                job = getattr(var, "job_frame", None)
                lines.append("%s%s: %s%s" % ("    " if len(variants) > 1 else "  ", rank_list(var.ranks),
                                             " < ".join(var.frames[:SHOWN]), " < ... < %s" % job if job else ""))
    hosts = v.hosts or {}
    spied = [(r, hosts[str(r)].py_spy_dump) for r in v.culprit_ranks if str(r) in hosts and hosts[str(r)].py_spy_dump]
    for r, path in spied:
        lines.append("py-spy (native and Python frames of every thread) of rank %d: %s" % (r, path))
    for u in v.undecided or ():
        lines.append("cannot decide: %s" % u)
    if v.after:
        lines.append("")
        lines.append("after the verdict:")
        for a in v.after:
            lines.append("  %s: %s" % (short_clock(a.at), a.text))
    for o in v.other_verdicts or []:
        lines.append("another verdict of this job, at %s: %s%s" % (
            clock(o.verdict_at), o.summary, " (later; %s)" % o.outcome if o.outcome else ""))
    for p in problems:
        lines.append("unreadable: %s" % p)
    return lines
