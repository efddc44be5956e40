"""How a verdict's value is made: its fields, JSON in and out, built once (``types.py`` holds the values).

A value (``Value``) is immutable (records.Record), has the fields its type lists (``FIELDS``, each made by
``F``: its JSON name, how a JSON value becomes the field's value and back, whether the analysis sets it only
where it applies) and turns into exactly its JSON and back (``to_json``, ``from_json``); keys a type does not
know are kept, in ``extra``.  ``Part``: a value earlier releases gave as a dict, still read by key too.
``LazyRanks``: {"<rank>": value} built where read.  ``Draft``: a value the analysis is still finding out,
built into its type once.  No torch and no files here.
"""
import enum
import json
from collections.abc import Mapping

from ..records import Record

def public(v):
    """A verdict's JSON document (of a Verdict, or of the analysis' dict: sets become sorted lists), ready for
    json.dump."""
    if isinstance(v, Value):
        v = v.to_json()
    return json.loads(json.dumps(v, default=lambda x: sorted(x) if isinstance(x, set) else str(x)))


class _Field(object):
    """One field: its JSON name, how a JSON value becomes the field's value (``load``) and back (``dump``);
    ``optional``: the analysis sets it only where it applies (every field is written only where it was set,
    or read from a file that held it)."""

    __slots__ = ("name", "load", "dump", "optional", "default")

    def __init__(self, name, load=None, dump=None, optional=False, default=None):
        self.name, self.load, self.dump, self.optional, self.default = name, load, dump, optional, default


def enum_of(cls):
    def load(v):
        if v is None or isinstance(v, cls):
            return v
        try:
            return cls(v)
        except ValueError:
            return v  # a value a later release added: kept as its string
    return load


def dump_enum(v):
    return v.value if isinstance(v, enum.Enum) else v


def as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else v  # a copy: what the JSON held, as a list


_SCALARS = frozenset((int, float, str, bool, type(None)))


def _scalars(values):
    """Whether ``values`` are JSON scalars only (checked in C): a verdict's lists of ranks hold 16,384 ints at
    16,384 ranks, several times over, and each went through _dump_any one call at a time (2026-12-01)."""
    return all(map(_SCALARS.__contains__, map(type, values)))


def dump_list(v):
    if not isinstance(v, (list, tuple)):
        return v
    return list(v) if _scalars(v) else [_dump_any(x) for x in v]


def _dump_any(v):
    if isinstance(v, Value):
        return v.to_json()
    if isinstance(v, LazyRanks):
        return v.to_json()
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return dump_list(v)
    if isinstance(v, dict):
        return dict(v) if _scalars(v.values()) else {k: _dump_any(x) for k, x in v.items()}
    return v


def of(cls):
    def load(v):
        return cls.from_json(v) if isinstance(v, dict) else v
    return load


def list_of(cls):
    def load(v):
        return [cls.from_json(x) if isinstance(x, dict) else x for x in v] if isinstance(v, (list, tuple)) else v
    return load


def ranks_of(cls):
    """{"<rank>": cls}: keys stay the JSON's strings (as ``exits`` and ``hosts``), each value built where it is
    read (LazyRanks)."""
    def load(v):
        return LazyRanks(cls, v) if isinstance(v, dict) else v
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
    """A property that reads field ``name`` of a value (``Value.__init_subclass__``)."""
    def read(self):
        return self._values[name]
    return property(read, doc="field %r" % name)


class LazyRanks(Mapping):
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


class Value(Record):
    """Immutable fields (records.Record), JSON in and out (module docstring)."""

    FIELDS = ()
    __slots__ = ("_values", "extra", "_present")

    def __init__(self, **values):
        _, known, defaults = _shape(type(self))
        if not known.issuperset(values):
            raise TypeError("%s has no field %s" % (type(self).__name__, ", ".join(sorted(set(values) - known))))
        extra = values.pop("extra", None) or {}
        self._fill(defaults, values, dict(extra))

    def _fill(self, defaults, values, extra):
        """Set the slots: every field, in FIELDS' order, its value where given, else its default; ``extra``
        kept as given (the caller's own dict)."""
        given = dict(defaults)
        given.update(values)
        _set(self, "_values", given)
        _set(self, "extra", extra)
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
        names, _, defaults = _shape(cls)
        extra = {k: v for k, v in d.items() if k not in names}
        if cls.__init__ is not Value.__init__:  # a type that sets fields of its own (Verdict's hangs)
            return cls(extra=extra, **values)
        # what __init__ makes of them, without its checks: every name is a field (a verdict's values are built
        # thousands at a time: the fuzzer's cases, a merge's missing ranks)
        self = object.__new__(cls)
        self._fill(defaults, values, extra)
        return self

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


class Part(Value):
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
