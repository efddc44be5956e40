"""A desync at one seq: the ranks in a stuck call issued different ops, sizes or roots; the odd ones out by a
majority, or by what the groups like this one issued there (analogs.py)."""
import collections
import re

from .. import analogs as _analogs
from ..levels import MismatchKind
from ..text import rank_list
from .types import Draft, Mismatch


ROOT_TEXT = re.compile(r"(, |^)(root \d+)$")  # the root a size text ends with (callword.decode_sig)


def mismatch(ops, calls, kind=MismatchKind.OP):
    """Different calls at one seq (a draft Mismatch; ``unknown``: ranks whose root is not known, where the
    roots differ): the majority's is expected, the others are the odd ones out."""
    counts = collections.Counter(ops.values())
    (top, n), = counts.most_common(1)
    unique_top = list(counts.values()).count(n) == 1
    odd = sorted(r for r, op in ops.items() if op != top) if unique_top else []
    by_op = collections.OrderedDict()
    for r, op in sorted(ops.items(), key=lambda x: (x[1] == top, x[0])):
        by_op.setdefault(op, []).append(r)
    return Draft(Mismatch, ("unknown",), kind=kind, ops={str(r): op for r, op in sorted(ops.items())},
                 expected_op=top if unique_top else None, odd_ranks=odd,
                 text=", ".join("%s %s" % (rank_list(rs), op) for op, rs in by_op.items()))


def by_program(m, calls, by_rank, stream, seq):
    """A desync with no majority: the odd ones out are the ranks whose call is not the one that groups like
    this one, with its history, issued at this seq and went past (analogs.program_call), where some of its
    ranks issued that call and some another; the evidence is said.  ``m``, changed in place, returned."""
    if m.odd_ranks or m.unknown:
        return m
    got = _analogs.program_call(by_rank, stream, seq)
    if got is None or any(c.op in (None, "unknown") for c in calls.values()):
        return m
    (op, size), streams, (first, last) = got
    agree = sorted(r for r, c in calls.items() if (c.op, c.size) == (op, size))
    odd = sorted(r for r in calls if r not in agree)
    if not agree or not odd or str(agree[0]) not in m.ops:
        return m
    m.odd_ranks, m.expected_op = odd, m.ops[str(agree[0])]
    m.evidence = "no majority in the group; group%s %s, whose calls #%d-#%d were this group's, issued %s%s at #%d" % (
        "s" if len(streams) > 1 else "", ", ".join(map(str, streams[:4])) + (" and %d more" % (len(streams) - 4)
                                                                              if len(streams) > 4 else ""),
        first, last, op, " of %s" % size if size else "", seq)
    return m
