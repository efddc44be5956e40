"""What became of a recorded verdict: each stuck call's outcome (resolved, ended, still stuck) and the events
since, from the documents written after it.  (The exit code of ``report`` and whether a verdict is one to act
on are the Verdict's own: ``Verdict.exit_code``, ``Verdict.acts``.)"""
from ..levels import CallEnd, Level, OutcomeState
from ..streams import is_p2p
from ..text import clock, rank_list, short_clock
from .analysis import _resolved
from .types import Event, Later, Outcome


def _main_record(records, docs_now=None):
    """The record shown: the first hang's verdict.  It is the first verdict that found stuck calls and named a
    culprit (else the newest that found stuck calls, else the newest); a later one takes its place only
    where it is the same hang grown hard (it holds a call of the first, names the same culprits, and is hard
    where the first was soft), or a new hang after the first resolved (each of its calls completed: a slow
    eval found overdue, then a real stall elsewhere; ``docs_now`` tells).  Anything else merged later is what
    happened after: a framework's SIGTERM handler calling a collective at the hang's seq, the ranks catching
    up after a hang (slow on a loaded machine), ``destroy_process_group`` at teardown.  A verdict is a record:
    later events are added and never erase the culprit (docs/diagnosis.md, "The record").  The others are
    ``other_verdicts``, each with its outcome; one still stuck sets the exit code (``with_outcome``)."""
    with_hangs = [r for r in records if r[0].hangs]
    named = [r for r in with_hangs if r[0].culprit_ranks]
    if not named:
        return (with_hangs or records or [None])[-1]
    main = named[0]
    for r in named[1:]:
        if _keys(r[0]) & _keys(main[0]):
            if (set(r[0].culprit_ranks) == set(main[0].culprit_ranks)
                    and r[0].level != Level.SOFT and main[0].level == Level.SOFT):
                main = r
        elif docs_now is not None and _resolved_before(main[0], docs_now, r[0].verdict_at or 0):
            main = r
    return main


def _keys(v):
    return {(str(h.stream), h.seq) for h in v.hangs or ()}


def _resolved_before(v, docs_now, t):
    """Whether every stuck call of verdict ``v`` completed (the late ranks caught up) by wall time ``t``."""
    outs = [_outcome(h, docs_now, v) for h in v.hangs or ()]
    return bool(outs) and all(o.state == OutcomeState.RESOLVED and (o.at is None or o.at <= t) for o in outs)


def with_outcome(records, docs_now):
    """The record of the hang (the first hang's verdict, ``_main_record``) as it was merged, with the
    ``outcome`` of each stuck call and the events after it (``after``), read from the documents now."""
    main = _main_record(records, docs_now)
    v = main[0]
    t0 = v.verdict_at or 0
    hangs = [h.replace(outcome=_outcome(h, docs_now, v)) for h in v.hangs or []]
    after = [Event(at=h.outcome.at, text=h.outcome.text) for h in hangs
             if h.outcome.state != OutcomeState.STUCK and h.outcome.at]
    known = {(h.stream, h.seq) for h in hangs}
    for r, d in sorted(docs_now.items()):
        if d.kind == "end" and (d.written_at or 0) >= t0:
            after.append(Event(at=d.written_at, rank=r, text="%s ended: %s" % (rank_list([r]), d.exit_reason)))
        for e in d.overdue:
            if (e.detected_at or 0) > t0 and (e.stream, e.seq) not in known:
                known.add((e.stream, e.seq))
                after.append(Event(at=e.detected_at, text="later: %s overdue on %s (no verdict merged for it)"
                                   % (e.describe(), rank_list([r]))))
    after.extend(_late_freezes(v, docs_now))
    after.sort(key=lambda x: x.at or 0)
    changes = dict(recorded=True, hangs=hangs, after=after)
    others = [r[0] for r in records if r is not main]
    if others:
        changes.update(other_verdicts=[Later(gather_id=x.gather_id, verdict_at=x.verdict_at, summary=x.summary,
                                             culprit_ranks=x.culprit_ranks, **_later_outcome(x, docs_now, t0))
                                       for x in others])
    res = _resolved(docs_now, {(h.stream, h.seq): h for h in hangs if h.outcome.state != OutcomeState.RESOLVED})
    if res:
        changes.update(resolved=res)
    return v.replace(**changes)


def _late_freezes(v, docs_now):
    """A late fact: ranks found frozen (their Python did not run) during the hang by their watchdogs after the
    verdict had merged without knowing it (a rank stopped inside a call every rank entered, found frozen a poll
    after the merge).  Added to "after", never changing what the verdict said (docs/diagnosis.md, "The
    record")."""
    starts = [h.started_at for h in v.hangs or () if h.started_at]
    if not starts:
        return []
    known, out = set(v.frozen_ranks or ()), []
    for r, d in sorted(docs_now.items()):
        if r in known:
            continue
        for since, until in d.frozen_spans:
            if until is not None and until < min(starts):
                continue
            text = ("later: %s was found frozen (its Python did not run: stopped, or a thread holding the GIL) "
                    "from %s %s; the verdict, merged at %s, did not know it" % (
                        rank_list([r]), short_clock(since),
                        "to %s (%.1f s)" % (short_clock(until), until - since) if until is not None else
                        "on (at least %.1f s by its last document)" % ((d.written_at or since) - since),
                        short_clock(v.verdict_at) if v.verdict_at else "the time of the hang"))
            out.append(Event(at=until if until is not None else since, rank=r, text=text))
    return out


