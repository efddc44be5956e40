"""The analysis: from one document per rank to the verdict.  For a stuck (stream, seq), each member rank has
finished it, entered it and waits, or never entered it (missing: where is it instead?); a missing rank that
waits in another stuck call makes this one a symptom of that (a cascade); different ops or sizes at one seq
are a desync; a cycle of stuck calls is an ordering deadlock (ordering.py names who broke the order).  Each
stuck call is a draft (types.Draft) that the rules fill in, part by part (its Whereabouts, its Mismatch, its
Ordering), and the verdict's values are built from the drafts once, at the end (types.py); words are not
written here: the front (verdict/__init__.analyze) and files add the summary from the values (render.py)."""
import collections
import os

from .. import arrivals as _arrivals
from .. import documents as _documents
from ..levels import CallEnd, Level, MismatchKind, Where, mismatch_word
from ..streams import GUARD_ADVICE, MAKING, is_p2p, p2p_ends
from ..text import describe, describe_call, rank_list
from .stacks import _stack_groups, main_thread_frames, place
from .categories import categorize
from .cycles import in_cycle, order_cycles
from .deaths import ABORTED_WORDS, aborted_alone, aborted_beside_another, aborted_beside_the_order, raised_on_a_death
from .mismatch import NOT_IN, OWN_ONLY, ROOT_TEXT, UNSHOWN, by_program, made_apart, mismatch
from .fields import Draft, LazyRanks
from .types import Culprit, Hang, Host, Resolved, Straggler, Verdict, Whereabouts

VERSION = 1  # of the verdict's JSON (report --json)

class _Candidate(object):
    """A (stream, seq) that may be stuck, as first found: the call, its ``level`` and ``deadline_s``, its age
    when first found overdue (``age_s``), the ranks that saw it (``seen_by``); ``derived``: a call a missing
    rank is in, not overdue itself (a cascade's root may be younger than the timeout)."""

    __slots__ = ("group", "stream", "group_ranks", "kind", "peer", "seq", "op", "api", "size", "started_at",
                 "detected_at", "level", "deadline_s", "age_s", "seen_by", "derived")

    def __init__(self, group, stream, group_ranks, kind, peer, seq, op, api, size, started_at, detected_at, level,
                 seen_by, deadline_s=None, age_s=None, derived=False):
        self.group, self.stream, self.group_ranks, self.kind, self.peer = group, stream, group_ranks, kind, peer
        self.seq, self.op, self.api, self.size, self.started_at = seq, op, api, size, started_at
        self.detected_at, self.level, self.deadline_s, self.age_s = detected_at, level, deadline_s, age_s
        self.seen_by, self.derived = set(seen_by), derived

    @classmethod
    def overdue(cls, e, rank):
        """An Overdue entry of ``rank``'s document."""
        return cls(e.group, e.stream, list(e.group_ranks) if e.group_ranks else e.group_ranks, e.kind, e.peer, e.seq,
                   e.op, e.api, e.size, e.started_at, e.detected_at, e.level, {rank}, e.deadline_s, e.age_s)

    @classmethod
    def in_flight(cls, g, seen_by, detected_at, level, derived=False):
        """The call a rank has in flight on one stream (a Position)."""
        c = g.in_flight
        return cls(g.group, g.stream, list(g.ranks) if g.ranks else g.ranks, g.kind, g.peer, c.seq, c.op, c.api,
                   c.size, c.started_at, detected_at, level, seen_by, derived=derived)


