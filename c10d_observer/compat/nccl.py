"""torch's NCCL recorders and backends: what this build offers to follow NCCL groups (the plan), the legacy
ProcessGroupNCCL's recorder and ProcessGroupNCCL2's recorder hooks read, a group's NCCL backend, its uid and
torch's own count of its collectives.  Part of ``compat``: callers read these names through
``c10d_observer.compat``."""
from enum import Enum

from .fr import _dump_entries, fr_buffer_env, parse_status
from .groups import _c10d, backend_name


# -- NCCL -----------------------------------------------------------------------------------------------
# Read in torch's source (docs/sources.md, "NCCL"): the legacy ProcessGroupNCCL records every work it
# enqueues in its own flight recorder (a singleton apart from gloo's), readable as JSON from 2.5
# (``_dump_nccl_trace_json``); its ``pg_status`` is keyed by the backend's ``uid`` (``local_id_``) and
# numbers collectives by torch's own collective counter (``seqCollective_``, the number torch's NCCL
# timeout messages give as ``SeqNum``).  Its buffer is 0 (off) by default through 2.10 and 2000 from 2.11;
# the size is read when the recorder is first used.  ProcessGroupNCCL2 (the default ``nccl`` from 2.15,
# opt-in from 2.14) is recorded by a FlightRecorderHook that torch attaches to each group, read with
# ``_dump_fr_trace_json(backend="nccl2")``; its pg_status counts every op (p2p too) with one counter.


class RecorderOn(str, Enum):
    """How torch's legacy NCCL flight recorder comes to record in this process (``nccl_plan["recorder_on"]``;
    the values are the strings the capabilities always held)."""
    DEFAULT = "default"  # torch records NCCL works by default (2.11+)
    ENV = "env"  # the user's TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE > 0
    ENABLE = "enable"  # off by default (2.5-2.10): enable() turns it on, before the first NCCL group
    OFF = "off"  # the user's buffer size is 0


# read by the legacy NCCL recorder on 2.5+ (and TORCH_FR_BUFFER_SIZE on 2.8+)
NCCL_TRACE_ENV = "TORCH_NCCL_TRACE_BUFFER_SIZE"
NCCL_TRACE_SIZE = 2000  # torch's own default from 2.11: what enable() sets where the recorder is off by default


def nccl_probe(fr_recorded):
    """What this build offers to follow NCCL groups, probed without a GPU (bindings and configuration).

    ``fr_recorded``: the gloo recorder probe's answer (compat.fr_recording).  From 2.8 the
    NCCL recorder is configured by the same code as gloo's (one templated constructor, the same variables
    and default), so whether gloo's records by default says whether NCCL's does."""
    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as C
    nccl_cls = getattr(C, "ProcessGroupNCCL", None)
    feats = {
        "available": bool(getattr(dist, "is_nccl_available", lambda: False)()) and nccl_cls is not None,
        "trace_json": hasattr(C, "_dump_nccl_trace_json"),
        "uid": nccl_cls is not None and hasattr(nccl_cls, "uid"),
        "nccl2": hasattr(C, "ProcessGroupNCCL2") or hasattr(dist, "ProcessGroupNCCL2"),
        "fr_hook": hasattr(C, "FlightRecorderHook"),
        "fr_backend_arg": "backend" in (getattr(getattr(C, "_dump_fr_trace_json", None), "__doc__", None) or ""),
        "cuda_graphs": hasattr(getattr(torch.cuda, "graphs", None), "CUDAGraph"),
    }
    default_on = bool(fr_recorded) and fr_buffer_env()[0] is None
    return feats, _nccl_plan(feats, default_on)


