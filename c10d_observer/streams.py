"""A stream's name, the one place it is written and read.  A group's collectives are numbered on the group's
own stream (its name, or ``<group>:<op>`` for an op a native source does not see); point-to-point calls on one
stream per group, sender and receiver, ``<group>:p2p:<src>-><dst>`` (``any``: a recv from any source).  The rank
side names them (tracker.py); the straggler join, the ordering rules and the verdict read them.  No imports."""

P2P = ":p2p:"
MAKING = "new_group:world"  # the stream (and group) of the world's making calls: each rank's count of them
# what to do where the ranks made their groups apart (the verdict's words; the rank's line where its new_group
# is not the one another rank made at that place: sources/groups.py)
GUARD_ADVICE = ("torch names a group by its place in the ranks' sequence of new_group calls: every rank calls "
                "new_group for every group, in one order, members or not (or passes use_local_synchronization=True)")


def p2p_name(group, src, dst):
    """The stream of the p2p calls from ``src`` to ``dst`` in ``group`` (``src`` None: from any source)."""
    return "%s%s%s->%s" % (group, P2P, "any" if src is None else src, dst)


def is_p2p(stream):
    """Whether ``stream`` (a name, or anything printed as one) is a p2p stream's."""
    return P2P in str(stream)


def p2p_ends(stream):
    """(src, dst) of a p2p stream, as ranks (src None: a recv from any source); None for a group's stream or a
    name that is not a p2p stream's."""
    _, sep, pair = str(stream).rpartition(P2P)
    src, arrow, dst = pair.partition("->")
    if not sep or not arrow:
        return None
    try:
        return (None if src == "any" else int(src)), int(dst)
    except ValueError:
        return None
