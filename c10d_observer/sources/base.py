"""The contract of the rank side's parts (issue 43): every source, and every helper part a source needs, is a
``Source`` that builds itself from a plan, installs, uninstalls, and may hear of each group as it appears.

``sources.build`` is a loop over ``PARTS`` (sources/__init__.py): each row's ``build(ctx)`` returns the part
the plan uses, or None; the parts are installed in that order and removed in reverse (``Composite``).  A new
torch recorder or hook is one row there and one file here.  Model: torch elastic's timer, whose
``TimerClient`` / ``TimerServer`` hold the contract and each transport lives in its own module.
"""
import collections

# What a part is built from: the plan (table.Plan), the dispatch at run time (sources.Dispatch), the tracker,
# the watchdog's config, the capabilities record (compat), the one patch registry of this enable(), the
# callables GroupWatch calls for every group (a list the parts fill while they are built), and whether this
# enable() turns the legacy NCCL recorder on (recorders.nccl_recorder_on).
BuildContext = collections.namedtuple("BuildContext", "plan dispatch tracker cfg caps registry on_group nccl_on")


class Source(object):
    """One part of the rank side.  ``name``: the dispatch table's row whose events it makes (sources/table.py),
    or "" for a part that makes no events itself (a switch, a watch)."""

    name = ""

    @classmethod
    def build(cls, ctx):
        """This part as the plan in ``ctx`` (a BuildContext) wants it, or None where the plan does not use it."""
        raise NotImplementedError

    def install(self):
        """Start: wrap, register, start a thread.  Raises where it cannot (the parts installed before it are
        removed again)."""

    def uninstall(self):
        """Put back what install() changed; never raises for what another part already restored."""

    def on_group(self, pg):
        """A process group this rank is a member of appeared (made before enable() or after): called once per
        group, from GroupWatch, before its first call where torch's group factory made it."""

    def hears_groups(self):
        """Whether this part overrides ``on_group`` (the build loop hands only those to GroupWatch)."""
        return type(self).on_group is not Source.on_group
