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
- ``Draft``: a value the analysis is still finding out, built into its type once.

No torch and no files here.
"""
import enum
import json
from collections.abc import Mapping

from ..records import Record
from ..levels import MISMATCH_WORDS, Category, Level, MismatchKind, OutcomeState, Where
from .render import format_text

__all__ = ["Level", "Where", "MismatchKind", "OutcomeState", "Category", "MISMATCH_WORDS", "Whereabouts", "Mismatch",
           "Ordering", "Outcome", "Culprit", "Straggler", "Host", "Resolved", "Stacks", "Event", "Later", "Hang",
           "Verdict", "Draft"]


def public(v):
    """A verdict's JSON document (of a Verdict, or of the analysis' dict: sets become sorted lists), ready for
    json.dump."""
    if isinstance(v, _Type):
        v = v.to_json()
    return json.loads(json.dumps(v, default=lambda x: sorted(x) if isinstance(x, set) else str(x)))


class _Field(object):
    """One field: its JSON name, how a JSON value becomes the field's value (``load``) and back (``dump``);
    ``optional``: the analysis sets it only where it applies (every field is written only where it was set,
    or read from a file that held it)."""

    __slots__ = ("name", "load", "dump", "optional", "default")

    def __init__(self, name, load=None, dump=None, optional=False, default=None):
        self.name, self.load, self.dump, self.optional, self.default = name, load, dump, optional, default


def _enum(cls):
    def load(v):
        if v is None or isinstance(v, cls):
            return v
        try:
            return cls(v)
        except ValueError:
            return v  # a value a later release added: kept as its string
    return load


def _dump_enum(v):
    return v.value if isinstance(v, enum.Enum) else v


def _list(v):
    return list(v) if isinstance(v, (list, tuple)) else v  # a copy: what the JSON held, as a list


_SCALARS = frozenset((int, float, str, bool, type(None)))


def _scalars(values):
    """Whether ``values`` are JSON scalars only (checked in C): a verdict's lists of ranks hold 16,384 ints at
    16,384 ranks, several times over, and each went through _dump_any one call at a time (2026-12-01)."""
    return all(map(_SCALARS.__contains__, map(type, values)))


def _dump_list(v):
    if not isinstance(v, (list, tuple)):
        return v
    return list(v) if _scalars(v) else [_dump_any(x) for x in v]


def _dump_any(v):
    if isinstance(v, _Type):
        return v.to_json()
    if isinstance(v, _Ranks):
        return v.to_json()
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return _dump_list(v)
    if isinstance(v, dict):
        return dict(v) if _scalars(v.values()) else {k: _dump_any(x) for k, x in v.items()}
    return v


def _of(cls):
    def load(v):
        return cls.from_json(v) if isinstance(v, dict) else v
    return load


def _list_of(cls):
    def load(v):
        return [cls.from_json(x) if isinstance(x, dict) else x for x in v] if isinstance(v, (list, tuple)) else v
    return load


def _ranks_of(cls):
    """{"<rank>": cls}: keys stay the JSON's strings (as ``exits`` and ``hosts``), each value built where it is
    read (_Ranks)."""
    def load(v):
        return _Ranks(cls, v) if isinstance(v, dict) else v
    return load


_SHAPES = {}  # a type -> (its field names, those and "extra", {name: default} in FIELDS' order): made once per type


def _shape(cls):
    shape = _SHAPES.get(cls)
    if shape is None:
        names = frozenset(f.name for f in cls.FIELDS)
        shape = _SHAPES[cls] = (names, names | {"extra"}, {f.name: f.default for f in cls.FIELDS})
    return shape


_set = object.__setattr__


def _read_field(name):
    """A property that reads field ``name`` of a value (``_Type.__init_subclass__``)."""
    def read(self):
        return self._values[name]
    return property(read, doc="field %r" % name)


class _Ranks(Mapping):
    """A read-only {"<rank>": cls} (``Verdict.hosts``, ``Hang.missing``) whose values are built from their JSON
    the first time each is read.  A verdict names every rank of the job in ``hosts``: at 16,384 ranks 16,384
    records, 58 ms of the 280 ms a node's relay took to pass the verdict on (it reads none of them), and as
    long again to turn back into JSON (2026-12-01).  A value not read goes back out as its JSON was (a
    record's JSON is its fields' and its extra keys': the same)."""

    __slots__ = ("_cls", "_raw", "_built")

    def __init__(self, cls, raw):
        self._cls, self._raw, self._built = cls, raw, {}

    def __getitem__(self, key):
        try:
            return self._built[key]
        except KeyError:
            pass
        x = self._raw[key]
        got = self._built[key] = self._cls.from_json(x) if isinstance(x, dict) else x
        return got

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def __contains__(self, key):
        return key in self._raw

    def to_json(self):
        built = self._built
        return {k: _dump_any(built[k] if k in built else x) for k, x in self._raw.items()}

    def __repr__(self):
        return "{%s}" % ", ".join("%r: %r" % (k, self[k]) for k in list(self._raw)[:8]) + (
            ", ...}" if len(self._raw) > 8 else "}")


class _Type(Record):
    """Immutable fields (records.Record), JSON in and out (module docstring)."""

    FIELDS = ()
    __slots__ = ("_values", "extra", "_present")

    def __init__(self, **values):
        _, known, defaults = _shape(type(self))
        if not known.issuperset(values):
            raise TypeError("%s has no field %s" % (type(self).__name__, ", ".join(sorted(set(values) - known))))
        extra = values.pop("extra", None) or {}
        given = dict(defaults)  # every field, in FIELDS' order: its value where given, else its default
        given.update(values)
        _set(self, "_values", given)
        _set(self, "extra", dict(extra))
        _set(self, "_present", frozenset(values))

    def __init_subclass__(cls, **kwargs):
        """Each field a property of its type (unless the type has an attribute of that name: Verdict.exit_code
        and .text stay theirs), found as any attribute is: a field read through ``__getattr__`` came after the
        lookup had failed, its AttributeError raised and caught, at each read (thousands a verdict)."""
        super().__init_subclass__(**kwargs)
        for f in cls.FIELDS:
            if not hasattr(cls, f.name):
                setattr(cls, f.name, _read_field(f.name))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            pass
        except AttributeError:  # during unpickling or copying, before the slots are set
            raise AttributeError(name)
        raise AttributeError("%s has no field %r (fields: %s)" % (
            type(self).__name__, name, ", ".join(f.name for f in self.FIELDS)))

    def _given(self):
        return {f.name: self._values[f.name] for f in self.FIELDS if f.name in self._present}

    def has(self, name):
        """Whether field ``name`` was set (by the analysis, or in the file read): a field never set is absent
        from the JSON."""
        return name in self._present

    def with_extra(self, **extra):
        """A copy with keys beside the fields (``extra``) added."""
        return type(self)(extra=dict(self.extra, **extra), **self._given())

    @classmethod
    def from_json(cls, d):
        if isinstance(d, cls):
            return d
        if not isinstance(d, dict):
            raise TypeError("%s.from_json needs a dict, got %s" % (cls.__name__, type(d).__name__))
        return cls._loaded(d)

    @classmethod
    def _loaded(cls, d):
        """The value of fields given by name (a file's JSON, a draft's values): each through its field's
        ``load`` (an enum's string to the enum, a part's dict to its type); other names kept in ``extra``."""
        values = {}
        for f in cls.FIELDS:
            if f.name in d:
                v = d[f.name]
                values[f.name] = f.load(v) if f.load is not None and v is not None else v
        names = _shape(cls)[0]
        extra = {k: v for k, v in d.items() if k not in names}
        return cls(extra=extra, **values)

    def to_json(self):
        out = {}
        for f in self.FIELDS:
            if f.name not in self._present:
                continue  # absent where the analysis did not set it (or the file did not hold it): absent
            v = self._values[f.name]
            out[f.name] = f.dump(v) if f.dump is not None and v is not None else _dump_any(v)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    def __repr__(self):
        shown = ", ".join("%s=%r" % (f.name, self._values[f.name]) for f in self.FIELDS
                          if f.name in self._present and not isinstance(self._values[f.name], (dict, list, tuple)))
        return "%s(%s)" % (type(self).__name__, shown)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | {f.name for f in self.FIELDS})

    def __reduce__(self):
        return (type(self).from_json, (self.to_json(),))