def _candidates(by_rank):
    """Every (stream, seq) a rank has had in flight for longer than its timeout."""
    found = collections.OrderedDict()
    for r, doc in sorted(by_rank.items()):
        # a call its watchdog found overdue counts while in flight, and where it ended without resolving
        # (its rank or its peers ended: on_timeout="abort" ends them)
        for e in doc.overdue:
            if e.in_flight or e.ended in (CallEnd.RANK_ENDED, CallEnd.PEERS_ENDED):
                c = found.get((e.stream, e.seq))
                if c is None:  # (made once a call: its group's ranks copied, 16,384 of them in a world group)
                    c = found[(e.stream, e.seq)] = _Candidate.overdue(e, r)
                c.seen_by.add(r)
                if e.level == Level.HARD and c.level != Level.HARD:
                    # a call past the hard deadline on any rank is a hard one, and its age and detection are
                    # that rank's (a soft detection's younger age is not the hard verdict's)
                    c.level, c.deadline_s, c.age_s, c.detected_at = Level.HARD, e.deadline_s, e.age_s, e.detected_at
                elif e.age_s is not None and (e.level == Level.HARD or c.level != Level.HARD):
                    # the first detection's age (of this level): the number the console printed
                    if c.age_s is None or e.age_s < c.age_s:
                        c.age_s, c.detected_at = e.age_s, e.detected_at
        if doc.dead:
            continue
        for g in doc.groups:
            if g.in_flight is None or g.in_flight.started_at is None:
                continue
            age = (doc.written_at or g.in_flight.started_at) - g.in_flight.started_at
            # a torch dump's ages are lower bounds (torch_fr.py) and its timeout is 0: every call in it counts
            if age > doc.timeout or doc.ages_at_least:
                key = (g.stream, g.in_flight.seq)
                # in flight past the timeout: hard (a torch dump's calls, with no timeout of their own, too)
                c = found.get(key)
                if c is None:
                    c = found[key] = _Candidate.in_flight(g, (), doc.written_at, Level.HARD)
                c.seen_by.add(r)
    return found


def _resolved(by_rank, stuck):
    """Calls that were overdue on some rank and completed later (the hang resolved): one Resolved per
    (stream, seq) still not stuck, with the longest time it was in flight and the ranks that reported it."""
    found = collections.OrderedDict()  # (stream, seq) -> [(rank, its Overdue entry)]
    for r, doc in sorted(by_rank.items()):
        for e in doc.overdue:
            if not (e.in_flight or not e.resolved) and (e.stream, e.seq) not in stuck:
                found.setdefault((e.stream, e.seq), []).append((r, e))
    out = []
    for seen in found.values():
        e0 = seen[0][1]
        after, done = e0.resolved_after_s, e0.completed_at
        for _, e in seen:
            after = max(after or 0, e.resolved_after_s or 0)
            done = max(done or 0, e.completed_at or 0) or None
        out.append(Resolved(group=e0.group, stream=e0.stream, seq=e0.seq, op=e0.op, api=e0.api, size=e0.size,
                            kind=e0.kind, peer=e0.peer, started_at=e0.started_at,
                            group_ranks=None if e0.group_ranks is None else list(e0.group_ranks), resolved=True,
                            resolved_after_s=after, reported_by=[r for r, _ in seen], completed_at=done))
    return out


def _object_call_short(h, hangs, by_rank, culprits, undecided):
    """Withhold the name of a rank in no collective beside the one rank that waits in ``h``, where ``h`` is an
    object collective's call (its api: two calls of one op, a size and then the data) and the rank's last call on
    the group is #seq - 1, of the op and size of the waiting rank's #seq - 1, the collective's sizes (int64; its
    data are uint8, distributed_c10d's ``_object_to_tensor``): it issued one plain call where the other issued the
    object collective, or the other that collective where the program has the plain call, and the documents are
    the same either way.  In a group of more ranks, those that issued ``h`` outvote it; a rank that other stuck
    calls (``hangs``) miss too is named as before.  The fuzzer's ops
    seed 244008549 (NCCL model): a world of two, a broadcast_object_list; rank 0 issued a broadcast of its size
    tensor instead and ended, rank 1 waits in the list's data broadcast (#3), and rank 0 was named."""
    if len(h.waiting_ranks) != 1 or len(h.group_ranks or ()) != 2 or h.seq < 2:
        return  # (more ranks that issued it, waiting or through, outvote the one in no collective)
    other = by_rank[h.waiting_ranks[0]]
    at = other.position(h.stream) if other is not None else None
    fly = at.in_flight if at is not None and at.in_flight is not None and at.in_flight.seq == h.seq else None
    api = h.api or (fly.api if fly is not None else "")
    before = other.call(h.stream, h.seq - 1) if api in _documents.OBJECT_APIS else None
    if (before is None or before.op != h.op or " x uint8" not in (h.size or "")
            or " x int64" not in (before.size or "")):
        return  # not the collective's data call (torch's _object_to_tensor: uint8) after its sizes' (int64)
    for r in h.missing_ranks:
        doc = by_rank[r]
        if r not in culprits or doc is None or h.missing[str(r)].state != Where.NO_COLLECTIVE or any(
                r in x.missing_ranks for x in hangs if x is not h):
            continue
        g = doc.position(h.stream)
        mine = doc.call(h.stream, h.seq - 1)
        if g is None or g.last_started != h.seq - 1 or mine is None or (mine.op, mine.size) != (before.op,
                                                                                               before.size):
            continue
        culprits.discard(r)
        undecided.append("%s: rank %d issued #%d as rank %d issued the first call of its %s and no call after it: "
                         "a plain %s where the program has the %s, or the %s where it has the plain %s, leaves the "
                         "same documents" % (describe(h), r, h.seq - 1, h.waiting_ranks[0], api, h.op, api, api,
                                             h.op))


