"""The documents the watchdogs write, typed (``RankDoc``: a report, a state, a rank's end; its
``Position`` in every stream; its ``Overdue`` calls; ``Call``): small immutable values with a format
version and ``to_json``/``from_json``, built once where a document is made or read (``load``) and read
as attributes everywhere after, as torch's flight-recorder analyser builds its ``Collective`` records
once.  Readers take versions 1 (before 2026-11-25) to 5 (3 to 5: a state in a node's bundle, WIRE_VERSION).
The verdict merged from them is typed in verdict/types.py.  No torch, no files written: the watchdog side uses
it too.
"""
import itertools
import json
import operator
from typing import NamedTuple, Optional

from . import channel as _ch
from . import wire as _wire
from .levels import CallEnd
from .text import describe_call

__all__ = ["Call", "Position", "Overdue", "RankDoc", "load"]


# -- what the watchdogs write: typed, built once where a document is read or made --------------------
FORMAT = "c10d_observer.report"
VERSION = 2  # 2: calls carry their start time, documents of kind "end", node files label their answers
# a state as a node's bundle carries it between nodes (relay.py, RankDoc.to_wire): version 2's fields without
# those that are null, its positions as rows (``group_rows``, Position.to_row) where version 2 has a dict each;
# only ever inside a bundle, so a release that reads no version 3 refuses the bundle, never reads its ranks as
# in no call.  4: a state's stacks summary may end in the frames of an earlier state of its bundle
# (``stacks_frames_of``: shared_stacks), which a release reading 3 would read as no frames.  5: a position's
# recent calls as one record (``recent_row``: the seq of the first, each distinct op and size once, the starts
# as ns after the first), which a release reading 4 would read as no recent calls
WIRE_VERSION = 5
READS = (1, 2, 3, 4, 5)  # the versions this release reads (1: written before 2026-11-25)


class DocumentError(ValueError):
    """A file that is not a document this release reads (named, with why)."""


def _ranks_out(d, key, ranks):
    if isinstance(ranks, (list, tuple)) and len(ranks) > _ch.RUNS_OVER:  # as runs [first, count, step]
        d[key], d[key + "_runs"] = None, _ch.runs_of(ranks)
    else:
        d[key] = list(ranks) if isinstance(ranks, (list, tuple)) else ranks


def _ranks_in(d, key):
    runs = d.get(key + "_runs")
    if runs is not None and d.get(key) is None:
        return _ch.ranks_from_runs(runs)
    value = d.get(key)
    return tuple(value) if isinstance(value, list) else None


_TIMES = (float, int)  # a started_at the fast path of Position.from_json takes as it is


def _num(value, default=None):
    t = type(value)
    if t is float or t is int:  # the JSON's numbers: the test below, without its two calls
        return value
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


class Call(NamedTuple):
    """One call of one stream as a rank knows it: its number, op, size signature ('4 x float32'), start
    time (Unix seconds) and the API that issued it (all_gather_object issues all_gathers)."""
    seq: int
    op: str = "unknown"
    size: Optional[str] = None
    started_at: Optional[float] = None
    api: str = ""


GPU_STATES = ("scheduled", "started")
ASYNC_P2P_APIS = ("batch_isend_irecv", "isend", "irecv")  # p2p ops not waited one by one (RankDoc.at_device)
OBJECT_APIS = ("all_gather_object", "broadcast_object_list")  # each issues two calls of one op on its group


def object_sizes_call(call):
    """Whether ``call`` (a Call) is an object collective's first call, the one of its sizes: an int64 tensor of one
    size per object (distributed_c10d's ``_object_to_tensor``; its data call carries uint8), the same for every
    such collective of that api, root and number of objects, whatever the objects are."""
    return call.api in OBJECT_APIS and " x int64" in (call.size or "")


def _async_p2p(pos):
    """Whether the call ``pos`` has in flight is an op of a batch, or an isend or irecv."""
    return pos.kind == "p2p" and pos.in_flight is not None and pos.in_flight.api in ASYNC_P2P_APIS


_STARTED, _RECENT = operator.itemgetter(3), operator.attrgetter("recent")  # a Call's started_at, a Position's


def _newest(groups):
    """The latest start of the calls of ``groups`` (Positions: recent, in flight), compared in C (a merge asks it
    of every rank); None where one's start is unknown, or none has a call."""
    recents = list(map(_RECENT, groups))
    records = [r.newest() for r in recents if type(r) is Record]  # their calls not built (Record)
    if records:
        recents = [r for r in recents if type(r) is not Record]
    try:
        return max(itertools.chain(map(_STARTED, itertools.chain.from_iterable(recents)), records,
                                   [g.in_flight.started_at for g in groups if g.in_flight is not None]))
    except (TypeError, ValueError):
        return None


