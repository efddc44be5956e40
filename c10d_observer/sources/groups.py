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

A job whose groups were made apart need not hang: where two groups of one size take one name (every rank
making only the groups it is in, ``if rank in ranks: new_group(ranks)``), gloo may wire them across, and their
collectives complete with the wrong ranks' tensors (ranks [0, 1] and [2, 3] each making their own pair, torch
2.13: an all_reduce of rank + 1 gave 5, not 3 or 7, on two or four ranks in 6 of 10 runs:
benchmarks/made_apart.py).  ``SameGroup`` asks the world's store,
as each ``new_group`` is made, whether this rank's group is the one another rank made at that place, and a
rank whose group is not says so in one line (once).
"""
import functools
import logging

from .. import callword as _cw
from .. import compat
from ..console import say as _say
from ..streams import GUARD_ADVICE, MAKING
from ..text import rank_list
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
        self.same = SameGroup()  # whether each new_group is the group the other ranks made at that place

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
            if call is not None:
                self.same.made(self.members)
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
                passed = orig(*args, **kwargs)
            finally:
                if call is not None:
                    call[0].done(call[1])
            if call is not None:
                self.same.passed()
            return passed

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


class SameGroup(object):
    """Whether this rank's ``new_group`` at each place (its count of them since the world was made) is the group
    the other ranks made there, asked of the world's store as the group is made: one ``compare_set`` a
    ``new_group`` where the store has it (torch 2.x; the first rank's members stay under the place's key, a rank
    whose members differ says so at once); else (1.x) one ``add`` under a key of the place and the members, and
    once torch's store-based barrier after it passed (every rank of the world made its ``new_group`` there), one
    read of how many ranks made the same group (fewer than the world: this rank says so).  One line a rank, at
    its first place that differs (the places after a left-out ``new_group`` all differ).  Never raises, never
    waits on anything but the store: the group is made whatever happens here."""

    def __init__(self, say=None, where=None):
        self.where = where or _world_and_store  # () -> (the default group, the world's store)
        self.world = None  # id() of the default group the count is of (a new world after destroy_process_group:
        # from 0; not the group itself, which this would keep alive)
        self.rank = None
        self.worlds = 0
        self.count = 0
        self.pending = None  # (store, key, members' text, world size): read once the barrier passed (1.x)
        self.said = False
        self.say = say or _say

    def made(self, members):
        self.pending = None
        try:
            world, store = self.where()
            if id(world) != self.world:
                self.world, self.worlds, self.count, self.said = id(world), self.worlds + 1, 0, False
                self.rank = world.rank()
            self.count += 1
            if self.said:
                return
            key = "c10d_observer/made/%d/%d" % (self.worlds, self.count)
            digest = "%06x" % _cw.members_digest(members)
            text = _members_text(members)
            if hasattr(store, "compare_set"):
                got = store.compare_set(key, "", "%d:%s:%s" % (self.rank, digest, text))
                other_rank, other_digest, other = _text(got).split(":", 2)
                if other_digest != digest:
                    self._differs("this rank made %s where rank %s made %s" % (text, other_rank, other))
            else:
                key = "%s/%s" % (key, digest)
                store.add(key, 1)
                self.pending = (store, key, text, world.size())
        except Exception:
            log.debug("c10d_observer: cannot compare this rank's new_group with the others'", exc_info=True)

    def passed(self):
        pending, self.pending = self.pending, None
        if pending is None or self.said:
            return
        store, key, text, size = pending
        try:
            alike = store.add(key, 0)
            if alike != size:
                self._differs("this rank made %s; %d of the world's %d ranks made that group there" % (
                    text, alike, size))
        except Exception:
            log.debug("c10d_observer: cannot compare this rank's new_group with the others'", exc_info=True)

    def _differs(self, what):
        self.said = True
        self.say("rank %d: new_group #%d is not the same group on every rank: %s; groups made apart may share a "
                 "name, and their collectives hang or complete across the wrong ranks (wrong results, no error): "
                 "%s" % (self.rank, self.count, what, GUARD_ADVICE))


def _world_and_store():
    return compat.default_group(), compat.c10d_module()._get_default_store()


def _members_text(members):
    """A group's members as the line says them ("ranks 0-3, 8"), shortened past 200 characters."""
    text = rank_list(members)
    return text if len(text) <= 200 else "%d ranks (%s ...)" % (len(set(members)), text[:120])


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
