"""The verdict as values: what the analysis finds, typed, built once and read as attributes everywhere.

The model is torch's flight-recorder analyser (``components/types.py``: ``Collective``, ``MatchState``,
``MatchInfo``).  Each type is immutable, has the fields of its part of ``report --json`` (docs/diagnosis.md)
and turns into exactly that JSON and back (``to_json``, ``from_json``): categories are ``str``-valued enums
whose values are the JSON's strings, so the files and ``report --json`` keep their shape, and a file written
by an earlier release reads as it was (keys this release does not know are kept, in ``extra``).

- ``Verdict``: every stuck call (``hangs``, root causes first), the culprits and the job's facts;
- ``Hang``: one stuck call; ``missing`` {rank: ``Whereabouts``} says where each rank that never arrived is;
  ``mismatch`` (``Mismatch``), ``ordering`` (``Ordering``) and ``outcome`` (``Outcome``, what became of it
  after the verdict) where the analysis found them;
- ``Culprit``: a culprit's node as its scheduler names it; ``Straggler``: who arrives last, per group;
- the parts earlier releases gave as dicts, still read by key too: ``Host`` (``hosts``), ``Resolved``
  (``resolved``), ``Stacks`` (``stack_groups``), ``Event`` (``after``), ``Later`` (``other_verdicts``);
How a value is made (its fields, JSON in and out, ``Draft``: a value the analysis is still finding out, built
into its type once) is ``fields.py``.  No torch and no files here.
"""
import json

from ..levels import MISMATCH_WORDS, Category, Level, MismatchKind, OutcomeState, Where
from .fields import F, Draft, Part, Value, as_list, dump_enum, dump_list, enum_of, list_of, of, ranks_of
from .render import format_text

__all__ = ["Level", "Where", "MismatchKind", "OutcomeState", "Category", "MISMATCH_WORDS", "Whereabouts", "Mismatch",
           "Ordering", "Outcome", "Culprit", "Straggler", "Host", "Resolved", "Stacks", "Event", "Later", "Hang",
           "Verdict", "Draft"]


def _of_rank(by_rank, rank):
    """The value of rank ``rank`` (an int) in one of the verdict's {"<rank>": value} (``hosts``, ``exits``,
    ``missing``, a mismatch's ``ops``: JSON's keys are strings), or None: the one place that knows it."""
    return (by_rank or {}).get(str(rank))


class Whereabouts(Value):
    """Where a rank that never arrived is instead (``Hang.missing[rank]``): ``state`` (``Where``), ``text``;
    the calls it is in (``calls``), the phase it declared (``phase``), what its main thread is doing
    (``main_thread``, ``innermost``, ``activity``); ``in_hang``: the hang it waits in (state stuck);
    ``issued``: the call it issued out of order (state out_of_order)."""
    __slots__ = ()
    FIELDS = (F("state", enum_of(Where), dump_enum), F("text"), F("calls", as_list, dump_list, True),
              F("phase", optional=True), F("main_thread", optional=True), F("innermost", optional=True),
              F("activity", optional=True), F("in_hang", optional=True), F("issued", as_list, dump_list, True))


class Mismatch(Value):
    """Different calls at one seq: ``kind`` (``MismatchKind``), each rank's ``ops`` ({"<rank>": op}), the
    majority's ``expected_op`` (None: no majority), the ``odd_ranks``, ``text``; ``evidence`` where the odd
    ones come from groups like this one rather than a majority (analogs.py)."""
    __slots__ = ()
    FIELDS = (F("kind", enum_of(MismatchKind), dump_enum), F("ops"), F("expected_op"),
              F("odd_ranks", as_list, dump_list), F("text"), F("evidence", optional=True))

    def op_of(self, rank):
        """The op rank ``rank`` issued at this seq, or None."""
        return _of_rank(self.ops, rank)


class Ordering(Value):
    """An ordering deadlock's culprit: ``rank`` issued ``issued`` ([stream, seq]) without ``skipped``, which the
    other ranks (``witnesses``) or its own earlier steps put before it; ``text``."""
    __slots__ = ()
    FIELDS = (F("rank"), F("issued", as_list, dump_list), F("skipped", as_list, dump_list),
              F("witnesses", as_list, dump_list), F("text"))


class Outcome(Value):
    """What became of a stuck call after the verdict (``state``: ``OutcomeState``), from the documents written
    since: when (``at``), in words (``text``); resolved: ``after_s``, ``late_ranks``; ended: ``ended_ranks``,
    ``aborted_ranks``; stuck: ``stuck_on``."""
    __slots__ = ()
    FIELDS = (F("state", enum_of(OutcomeState), dump_enum), F("at"), F("text"), F("after_s", optional=True),
              F("late_ranks", as_list, dump_list, True), F("ended_ranks", as_list, dump_list, True),
              F("aborted_ranks", as_list, dump_list, True), F("stuck_on", as_list, dump_list, True))