def _where(doc, frames, now):
    """Where a rank that never entered a stuck call is instead (a draft Whereabouts)."""
    if doc is None:
        return Draft(Whereabouts, state=Where.UNKNOWN, text="sent nothing: dead, unreachable or not observed; unknown")
    if doc.dead:
        return Draft(Whereabouts, state=Where.DEAD, text="dead: %s" % (doc.exit_reason or "its process is gone"))
    out = Draft(Whereabouts, state=Where.NO_COLLECTIVE, calls=[])
    words = []
    for g in doc.groups:
        c = g.in_flight
        if c is None:
            continue
        call = {"group": g.group, "stream": g.stream, "group_ranks": list(g.ranks) if g.ranks else g.ranks,
                "kind": g.kind, "peer": g.peer, "seq": c.seq, "op": c.op, "size": c.size}
        for_s = None
        if c.started_at:
            for_s = round((doc.written_at or now) - c.started_at, 1)
            call.update(for_s=for_s, for_at_least=doc.ages_at_least)
        out.calls.append(call)
        words.append("%s%s" % (describe_call(call), "" if for_s is None else " for %s%g s" % (
            "at least " if doc.ages_at_least else "", for_s)))
    if words:
        out.state = Where.IN_COLLECTIVE
        out.text = "it is in " + "; ".join(words)
    else:
        out.text = "it is in no collective"
    if doc.phase:  # busy on purpose: the rank said so (c10d_observer.phase)
        out.phase = doc.phase.to_json()
        out.text += "; " + phase_text(doc.phase, doc.written_at or now)
    if doc.frozen:
        out.state = Where.FROZEN
        out.text += ("; its Python has not run for %.1f s (a thread holds the GIL, or the process is "
                     "stopped): a frozen process, not a collective hang" % (doc.heartbeat_age_s or 0))
    w = place(frames)
    if w is not None:
        out.main_thread, out.innermost = w.main_thread, w.innermost
        if w.activity:
            out.activity = w.activity
        out.text += "; " + w.text
    return out


def phase_text(ph, now):
    """"it is in phase 'checkpoint', 40 s of up to 600 s" (or "40 s so far", with no limit)."""
    spent = max(0.0, now - (ph.since or now))
    return "it is in phase %r, %s" % (ph.name, "%.0f s of up to %.0f s" % (spent, ph.up_to_s)
                                       if ph.up_to_s else "%.0f s so far (no limit declared)" % spent)


def _holds(hangs, by_rank, now):
    """A verdict on calls that wait for ranks in declared phases is held until the phases' limits, soft or
    hard alike (a hard one becomes soft): each such hang gets ``held_until`` and ``held_why``; returns the
    latest limit, or None."""
    latest = None
    for h in hangs:
        waits_on = [r for r in h.missing_ranks if h.missing[str(r)].state != Where.STUCK]
        phases = [(r, by_rank[r].phase) for r in waits_on if by_rank[r] is not None and by_rank[r].phase]
        if not waits_on or len(phases) != len(waits_on):
            continue
        until = max(ph.until or (now + (h.timeout or 0)) for _, ph in phases)
        if until <= now:
            continue
        h.level, h.held_until = Level.SOFT, until
        h.held_why = "; ".join("rank %d %s" % (r, phase_text(ph, now)[3:]) for r, ph in phases)
        latest = until if latest is None else max(latest, until)
    return latest