def device_ordered(backend):
    """Whether a group's calls run on the rank's GPU in the order the rank issued them, with its calls on other
    such groups (NCCL: a synchronous call runs on the current stream; a wait() holds it), though its Python has
    gone on: a CPU backend's calls (gloo's) run on threads of their own.  A backend of both ("cpu:gloo,
    cuda:nccl") is not: the device of a call is not in the documents."""
    return bool(backend) and "nccl" in backend and "gloo" not in backend


class Position(NamedTuple):
    """Where a rank is on one stream (a group's collectives, or one direction of its p2p calls)."""
    stream: str
    group: str
    kind: str = "collective"
    ranks: Optional[tuple] = None
    backend: Optional[str] = None
    peer: Optional[int] = None
    src: Optional[int] = None
    dst: Optional[int] = None
    torch_timeout_s: Optional[float] = None
    last_started: int = 0
    last_completed: int = 0
    in_flight: Optional[Call] = None
    recent: tuple = ()  # Calls, oldest first (in flight ones included)
    ring_overflow: int = 0
    # the call in flight as NCCL's recorder saw it on the GPU (torch dumps, torch_fr.py): "scheduled" (its
    # kernel has not started: the stream is busy with earlier work) or "started"; ``gpu_timing``: whether the
    # recorder saw start times at all (TORCH_NCCL_ENABLE_TIMING=1), without which every call reads "scheduled"
    gpu_state: Optional[str] = None
    gpu_timing: Optional[bool] = None

    def members(self):
        if self.kind == "p2p" and self.src is not None and self.dst is not None:
            return sorted({self.src, self.dst})
        return list(self.ranks or ())

    def shown(self):
        """The calls this position shows: its recent ones, then its call in flight (a tuple of Calls)."""
        return self.recent + ((self.in_flight,) if self.in_flight is not None else ())

    def call(self, seq):
        """What this rank knows of its call ``seq`` here (Call), or None."""
        if self.in_flight is not None and self.in_flight.seq == seq:
            return self.in_flight
        for c in self.recent:
            if c.seq == seq:
                return c
        return None

    def to_json(self):
        d = {"stream": self.stream, "group": self.group, "kind": self.kind, "backend": self.backend,
             "peer": self.peer, "src": self.src, "dst": self.dst, "torch_timeout_s": self.torch_timeout_s,
             "last_started": self.last_started, "last_completed": self.last_completed,
             "ring_overflow": self.ring_overflow,
             "recent_ops": [[c.seq, c.op, c.size, c.started_at] for c in self.recent],
             "in_flight_seq": self.in_flight.seq if self.in_flight is not None else None}
        _ranks_out(d, "ranks", self.ranks)
        if self.in_flight is not None:
            c = self.in_flight
            d.update(in_flight_op=c.op, in_flight_api=c.api, in_flight_size=c.size, in_flight_since=c.started_at)
        if self.gpu_state is not None:
            d.update(in_flight_gpu_state=self.gpu_state, gpu_timing=self.gpu_timing)
        return d

    def to_row(self):
        """The position as a list of its fields in their order (the form a node's bundle carries: a dict's keys,
        16 a position, were most of a bundle's JSON to parse), its ranks as runs (``{"runs": ...}``) where
        ``_ranks_out`` writes runs, the call in flight as a list ([seq, op, size, started_at, api]), the recent
        calls as ``recent_row`` makes them; trailing nulls left out."""
        row = list(self)
        if isinstance(self.ranks, tuple) and len(self.ranks) > _ch.RUNS_OVER:
            row[3] = {"runs": _ch.runs_of(self.ranks)}
        elif self.ranks is not None:
            row[3] = list(self.ranks)
        row[11] = list(self.in_flight) if self.in_flight is not None else None
        row[12] = recent_row(self.recent)
        while row and row[-1] is None:
            row.pop()
        return row

    @classmethod
    def from_row(cls, row):
        """A Position from ``to_row``'s list, each field read as ``from_json`` reads it.  Raises DocumentError
        where ``row`` is not such a list."""
        n = len(row) if type(row) is list else 0
        if n < 2 or n > _FIELDS:
            raise DocumentError("a position's row is not a list of at most %d fields" % _FIELDS)
        (stream, group, kind, ranks, backend, peer, src, dst, timeout, started, completed, fly, ops, overflow,
         gpu, timing) = row + _PADS[n] if n < _FIELDS else row
        calls = None
        if type(ops) is list and ops and type(ops[0]) is int:  # recent_row's record
            calls, ops = Record.of(ops), ()
        t = type(ranks)
        if t is list:
            ranks = tuple(ranks)
        elif t is dict:
            ranks = _ch.ranks_from_runs(ranks.get("runs")) if isinstance(ranks.get("runs"), list) else None
        else:
            ranks = None
        if fly is not None:
            if type(fly) is list and fly and isinstance(fly[0], int):
                if len(fly) != 5:
                    fly = (fly + [None] * 5)[:5]
                t = fly[3]
                fly = tuple.__new__(Call, (fly[0], fly[1] or "unknown", fly[2], t if type(t) in _TIMES else _num(t),
                                           fly[4] or ""))
            else:
                fly = None
        return cls._build(stream, group, kind, ranks, backend, peer, src, dst, timeout, started, completed, fly,
                          ops if type(ops) is list else (), overflow, gpu, timing, calls)

    @classmethod
    def from_json(cls, d):
        get = d.get
        fly = get("in_flight_seq")
        in_flight = Call(fly, get("in_flight_op") or "unknown", get("in_flight_size"),
                         _num(get("in_flight_since")), get("in_flight_api") or "") if isinstance(fly, int) else None
        runs = get("ranks_runs")
        ranks = get("ranks")
        # _ranks_in(d, "ranks"), its common case inline
        ranks = tuple(ranks) if runs is None and type(ranks) is list else _ranks_in(d, "ranks")
        return cls._build(get("stream"), get("group"), get("kind"), ranks, get("backend"), get("peer"), get("src"),
                          get("dst"), get("torch_timeout_s"), get("last_started"), get("last_completed"), in_flight,
                          get("recent_ops") or (), get("ring_overflow"), get("in_flight_gpu_state"),
                          get("gpu_timing"))

    @classmethod
    def _build(cls, stream, group, kind, ranks, backend, peer, src, dst, timeout, started, completed, in_flight,
               ops, overflow, gpu, timing, calls=None):
        """The Position of fields as a document holds them (``from_json``, ``from_row``): each checked, the
        recent calls ([seq, op, size, started_at] each) built, or ``calls`` where they are built already."""
        new = tuple.__new__  # a Call per item, built directly (the merge reads thousands: issue 42's fuzzer)
        # what a watchdog writes: [seq, op, size, started_at] with a number for each time, every item (one of
        # another type or length fails the unpacking or the test, the count tells, and it takes the way below)
        recent = ()
        if ops:
            try:
                recent = [new(Call, (s, o, z, t, "")) for s, o, z, t in ops
                          if type(s) is int and o and type(t) in _TIMES]
            except (ValueError, TypeError):
                recent = ()
        if len(recent) != len(ops):  # anything else, item by item
            recent = []
            for item in ops:
                if type(item) is list and len(item) == 4 and type(item[0]) is int and item[1]:
                    t = item[3]
                    recent.append(new(Call, (item[0], item[1], item[2], t if type(t) in _TIMES else None, "")))
                elif isinstance(item, list) and item and isinstance(item[0], int):
                    recent.append(Call(item[0], item[1] if len(item) > 1 and item[1] else "unknown",
                                       item[2] if len(item) > 2 else None,
                                       _num(item[3]) if len(item) > 3 else None))
        if calls is not None:
            recent = calls
        # a string, a count as the JSON holds them taken as they are (_num's test, without its call)
        args = (stream if type(stream) is str else str(stream), group if type(group) is str else str(group),
                kind or "collective", ranks, backend, peer, src, dst, None if timeout is None else _num(timeout),
                started if type(started) is int else _num(started, 0),
                completed if type(completed) is int else _num(completed, 0), in_flight,
                recent if type(recent) is Record else tuple(recent),
                overflow if type(overflow) is int else _num(overflow, 0), gpu if gpu in GPU_STATES else None,
                None if timing is None else bool(timing))
        return new(cls, args) if cls is Position else cls(*args)  # the namedtuple's __new__, without its call


