"""What crosses the c10d store between nodes (relay.py), packed: JSON, made smaller where a verdict grows with
the job (runs of ranks, columns of per-rank records), compressed, in base64.  No torch."""
import base64
import json
import zlib

from . import channel as _ch


def pack(obj):
    return base64.b64encode(zlib.compress(json.dumps(_squeeze(obj), separators=(",", ":")).encode("utf-8"),
                                          6)).decode("ascii")


def labelled(label, obj):
    """``pack(obj)`` behind a line of JSON (``label``) that a reader takes without unpacking what follows: a
    node's bundle is labelled with its request and host, and the merging node writes what follows into a
    file as it came, its watchdog unpacking it once (``documents.load``), rather than unpacking it, writing
    it out as JSON and the watchdog parsing that again (the unpack and the write were 1.65 s of the merging
    relay's 2.13 s of fetching at 4,096 ranks, cascade, benchmarks/scale.py under cProfile, 2026-12-02)."""
    return json.dumps(label, separators=(",", ":")) + "\n" + pack(obj)


def label_of(value):
    """(label, packed) of a ``labelled`` value; (None, None) where it is not one."""
    head, sep, packed = text(value).partition("\n")
    try:
        label = json.loads(head) if sep else None
    except ValueError:
        label = None
    return (label, packed) if isinstance(label, dict) else (None, None)


def unpack(value):
    """What ``pack`` made of an object, the object again: the runs and columns undone as JSON's decoder meets
    them (its object hook, called once a dict), where a walk over the whole object cost a Python call per
    list and scalar: a node's bundle of 8 states, 720 calls, 0.6 of the merging node's 0.8 ms a bundle
    (benchmarks/scale.py at 4,096 ranks under cProfile, 2026-12-01)."""
    try:
        raw = zlib.decompress(base64.b64decode(text(value)))
    except zlib.error as e:  # every other fault of a value that is not packed is a ValueError already
        raise ValueError("not a packed value: %s" % e)
    return json.loads(raw.decode("utf-8"), object_hook=_undo)


def _undo(obj):
    """One dict as the decoder made it, its insides undone already (the decoder builds the inside first)."""
    if len(obj) == 1:
        if _RUNS in obj:
            return _ch.expand_runs(obj[_RUNS])
        if _ROWS in obj:
            keys, fields, columns = obj[_ROWS]
            return {str(k): {f: col[i] for f, col in zip(fields, columns)} for i, k in enumerate(keys)}
    return obj


_RUNS, _ROWS = "__runs__", "__rows__"
_SCALARS = frozenset((int, float, str, bool, type(None)))


def _flat(obj):
    """Whether list ``obj`` holds scalars only, or short lists of scalars only (an arrivals share's [seq,
    start] pairs): nothing in it to squeeze or to unsqueeze.  A node's share at 2,048 nodes is 6,144 such
    pairs; walked one call per item, packing it took 22 ms and unpacking 16 ms, and the collector unpacks
    every node's each round (2,047 in 41 s)."""
    return all(type(x) in _SCALARS or (type(x) is list and len(x) <= _ch.RUNS_OVER
                                       and all(type(y) in _SCALARS for y in x)) for x in obj)


def _squeeze(obj):
    """What goes through the store, made smaller where a verdict grows with the job (it goes to every
    node): a long list of ints -> runs; a long map rank -> record of the same fields -> columns.  At 4,096
    ranks the verdict's per-rank map alone was 63 KiB per node, compressed."""
    if isinstance(obj, list):
        if len(obj) > _ch.RUNS_OVER and all(type(x) is int for x in obj):
            return {_RUNS: _ch.rank_runs(obj)}
        return obj if _flat(obj) else [_squeeze(x) for x in obj]
    if isinstance(obj, dict):
        if len(obj) > _ch.RUNS_OVER and all(isinstance(v, dict) for v in obj.values()):
            fields = sorted(set(k for v in obj.values() for k in v))
            if all(len(v) == len(fields) for v in obj.values()) and all(k.isdigit() for k in obj):
                keys = list(obj)
                return {_ROWS: [_squeeze([int(k) for k in keys]), fields,
                                [_squeeze([obj[k][f] for k in keys]) for f in fields]]}
        return {k: _squeeze(v) for k, v in obj.items()}
    return obj


def text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)
