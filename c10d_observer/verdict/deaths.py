"""Ranks that died or raised beside a hang: which of them are its culprits and which its symptoms (gloo's aborts
of a rank that received a collective of another size; a rank that raised once a peer died)."""
from .. import analogs as _analogs
from ..levels import MismatchKind
from ..text import call_words, describe, rank_list
from .fields import Draft
from .types import Mismatch


# A rank that died of SIGABRT beside another rank that explains the hang: gloo aborts a rank that receives a
# collective of another size than it posted ("op.preamble.length <= op.nbytes ... Is there a distributed
# collective mismatch"), so the desync's victim dies while the rank that caused it lives on (the fuzzer's real
# programs: tests/fuzz/real.py, seed 5000066).  It is a symptom: not named while another rank of the call is.
ABORTED_WORDS = ("aborted (SIGABRT), as gloo aborts a rank that receives a collective of another size than it "
                 "posted: a symptom of the other rank's desync, not named")


def gloo_aborted(doc):
    """Whether the rank's process died of SIGABRT (as gloo aborts a rank on a size it did not post)."""
    return doc.dead and "(SIGABRT)" in (doc.exit_reason or "")


def aborted_beside_another(h, by_rank, waiting_in):
    """The missing ranks of hang ``h`` that died of SIGABRT, where a missing rank that did not (in no
    collective, frozen, dead otherwise) is there to name, but for those that raised on the death in the call
    before (``raised_before``): else none (an abort alone is named)."""
    aborted, others = [], []
    for r in h.missing_ranks:
        doc = by_rank[r]
        if doc is None or r in waiting_in:
            continue
        if gloo_aborted(doc):
            aborted.append(r)
        else:
            others.append(r)
    if aborted and others and set(others) <= raised_before(h, by_rank, waiting_in):
        return []
    return aborted if others else []


def raised_before(h, by_rank, waiting_in):
    """The missing ranks of hang ``h`` that raised on the death of the one missing rank gloo aborted (SIGABRT) in
    the call before it, #seq - 1, which two ranks or more waiting in ``h`` completed, issued alike: each of them in
    no collective, its last call there #seq - 1, of the op and size those ranks issued, and a call the aborted
    rank never entered or died inside, by its record (``raised_on_a_death``).  Every one of them or none (set()).
    gloo aborts a rank that receives more than it posted, and a receiver of the call's data of the size that
    the ranks that completed it posted did not abort: the aborted rank posted another size, or crashed, and
    those that raised did so on its death.  The fuzzer's real seed 363000078 on torch 2.15 (2026-12-06, four runs
    at once): rank 4 of five posted the world's broadcast #1 of another size at step 0; gloo aborted it, its
    record holding no call; the root and rank 1 raised, ranks 2 and 3 completed #1 and wait in #2, and nobody
    was named, rank 4 taken for a symptom beside ranks 0 and 1, and they for symptoms of its death.  A rank that
    raised whose #seq - 1 is another size, or whose record does not show it, may be the one that sent more (a
    relay of the broadcast's tree forwards what it posted): nothing is excused then."""
    aborted = [r for r in h.missing_ranks if r not in waiting_in and by_rank[r] is not None
               and gloo_aborted(by_rank[r])]
    if len(aborted) != 1 or h.seq < 2:
        return set()
    prev = h.seq - 1

    def call_of(r):
        g = by_rank[r].position(h.stream) if by_rank[r] is not None else None
        c = g.call(prev) if g is not None else None
        return (c.op, c.size) if c is not None and c.op not in (None, "unknown") and c.size else None

    completed = {call_of(p) for p in h.waiting_ranks}
    if len(h.waiting_ranks) < 2 or len(completed) != 1 or None in completed:
        return set()
    out = set()
    for r in h.missing_ranks:
        if r in aborted or r in waiting_in:
            continue
        g = by_rank[r].position(h.stream) if by_rank[r] is not None else None
        if (g is None or g.last_started != prev or call_of(r) not in completed
                or raised_on_a_death(r, by_rank, set(aborted)) is None):
            return set()
        out.add(r)
    return out