# recent calls a position carries as lists, at most: as a record fewer read slower (Position.from_row of one
# position through JSON, this project's VM: 1 call 3.1 us as a list, 5.4 as a record; 8: 5.6 and 5.8; 32: 14.8
# and 11.1)
RECORD_OVER = 8
_CODES = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # a call's (op, size) in recent_row
_CODE_OF = {c: i for i, c in enumerate(_CODES)}


def recent_row(calls):
    """A position's recent calls as a bundle carries them (WIRE_VERSION 5): where there are more than RECORD_OVER,
    ``[seq of the first, [[op, size] each distinct], a character a call naming its (op, size) there, [start of
    the first, then each other's start as integer ns after it]]``, if their seqs follow one another, each has an
    op and a start, they have at most 62 distinct (op, size) and each start reads back as the same float; else a
    list of [seq, op, size, started_at] each.  With 32 calls a stream (``rank_docs.HISTORY``, a job some steps
    in), those lists were 84 % of a state's JSON and their floats and strings most of its parse (docs/scale.md,
    "Recent calls as one record"); a few calls read faster as lists.  The difference of two starts of one clock
    is exact in floating point (they are within a factor of two of each other), and an integer of ns carries it
    to well under the start's own precision (2**-22 s at today's epoch): each start is checked as it will be
    read."""
    if type(calls) is Record:
        return calls._row  # as it came
    if len(calls) <= RECORD_OVER:
        return [[c.seq, c.op, c.size, c.started_at] for c in calls]
    seq0, t0 = calls[0].seq, calls[0].started_at
    if type(seq0) is int and type(t0) is float:
        table, index, codes, times = [], {}, [], [t0]
        for i, c in enumerate(calls):
            t = c.started_at
            if c.seq != seq0 + i or not c.op or type(t) is not float:
                break
            if i:
                d = round((t - t0) * 1e9)
                if t0 + d / 1e9 != t:
                    break
                times.append(d)
            key = (c.op, c.size)
            k = index.get(key)
            if k is None:
                if len(table) == len(_CODES):
                    break
                k = index[key] = len(table)
                table.append([c.op, c.size])
            codes.append(_CODES[k])
        else:
            return [seq0, table, "".join(codes), times]
    return [[c.seq, c.op, c.size, c.started_at] for c in calls]