class ByRank(dict):
    """What the rules read by rank ({rank: RankDoc}, {rank: main-thread frames}): a rank that wrote no document
    reads None (``by_rank[r]``), one rule for every rule of the analysis.  ``memo``: once the documents are
    final (``analyze``), the tables the rules make of them, each made once a verdict (analogs' tables of the
    groups' calls: two to nine times a verdict that reads them, seed 7)."""
    __slots__ = ("memo", "issued")

    def __missing__(self, rank):
        return None


def analyze(by_rank, world_size=None, now=None, stragglers=None):
    """The verdict (a Verdict) from one document per rank (RankDoc, or its JSON); ``stragglers``: the node's
    stragglers document (arrivals.py), named in the verdict."""
    # in rank order: the rules' sorted(by_rank.items()) then find one run (at 16,384 ranks of a merge, whose
    # files come in any order, 0.15 s of sorting pairs where once by rank)
    by_rank = ByRank((r, _documents.RankDoc.of(by_rank[r])) for r in sorted(by_rank))
    frames = ByRank((r, main_thread_frames(doc)) for r, doc in by_rank.items())
    # each rank as its device stands: an NCCL rank's calls issued behind the one its GPU waits in left out
    queued, issued = {}, {}
    for r, doc in list(by_rank.items()):
        by_rank[r], left_out = doc.at_device()
        if left_out:
            queued[r], issued[r] = left_out, doc
    by_rank.memo = {}  # (the documents final)
    by_rank.issued = issued  # {rank: its document with the calls issued behind its device's (at_device)}
    if world_size is None:
        world_size = max([d.world_size or 0 for d in by_rank.values()] or [0])
    now = now if now is not None else max([d.written_at or 0 for d in by_rank.values()] or [0])
    cands = _candidates(by_rank)
    hangs = _stuck_calls(by_rank, cands, now)
    culprits, undecided = _place_missing(hangs, by_rank, frames, now, queued)
    cycles = [i for i, h in enumerate(hangs) if h.caused_by and in_cycle(hangs, i)]
    for i in cycles:
        hangs[i].cycle = True
    if cycles:
        culprits.update(order_cycles(hangs, cycles, by_rank, undecided))
        aborted_beside_the_order(hangs, by_rank, culprits)
    for h in hangs:
        h.root = not h.caused_by
        culprits.update(categorize(h, by_rank, undecided))
    for h in hangs:
        _object_call_short(h, hangs, by_rank, culprits, undecided)
    odd = {r for h in hangs if h.mismatch is not None for r in h.mismatch.odd_ranks or ()}
    # after every rule that names: the dead rank it leans on, named or not (one gloo aborted is not named, and one
    # in none of the stuck calls raises in its peers all the same: the fuzzer's real seed 363000187 on 2.15)
    gone = {r for r, doc in by_rank.items() if doc is not None and doc.dead}
    for h in hangs:
        dead = culprits | gone
        for r in h.missing_ranks:
            m = h.missing[str(r)]
            why = raised_on_a_death(r, by_rank, dead, odd) if m.state == Where.NO_COLLECTIVE else None
            if why is not None:
                culprits.discard(r)
                m.state, m.text = Where.RAISED, "%s; %s" % (m.text or "it is in no collective", why)
    made = _made_apart(by_rank, hangs, culprits, undecided)
    for h in hangs:
        unknown = [r for r in h.missing_ranks if by_rank[r] is None]
        if unknown:
            undecided.append("%s: %s sent nothing; whether they are dead, unreachable or elsewhere is unknown"
                             % (describe(h), rank_list(unknown)))
    hangs = _renumbered(hangs)
    held = _holds(hangs, by_rank, now)
    hangs = [h.build() for h in hangs]
    out = _facts(hangs, culprits, held, undecided, by_rank, world_size, frames, cands, stragglers, now)
    return Verdict(made_apart=made, **out) if made else Verdict(**out)


