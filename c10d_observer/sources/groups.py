"""Knowing every process group as it is created, without touching the call path.

Native sources work per group (pre/post hooks are registered on each group; the flight recorder covers
some backends only), so they must hear of a group before its first call.  ``GroupWatch`` wraps torch's
group factory ``distributed_c10d._new_process_group_helper`` (every ``init_process_group`` and
``new_group`` passes through it, from 1.8 on) and also scans torch's registry, which finds groups made
another way (``split_group``) at the next scan.  Nothing here runs per collective.

The same wrapper watches the group's making itself.  torch requires every rank of the world to call
``new_group`` (but with ``use_local_synchronization=True``), and every rank passes through the factory: a
member of a new gloo group waits inside it until every member has come (gloo's rendezvous), a non-member
returns at once; torch's store-based barrier after it (on 1.x, or where ``TORCH_DIST_INIT_BARRIER=1``) waits
for every rank.  A rank that leaves a ``new_group`` out (under an ``if``) leaves its peers there, while it
waits in its next collective for them.  Each factory call and each such barrier is a call (op ``new_group``,
the group's members as its size) on one stream for the world, ``new_group:world``, every rank numbering them
alike, so that the watchdog times them and the verdict sees where such a rank waits (not "in no collective"),
which rank issued its next collective without the ``new_group`` the others made, and which made its groups in
another order than the others or another group (torch names a group by its place in that order: ranks that
made [0, 1] at different places wait for each other under two names).  Not written: ``init_process_group``'s
own factory call and barrier (no world yet; its barrier waits out the ranks' start-up), a ``new_group`` with
``use_local_synchronization=True`` (its members alone call it: ``_new_group_with_tag``, 2.x, says so) and its
barrier, ``split_group`` (no factory call).
"""
import functools
import logging

from .. import callword as _cw
from .. import compat
from ..streams import MAKING
from .base import Source

log = logging.getLogger("c10d_observer")


class GroupWatch(Source):
    """Calls each of ``on_group`` (a list of callables, the parts' as they are built) once for every group this
    rank is a member of."""

    def __init__(self, registry, on_group, tracker=None):
        self.registry = registry
        self.listeners = on_group  # the build's list: a part built after this one adds to it (the reader)
        self.known = set()
        self.tracker = tracker  # where the group's making is written as a call (None: it is not)
        self.making = None  # the stream writer of the world's making stream, once a group's making was written
        self.local = False  # inside a new_group(use_local_synchronization=True): its members alone call it
        self.barrier_next = False  # whether the next store-based barrier is new_group's (after its factory call)
        self.members = None  # the members of the group whose making was written last (its barrier's too)

    @classmethod
    def build(cls, ctx):
        return cls(ctx.registry, ctx.on_group, ctx.tracker)

    def install(self):
        c10d = compat.c10d_module()
        if hasattr(c10d, "_new_process_group_helper"):
            self.registry.wrap(c10d, "_new_process_group_helper", self._wrap)
        if self.tracker is not None and hasattr(c10d, "_store_based_barrier"):
            self.registry.wrap(c10d, "_store_based_barrier", self._wrap_barrier)
        if self.tracker is not None and hasattr(c10d, "_new_group_with_tag"):
            self.registry.wrap(c10d, "_new_group_with_tag", self._wrap_tag)
        self.scan()

    def _wrap(self, orig):
        @functools.wraps(orig)
        def helper(*args, **kwargs):
            # the members of the group being made: the third argument from 1.8 to 2.15 (``group_ranks``,
            # then ``global_ranks_in_group``); empty for the default group, made before any other
            ranks = args[2] if len(args) > 2 else kwargs.get("global_ranks_in_group", kwargs.get("group_ranks"))
            making = self.tracker is not None and ranks and not self.local
            self.members = list(ranks) if making else None  # the barrier after it is this group's making too
            call = self._start_making(members=self.members) if making else None
            # a store-based barrier right after this is new_group's where the world existed before (else it is
            # init_process_group's, which waits out the ranks' start-up: not watched)
            self.barrier_next = compat.default_group() is not None
            try:
                result = orig(*args, **kwargs)
            finally:
                if call is not None:
                    call[0].done(call[1])
            pg = result[0] if isinstance(result, tuple) else result
            self.see(pg)
            return result

        return helper

    def _wrap_tag(self, orig):
        @functools.wraps(orig)
        def with_tag(*args, **kwargs):
            local = kwargs.get("use_local_synchronization", args[5] if len(args) > 5 else False)
            before, self.local = self.local, bool(local)
            try:
                return orig(*args, **kwargs)
            finally:
                self.local = before

        return with_tag

    def _wrap_barrier(self, orig):
        @functools.wraps(orig)
        def barrier(*args, **kwargs):
            # (rank, store, timeout) on 1.x; (rank, store, group_name, rendezvous_count, timeout) since: a
            # barrier of fewer ranks than the world's (use_local_synchronization) is not the world's, and not
            # written (its ranks' count of such barriers is not the world's)
            count = args[3] if len(args) > 4 else kwargs.get("rendezvous_count")
            call = self._start_making(count, self.members) if self.barrier_next and not self.local else None
            self.barrier_next = False
            try:
                return orig(*args, **kwargs)
            finally:
                if call is not None:
                    call[0].done(call[1])

        return barrier

    def _start_making(self, count=None, members=None):
        """Write the start of a group's making as a call on the world's making stream, with the group's
        ``members`` as its size (callword.encode_members: ranks that make different groups at one place differ
        there): (stream writer, seq), or None where no world exists yet or the barrier is of a part of it.  Never
        raises: the group is made whatever happens here."""
        try:
            world = compat.default_group()
            if world is None or (count is not None and count != world.size()):
                return None
            st = self.making
            if st is None:
                desc = dict(self.tracker.group(world).desc)
                desc.update(group=MAKING, name=MAKING, stream=MAKING, ranks=list(range(world.size())),
                            kind="collective")
                desc.pop("torch_timeout_s", None)
                st = self.making = self.tracker._stream(desc)
            word = _cw.encode_op("new_group")
            if members:
                word |= _cw.encode_members(members, world.size())
            return st, st.start(word)
        except Exception:
            log.debug("c10d_observer: cannot write a group's making", exc_info=True)
            return None

    def uninstall(self):
        pass  # the wrapper is in the shared registry: the patch source's uninstall restores it

    def scan(self):
        for pg in compat.all_groups():
            self.see(pg)

    def see(self, pg):
        if pg is None or id(pg) in self.known or not hasattr(pg, "rank"):
            return
        try:
            if pg.rank() < 0:  # GroupMember.NON_GROUP_MEMBER and friends
                return
        except Exception:
            return
        self.known.add(id(pg))
        for fn in self.listeners:
            try:
                fn(pg)
            except Exception:  # a group we cannot hook is watched less, never broken
                log.warning("c10d_observer: cannot watch process group %r", pg, exc_info=True)
