"""The verdict's words as enums, on the floor that documents, protocols, the watchdog and the verdict all stand
on: a verdict's level (soft informs, hard acts), how an overdue call ended, where a rank that never arrived is,
what kind of desync, what kind of hang, what became of it.  ``str``-valued: each value is the JSON's string, so
the files and ``report --json`` keep their shape.  No imports of the package."""
import enum

__all__ = ["Level", "CallEnd", "Where", "MismatchKind", "OutcomeState", "Category", "MISMATCH_WORDS", "mismatch_word"]


class _Words(str, enum.Enum):
    def __str__(self):
        return self.value


class Level(_Words):
    """A soft verdict (past a learned deadline) informs; a hard one (past the timeout) acts."""
    SOFT = "soft"
    HARD = "hard"


class CallEnd(_Words):
    """How an overdue call left flight (documents.Overdue.ended, detector.py)."""
    COMPLETED = "completed"  # the hang resolved
    RANK_ENDED = "rank ended"  # the rank was ended while in it
    PEERS_ENDED = "peers ended"  # it ended once other ranks of it had ended: torch raised, not a recovery


class Where(_Words):
    """Where a rank that never arrived in a stuck call is instead."""
    NO_COLLECTIVE = "no_collective"  # busy in Python or compute
    IN_COLLECTIVE = "in_collective"  # in another call, not stuck (yet)
    STUCK = "stuck"  # it waits in another stuck call (a cascade)
    FROZEN = "frozen"  # its Python has not run for three polls (a thread holds the GIL, the process stopped)
    DEAD = "dead"  # its process ended before it entered the call
    UNKNOWN = "unknown"  # it sent nothing
    OUT_OF_ORDER = "out_of_order"  # it issued its calls across groups in another order (an ordering deadlock)
    RAISED = "raised"  # its call that a dead culprit never entered is over: it raised, the rank left (a symptom)


class MismatchKind(_Words):
    OP = "op"  # different ops at the same seq
    SIZE = "size"  # the same op, different sizes or dtypes
    ROOT = "root"  # the same rooted op and size, different roots (sources that see the root: patch, gloo_recorder)


MISMATCH_WORDS = {MismatchKind.OP: "ops", MismatchKind.SIZE: "sizes", MismatchKind.ROOT: "roots"}  # "different <word>"


def mismatch_word(kind, op):
    """"different <word>" of a desync of ``kind`` in a call of ``op``: a ``new_group``'s size is the group it
    makes (callword.encode_members)."""
    if op == "new_group" and str(kind) == MismatchKind.SIZE.value:
        return "groups"
    return MISMATCH_WORDS[MismatchKind(str(kind))]


class OutcomeState(_Words):
    """What became of a stuck call after the verdict."""
    RESOLVED = "resolved"  # every rank that waited completed it: the late ranks caught up
    ENDED = "ended"  # its ranks ended while it was stuck
    STUCK = "stuck"  # still stuck in the newest documents


class Category(_Words):
    """What kind of hang a stuck call is (``Hang.category``, its evidence in ``Hang.category_why``)."""
    NEVER_ARRIVED = "never_arrived"  # a rank never entered it (Whereabouts says where it is instead)
    MISMATCH = "mismatch"  # its ranks issued different ops, sizes or dtypes at the same seq
    ORDER = "order"  # the ranks issued their calls across groups in different orders
    UNMATCHED_P2P = "unmatched_p2p"  # a send or recv whose peer never posted its half
    CASCADE = "cascade"  # the rank it waits for is stuck in another stuck call: a symptom, not a root
    ALL_ARRIVED = "all_arrived"  # every rank entered it and none completed it (or some did, and the rest wait)