def _made_apart(by_rank, hangs, culprits, undecided):
    """Where the ranks made different groups at one ``new_group`` before the stuck calls (mismatch.made_apart),
    that decides: the odd ones out are the culprits, whoever else the rules named or could not decide (a rank
    named from a group its peers made otherwise, as "never arrived" in a call it is in under another group's
    members, is no culprit; nor, where that making is itself stuck, a rank that raised on the crossed groups
    and ended: 1.8.1, seed 76000010), or nobody where none has a majority, or where every rank may have made
    only the groups it is in (mismatch._guarded: no rank is the odd one).  Its words (the verdict's
    ``made_apart``; None where that making is the stuck call, whose own desync says it), or None."""
    if not hangs:
        return None
    apart = made_apart(by_rank, hangs)
    if apart is None:
        return None
    m, seq, stuck, why = apart
    words = "new_group #%d: %s" % (seq, m.text)
    culprits.clear()
    said = _guard_words(why, m.odd_ranks, seq)
    no_odd = why is not None and why[0] in (OWN_ONLY, UNSHOWN)  # the guard on every rank, or maybe: no odd one
    if stuck:  # the stuck call's own desync says it, and why where the makings show it
        for h in hangs:
            if h.stream == MAKING and h.seq == seq and h.mismatch is not None:
                if said:
                    h.mismatch.text = "%s; %s" % (h.mismatch.text, said)
                if no_odd:
                    h.mismatch.odd_ranks, h.mismatch.expected_op = [], None
    if no_odd:
        del undecided[:]
        undecided.append("new_group #%d: %s: no one rank is at fault%s" % (
            seq, said, "" if why[0] == OWN_ONLY else " there, or the documents cannot tell which"))
        return None if stuck else "%s; %s" % (words, said)
    if m.odd_ranks:
        culprits.update(m.odd_ranks)
        del undecided[:]  # what the rules could not decide from calls on groups wired across: decided here
        return None if stuck else "%s; the odd one out: %s%s" % (words, rank_list(m.odd_ranks),
                                                                  "; " + said if said else "")
    if stuck:
        return None  # the stuck call's own desync says why nobody is named
    undecided.append("%s: the ranks made different groups there (%s) and none has a majority" % (
        "new_group #%d" % seq, m.text))
    return words


def _guard_words(why, odd, seq):
    """What made the groups apart in words (mismatch._guarded's ``why``), or None."""
    if why is None:
        return None
    if why[0] == OWN_ONLY:
        return "each rank made only the groups it is in, so the groups took other names on different ranks; %s" % (
            GUARD_ADVICE)
    if why[0] == UNSHOWN:  # a majority could name the wrong ranks: no rank is named
        return ("no making shown is of a group its rank is not in (past 24 ranks a making carries a digest of its "
                "members, known only for groups the documents show; or the first makings are not shown): where "
                "each rank made only the groups it is in, %s" % GUARD_ADVICE)
    one = len(odd) == 1
    if why[0] == NOT_IN:  # no later making shows whether it left that one out: said as a question
        return "%s not in the group the others made there (%s): where %s left that new_group out, %s" % (
            "%s is" % rank_list(odd) if one else "%s are" % rank_list(odd), rank_list(why[1]),
            "it" if one else "they", GUARD_ADVICE)
    return "%s left out new_group #%d (of %s, a group %s not in), so %s later groups took the next names; %s" % (
        rank_list(odd), seq, rank_list(why[1]), "it is" if one else "they are", "its" if one else "their",
        GUARD_ADVICE)


def _facts(hangs, culprits, held, undecided, by_rank, world_size, frames, cands, stragglers, now):
    """The verdict's fields beside its stuck calls: the culprits, the job's ranks, what cannot be decided."""
    hard = any(h.level == Level.HARD for h in hangs)
    out = dict(version=VERSION, hangs=hangs, culprit_ranks=sorted(culprits),
               level=(Level.HARD if hard else Level.SOFT) if hangs else None,
               held_until=held if held is not None and not hard else None,
               held_why="; ".join(h.held_why for h in hangs if h.held_why) or None,
               ranks_reporting=sorted(by_rank), ranks_silent=sorted(set(range(world_size)) - set(by_rank)),
               ranks_dead=sorted(r for r, d in by_rank.items() if d.dead),
               exits={str(r): d.exit_reason for r, d in sorted(by_rank.items()) if d.dead},
               frozen_ranks=sorted(r for r, d in by_rank.items() if d.frozen), world_size=world_size,
               undecided=undecided, stack_groups=_stack_groups(frames), resolved=_resolved(by_rank, cands),
               # each rank's Host made where it is read, as a verdict read from its file has them (most
               # verdicts read none: 2 us a rank, a tenth of a fuzzer case's verdict of 9 ranks)
               hosts=LazyRanks(Host, {str(r): {"host": d.host, "pid": d.pid, "py_spy_dump": _existing(
                   d.py_spy_dump), "node": d.node} for r, d in sorted(by_rank.items())}),
               culprits=[_culprit(r, by_rank[r]) for r in sorted(culprits)])
    if stragglers:  # the node's stragglers document, as arrivals.py (its owner) reads it
        out.update(stragglers=[Straggler.from_json(s) for s in _arrivals.named(stragglers)],
                   straggler_lines=_arrivals.lines(stragglers, now))
    return out