class Culprit(Value):
    """A culprit as a scheduler needs it: its ``rank``, its ``node`` by the scheduler's name for it
    (``node_from``: which variable said it, or "hostname"), ``host``, ``pid``, and the job's ids."""
    __slots__ = ()
    FIELDS = (F("rank"), F("node"), F("node_from"), F("host"), F("pid"), F("slurm_job_id", optional=True),
              F("torchelastic_run_id", optional=True))


class Straggler(Value):
    """The rank that arrives last at a group's calls (arrivals.py): ``rank``, its ``share`` of the ``calls``
    at which the ranks did not arrive together, its ``median_lag_s``, ``since`` when; the group's ``stream``
    and ``ranks``."""
    __slots__ = ()
    FIELDS = (F("rank"), F("share"), F("median_lag_s"), F("calls"), F("of_calls", optional=True),
              F("since", optional=True), F("stream"), F("ranks", as_list, dump_list))


class Host(Part):
    """A rank's process (``Verdict.hosts["<rank>"]``): its ``host``, ``pid``, its py-spy dump's path where one
    was taken (``py_spy_dump``), its ``node`` by the scheduler's name for it."""
    __slots__ = ()
    FIELDS = (F("host"), F("pid"), F("py_spy_dump", optional=True), F("node", optional=True))


class Resolved(Part):
    """A call that was overdue on some rank and completed later (``Verdict.resolved``): the call, the longest
    time it was in flight (``resolved_after_s``), when it completed, the ranks that reported it."""
    __slots__ = ()
    FIELDS = (F("group"), F("stream"), F("seq"), F("op"), F("api"), F("size"), F("kind"), F("peer"), F("started_at"),
              F("group_ranks", as_list, dump_list), F("resolved"), F("resolved_after_s"),
              F("reported_by", as_list, dump_list), F("completed_at"))


class Stacks(Part):
    """Main-thread stacks grouped (``Verdict.stack_groups``): the innermost ``frames`` in words (but the
    observer's own), the ``ranks`` at them; a group's ``variants``: the same functions at different lines, each
    with its ranks; ``job_frame``: the job's innermost frame, where the first frames shown are all torch's or
    a library's (a ``new_group`` is five deep in torch: which of the job's it is, this line says)."""
    __slots__ = ()
    FIELDS = (F("frames", as_list, dump_list), F("ranks", as_list, dump_list),
              F("variants", lambda v: list_of(Stacks)(v), dump_list, True), F("job_frame", optional=True))


class Event(Part):
    """What happened after a recorded verdict (``Verdict.after``): ``at`` when, the ``rank`` where it is one
    rank's, ``text``."""
    __slots__ = ()
    FIELDS = (F("at"), F("rank", optional=True), F("text"))


class Later(Part):
    """Another verdict of the job than the one shown (``Verdict.other_verdicts``): its ``gather_id``,
    ``verdict_at``, ``summary``, ``culprit_ranks`` and, for one merged later that found stuck calls, their
    worst ``outcome`` (resolved, ended, stuck)."""
    __slots__ = ()
    FIELDS = (F("gather_id"), F("verdict_at"), F("summary"), F("culprit_ranks", as_list, dump_list),
              F("outcome", enum_of(OutcomeState), dump_enum, True))


class Hang(Value):
    """One stuck call (docs/diagnosis.md, ``report --json``): where (``group``, ``stream``, ``group_ranks``,
    ``kind``, ``peer``), which (``seq``, ``op``, ``api``, ``size``), who waits in it (``waiting_ranks``), who
    finished it, who never arrived (``missing_ranks``, ``missing``: {"<rank>": Whereabouts}), its ``level``
    (``Level``) and deadlines, ``root`` or ``caused_by`` (hang indices), and ``mismatch``, ``ordering``,
    ``outcome`` where found; ``category`` (``Category``: what kind of hang) with its evidence
    (``category_why``), ``frozen_in_it``: ranks in it whose Python stopped (files before 2026-11-25
    have no category), and ``gpu_not_started``: ranks whose NCCL work for it never started on the GPU while
    other ranks' did (torch's NCCL dumps with TORCH_NCCL_ENABLE_TIMING=1)."""
    __slots__ = ()
    FIELDS = (F("group"), F("stream"), F("group_ranks", as_list, dump_list),
              F("level", enum_of(Level), dump_enum, default=Level.HARD),  # files of 2026-11-23 and before: hard
              F("deadline_s"), F("kind"), F("peer"), F("seq"), F("op"), F("api"), F("size"),
              F("waiting_ranks", as_list, dump_list), F("died_waiting", as_list, dump_list),
              F("missing_ranks", as_list, dump_list), F("finished_ranks", as_list, dump_list),
              F("finished_then_ended", as_list, dump_list), F("started_at"), F("detected_at"),
              F("detected_by", as_list, dump_list), F("overdue"), F("timeout"), F("torch_timeout_s"),
              F("stuck_s", optional=True), F("stuck_at_least", optional=True),
              F("mismatch", of(Mismatch), None, True), F("other_op_ranks", as_list, dump_list, True),
              F("missing", ranks_of(Whereabouts)), F("caused_by", as_list, dump_list), F("cycle", optional=True),
              F("root"), F("held_until", optional=True), F("held_why", optional=True),
              F("ordering", of(Ordering), None, True), F("outcome", of(Outcome), None, True),
              F("category", enum_of(Category), dump_enum, True), F("category_why", optional=True),
              F("frozen_in_it", as_list, dump_list, True), F("gpu_not_started", as_list, dump_list, True))

    @property
    def call(self):
        """The call as the console names it: 'all_reduce #3 on group 0 (ranks 0-1), 4 x float32'."""
        from ..text import describe
        return describe(self)

    def whereabouts(self, rank):
        """Where rank ``rank`` (an int) is, if it never arrived, else None."""
        return _of_rank(self.missing, rank)