def _nccl_plan(feats, default_on):
    """Which way NCCL groups are followed on this build (the record compat/expected holds per line)."""
    if not feats["available"]:
        return {"recorder": None, "recorder_on": None, "nccl2_recorder": False, "fallback": None,
                "why": "no NCCL in this build"}
    name, value = fr_buffer_env()
    if not feats["trace_json"]:
        on, why = None, "no JSON dump of the NCCL recorder before torch 2.5 (_dump_nccl_trace_json)"
    elif name is not None and value is not None:
        on = RecorderOn.ENV if value > 0 else RecorderOn.OFF
        why = "%s=%s" % (name, value)
    elif default_on:
        on, why = RecorderOn.DEFAULT, "torch records NCCL works by default (its gloo recorder does, same code, probed)"
    else:
        on, why = RecorderOn.ENABLE, ("off by default; enable() before the first NCCL group sets %s=%d" %
                             (NCCL_TRACE_ENV, NCCL_TRACE_SIZE))
    return {"recorder": "nccl_trace" if feats["trace_json"] else None, "recorder_on": on,
            "nccl2_recorder": bool(feats["nccl2"] and feats["fr_hook"] and feats["fr_backend_arg"]),
            "fallback": "patch: Work.is_completed(); a CUDA event marker for a call that returns no Work",
            "why": why}


def nccl_status():
    """{pg_id: (last_enqueued, last_completed)} of the legacy NCCL recorder (about 8 us on an H100)."""
    from torch._C import _distributed_c10d as C
    return parse_status(C._dump_nccl_trace_json(includeCollectives=False))


def nccl_active_entries():
    """The legacy NCCL recorder's entries of works not completed yet (about 1.2 ms at 2,000 entries)."""
    import json as _json
    from torch._C import _distributed_c10d as C
    return _json.loads(C._dump_nccl_trace_json(includeCollectives=True, onlyActive=True)).get("entries") or []


def nccl_entries():
    """The legacy NCCL recorder's whole buffer of entries (the batch reads: every call's start)."""
    return _dump_entries("_dump_nccl_trace", "_dump_nccl_trace_json")


def nccl2_status():
    """pg_status of ProcessGroupNCCL2's recorder hooks (torch 2.14+)."""
    from torch._C import _distributed_c10d as C
    return parse_status(C._dump_fr_trace_json(includeCollectives=False, backend="nccl2"))


def nccl2_active_entries():
    import json as _json
    from torch._C import _distributed_c10d as C
    return _json.loads(C._dump_fr_trace_json(includeCollectives=True, onlyActive=True,
                                             backend="nccl2")).get("entries") or []


def nccl2_entries():
    """ProcessGroupNCCL2's recorder hooks' whole buffer (torch 2.14+; JSON: its pickled dump takes no backend)."""
    return _dump_entries(None, "_dump_fr_trace_json", backend="nccl2")


def cuda_backend(pg):
    """The backend object a group uses for CUDA tensors (its ProcessGroupNCCL), or None."""
    get = getattr(pg, "_get_backend", None)
    if get is None:  # torch 1.x: the group object is the backend
        return pg
    try:
        import torch
        be = get(torch.device("cuda"))
    except Exception:
        return None
    return getattr(be, "wrapped_pg", be)  # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps it


def nccl_kind(pg):
    """"nccl" (the legacy ProcessGroupNCCL), "nccl2" (ProcessGroupNCCL2) or None, for a group."""
    if "nccl" not in backend_name(pg):
        return None
    be = cuda_backend(pg)
    try:
        name = str(be.name()).lower() if be is not None else "nccl"
    except Exception:
        name = "nccl"
    return "nccl2" if "nccl2" in name else "nccl"


def nccl_uid(pg):
    """The index the legacy NCCL recorder keys a group by (the backend's ``uid``), or None."""
    try:
        return str(int(cuda_backend(pg).uid))
    except Exception:
        return None


def torch_seq(pg):
    """torch's own count of the collectives enqueued on a group (legacy NCCL 2.5+: p2p not counted), or None."""
    for obj in (cuda_backend(pg), pg):
        fn = getattr(obj, "_get_sequence_number_for_group", None)
        if fn is not None:
            try:
                return int(fn())
            except Exception:
                continue
    return None


def fr_hooked(pg):
    """Whether torch attached its FlightRecorderHook to a group (ProcessGroupNCCL2's recorder, 2.14+)."""
    hooks = getattr(getattr(_c10d(), "_world", None), "pg_flight_recorder_hooks", None)
    try:
        return hooks is not None and pg in hooks
    except Exception:
        return False