class Draft(object):
    """A value the analysis is still finding out (a Hang, its Whereabouts, its Mismatch): its fields as
    attributes, set as each is learned (an unset one reads None; ``has`` tells it apart); ``build()`` makes the
    immutable value once, with the fields that were set, drafts inside built too.  ``also``: names beside the
    type's fields that the value keeps in ``extra``.  Values are kept as the JSON would give them back (a
    tuple as a list, a set as a sorted list), so a verdict built here equals one read from its file."""

    # the fields set are the draft's __dict__: a set field reads as a plain attribute (the analysis reads
    # thousands a verdict), ``__getattr__`` runs for the others only
    __slots__ = ("_type", "_names", "__dict__")

    def __init__(self, type_, also=(), **values):
        names = _shape(type_)[0]
        _set(self, "_type", type_)
        _set(self, "_names", names | frozenset(also) if also else names)
        for k, v in values.items():
            setattr(self, k, v)

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._names:
            raise AttributeError("a draft %s has no field %r" % (self._type.__name__, name))
        return None  # a field not set

    def __setattr__(self, name, value):
        if name not in self._names:
            raise AttributeError("a draft %s has no field %r" % (self._type.__name__, name))
        self.__dict__[name] = value

    def has(self, name):
        return name in self.__dict__

    def build(self):
        return self._type._loaded({k: _built(v) for k, v in self.__dict__.items()})