def _stuck_calls(by_rank, cands, now):
    """The stuck calls, as evaluated (drafts of Hangs): the overdue ones, and the calls in flight of the ranks
    missing from them (a cascade is named by its root even before the root is overdue)."""
    hangs, seen = [], set()
    todo = list(cands.items())
    while todo:
        (stream, seq), e = todo.pop(0)
        if (stream, seq) in seen:
            continue
        seen.add((stream, seq))
        h = _evaluate(by_rank, stream, seq, e, now)
        if e.derived and not h.missing_ranks and not h.has("mismatch"):
            continue  # a call everyone is in: under way, not stuck
        hangs.append(h)
        # a rank that never arrived may be waiting in a call of its own, younger than the timeout: look
        # at that call too, so that a cascade is named by its root even before the root is overdue
        for r in h.missing_ranks:
            doc = by_rank[r]
            if doc is None or doc.dead:
                continue
            for g in doc.groups:
                if g.in_flight is None:
                    continue
                key = (g.stream, g.in_flight.seq)
                if key in seen or key in cands:
                    continue
                # not overdue itself: hard only where it is in flight past this rank's timeout
                hard = (doc.ages_at_least or g.in_flight.started_at is not None and doc.timeout
                        and now - g.in_flight.started_at > doc.timeout)
                todo.append((key, _Candidate.in_flight(g, {r}, None, Level.HARD if hard else Level.SOFT, True)))

    return hangs


def _place_missing(hangs, by_rank, frames, now, queued=None):
    """Where each missing rank of each stuck call is, what each call waits on (``caused_by``), the ranks
    that rule names, the mismatches, and what cannot be decided: (culprits, undecided).  ``queued``: {rank:
    {stream: seqs}}, the calls a rank issued behind the one its device waits in (RankDoc.at_device)."""
    queued = queued or {}
    waiting_in = {}  # rank -> index of the stuck call it waits in
    for i, h in enumerate(hangs):
        for r in h.waiting_ranks:
            waiting_in.setdefault(r, i)
    culprits, undecided = set(), []
    # an aborted rank that one stuck call names on its own evidence (its peers there issued one call alike) and
    # another, later in the cascade, takes for a symptom beside a rank in no collective: named (the fuzzer's real
    # seed 43000042 on 2.13: rank 1 aborted inside broadcast #1, rank 3 raised there and ended, and broadcast
    # #2 took rank 1 for a symptom beside rank 3, a symptom itself (raised_on_a_death): nobody was named)
    beside, alone_named = {}, {}  # rank -> [(its Whereabouts, their text before)]; rank -> the call naming it
    called = {}  # hang index -> its call in words, made once: a cascade's 2,048 missing ranks wait in one call
    for i, h in enumerate(hangs):
        h.missing, caused_by = {}, []
        for r in h.missing_ranks:
            j = waiting_in.get(r)
            if j is not None and j != i:
                caused_by.append(j)
                behind = h.seq in queued.get(r, {}).get(h.stream, ())
                if j not in called:
                    called[j] = describe(hangs[j])
                h.missing[str(r)] = Draft(Whereabouts, state=Where.STUCK, text="%s %s" % (
                    "it issued this call, queued on its GPU behind" if behind else "it waits in",
                    called[j]), in_hang=j)
            else:
                h.missing[str(r)] = _where(by_rank[r], frames[r], now)
                if by_rank[r] is not None:
                    culprits.add(r)
        for r in aborted_beside_another(h, by_rank, waiting_in):
            culprits.discard(r)
            m = h.missing[str(r)]
            beside.setdefault(r, []).append((m, m.text or "dead"))
            m.text = "%s; %s" % (m.text or "dead", ABORTED_WORDS)
        alone = aborted_alone(h, by_rank, waiting_in)
        if alone is not None:
            r, odd, why = alone
            m = h.missing[str(r)]
            m.text = "%s; %s" % (m.text or "dead", why)
            if odd is None:  # nothing decides
                culprits.discard(r)
                undecided.append("%s: %s" % (describe(h), why))
            elif not odd:
                alone_named[r] = describe(h)
            elif odd:  # a size Mismatch of the peers that the groups like this one tell apart: named below
                culprits.discard(r)
                h.mismatch = odd
        h.caused_by = sorted(set(caused_by))
        m = h.mismatch
        if m is not None and m.odd_ranks:
            culprits.update(m.odd_ranks)
        elif m is not None:
            why = "the root of %s is not known" % rank_list(m.unknown) if m.unknown else "none has a majority"
            if m.evidence:  # a lead that decides nothing (mismatch._early_lead)
                why += "; %s" % m.evidence
            undecided.append("%s: the ranks in it issued different %s (%s) and %s" % (
                describe(h), mismatch_word(m.kind, h.op), m.text, why))
    for r in set(alone_named) & set(beside):
        culprits.add(r)
        for m, before in beside[r]:
            m.text = "%s; aborted (SIGABRT): named at %s, where its peers issued one call alike" % (
                before, alone_named[r])
    return culprits, undecided