class Record(object):
    """A position's recent calls as a bundle's record carries them (``recent_row``), read as the tuple of Calls it
    stands for (iterated, indexed, added to a tuple, compared, hashed as that tuple), whose Calls are built at
    its first such use: the merge of 4,096 ranks' states of 32 calls a stream spent 0.14 of its 0.32 s read
    building Calls that a hang's analysis never looks at (docs/scale.md, "Recent calls as one record").
    ``newest``: the latest start, without them.  Made by ``of`` only, from a record that holds together."""
    __slots__ = ("_row", "_calls")

    @classmethod
    def of(cls, row):
        """The Record of ``recent_row``'s record ``row``, or () where it does not hold together (a damaged record
        reads as no recent calls, as a damaged list of them does)."""
        try:
            seq, table, codes, times = row
            t0 = times[0]
            if (type(seq) is not int or type(t0) is not float or type(codes) is not str or len(codes) != len(times)
                    or not _INTS.issuperset(map(type, times[1:])) or not _CODE_SETS[len(table)].issuperset(codes)
                    or not all(type(e) is list and len(e) == 2 and type(e[0]) is str and e[0] for e in table)):
                return ()
        except (TypeError, ValueError, IndexError, KeyError):
            return ()
        rec = object.__new__(cls)
        rec._row, rec._calls = row, None
        return rec

    def calls(self):
        c = self._calls
        if c is None:
            seq, table, codes, times = self._row
            t0, new = times[0], tuple.__new__
            at = list(map(table.__getitem__, map(_CODE_OF.__getitem__, codes)))
            first = new(Call, (seq, at[0][0], at[0][1], t0, ""))
            c = self._calls = (first,) + tuple([new(Call, (i, op, size, t0 + d / 1e9, "")) for i, (op, size), d in
                                                zip(itertools.count(seq + 1), at[1:], times[1:])])
        return c

    def words(self):
        """A key of what these calls are, not when: two Records of one key hold the same ops and sizes at the same
        seqs (the verdict compares many ranks' records by it without building their calls)."""
        seq, table, codes, _ = self._row
        return seq, codes, tuple(map(tuple, table))

    def newest(self):
        """The latest start of these calls (each start t0 + d / 1e9 is exact and rises with d)."""
        times = self._row[3]
        return times[0] + max(times[1:]) / 1e9 if len(times) > 1 else times[0]

    def __len__(self):
        return len(self._row[2])

    def __iter__(self):
        return iter(self.calls())

    def __getitem__(self, i):
        return self.calls()[i]

    def __add__(self, other):
        return self.calls() + tuple(other)

    def __radd__(self, other):
        return tuple(other) + self.calls()

    def __eq__(self, other):
        if isinstance(other, Record):
            other = other.calls()
        return self.calls() == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self):
        return hash(self.calls())

    def __repr__(self):
        return repr(self.calls())


_INTS = frozenset((int,))
_CODE_SETS = [frozenset(_CODES[:n]) for n in range(len(_CODES) + 1)]  # the codes a table of n entries gives


_FIELDS = len(Position._fields)
_PADS = [[None] * (_FIELDS - n) for n in range(_FIELDS)]  # a row of n fields padded to a Position's (from_row)