_PLAIN = frozenset([str, int, float, bool, type(None)])  # values _built keeps as they are (most of a draft's)


def _built(v):
    if type(v) in _PLAIN:
        return v
    if isinstance(v, Draft):
        return v.build()
    if isinstance(v, dict):
        return {k: _built(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_built(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return v


def F(name, load=None, dump=None, optional=False, default=None):
    return _Field(name, load, dump, optional, default)


class Whereabouts(_Type):
    """Where a rank that never arrived is instead (``Hang.missing[rank]``): ``state`` (``Where``), ``text``;
    the calls it is in (``calls``), the phase it declared (``phase``), what its main thread is doing
    (``main_thread``, ``innermost``, ``activity``); ``in_hang``: the hang it waits in (state stuck);
    ``issued``: the call it issued out of order (state out_of_order)."""
    __slots__ = ()
    FIELDS = (F("state", _enum(Where), _dump_enum), F("text"), F("calls", _list, _dump_list, True),
              F("phase", optional=True), F("main_thread", optional=True), F("innermost", optional=True),
              F("activity", optional=True), F("in_hang", optional=True), F("issued", _list, _dump_list, True))


class Mismatch(_Type):
    """Different calls at one seq: ``kind`` (``MismatchKind``), each rank's ``ops`` ({"<rank>": op}), the
    majority's ``expected_op`` (None: no majority), the ``odd_ranks``, ``text``; ``evidence`` where the odd
    ones come from groups like this one rather than a majority (analogs.py)."""
    __slots__ = ()
    FIELDS = (F("kind", _enum(MismatchKind), _dump_enum), F("ops"), F("expected_op"),
              F("odd_ranks", _list, _dump_list), F("text"), F("evidence", optional=True))


class Ordering(_Type):
    """An ordering deadlock's culprit: ``rank`` issued ``issued`` ([stream, seq]) without ``skipped``, which the
    other ranks (``witnesses``) or its own earlier steps put before it; ``text``."""
    __slots__ = ()
    FIELDS = (F("rank"), F("issued", _list, _dump_list), F("skipped", _list, _dump_list),
              F("witnesses", _list, _dump_list), F("text"))


class Outcome(_Type):
    """What became of a stuck call after the verdict (``state``: ``OutcomeState``), from the documents written
    since: when (``at``), in words (``text``); resolved: ``after_s``, ``late_ranks``; ended: ``ended_ranks``,
    ``aborted_ranks``; stuck: ``stuck_on``."""
    __slots__ = ()
    FIELDS = (F("state", _enum(OutcomeState), _dump_enum), F("at"), F("text"), F("after_s", optional=True),
              F("late_ranks", _list, _dump_list, True), F("ended_ranks", _list, _dump_list, True),
              F("aborted_ranks", _list, _dump_list, True), F("stuck_on", _list, _dump_list, True))


class Culprit(_Type):
    """A culprit as a scheduler needs it: its ``rank``, its ``node`` by the scheduler's name for it
    (``node_from``: which variable said it, or "hostname"), ``host``, ``pid``, and the job's ids."""
    __slots__ = ()
    FIELDS = (F("rank"), F("node"), F("node_from"), F("host"), F("pid"), F("slurm_job_id", optional=True),
              F("torchelastic_run_id", optional=True))


class Straggler(_Type):
    """The rank that arrives last at a group's calls (arrivals.py): ``rank``, its ``share`` of the ``calls``
    at which the ranks did not arrive together, its ``median_lag_s``, ``since`` when; the group's ``stream``
    and ``ranks``."""
    __slots__ = ()
    FIELDS = (F("rank"), F("share"), F("median_lag_s"), F("calls"), F("of_calls", optional=True),
              F("since", optional=True), F("stream"), F("ranks", _list, _dump_list))


class _Part(_Type):
    """The verdict, and each part of it that earlier releases gave as a dict: read as attributes in the
    package, and still by key (``part["host"]``, ``part.get("pid")``, ``"rank" in part``) for on_hang
    callbacks and scripts written against those releases: the key reads read its JSON (``_mapping``)."""
    __slots__ = ()

    def _mapping(self):
        return self.to_json()

    def __getitem__(self, key):
        return self._mapping()[key]

    def __contains__(self, key):
        return key in self._mapping()

    def get(self, key, default=None):
        return self._mapping().get(key, default)

    def keys(self):
        return self._mapping().keys()


class Host(_Part):
    """A rank's process (``Verdict.hosts["<rank>"]``): its ``host``, ``pid``, its py-spy dump's path where one
    was taken (``py_spy_dump``), its ``node`` by the scheduler's name for it."""
    __slots__ = ()
    FIELDS = (F("host"), F("pid"), F("py_spy_dump", optional=True), F("node", optional=True))


class Resolved(_Part):
    """A call that was overdue on some rank and completed later (``Verdict.resolved``): the call, the longest
    time it was in flight (``resolved_after_s``), when it completed, the ranks that reported it."""
    __slots__ = ()
    FIELDS = (F("group"), F("stream"), F("seq"), F("op"), F("api"), F("size"), F("kind"), F("peer"), F("started_at"),
              F("group_ranks", _list, _dump_list), F("resolved"), F("resolved_after_s"),
              F("reported_by", _list, _dump_list), F("completed_at"))


class Stacks(_Part):
    """Main-thread stacks grouped (``Verdict.stack_groups``): the innermost ``frames`` in words, the ``ranks`` at
    them; a group's ``variants``: the same functions at different lines, each with its ranks."""
    __slots__ = ()
    FIELDS = (F("frames", _list, _dump_list), F("ranks", _list, _dump_list),
              F("variants", lambda v: _list_of(Stacks)(v), _dump_list, True))


class Event(_Part):
    """What happened after a recorded verdict (``Verdict.after``): ``at`` when, the ``rank`` where it is one
    rank's, ``text``."""
    __slots__ = ()
    FIELDS = (F("at"), F("rank", optional=True), F("text"))


class Later(_Part):
    """Another verdict of the job than the one shown (``Verdict.other_verdicts``): its ``gather_id``,
    ``verdict_at``, ``summary``, ``culprit_ranks`` and, for one merged later that found stuck calls, their
    worst ``outcome`` (resolved, ended, stuck)."""
    __slots__ = ()
    FIELDS = (F("gather_id"), F("verdict_at"), F("summary"), F("culprit_ranks", _list, _dump_list),
              F("outcome", _enum(OutcomeState), _dump_enum, True))


class Hang(_Type):
    """One stuck call (docs/diagnosis.md, ``report --json``): where (``group``, ``stream``, ``group_ranks``,
    ``kind``, ``peer``), which (``seq``, ``op``, ``api``, ``size``), who waits in it (``waiting_ranks``), who
    finished it, who never arrived (``missing_ranks``, ``missing``: {"<rank>": Whereabouts}), its ``level``
    (``Level``) and deadlines, ``root`` or ``caused_by`` (hang indices), and ``mismatch``, ``ordering``,
    ``outcome`` where found; ``category`` (``Category``: what kind of hang) with its evidence
    (``category_why``), ``frozen_in_it``: ranks in it whose Python stopped (files before 2026-11-25
    have no category), and ``gpu_not_started``: ranks whose NCCL work for it never started on the GPU while
    other ranks' did (torch's NCCL dumps with TORCH_NCCL_ENABLE_TIMING=1)."""
    __slots__ = ()
    FIELDS = (F("group"), F("stream"), F("group_ranks", _list, _dump_list),
              F("level", _enum(Level), _dump_enum, default=Level.HARD),  # files of 2026-11-23 and before: hard
              F("deadline_s"), F("kind"), F("peer"), F("seq"), F("op"), F("api"), F("size"),
              F("waiting_ranks", _list, _dump_list), F("died_waiting", _list, _dump_list),
              F("missing_ranks", _list, _dump_list), F("finished_ranks", _list, _dump_list),
              F("finished_then_ended", _list, _dump_list), F("started_at"), F("detected_at"),
              F("detected_by", _list, _dump_list), F("overdue"), F("timeout"), F("torch_timeout_s"),
              F("stuck_s", optional=True), F("stuck_at_least", optional=True),
              F("mismatch", _of(Mismatch), None, True), F("other_op_ranks", _list, _dump_list, True),
              F("missing", _ranks_of(Whereabouts)), F("caused_by", _list, _dump_list), F("cycle", optional=True),
              F("root"), F("held_until", optional=True), F("held_why", optional=True),
              F("ordering", _of(Ordering), None, True), F("outcome", _of(Outcome), None, True),
              F("category", _enum(Category), _dump_enum, True), F("category_why", optional=True),
              F("frozen_in_it", _list, _dump_list, True), F("gpu_not_started", _list, _dump_list, True))

    @property
    def call(self):
        """The call as the console names it: 'all_reduce #3 on group 0 (ranks 0-1), 4 x float32'."""
        from ..text import describe
        return describe(self)

    def whereabouts(self, rank):
        """Where rank ``rank`` (an int) is, if it never arrived, else None."""
        return (self.missing or {}).get(str(rank))


class Verdict(_Part):
    """Who never arrived, for one job: what ``report DIR --json`` prints, typed (module docstring).  Also
    ``exit_code`` (what ``report`` exits with), ``text`` (what it prints), ``acts`` (a hard verdict to act
    on) and ``to_dict()`` (the JSON document)."""
    __slots__ = ()
    FIELDS = (F("version"), F("hangs", _list_of(Hang), _dump_list), F("culprit_ranks", _list, _dump_list),
              F("level", _enum(Level), _dump_enum), F("held_until"), F("held_why"),
              F("ranks_reporting", _list, _dump_list), F("ranks_silent", _list, _dump_list),
              F("ranks_dead", _list, _dump_list), F("exits"), F("frozen_ranks", _list, _dump_list),
              F("world_size"), F("undecided", _list, _dump_list), F("stack_groups", _list_of(Stacks), _dump_list),
              F("resolved", _list_of(Resolved), _dump_list), F("hosts", _ranks_of(Host)),
              F("culprits", _list_of(Culprit), _dump_list, True),
              F("stragglers", _list_of(Straggler), _dump_list, True), F("straggler_lines", _list, _dump_list, True),
              F("summary", optional=True), F("gather_id", optional=True), F("gather_s", optional=True),
              F("verdict_at", optional=True), F("merged", optional=True), F("recorded", optional=True),
              F("after", _list_of(Event), _dump_list, True), F("other_verdicts", _list_of(Later), _dump_list, True),
              F("exit_code", optional=True))

    def __init__(self, **values):
        values.setdefault("hangs", ())
        _Type.__init__(self, **values)

    def to_json(self):
        out = _Type.to_json(self)
        if "exit_code" in out:  # derived only: what the rule says of this verdict, whatever a file held
            out["exit_code"] = self.exit_code
        return out

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
    # for on_hang callbacks written against it (_Part).  The package reads attributes only
    # (test_verdict_types.py).
    def _mapping(self):
        return self.to_dict()