def _renumbered(hangs):
    """The stuck calls, roots first, then by start; every index into them renumbered."""
    hangs_sorted = sorted(range(len(hangs)), key=lambda i: (not hangs[i].root, hangs[i].started_at or 0))
    order = {old: new for new, old in enumerate(hangs_sorted)}
    hangs = [hangs[i] for i in hangs_sorted]
    for h in hangs:
        h.caused_by = sorted(order[j] for j in h.caused_by)
        for m in h.missing.values():
            if m.has("in_hang"):
                m.in_hang = order[m.in_hang]
    return hangs


def _evaluate(by_rank, stream, seq, e, now):
    """The draft of stuck call (``stream``, ``seq``) found as candidate ``e``: who finished it, waits in it or
    never entered it, its op and size, how long it is stuck, and a desync at its seq where the ranks differ."""
    waiting, missing, finished, ended_after, died, calls = [], [], [], [], [], {}
    for r in _members(e, stream):
        doc = by_rank[r]
        pos = doc.position(stream) if doc is not None else None
        if pos is None or pos.last_started < seq:
            missing.append(r)
            continue
        if pos.last_completed >= seq:
            finished.append(r)
            if doc.kind == "end" or doc.dead:
                ended_after.append(r)  # it finished the call, then ended: never "never arrived"
        else:
            waiting.append(r)
            if doc.dead:
                died.append(r)  # it was in the call when it ended: not a culprit
        c = doc.call(stream, seq)
        if c is not None and c.op and c.op != "unknown":
            calls[r] = c
    seen_by = sorted(e.seen_by)
    h = Draft(Hang, group=e.group, stream=stream, group_ranks=e.group_ranks, level=e.level or Level.HARD,
              deadline_s=e.deadline_s, kind=e.kind, peer=e.peer, seq=seq, op=e.op, api=e.api or "",
              size=e.size or next((calls[r].size for r in sorted(calls) if calls[r].size), None),
              waiting_ranks=waiting, died_waiting=died, missing_ranks=missing, finished_ranks=finished,
              finished_then_ended=ended_after, started_at=e.started_at, detected_at=e.detected_at,
              detected_by=seen_by, overdue=not e.derived, timeout=by_rank[seen_by[0]].timeout)
    if h.op in (None, "unknown") and calls:
        h.op = collections.Counter(c.op for c in calls.values()).most_common(1)[0][0]
    # torch's own timeout of this group: it ends the job then (a subgroup does not inherit the world's)
    h.torch_timeout_s = next((p.torch_timeout_s for p in (by_rank[r].position(stream) for r in seen_by)
                              if p is not None and p.torch_timeout_s is not None), None)
    if e.age_s is not None:
        # one duration per hang everywhere: its age when first found overdue, as the console, the report
        # and the verdict all say it ("stuck 3.1 s"); a later merge does not make it a different number
        h.stuck_s, h.stuck_at_least = round(e.age_s, 1), False
    elif h.started_at is not None:
        h.stuck_s = round(now - h.started_at, 1)
        # torch dumps carry no time of their own: ages count from the newest time in them (torch_fr.py)
        h.stuck_at_least = any(by_rank[r].ages_at_least for r in seen_by)
    _desync(h, calls, by_rank, (waiting, finished, ended_after, died))
    return h