def _later_outcome(x, docs_now, t0):
    """{"outcome": resolved | ended | stuck} of a verdict merged after the one shown, where it found stuck
    calls: the worst of its calls' (a stuck one keeps the exit code at 1); {} for an earlier one."""
    hangs = [h for h in x.hangs or () if h.waiting_ranks or h.missing_ranks]
    if (x.verdict_at or 0) <= t0 or not hangs:
        return {}  # earlier, or nobody was in its calls when it was merged ("they finished it")
    states = [_outcome(h, docs_now, x).state for h in hangs]
    worst = (OutcomeState.STUCK if OutcomeState.STUCK in states else OutcomeState.ENDED if OutcomeState.ENDED in states
             else OutcomeState.RESOLVED)
    return {"outcome": worst}


def _outcome(h, docs_now, v):
    """What became of a recorded stuck call (an Outcome of Hang ``h`` of Verdict ``v``), from the documents written since the verdict: resolved (every
    rank that waited and wrote since completed it: the late ranks caught up), ended (its ranks ended while
    it was stuck: the job was ended, or aborted), or stuck (as of the newest document).  Ranks that wrote
    nothing since (another node's, whose files stayed there) are named, never guessed; so are another node's
    ranks whose state, relayed here during the gather, shows them still in the call: news of then."""
    key = (h.stream, h.seq)
    t0 = v.verdict_at or 0
    waited = list(h.waiting_ranks or []) + list(h.missing_ranks or [])
    completed, ended, stuck_on, silent = [], [], [], []
    other_op = {}  # late ranks whose call at this seq was another op: a teardown's call, never a catch-up
    p2p = h.kind == "p2p" or is_p2p(key[0])  # a send and its recv: one call, two ops
    at = None
    for r in waited:
        d = docs_now.get(r)
        if d is None or (d.written_at or 0) <= t0:
            silent.append(r)
            continue
        e = next((x for x in d.overdue if (x.stream, x.seq) == key), None)
        pos = d.position(key[0])
        op = _op_at(e, pos, key[1])
        if op not in ("unknown", h.op or "unknown") and r in (h.missing_ranks or ()) and not p2p:
            other_op[r] = op
        if r not in other_op and (e is not None and e.ended == CallEnd.COMPLETED or (
                e is None and pos is not None and pos.last_completed >= key[1] and not d.dead)):
            completed.append(r)
            if e is not None and e.completed_at:
                at = max(at or 0, e.completed_at)
        elif (e is not None and e.ended in (CallEnd.RANK_ENDED, CallEnd.PEERS_ENDED)) or d.dead or d.kind == "end":
            ended.append(r)  # (a late rank that called another op here: what it did since decides)
        elif d.relayed_from:
            silent.append(r)  # another node's state, relayed during the gather: what it said then, not now
        else:
            stuck_on.append(r)
    unheard = " (nothing since from %s)" % rank_list(silent) if silent else ""
    if other_op:
        unheard += "; %s, not %s: no catch-up" % (
            ", ".join("rank %d called %s #%s there" % (r, o, key[1]) for r, o in sorted(other_op.items())),
            h.op)
    late = list(h.missing_ranks or [])
    if completed and not ended and not stuck_on:
        after = max([x.resolved_after_s or 0 for r in completed for x in docs_now[r].overdue
                     if (x.stream, x.seq) == key] or [0]) or None
        if late:
            text = "%s was %s late at %s #%s, then caught up%s" % (
                rank_list(late), "%.1f s" % after if after else "", h.op, h.seq,
                "; the call completed at %s" % short_clock(at) if at else "")
        else:
            text = "%s #%s completed %s: resolved" % (h.op, h.seq, "after %.1f s" % after if after else "later")
        return Outcome(state=OutcomeState.RESOLVED, at=at, after_s=after, late_ranks=late,
                       text=text.replace("  ", " ") + unheard)
    if ended and not stuck_on:
        aborted = [r for r in ended if "on_timeout=abort" in (docs_now[r].exit_reason or "")]
        ends = [docs_now[r].written_at for r in ended if docs_now[r].written_at]
        text = "the job ended while it was stuck: %s ended%s" % (
            rank_list(ended), " (%s by the observer, on_timeout=abort)" % rank_list(aborted) if aborted else "")
        return Outcome(state=OutcomeState.ENDED, at=max(ends) if ends else None, ended_ranks=ended,
                       aborted_ranks=aborted, text=text + unheard)
    newest = max([d.written_at or 0 for d in docs_now.values()] or [0])
    return Outcome(state=OutcomeState.STUCK, at=None, stuck_on=stuck_on or silent,
                   text=("still stuck in the newest documents (%s)" % clock(newest) if stuck_on else
                         "no rank of it wrote anything since the verdict") + (unheard if stuck_on else ""))


def _op_at(e, pos, seq):
    """The op a rank's documents show at ``seq`` of a stream: its overdue entry's, else its history's."""
    if e is not None and e.op != "unknown":
        return e.op
    calls = pos.shown() if pos is not None else ()
    return next((c.op for c in calls if c is not None and c.seq == seq), "unknown")