def aborted_beside_the_order(hangs, by_rank, culprits):
    """A rank gloo aborted (SIGABRT), missing from a stuck call whose cycle names the rank that broke the order:
    a symptom beside that rank, as beside a rank in no collective (``aborted_beside_another``), not named.  The
    fuzzer's real seed 66000021 on 2.13 (2026-12-06): rank 1 skipped the world's broadcast #6 of 1 x float32, so
    its broadcast of 4096 met the others' #6 and gloo aborted ranks 3 and 5 (rank 3's log: 16384 bytes received
    where it posted 4); their source had not yet recorded their calls (their documents held #0 and #1), so they
    "never arrived" at #7 beside rank 1, which the order rule named, and all three were named."""
    for h in hangs:
        o = h.ordering
        if o is None:
            continue
        for r in h.missing_ranks:
            doc = by_rank[r]
            if r == o.rank or doc is None or not gloo_aborted(doc):
                continue
            culprits.discard(r)
            m = h.missing[str(r)]
            m.text = "%s; %s" % (m.text or "dead", ABORTED_WORDS)


def aborted_alone(h, by_rank, waiting_in):
    """``(rank, odd, why)`` for the missing rank of hang ``h`` that died of SIGABRT with no other missing rank
    beside it (else None).  Where the call's own mismatch names its odd ranks, ``odd`` is that mismatch: the dead
    rank is its symptom, not named.  Else only where its last call on the stuck call's stream is the one before it:
    it may have crashed before the call, or died inside it, aborted by gloo because a peer sent more than it
    posted (seed 8000076 on 2.15: the root of a pair's broadcast sent 2,097,153 elements; gloo aborted the
    receiver before its source read its entry for the call).  Its own size is unknown; its peers' calls at the
    place decide:
    - two or more peers issued one op and one size: ``odd`` is [] (it is named: it crashed, or posted another
      size than they all did);
    - the groups like this one issued a call there (analogs.program_call): ``odd`` is a size Mismatch whose
      odd ranks are the peers whose call is another (named, the dead rank a symptom), or [] where every peer
      issued the program's call;
    - else ``odd`` is None: nothing decides, the hang says why."""
    missing = [r for r in h.missing_ranks if by_rank[r] is not None and r not in waiting_in]
    raised = raised_before(h, by_rank, waiting_in) if len(missing) > 1 else set()
    missing = [r for r in missing if r not in raised]
    if len(missing) != 1:
        return None  # none, or aborted_beside_another's case
    r = missing[0]
    doc = by_rank[r]
    if not gloo_aborted(doc):
        return None
    pos = doc.position(h.stream)
    if raised and (pos.last_started if pos is not None else 0) < h.seq:
        c = by_rank[h.waiting_ranks[0]].position(h.stream).call(h.seq - 1)  # (raised_before: shown, alike)
        prev = call_words(c.op, h.seq - 1, h.group, h.group_ranks, h.kind, size=c.size)
        return (r, [], "aborted (SIGABRT) in or before %s, which %s completed and %s issued alike and raised on "
                        "its death: it posted another size than they did, or crashed" % (
                            prev, rank_list(sorted(h.waiting_ranks)), rank_list(sorted(raised))))
    m = h.mismatch if h.has("mismatch") else None
    if m is not None and m.odd_ranks:
        # the call's mismatch names its odd ranks from the peers' own calls: gloo aborts the victim of a desync
        # while the rank that caused it lives on, wherever the dead rank's record stopped (the fuzzer's real seed
        # 46000136 on 2.15: rank 3 posted the world's broadcast #4 three times as large, gloo aborted rank 7,
        # whose record held no call of the world yet: it was named beside rank 3)
        return (r, m, "%s; the odd one%s of %s: %s" % (ABORTED_WORDS, "s" if len(m.odd_ranks) > 1 else "",
                                                       describe(h), rank_list(m.odd_ranks)))
    peers = {p: by_rank[p].call(h.stream, h.seq) for p in h.waiting_ranks + h.finished_ranks}
    peers = {p: (c.op, c.size) for p, c in peers.items() if c is not None and c.op not in (None, "unknown") and c.size}
    pos = doc.position(h.stream)
    started = pos.last_started if pos is not None else 0
    if started != h.seq - 1:
        # two peers or more alike: it left the program, whatever its record holds (named dead, as ever)
        return None if len(peers) >= 2 and len(set(peers.values())) == 1 else _behind(r, h, by_rank, started)
    call = describe(h)
    if len(peers) >= 2 and len(set(peers.values())) == 1 and not h.has("mismatch"):
        return (r, [], "aborted (SIGABRT) before or inside %s, which %s issued alike (%s of %s): it crashed, or "
                        "posted another size than they did" % (call, rank_list(sorted(peers)), *next(iter(peers.values()))))
    got = _analogs.program_call(by_rank, h.stream, h.seq) if peers and len(peers) == len(
        h.waiting_ranks + h.finished_ranks) else None
    if got is not None:
        (op, size), streams, _ = got
        odd = sorted(p for p, c in peers.items() if c != (op, size))
        like = "group%s %s, like this one, issued %s of %s there" % (
            "s" if len(streams) > 1 else "", ", ".join(map(str, streams[:4])), op, size)
        if odd:
            ops = {str(p): "%s of %s" % c for p, c in sorted(peers.items())}
            mismatch = Draft(Mismatch, ("unknown",), kind=MismatchKind.SIZE, ops=ops, expected_op="%s of %s" % (op, size),
                             odd_ranks=odd, text=", ".join("%s %s" % (rank_list([p]), ops[str(p)]) for p in odd),
                             evidence="%s; the one rank beside, %s, died of SIGABRT" % (like, rank_list([r])))
            return (r, mismatch, "aborted (SIGABRT) by gloo inside %s, as gloo aborts a rank that receives more "
                                  "than it posted: %s issued %s there (%s): a symptom, not named" % (
                                      call, rank_list(odd), ops[str(odd[0])], like))
        return (r, [], "aborted (SIGABRT) before or inside %s; its peers issued the program's call (%s): it "
                        "crashed, or posted another size" % (call, like))
    said = "; ".join("%s issued %s of %s" % ((rank_list([p]),) + c) for p, c in sorted(peers.items())[:2])
    return (r, None, "%s died of SIGABRT and never arrived, or died inside it: gloo aborts a rank that receives "
                      "a collective of another size than it posted, so %s may have crashed before it or been "
                      "aborted by its peer's call (%s); its own size is not known, and no group like this one "
                      "shows the program's call there: not named" % (rank_list([r]), rank_list([r]),
                                                                    said or "their sizes are not known"))