class Verdict(Part):
    """Who never arrived, for one job: what ``report DIR --json`` prints, typed (module docstring).  Also
    ``exit_code`` (what ``report`` exits with), ``text`` (what it prints), ``acts`` (a hard verdict to act
    on) and ``to_dict()`` (the JSON document)."""
    __slots__ = ()
    FIELDS = (F("version"), F("hangs", list_of(Hang), dump_list), F("culprit_ranks", as_list, dump_list),
              F("level", enum_of(Level), dump_enum), F("held_until"), F("held_why"),
              F("ranks_reporting", as_list, dump_list), F("ranks_silent", as_list, dump_list),
              F("ranks_dead", as_list, dump_list), F("exits"), F("frozen_ranks", as_list, dump_list),
              F("world_size"), F("undecided", as_list, dump_list), F("stack_groups", list_of(Stacks), dump_list),
              F("resolved", list_of(Resolved), dump_list), F("hosts", ranks_of(Host)),
              F("culprits", list_of(Culprit), dump_list, True),
              F("stragglers", list_of(Straggler), dump_list, True), F("straggler_lines", as_list, dump_list, True),
              F("summary", optional=True), F("gather_id", optional=True), F("gather_s", optional=True),
              F("verdict_at", optional=True), F("merged", optional=True), F("recorded", optional=True),
              F("after", list_of(Event), dump_list, True), F("other_verdicts", list_of(Later), dump_list, True),
              F("exit_code", optional=True), F("made_apart", optional=True))

    def __init__(self, **values):
        values.setdefault("hangs", ())
        Value.__init__(self, **values)

    def to_json(self):
        out = Value.to_json(self)
        if "exit_code" in out:  # derived only: what the rule says of this verdict, whatever a file held
            out["exit_code"] = self.exit_code
        return out

    def host(self, rank):
        """Rank ``rank``'s process (a Host), or None."""
        return _of_rank(self.hosts, rank)

    def exit_reason(self, rank):
        """How dead rank ``rank``'s process ended, in words, or None."""
        return _of_rank(self.exits, rank)

    def with_exit_code(self):
        """This verdict with its ``exit_code`` in its JSON (``report --json`` prints it)."""
        return self.replace(exit_code=self.exit_code)

    @property
    def exit_code(self):
        """What ``report`` exits with (the one rule): 1 a call is stuck (or was, when the job ended), 3 every
        stuck call resolved (or calls were overdue and completed later), 0 no call was ever overdue."""
        if any((h.outcome.state if h.outcome else OutcomeState.STUCK) != OutcomeState.RESOLVED for h in self.hangs):
            return 1
        if any(isinstance(o, Later) and o.outcome in (OutcomeState.STUCK, OutcomeState.ENDED)
               for o in self.other_verdicts or ()):
            return 1  # a later verdict (one that named nobody) whose calls are stuck, or were when the job ended
        return 3 if self.hangs or self.resolved else 0

    @property
    def acts(self):
        """Whether this verdict is one to act on (the signal, on_timeout="abort", ``--exclude``): one of its stuck
        calls is past the hard deadline, not held by a declared phase, and did not resolve.  Soft verdicts
        (learned deadlines) inform only."""
        return any(h.level == Level.HARD and not h.held_until
                   and (h.outcome.state if h.outcome else None) != OutcomeState.RESOLVED for h in self.hangs)

    @property
    def text(self):
        """The verdict as ``report`` prints it (without the per-rank section)."""
        return format_text(self, self.extra.get("unreadable") or ())

    @property
    def dump_dir(self):
        return self.extra.get("dump_dir")

    def to_dict(self):
        """The JSON document (``report --json``'s)."""
        return json.loads(json.dumps(self.to_json()))

    # The earlier release's Verdict was also read as a mapping of report --json's keys (and dump_dir): kept
    # for on_hang callbacks written against it (Part).  The package reads attributes only
    # (test_verdict_types.py).
    def _mapping(self):
        return self.to_dict()