_P2P_OPS = ("send", "recv", "isend", "irecv", "recv_anysource")



def _desync(h, calls, by_rank, lists):
    """Different ops, sizes or roots at the stuck call's seq: its ``mismatch``; the odd ones that issued another
    op never entered this call (taken out of ``lists``: waiting, finished, ended after, died)."""
    stream, seq = h.stream, h.seq
    # a p2p stream's send (its source's) and recv (its destination's) at one seq are the two halves of one
    # call: never ops that differ (their sizes may)
    ops = {r: "p2p" if c.op in _P2P_OPS and is_p2p(stream) else c.op for r, c in calls.items()}
    if len(set(ops.values())) > 1:
        h.mismatch = m = by_program(mismatch(ops, calls), calls, by_rank, stream, seq)
        if m.expected_op:
            # the odd ones issued another op at this seq: they never entered *this* call, finished or not
            other = [r for r in m.odd_ranks if r in h.waiting_ranks or r in h.finished_ranks]
            h.other_op_ranks = other
            for lst in lists:
                lst[:] = [r for r in lst if r not in other]
            if h.op != m.expected_op:
                h.op = m.expected_op
                h.size = next((c.size for r, c in sorted(calls.items()) if c.op == m.expected_op and c.size), None)
        return
    # same op, different dtype or element count: also a desync
    sizes = {r: "%s of %s" % (c.op, c.size) for r, c in calls.items() if c.size}
    differ = len({(ops[r], calls[r].size) for r in sizes}) > 1  # (a p2p stream's halves compared by size)
    bare = {r: "%s of %s" % (calls[r].op, ROOT_TEXT.sub("", calls[r].size)) for r in sizes}
    if differ and len(set(bare.values())) == 1:  # one op and size: roots
        found = {r: ROOT_TEXT.search(calls[r].size) for r in sizes}
        known = {r: f.group(2) for r, f in found.items() if f}
        if len(set(known.values())) > 1:  # two roots seen: a desync (one root and unknown ones: none seen)
            h.mismatch = m = mismatch({r: "%s from %s" % (calls[r].op, known.get(r, "an unknown root"))
                                       for r in sizes}, calls, MismatchKind.ROOT)
            if len(known) < len(sizes):  # a rank of unknown root may be on either side: no odd one named
                m.expected_op, m.odd_ranks = None, []
                m.unknown = sorted(r for r in sizes if r not in known)
            else:
                by_program(m, calls, by_rank, stream, seq)
            if m.expected_op:
                h.size = next(calls[r].size for r in sorted(sizes) if r not in m.odd_ranks)
    elif differ:
        h.mismatch = m = by_program(mismatch(sizes, calls, MismatchKind.SIZE), calls, by_rank, stream, seq)
        if m.expected_op:  # the call named by what the majority issued, not by the odd rank's size
            h.size = m.expected_op.split(" of ", 1)[1]


def _members(e, stream):
    ends = p2p_ends(stream)
    if ends is not None and ends[0] is not None:
        return sorted(set(ends))
    return list(e.group_ranks or [])


def _culprit(rank, doc):
    """What a scheduler needs of one culprit (a Culprit): its node by the scheduler's name for it (``node_from``
    says which: scheduler.NODE_SOURCES or "hostname"), its host and pid, the job's ids."""
    if doc is None:
        return Culprit(rank=rank, node=None, node_from=None, host=None, pid=None)
    return Culprit(rank=rank, node=doc.node, node_from=doc.node_from, host=doc.host, pid=doc.pid, **doc.job_ids)


def culprit_entry(rank, doc):
    """``_culprit``'s JSON: what a scheduler needs of one culprit."""
    return _culprit(rank, doc).to_json()


def _existing(path):
    return path if path and os.path.exists(path) else None


