"""Knowing every process group as it is created, without touching the call path.

Native sources work per group (pre/post hooks are registered on each group; the flight recorder covers
some backends only), so they must hear of a group before its first call.  ``GroupWatch`` wraps torch's
group factory ``distributed_c10d._new_process_group_helper`` (every ``init_process_group`` and
``new_group`` passes through it, from 1.8 on) and also scans torch's registry, which finds groups made
another way (``split_group``) at the next scan.  Nothing here runs per collective.
"""
import functools
import logging

from .. import compat
from .base import Source

log = logging.getLogger("c10d_observer")


class GroupWatch(Source):
    """Calls each of ``on_group`` (a list of callables, the parts' as they are built) once for every group this
    rank is a member of."""

    def __init__(self, registry, on_group):
        self.registry = registry
        self.listeners = on_group  # the build's list: a part built after this one adds to it (the reader)
        self.known = set()

    @classmethod
    def build(cls, ctx):
        return cls(ctx.registry, ctx.on_group)

    def install(self):
        c10d = compat.c10d_module()
        if hasattr(c10d, "_new_process_group_helper"):
            self.registry.wrap(c10d, "_new_process_group_helper", self._wrap)
        self.scan()

    def _wrap(self, orig):
        @functools.wraps(orig)
        def helper(*args, **kwargs):
            result = orig(*args, **kwargs)
            pg = result[0] if isinstance(result, tuple) else result
            self.see(pg)
            return result

        return helper

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