class Overdue(NamedTuple):
    """A call of this rank its watchdog found overdue, and what became of it: ``in_flight`` while it
    lasts; then ``ended`` says how it ended: "completed" (the hang resolved: ``completed_at``,
    ``resolved_after_s``), "rank ended" (the rank ended while in it) or "peers ended" (it ended once other
    ranks of the call had ended: torch raised, the hang did not resolve)."""
    stream: str
    group: str
    seq: int
    op: str = "unknown"
    api: str = ""
    size: Optional[str] = None
    group_ranks: Optional[tuple] = None
    kind: str = "collective"
    peer: Optional[int] = None
    backend: Optional[str] = None
    started_at: Optional[float] = None
    detected_at: Optional[float] = None
    age_s: Optional[float] = None
    in_flight: bool = True
    ended: Optional[str] = None
    completed_at: Optional[float] = None
    resolved_after_s: Optional[float] = None
    level: str = "hard"  # "soft": past its learned deadline only; "hard": past the timeout
    deadline_s: Optional[float] = None  # the deadline it passed
    held_until: Optional[float] = None  # a verdict held its hard level until then (a rank in a phase)

    @property
    def resolved(self):
        return self.ended == CallEnd.COMPLETED

    def describe(self):
        return describe_call(self._asdict())

    def to_json(self):
        d = self._asdict()
        _ranks_out(d, "group_ranks", self.group_ranks)
        d["resolved"] = self.resolved
        return d

    @classmethod
    def from_json(cls, d):
        get = d.get
        ended = get("ended")
        if ended is None and get("in_flight", True) is False:  # version 1: completed, whatever the cause
            ended = "completed" if get("resolved") else "peers ended"
        args = (str(get("stream")), str(get("group")), _num(get("seq"), 0), get("op") or "unknown", get("api") or "",
                get("size"), _ranks_in(d, "group_ranks"), get("kind") or "collective", get("peer"), get("backend"),
                _num(get("started_at")), _num(get("detected_at")), _num(get("age_s")), bool(get("in_flight", True)),
                ended, _num(get("completed_at")), _num(get("resolved_after_s")), get("level") or "hard",
                _num(get("deadline_s")), _num(get("held_until")))
        return tuple.__new__(cls, args) if cls is Overdue else cls(*args)  # (as Position._build: every state has one)


class Phase(NamedTuple):
    """The phase a rank declared (``c10d_observer.phase``): its ``name``, ``since`` when and ``until`` when it
    may last (Unix seconds; None: no limit), and that limit as a length (``up_to_s``)."""
    name: Optional[str] = None
    since: Optional[float] = None
    until: Optional[float] = None
    up_to_s: Optional[float] = None

    def to_json(self):
        return {"name": self.name, "since": self.since, "until": self.until, "up_to_s": self.up_to_s}

    @classmethod
    def from_json(cls, d):
        """The phase in a document's ``phase`` (a dict with a name), else None."""
        if not isinstance(d, dict) or not d:
            return None
        return cls(d.get("name"), _num(d.get("since")), _num(d.get("until")), _num(d.get("up_to_s")))


class FrozenSpan(NamedTuple):
    """When a rank's Python did not run (its watchdog saw no beat): ``since``, ``until`` (None: still)."""
    since: float
    until: Optional[float] = None