def _behind(r, h, by_rank, started):
    """``(rank, None, why)`` where the aborted rank's record stops before calls a peer of the stuck call completed
    on its group (its source had not yet recorded them when gloo aborted it), and its peers there are not two or
    more alike: where it died is not known, and so whether it crashed or a peer's call of another size aborted
    it; else None (the rank is named dead).  The
    fuzzer's real seed 66000013 on 2.13 (2026-12-06): in a tp pair, root rank 3 broadcast int64 where the program
    broadcasts bfloat16, gloo aborted rank 2 ("8388608 vs 2097152"), whose record held no call, and rank 2 was
    named, dead before #3 by its record, though rank 3 had completed #1 and #2 with it."""
    done = {}
    for p in h.waiting_ranks + h.finished_ranks:
        g = by_rank[p].position(h.stream) if by_rank[p] is not None else None
        if g is not None and (g.last_completed or 0) > started:
            done[p] = g.last_completed
    if not done or started >= h.seq:
        return None
    p = min(done)
    shown = "holds no call on this group" if not started else "stops at #%d on this group" % started
    return (r, None, "%s died of SIGABRT; its record %s, where %s completed #%d with it: its source had not "
                     "recorded its last calls, so whether it crashed or gloo aborted it inside a peer's call of "
                     "another size than it posted is not known: not named" % (rank_list([r]), shown,
                                                                              rank_list([p]), done[p]))


