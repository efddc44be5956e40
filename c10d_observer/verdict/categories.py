"""The category of a stuck call (types.Category) and the words that say why: what the ranks missing from it,
and the GPU, tell."""
from ..levels import Category, Where, mismatch_word
from ..text import describe, rank_list
from .. import streams as _streams


def is_p2p(h):
    return h.kind == "p2p" or _streams.is_p2p(h.stream or "")


def _whereabouts(missing):
    """Where the missing ranks are, in words: "rank 2 is in no collective; rank 3 is dead: ..."."""
    out = []
    for r, m in sorted(missing.items(), key=lambda kv: int(kv[0])):
        text = (m.text or m.state or "unknown").split("; ")[0]
        out.append("rank %s %s" % (r, text[3:] if text.startswith("it ") else "is " + text if text.startswith(
            "dead") else ": " + text))
    return "; ".join(x.replace(" : ", ": ") for x in out)


def _unposted(h):
    """"rank 3 never posted its half: rank 3 is in no collective"."""
    return "%s never posted %s half: %s" % (rank_list(h.missing_ranks), "its" if len(h.missing_ranks) == 1 else
                                            "their", _whereabouts(h.missing))


def categorize(h, by_rank, undecided):
    """What kind of hang ``h`` (a draft Hang) is (``category``, ``category_why``); returns the culprits it adds:
    the frozen ranks of a call every member entered, where some members are not frozen (they wait for the
    frozen)."""
    states = [m.state for m in h.missing.values()]
    if h.mismatch:
        h.category = Category.MISMATCH
        h.category_why = "its ranks issued different %s at the same seq: %s" % (
            mismatch_word(h.mismatch.kind, h.op), h.mismatch.text)
    elif is_p2p(h) and h.missing_ranks and (h.cycle or h.caused_by):
        # a send or recv whose peer went on to another call (which waits for this rank: the calls wait for
        # each other): the peer left its half out, as docs/diagnosis.md documents an unmatched p2p
        h.category, h.category_why = Category.UNMATCHED_P2P, _unposted(h)
    elif h.cycle or Where.OUT_OF_ORDER in states:
        h.category = Category.ORDER
        h.category_why = "the ranks issued their calls across groups in different orders"
    elif h.caused_by:
        h.category = Category.CASCADE
        h.category_why = "%s it waits for %s in another stuck call" % (
            rank_list([int(r) for r, m in h.missing.items() if m.state == Where.STUCK]),
            "is" if states.count(Where.STUCK) == 1 else "are")
    elif h.missing_ranks:
        # the kind says "never arrived" (render: "kind: never arrived: rank 2 is in no collective"); the why
        # says where the ranks are, in words, not the fact again with a raw state
        if is_p2p(h):
            h.category, h.category_why = Category.UNMATCHED_P2P, _unposted(h)
        else:
            h.category, h.category_why = Category.NEVER_ARRIVED, _whereabouts(h.missing)
    else:
        h.category = Category.ALL_ARRIVED
        return _all_arrived(h, by_rank, undecided)
    return ()


def _all_arrived(h, by_rank, undecided):
    """Why a call every member entered is stuck (``category_why``); returns the ranks that are its culprits: the
    frozen ones beside ranks that are not, or the ranks whose NCCL work never started while the others' did."""
    call = describe(h)
    frozen = sorted(r for r in h.waiting_ranks if by_rank[r] is not None and by_rank[r].frozen)
    if frozen:
        h.frozen_in_it = frozen
    others = sorted(r for r in h.waiting_ranks if r not in frozen)
    if frozen and (others or h.finished_ranks):
        ages = ", ".join(("rank %d " % r if len(frozen) > 1 else "") + "%.1f s" % (by_rank[r].heartbeat_age_s or 0)
                         for r in frozen)
        them = "it" if len(frozen) == 1 else "them"
        rest = ("%s wait%s for %s" % (rank_list(others), "s" if len(others) == 1 else "", them) if others else
                "%s completed %s part" % (rank_list(h.finished_ranks), "its" if len(h.finished_ranks) == 1 else "their"))
        h.category_why = ("every rank entered it; %s %s frozen in it (%s Python has not run for %s: a stopped "
                          "process or a thread holding the GIL) and %s" % (
                              rank_list(frozen), "is" if len(frozen) == 1 else "are",
                              "its" if len(frozen) == 1 else "their", ages, rest))
        return frozen
    if frozen:
        undecided.append("%s: every rank of it is in it and all are frozen (%s): a whole job stopped, not one "
                         "rank's fault the documents show" % (call, rank_list(frozen)))
        h.category_why = "every rank entered it and every one is frozen"
    elif h.finished_ranks:
        h.category_why = ("%s completed it and %s still wait in it; no rank is missing or frozen" % (
            rank_list(h.finished_ranks), rank_list(h.waiting_ranks)))
        undecided.append("%s: %s" % (call, h.category_why))
    else:
        gpu, timed = _gpu_states(h, by_rank)
        late = sorted(r for r, st in gpu.items() if st == "scheduled")
        if timed and len(gpu) == len(h.waiting_ranks) and 0 < len(late) < len(gpu):
            started = sorted(r for r in gpu if r not in late)
            h.gpu_not_started = late
            h.category_why = (
                "every rank enqueued it; on %s its work never started on the GPU (NCCL's recorder: scheduled: "
                "its stream is busy with earlier work, or that work is wedged) and %s started it and wait%s "
                "for %s" % (rank_list(late), rank_list(started), "s" if len(started) == 1 else "",
                            "it" if len(late) == 1 else "them"))
            return late
        h.category_why = ("every rank entered it and none completed it; none is frozen: the transport or "
                          "a device is wedged, or a rank's work never ran") + _gpu_why(h, gpu, timed)
        undecided.append("%s: %s" % (call, h.category_why))
    return ()


def _gpu_states(h, by_rank):
    """({rank: "scheduled" | "started"} of the waiting ranks whose document has NCCL's state of this call,
    whether each of those dumps had start events: without them "scheduled" says nothing)."""
    out, timed = {}, True
    for r in h.waiting_ranks:
        p = by_rank[r].position(h.stream) if by_rank[r] is not None else None
        if p is not None and p.gpu_state and p.in_flight is not None and p.in_flight.seq == h.seq:
            out[r] = p.gpu_state
            timed = timed and bool(p.gpu_timing)
    return out, timed and bool(out)


def _gpu_why(h, gpu, timed):
    """What NCCL's per-call states say where they cannot name a rank."""
    if not gpu:
        return ""
    if not timed:
        return ("; NCCL's recorder has every call as scheduled until it completes unless TORCH_NCCL_ENABLE_TIMING=1 "
                "is set: with it, the rank whose work never started on its GPU is named")
    if len(gpu) < len(h.waiting_ranks):
        return "; NCCL's state of it is known only on %s" % rank_list(sorted(gpu))
    if set(gpu.values()) == {"started"}:
        return "; NCCL's recorder: its work started on every rank's GPU and none completed (a link or NCCL itself)"
    return "; NCCL's recorder: its work started on no rank's GPU (every stream busy with earlier work)"