class RankDoc(NamedTuple):
    """One rank's document: a report (its watchdog found a call overdue), a state (its answer to a
    gather), an end (the rank ended: ``alive`` False when its process died without disable()), or a torch
    flight-recorder dump read as a state.  ``extra``: the report's other fields, kept as they are."""
    kind: str
    rank: int
    world_size: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    job_id: str = ""
    written_at: Optional[float] = None
    watchdog_started_at: Optional[float] = None
    alive: bool = True
    exit_reason: Optional[str] = None
    frozen: bool = False
    heartbeat_age_s: Optional[float] = None
    main_thread: Optional[int] = None
    stack_dump: Optional[str] = None
    stacks_text: Optional[str] = None  # another node's summary of stack_dump (relay.py)
    py_spy_dump: Optional[str] = None
    gather_id: Optional[str] = None
    stacks_size_before: Optional[int] = None
    groups: tuple = ()
    overdue: tuple = ()
    flight_recorder: Optional[dict] = None
    config: Optional[dict] = None
    signal_handler: Optional[dict] = None
    ages_at_least: bool = False  # a torch dump's ages are lower bounds (torch_fr.py)
    relayed_from: Optional[str] = None
    phase: Optional[Phase] = None  # the phase the rank declared (its JSON: {name, since, until, up_to_s})
    scheduler: Optional[dict] = None  # its node as the scheduler names it, the job's ids (scheduler.py)
    path: Optional[str] = None  # where it was read from (not written)
    extra: Optional[dict] = None

    @property
    def timeout(self):
        return _num((self.config or {}).get("timeout"), 0) or 0

    @property
    def frozen_spans(self):
        """When the rank's Python did not run (FrozenSpans, oldest first), from ``extra``'s ``frozen_spans``."""
        out = []
        for span in (self.extra or {}).get("frozen_spans") or ():
            since = _num(span.get("since")) if isinstance(span, dict) else None
            if since is not None:
                out.append(FrozenSpan(since, _num(span.get("until"))))
        return tuple(out)

    @property
    def dead(self):
        return not self.alive

    @property
    def node(self):
        """Its node as the scheduler names it, else its host."""
        return (self.scheduler or {}).get("node") or self.host

    @property
    def node_from(self):
        """Which said ``node``: the scheduler's variable (scheduler.NODE_SOURCES), "hostname", or None."""
        return (self.scheduler or {}).get("node_from") or ("hostname" if self.host else None)

    @property
    def job_ids(self):
        """The scheduler's ids of the job that are set: {"slurm_job_id", "torchelastic_run_id"}."""
        sched = self.scheduler or {}
        return {key: sched[key] for key in ("slurm_job_id", "torchelastic_run_id") if sched.get(key)}

    def position(self, stream):
        for g in self.groups:
            if g.stream == stream:
                return g
        return None

    def positions(self):
        return {g.stream: g for g in self.groups}

    def call(self, stream, seq):
        """What this rank knows of its call ``seq`` on ``stream``: its position's, an overdue entry's, or
        the flight recorder's entry (op and size of calls that completed), as a Call; or None."""
        g = self.position(stream)
        c = g.call(seq) if g is not None else None
        if c is not None and c.op != "unknown":
            return c
        for e in self.overdue:
            if e.stream == stream and e.seq == seq:
                return Call(seq, e.op, e.size, e.started_at, e.api)
        group = g.group if g is not None else stream
        for e in (self.flight_recorder or {}).get(group) or ():
            if isinstance(e, dict) and e.get("seq") == seq and e.get("op"):
                t = _num(e.get("time_created_ns"))
                return Call(seq, e["op"], e.get("size"), t / 1e9 if t else None)
        return c

    def at_device(self):
        """(this document as its rank's device stands, {stream: the seqs left out}): where its calls run on its
        GPU in the order it issued them (``device_ordered``), a call issued after the oldest call it has in
        flight there has not been entered by the device, whatever its Python did (NCCL: a synchronous call
        returns at once, and the Python thread goes on to its next synchronisation).  Those calls are taken
        out of the positions (``last_started`` back to the call before them, ``in_flight`` the oldest one
        left) and of ``overdue``: the document reads as a CPU backend's rank blocked in that oldest call
        would write it.  A stream whose calls after it are not all in its recent calls is left as it is.  An
        op of a ``batch_isend_irecv`` or an isend/irecv (its call's api, ``ASYNC_P2P_APIS``) holds the calls
        issued after it (a wait() holds the current stream) but is held only by the other calls: the ops of
        one batch run together (one NCCL group call).  The document itself where nothing is left out."""
        firsts = [(g.in_flight.started_at, _async_p2p(g)) for g in self.groups if g.in_flight is not None
                  and g.in_flight.started_at is not None and device_ordered(g.backend)]
        if not firsts:
            return self, {}
        t0 = min(t for t, _ in firsts)
        newest = _newest(self.groups)
        if newest is not None and newest <= t0:
            return self, {}  # no call issued after its oldest call in flight: a rank blocked there, the usual case
        t0_async = min([t for t, a in firsts if not a] or [None])
        groups, out = [], {}
        for g in self.groups:
            held = t0_async if _async_p2p(g) else t0
            if held is None or not any(c.started_at is not None and c.started_at > held for c in g.recent) and (
                    g.in_flight is None or g.in_flight.started_at is None or g.in_flight.started_at <= held):
                groups.append(g)  # no call of it issued after: as it is
                continue
            calls = {c.seq: c for c in g.shown()}
            later = sorted(q for q, c in calls.items() if held is not None and c.started_at is not None
                           and c.started_at > held)
            if (not device_ordered(g.backend) or not later or later[-1] != g.last_started
                    or later != list(range(later[0], later[-1] + 1))):
                groups.append(g)
                continue
            last = later[0] - 1
            if last < g.last_completed:
                groups.append(g)  # a call it completed was issued after one still in flight: not one queue
                continue
            out[g.stream] = set(later)
            flying = calls.get(g.last_completed + 1) if last > g.last_completed else None
            groups.append(g._replace(last_started=last, in_flight=flying,
                                     recent=tuple(c for c in g.recent if c.seq <= last)))
        if not out:
            return self, {}
        overdue = tuple(e for e in self.overdue if e.seq not in out.get(e.stream, ()))
        return self._replace(groups=tuple(groups), overdue=overdue), out

    def history(self):
        """Every call this rank knows of across its streams, as (started_at, stream, Call), in the order it
        issued them (its own clock); calls of unknown start left out.  The flight recorder's entries add the
        calls a recorder source never put in the channel."""
        seen = {}
        for g in self.groups:
            for c in g.shown():
                if c.started_at is not None:
                    seen[(g.stream, c.seq)] = (c.started_at, g.stream, c)
        by_group = {g.group: g.stream for g in self.groups if g.kind == "collective" and g.stream == g.group}
        for group, entries in (self.flight_recorder or {}).items():
            stream = by_group.get(group)
            for e in entries or ():
                t = _num(e.get("time_created_ns")) if isinstance(e, dict) else None
                if stream is None or not t or not isinstance(e.get("seq"), int) or e["seq"] < 1:
                    continue
                seen.setdefault((stream, e["seq"]), (t / 1e9, stream, Call(e["seq"], e.get("op") or "unknown",
                                                                         e.get("size"), t / 1e9)))
        return sorted(seen.values(), key=lambda x: (x[0], x[1], x[2].seq))

    def to_json(self):
        d = {"format": FORMAT, "version": VERSION}
        for k, v in self._asdict().items():
            if k in ("groups", "overdue"):
                d[k] = [x.to_json() for x in v]
            elif k == "phase" and v is not None:
                d[k] = v.to_json()
            elif k == "extra":
                continue
            elif k == "path" or (k in ("stacks_text", "relayed_from", "phase", "scheduler") and v is None):
                continue
            else:
                d[k] = v
        for k, v in (self.extra or {}).items():
            d.setdefault(k, v)
        return d

    def to_wire(self):
        """This document as a node's bundle carries it to the merging node (relay.py): ``to_json``'s, version
        WIRE_VERSION: its positions as rows (``group_rows``, Position.to_row), and no field of its own nor of an
        overdue call's whose value is null (its ``extra`` kept as it is).  The merging watchdog parses every
        rank's; 4,096 ranks' states of ``benchmarks/scale.py`` as bundles, on this project's VM: see
        docs/scale.md, "A bundle's states as rows"."""
        d = self.to_json()
        known = _known(type(self))
        out = {k: v for k, v in d.items() if v is not None or k not in known}
        out["version"] = WIRE_VERSION
        del out["groups"]
        out["group_rows"] = [g.to_row() for g in self.groups]
        out["overdue"] = [{k: v for k, v in e.items() if v is not None} for e in d["overdue"]]
        return out

    @classmethod
    def of(cls, d):
        """A RankDoc as it is; a document's dict (tests, older callers of the verdict) read as one, its format
        and version this release's where it names none."""
        if isinstance(d, cls):
            return d
        if type(d) is dict and "format" in d and "version" in d:  # read as it is: from_json copies nothing of it
            return cls.from_json(d)
        return cls.from_json(dict(d, format=d.get("format", FORMAT), version=d.get("version", VERSION)))

    @classmethod
    def from_json(cls, d, path=None, node=None):
        """The document of JSON ``d`` (read from ``path``).  ``node``: (the gather it answers, host) where ``d`` is
        a state in a node's file (``load``): it counts for that gather, its own answer kept in
        ``extra['answered_gather_id']``, its node named as ``relayed_from`` where it names none, and nothing to
        wait for in its stacks file (its node waited: the summary is inline)."""
        get = d.get if isinstance(d, dict) else None
        if get is None or get("format") != FORMAT:
            raise DocumentError("%s is not a c10d-observer document" % (path or "the document"))
        version = get("version")
        if version not in READS:
            raise DocumentError("%s has document version %r; this release reads versions %s"
                                % (path or "the document", version, ", ".join(map(str, READS))))
        rank = get("rank")
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise DocumentError("%s names no rank" % (path or "the document"))
        kind = get("kind") or "report"
        alive = get("alive") is not False
        if version == 1 and kind == "state" and (get("exit_reason") or not alive):
            kind = "end"  # version 1 wrote a rank's end as its state
        known = _known(cls)
        extra = {k: v for k, v in d.items() if k not in known and not k.startswith("_")}
        gather_id, before, relayed_from = get("gather_id"), _num(get("stacks_size_before")), get("relayed_from")
        if node is not None:
            extra["answered_gather_id"] = gather_id
            gather_id, before, relayed_from = node[0], None, relayed_from or node[1]
        fr, config, sched = get("flight_recorder"), get("config"), get("scheduler")
        rows = get("group_rows")  # WIRE_VERSION's positions
        groups = (tuple(Position.from_row(r) for r in rows if type(r) is list) if type(rows) is list else
                  tuple(Position.from_json(g) for g in get("groups") or () if isinstance(g, dict)))
        args = (kind, rank, _num(get("world_size")), get("host"), _num(get("pid")), get("job_id") or "",
                _num(get("written_at")), _num(get("watchdog_started_at")), alive, get("exit_reason"),
                bool(get("frozen")) and alive, _num(get("heartbeat_age_s")), _num(get("main_thread")),
                get("stack_dump"), get("stacks_text"), get("py_spy_dump"), gather_id, before, groups,
                tuple(Overdue.from_json(e) for e in get("overdue") or () if isinstance(e, dict)),
                fr if isinstance(fr, dict) else None, config if isinstance(config, dict) else {},
                get("signal_handler"), bool(get("ages_at_least")), relayed_from, Phase.from_json(get("phase")),
                sched if isinstance(sched, dict) else None, path, extra)
        return tuple.__new__(cls, args) if cls is RankDoc else cls(*args)  # (as Position._build)