def raised_on_a_death(r, by_rank, culprits, odd=()):
    """Why rank ``r``, alive and in no collective, is a symptom of a dead rank of ``culprits`` (the ranks named, and
    every dead rank: one gloo aborted is not named, and its death raises in its peers all the same; the fuzzer's
    real seed 37000018 on 2.15, on a loaded machine, named three such ranks beside it; nor need the dead rank be
    in a stuck call: seed 363000187 on 2.15, a mesh rank whose tp call raised when its tp peer exited, named in
    its dp pair's broadcast), in words; else None.  Its
    last call on a group of a dead named rank is one that rank never entered, and it is no longer in it: a
    collective cannot complete without a member, so it ended by raising (gloo raises in the peers of a rank
    whose process ends), and the rank went to its error path, where it may stay a while (tearing down).  The
    fuzzer's real programs found it (tests/fuzz/real.py, seed 5000001 on torch 2.15: a mesh rank named "in no
    collective" beside the rank that exited); a group the dead rank's document does not hold, where it holds
    others, is one it issued no call on (seed 19000025 on torch 1.8.1, the patch source: rank 0 exited before
    its pair's first barrier, which raised in rank 1).  Only in that direction: a rank that stalls outside collectives
    while a peer dies waiting for it never entered a call that the dead rank did not.

    Also where its last call there is the one the dead rank died inside (in flight in its document), which the
    rank's record shows over: a source counts a call that raised as over (tracker.poll_once: a failed work is no
    longer in flight), and gloo raises in the peers of a rank that dies in a call (the fuzzer's real seed 43000042
    on 1.8.1: gloo aborted rank 1 inside a broadcast whose size it changed, the broadcast raised "Connection reset
    by peer" in rank 3, which ended, and rank 3 was named "in no collective" beside rank 1).  A receiver of a
    broadcast may also have completed it whole; its rank is then not named either: a miss, never a wrong culprit.
    Not for a rank of ``odd`` (the odd ones of a mismatch: the rank whose call made the other one die)."""
    doc = by_rank[r]
    if doc is None or doc.dead or doc.frozen or doc.phase or any(g.in_flight is not None for g in doc.groups):
        return None
    for d in sorted(culprits):
        dead = by_rank[d]
        if d == r or dead is None or not dead.dead:
            continue
        for g in doc.groups:
            if g.kind != "collective" or d not in (g.ranks or ()):
                continue
            theirs = dead.position(g.stream)
            if theirs is None and dead.groups:
                theirs_started = 0  # its record of its groups has none of this one: it issued no call there
            else:
                theirs_started = theirs.last_started if theirs is not None else None
            died_in = theirs.in_flight.seq if theirs is not None and theirs.in_flight is not None else None
            never = theirs_started is not None and g.last_started > theirs_started
            inside = r not in odd and died_in is not None and died_in == g.last_started <= g.last_completed
            if not (never or inside):
                continue
            c = g.call(g.last_started)
            call = call_words(c.op if c else None, g.last_started, g.group, list(g.ranks or ()), "collective")
            if never:
                return ("its %s, which rank %d never entered, is over: gloo raised it when rank %d died, and this "
                        "rank left for its error path; a symptom, not named" % (call, d, d))
            return ("its last call, %s, is the one rank %d died inside, and it is over: gloo raises in the "
                    "peers of a rank that dies in a call, and this rank may have left for its error path "
                    "(or completed it, and ended or stopped of its own); a symptom of the death, not named"
                    % (call, d))
    return None