_KNOWN = {}  # RankDoc (a class) -> the keys of a document that are not ``extra``: made once, not per document


def _known(cls):
    known = _KNOWN.get(cls)
    if known is None:
        known = _KNOWN[cls] = frozenset(cls._fields) | {"format", "version", "group_rows"}
    return known


NODE_KIND = "node_states"


def node_states_json(host, gather_id, docs=(), packed=None):
    """A node's states as one document (relay.py): ``answers`` is the gather they count for on this node; each
    state keeps the gather it answered on its own node.  ``packed``: as another node's relay packed them."""
    return dict({"format": FORMAT, "version": VERSION, "kind": NODE_KIND, "host": host, "answers": gather_id},
                **({"packed": packed} if packed is not None else
                   {"docs": [d.to_json() if isinstance(d, RankDoc) else d for d in docs]}))


_FRAMES = "\n  File "  # where a stacks summary's frames begin (stackfile's format: faulthandler's)
FRAMES_OF = "stacks_frames_of"


def shared_stacks(states):
    """A node's states (wire dicts, ``RankDoc.to_wire`` and the relay's ``stacks_text``) as its bundle carries
    them: where a state's stacks summary ends in the same frames as an earlier state's (the ranks of a node
    waiting in one call: one main-thread stack, each rank's own header and thread lines), it carries only the
    lines before them and ``stacks_frames_of``: [that state's index, where its frames begin].  ``load`` puts the
    text back whole.  The states given are not changed."""
    out, first = [], {}
    for i, d in enumerate(states):
        text = d.get("stacks_text")
        at = text.find(_FRAMES) if type(text) is str else -1
        if at >= 0:
            j = first.setdefault(text[at:], (i, at))
            if j[0] != i:
                d = dict(d, stacks_text=text[:at])
                d[FRAMES_OF] = list(j)
        out.append(d)
    return out


def _whole_stacks(states):
    """The states of a bundle (``shared_stacks``) with each stacks summary whole again, in place; a reference to
    no earlier whole summary is dropped (the lines before the frames kept)."""
    for i, d in enumerate(states):
        ref = d.pop(FRAMES_OF, None) if type(d) is dict else None
        if ref is None:
            continue
        try:
            j, at = ref
            whole = states[j].get("stacks_text") if 0 <= j < i else None
            if type(whole) is str and type(d.get("stacks_text")) is str and whole.startswith(_FRAMES, at):
                d["stacks_text"] += whole[at:]
        except (TypeError, ValueError, AttributeError):
            pass


def load(path):
    """The documents in one file (a rank's report, state or end; a node's states), as RankDocs.  A node
    file's states count for the gather it answers (``answers``): each gets that as ``gather_id``, its own
    answer kept in ``extra['answered_gather_id']``.  Raises DocumentError or OSError."""
    try:
        with open(path) as f:
            d = json.load(f)
        if isinstance(d, dict) and "packed" in d:  # a node's states as its relay packed them (wire.labelled)
            d = dict(d, docs=_wire.unpack(d.pop("packed")))
            if type(d["docs"]) is list:
                _whole_stacks(d["docs"])
    except ValueError as e:
        raise DocumentError("%s is not JSON: %s" % (path, e))
    if isinstance(d, dict) and d.get("kind") == NODE_KIND:
        if d.get("format") != FORMAT or d.get("version") not in READS:
            raise DocumentError("%s is not a node-states document this release reads" % path)
        out = []
        answers = d.get("answers", d.get("gather_id"))
        for item in d.get("docs") or ():
            if isinstance(item, dict):
                out.append(RankDoc.from_json(item, path, (answers, d.get("host"))))
        return out
    return [RankDoc.from_json(d, path)]
