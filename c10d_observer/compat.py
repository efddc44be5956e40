"""The only module that knows torch releases: probes the installed torch and returns a capabilities record.

Features are probed (``hasattr``, imports); the version string is recorded but never decides alone
(``2.6.0a0+nv...`` builds exist).  Everything that reads torch's private state (group names, ranks,
backends) lives here too, so that a torch change is mended in one place.
"""
import importlib
import os
import socket
import sys
from enum import Enum

from packaging.version import Version, InvalidVersion

# ProcessGroup methods that issue a collective or p2p op, in any release (1.8 → 2.15), and the op each is.
PG_METHODS = (
    ("allreduce", "all_reduce"), ("broadcast", "broadcast"), ("reduce", "reduce"),
    ("allgather", "all_gather"), ("_allgather_base", "all_gather_into_tensor"),
    ("all_gather_single", "all_gather_single"), ("gather", "gather"), ("scatter", "scatter"),
    ("reduce_scatter", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter_tensor"),
    ("reduce_scatter_single", "reduce_scatter_single"), ("alltoall", "all_to_all"),
    ("alltoall_base", "all_to_all_single"), ("all_to_all_single", "all_to_all_single"),
    ("barrier", "barrier"), ("monitored_barrier", "monitored_barrier"),
    ("allreduce_coalesced", "all_reduce_coalesced"), ("allgather_coalesced", "all_gather_coalesced"),
    ("allgather_into_tensor_coalesced", "all_gather_into_tensor_coalesced"),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced"),
    ("all_gather_single_coalesced", "all_gather_single_coalesced"),
    ("reduce_scatter_single_coalesced", "reduce_scatter_single_coalesced"),
    ("gather_single", "gather_single"),
    ("send", "send"), ("recv", "recv"), ("recv_anysource", "recv_anysource"),
)
P2P_METHODS = {"send": 1, "recv": 1, "recv_anysource": None}  # method -> index of the peer argument

# Module-level functions that issue several ops under one user-facing name.
COMPOSITE_APIS = ("all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                  "send_object_list", "recv_object_list", "batch_isend_irecv")

class RecorderOn(str, Enum):
    """How torch's legacy NCCL flight recorder comes to record in this process (``nccl_plan["recorder_on"]``;
    the values are the strings the capabilities always held)."""
    DEFAULT = "default"  # torch records NCCL works by default (2.11+)
    ENV = "env"  # the user's TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE > 0
    ENABLE = "enable"  # off by default (2.5-2.10): enable() turns it on, before the first NCCL group
    OFF = "off"  # the user's buffer size is 0


SOURCES = ("hooks", "pg_hooks", "flight_recorder", "patch")  # what source= accepts (sources/table.py ranks them)

# The tensor whose size must agree across the ranks of a call (the call's size signature, channel.py):
# "in" or "out", and for the patch source the index of the ProcessGroup method's argument that holds it.
# all_to_all and barriers have none (splits may differ; no tensor).
SIZE_TENSOR = {
    "all_reduce": ("in", 0), "broadcast": ("in", 0), "reduce": ("in", 0), "all_reduce_coalesced": ("in", 0),
    "send": ("in", 0), "recv": ("out", 0), "recv_anysource": ("out", 0),
    "all_gather": ("in", 1), "all_gather_into_tensor": ("in", 1), "gather": ("in", 1),
    "all_gather_coalesced": ("in", 1), "all_gather_into_tensor_coalesced": ("in", 1),
    "scatter": ("out", 0), "reduce_scatter": ("out", 0), "reduce_scatter_tensor": ("out", 0),
    "reduce_scatter_tensor_coalesced": ("out", 0),
}

# The argument of a ProcessGroup method that holds a rooted op's root: its options (``rootRank``), or the
# root itself in the overloads pg.broadcast(tensor, root) and pg.reduce(tensor, root, op).
ROOT_ARG = {"broadcast": 1, "reduce": 1, "gather": 2, "scatter": 2}


def dtype_codes():
    """{torch dtype: channel dtype code} for the dtypes this torch has."""
    import torch
    from . import channel as _ch
    return {getattr(torch, n): c for c, n in enumerate(_ch.DTYPES)
            if c and isinstance(getattr(torch, n, None), torch.dtype)}


def _c10d():
    return importlib.import_module("torch.distributed.distributed_c10d")


def release(version_string):
    """(major, minor, micro) of a torch version string, or None when it does not parse."""
    try:
        return Version(version_string).release[:3]
    except InvalidVersion:
        return None


def probe():
    """The capabilities record of the installed torch (a plain dict, JSON-serialisable)."""
    import torch
    import torch.distributed as dist

    caps = {"torch_version": torch.__version__, "torch_release": list(release(torch.__version__) or ()),
            "distributed_available": bool(dist.is_available())}
    feats = caps["features"] = {}
    if not caps["distributed_available"]:
        caps["sources"] = {s: {"usable": False, "reason": "torch.distributed is not available in this build"}
                           for s in SOURCES}
        caps["nccl"], caps["nccl_plan"] = {}, _nccl_plan({"available": False}, False)
        return caps
    from torch._C import _distributed_c10d as C
    pg = C.ProcessGroup
    feats["pg_methods"] = [m for m, _ in PG_METHODS if m in pg.__dict__]
    feats["work_class"] = work_class().__module__ + "." + work_class().__name__
    feats["work_get_future"] = hasattr(work_class(), "get_future")
    feats["sequence_number"] = hasattr(pg, "_get_sequence_number_for_group")
    feats["composite_apis"] = [n for n in COMPOSITE_APIS if hasattr(_c10d(), n)]
    feats["coalescing_manager"] = hasattr(_c10d(), "_coalescing_manager")
    feats["broadcast_coalesced"] = hasattr(dist, "_broadcast_coalesced")
    feats["ddp_comm_hook"] = _ddp_class() is not None and hasattr(_ddp_class(), "register_comm_hook")
    feats["pg_pre_post_hooks"] = hasattr(pg, "register_pre_hook") and hasattr(pg, "register_post_hook")
    feats["hooks_module"] = _hooks_module_name()
    feats["flight_recorder"] = hasattr(C, "_dump_fr_trace")
    feats["nccl_trace"] = hasattr(C, "_dump_nccl_trace")

    feats["flight_recorder_json"] = hasattr(C, "_dump_fr_trace_json")
    fr_on, fr_why = fr_recording(feats)
    feats["flight_recorder_records_gloo"] = fr_on

    srcs = caps["sources"] = {}
    srcs["hooks"] = ({"usable": True, "reason": "%s: collective start/end callbacks from torch's event "
                                                "thread" % feats["hooks_module"]} if feats["hooks_module"] else
                     {"usable": False, "reason": "torch.distributed.hooks / _hooks is not importable "
                                                 "(no torch release ships it)"})
    srcs["pg_hooks"] = ({"usable": True, "reason": "ProcessGroup.register_pre_hook/register_post_hook on "
                                                   "every group"} if feats["pg_pre_post_hooks"] else
                        {"usable": False, "reason": "ProcessGroup.register_pre_hook/register_post_hook "
                                                    "absent (they come with torch 2.14)"})
    if not feats["flight_recorder"] or not feats["flight_recorder_json"]:
        srcs["flight_recorder"] = {"usable": False, "reason": "torch._C._distributed_c10d._dump_fr_trace(_json) "
                                                              "absent (torch 2.8+)"}
    else:
        srcs["flight_recorder"] = {"usable": fr_on, "reason": fr_why}
    srcs["patch"] = ({"usable": True, "reason": "wraps %d ProcessGroup methods" % len(feats["pg_methods"])}
                     if feats["pg_methods"] else
                     {"usable": False, "reason": "no ProcessGroup collective methods found"})
    caps["nccl"], caps["nccl_plan"] = nccl_probe(fr_on)
    caps["funcol"] = funcol_kind()
    return caps


FR_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # first one set wins; 0 turns it off


def fr_buffer_env():
    """(variable, value) of the first flight-recorder buffer size variable that is set, else (None, None)."""
    for name in FR_ENV:
        raw = os.environ.get(name)
        if raw is not None and raw.strip() != "":
            try:
                return name, int(raw)
            except ValueError:
                return name, None
    return None, None


# torch's flight recorder (gloo's and the legacy NCCL one's) records by default from 2.11 (a 2,000-entry
# buffer); on 2.5-2.10 it records only where a buffer size variable is > 0 when the first process group is
# made: torch reads it once, then.  Measured on 2.8.0, 2.9.1 and 2.10.0 (benchmarks/fr_reads.py --late): set
# after `import torch` and before init_process_group, TORCH_NCCL_TRACE_BUFFER_SIZE=2000 turns gloo's on;
# set after init_process_group, it does not.
FR_OFF_BY_DEFAULT = ((2, 5), (2, 11))


def recorder_on_before_init(version=None):
    """Where torch's flight recorder is off by default (2.5-2.10) and no buffer size variable is set, set
    NCCL_TRACE_ENV=NCCL_TRACE_SIZE now: the caller is about to make the first process group (C10D_OBSERVER=1
    and ``run`` call this from their wrapper of init_process_group), so that the recorder source, which costs
    nothing per call, covers gloo (2.8+) and NCCL (2.5+) there too.  Returns the variable set, or None."""
    if fr_buffer_env()[0] is not None:
        return None  # the user chose
    if version is None:
        import torch
        version = torch.__version__
    rel = release(version)
    if rel is None or not (FR_OFF_BY_DEFAULT[0] <= tuple(rel[:2]) < FR_OFF_BY_DEFAULT[1]):
        return None
    from torch._C import _distributed_c10d as C
    if not (hasattr(C, "_dump_fr_trace_json") or hasattr(C, "_dump_nccl_trace_json")):
        return None
    os.environ[NCCL_TRACE_ENV] = str(NCCL_TRACE_SIZE)
    return NCCL_TRACE_ENV


_FR_PROBE = []


def fr_recording(feats):
    """(records, reason): does the flight recorder record gloo collectives in this process?

    Where a buffer size variable is set, it says (torch reads it when the recorder is first used: > 0 records,
    0 does not).  Where none is, measured, not inferred from the version: in a child process (so that the
    probe's call is never in this process's recorder, where a user's dump and torch's analyser would meet a
    group no pg_config names), a private one-rank gloo group runs one all_reduce and the recorder's pg_status
    is read before and after.  Done once per process, and its answer kept per torch build in the temporary
    folder (``_probe_cache``).  On torch 2.8-2.10 the recorder is off unless TORCH_FR_BUFFER_SIZE /
    TORCH_NCCL_TRACE_BUFFER_SIZE is > 0 (see docs/sources.md on why enable() does not turn it on)."""
    if not feats.get("flight_recorder") or not feats.get("flight_recorder_json"):
        return False, "no flight recorder in this torch"
    name, value = fr_buffer_env()
    if name is not None and value is not None and value <= 0:
        return False, "flight recorder turned off (%s=%s)" % (name, value)
    if name is not None and value is not None:
        return True, "flight recorder records gloo collectives (%s=%s); pg_status polled off the call path" % (
            name, value)
    if not _FR_PROBE:
        _FR_PROBE.append(_probe_fr_records())
    rec, detail = _FR_PROBE[0]
    if rec:
        return True, "flight recorder records gloo collectives (torch's default, probed in a child process); " \
                     "pg_status polled off the call path"
    return False, "flight recorder present but not recording gloo (%s; set TORCH_FR_BUFFER_SIZE=2000 before " \
                  "the first process group to use it)" % (detail,)


_PROBE_CODE = """
import datetime, json, sys
import torch
from torch._C import _distributed_c10d as C
def status():
    st = json.loads(C._dump_fr_trace_json(includeCollectives=False)).get("pg_status") or {}
    return {str(k): int(v.get("last_enqueued_collective", -1)) for k, v in st.items()}
before = status()
pg = C.ProcessGroupGloo(C.HashStore(), 0, 1, datetime.timedelta(seconds=10))
pg.allreduce([torch.zeros(1)]).wait()
after = status()
sys.stdout.write("recorded" if any(v > before.get(k, 0) for k, v in after.items()) else "not recorded")
"""


def _probe_cache():
    """(path, key) of the probe's answer kept for this torch build (its version and where it lives)."""
    import tempfile
    import torch
    so = getattr(torch._C, "__file__", "") or ""
    try:
        stamp = int(os.stat(so).st_mtime)
    except OSError:
        stamp = 0
    key = "%s|%s|%s" % (torch.__version__, so, stamp)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), "c10d_observer-fr-probe-%d.json" % uid), key


def _probe_fr_records():
    import json as _json
    import subprocess
    path, key = _probe_cache()
    try:
        with open(path) as f:
            kept = _json.load(f)
        if isinstance(kept, dict) and isinstance(kept.get(key), list):
            return tuple(kept[key])
    except (IOError, OSError, ValueError):
        kept = {}
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER"))
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE_CODE], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return False, "probe failed: %s" % (e,)
    if out.returncode != 0 or out.stdout.strip() not in ("recorded", "not recorded"):
        return False, "probe failed: exit %s, %s" % (out.returncode, (out.stderr.strip().splitlines() or [""])[-1])
    answer = (True, "recorded") if out.stdout.strip() == "recorded" else (
        False, "torch's default buffer size is 0 here")
    try:
        kept = kept if isinstance(kept, dict) else {}
        kept[key] = list(answer)
        tmp = "%s.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            _json.dump(kept, f)
        os.replace(tmp, path)
    except (IOError, OSError):
        pass
    return answer


def fr_status():
    """{pg_id: (last_enqueued, last_completed)} from the flight recorder, without entries (cheap)."""
    from torch._C import _distributed_c10d as C
    return parse_status(C._dump_fr_trace_json(includeCollectives=False))


def parse_status(raw):
    """{pg_id: (last_enqueued, last_completed)} of a recorder dump's ``pg_status`` (JSON bytes or str)."""
    import json as _json
    st = _json.loads(raw).get("pg_status") or {}
    out = {}
    for k, v in st.items():
        try:
            out[str(k)] = (int(v.get("last_enqueued_collective", -1)), int(v.get("last_completed_collective", -1)))
        except (TypeError, ValueError, AttributeError):
            continue
    return out


class _PlainUnpickler(object):
    """Loads torch's own pickled recorder dump (bytes its C++ made in this process) as plain dicts, lists and
    scalars: any class or function named in it is refused, so nothing but data is ever built."""

    @staticmethod
    def loads(raw):
        import io
        import pickle

        class Plain(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError("not plain data: %s.%s" % (module, name))

        return Plain(io.BytesIO(raw)).load()


def _dump_entries(pickled, as_json, **kw):
    """A recorder's entries (no stack frames): its pickled dump where torch has one (half the time of the JSON
    dump, which holds the GIL as long: 29 against 62 ms for 2,000 gloo entries, and 9 against 27 ms to load;
    torch 2.13, benchmarks/fr_reads.py), else its JSON one."""
    import json as _json
    from torch._C import _distributed_c10d as C
    fn = getattr(C, pickled, None) if pickled else None
    if fn is not None:
        try:
            doc = _PlainUnpickler.loads(fn(includeCollectives=True, includeStackTraces=False, **kw))
            return doc.get("entries") or [] if isinstance(doc, dict) else []
        except TypeError:  # a release whose pickled dump takes other arguments: the JSON one
            pass
    return _json.loads(getattr(C, as_json)(includeCollectives=True, **kw)).get("entries") or []


def fr_entries():
    """The gloo flight recorder's whole buffer of entries as plain dicts (no stack frames)."""
    return _dump_entries("_dump_fr_trace", "_dump_fr_trace_json")


# -- NCCL -----------------------------------------------------------------------------------------------
# Read in torch's source (docs/sources.md, "NCCL"): the legacy ProcessGroupNCCL records every work it
# enqueues in its own flight recorder (a singleton apart from gloo's), readable as JSON from 2.5
# (``_dump_nccl_trace_json``); its ``pg_status`` is keyed by the backend's ``uid`` (``local_id_``) and
# numbers collectives by torch's own collective counter (``seqCollective_``, the number torch's NCCL
# timeout messages give as ``SeqNum``).  Its buffer is 0 (off) by default through 2.10 and 2000 from 2.11;
# the size is read when the recorder is first used.  ProcessGroupNCCL2 (the default ``nccl`` from 2.15,
# opt-in from 2.14) is recorded by a FlightRecorderHook that torch attaches to each group, read with
# ``_dump_fr_trace_json(backend="nccl2")``; its pg_status counts every op (p2p too) with one counter.
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


# torch's op names (HookOpName of the pre/post hooks, flight-recorder profiling names, c10d OpType strings)
# -> the observer's op names (channel.OPS)
OP_ALIASES = {
    "allreduce": "all_reduce", "allgather": "all_gather", "allgather_base": "all_gather_into_tensor",
    "_allgather_base": "all_gather_into_tensor", "allgather_coalesced": "all_gather_coalesced",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor_coalesced",
    "allreduce_coalesced": "all_reduce_coalesced", "alltoall": "all_to_all", "alltoall_base": "all_to_all_single",
    "reduce_scatter_base": "reduce_scatter_tensor", "_reduce_scatter_base": "reduce_scatter_tensor",
    "recvanysource": "recv_anysource", "_reduce_oop": "reduce", "_broadcast_oop": "broadcast",
    "_all_gather_base": "all_gather_into_tensor", "all_reduce_barrier": "barrier",
}
# ProcessGroupNCCL's name for a coalesced block of one collective kind: "nccl:" + its OpType + "_coalesced"
_NCCL_COALESCED = {"ALLGATHER": "all_gather_into_tensor_coalesced", "REDUCE_SCATTER": "reduce_scatter_tensor_coalesced",
                   "ALLREDUCE": "all_reduce_coalesced"}


def op_name(torch_name):
    """Normalise one of torch's op names (``ALLREDUCE``, ``gloo:all_reduce``, ``nccl:_allgather_base``,
    ``nccl:send 0->1``, ``nccl:ALLGATHER_coalesced``) to the name users write."""
    n = str(torch_name)
    if ":" in n:
        n = n.split(":", 1)[1].split(" ", 1)[0]  # "send 0->1": the peers are the stream's business
    else:
        n = n.split(".")[-1]
    if n.endswith("_coalesced") and n[:-len("_coalesced")] in _NCCL_COALESCED:
        return _NCCL_COALESCED[n[:-len("_coalesced")]]
    n = n.lower()
    return OP_ALIASES.get(n, n)


def entry_op(e):
    """The op of a flight-recorder entry, as users write it (``all_gather_into_tensor``, not
    ``nccl:_all_gather_base``; ``all_to_all_single`` where NCCL names both all_to_all variants alike)."""
    op = op_name(e.get("profiling_name", "") or "unknown")
    if op == "all_to_all" and len(e.get("input_sizes") or ()) == 1 and "nccl" in str(e.get("profiling_name")):
        op = "all_to_all_single"
    return op


def entry_size(e):
    """``"<numel> x <dtype>"`` of a flight-recorder entry's tensor that must agree across ranks (SIZE_TENSOR),
    or None: what the verdict compares to find a desync."""
    side = SIZE_TENSOR.get(entry_op(e), (None,))[0]
    tensor = entry_tensor(e, side) if side is not None else None
    return "%d x %s" % tensor if tensor else None


def entry_tensor(e, side="in"):
    """(numel, dtype name as in channel.DTYPES) of a flight-recorder entry's first input (``side="in"``) or
    output tensor, or None.  The dtype falls back to the other side's (recorded readings lack
    ``output_dtypes``; a collective's tensors share one dtype)."""
    from . import channel as _ch
    which = "input" if side == "in" else "output"
    other = "output" if side == "in" else "input"
    sizes = e.get(which + "_sizes") or []
    dtypes = e.get(which + "_dtypes") or e.get(other + "_dtypes") or []
    if not sizes or not isinstance(sizes[0], list) or not dtypes:
        return None
    numel = 1
    for n in sizes[0]:
        numel *= int(n)
    return numel, _ch.SCALAR_TYPES.get(str(dtypes[0]), str(dtypes[0]).lower())


def find_group(name):
    """The ProcessGroup torch registered under ``name`` (the group name every rank agrees on), or None."""
    names, _, _ = _world_maps()
    for pg, n in list(names.items()):
        if n == name:
            return pg
    return None


def all_groups():
    """Every ProcessGroup torch has registered in this process."""
    names, _, pg_map = _world_maps()
    seen = list(pg_map) if pg_map else []
    for pg in names:
        if pg not in seen:
            seen.append(pg)
    return seen


def _hooks_module_name():
    for name in ("torch.distributed.hooks", "torch.distributed._hooks"):
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        if hasattr(mod, "register_collective_start_hook") and hasattr(mod, "register_collective_end_hook"):
            return name
    return None


def _ddp_class():
    try:
        from torch.nn.parallel import DistributedDataParallel
    except Exception:
        return None
    return DistributedDataParallel


def work_class():
    from torch._C import _distributed_c10d as C
    return getattr(C, "Work", None) or C.ProcessGroup.Work


def process_group_class():
    from torch._C import _distributed_c10d as C
    return C.ProcessGroup


def c10d_module():
    return _c10d()


def ddp_class():
    return _ddp_class()


def _world_maps():
    """(pg_names, pg_group_ranks, pg_map) of torch's group registry, in any release."""
    d = _c10d()
    world = getattr(d, "_world", None)
    if world is not None:
        return world.pg_names, world.pg_group_ranks, world.pg_map
    return getattr(d, "_pg_names", {}), getattr(d, "_pg_group_ranks", {}), getattr(d, "_pg_map", {})


def default_group():
    d = _c10d()
    try:
        if not d.is_initialized():
            return None
        return d._get_default_group()
    except Exception:
        return None


def describe_group(pg):
    """What identifies a group on every rank: {"group", "name", "ranks", "backend"} (ranks are global)."""
    names, group_ranks, pg_map = _world_maps()
    name = names.get(pg)
    if name is None:
        name = getattr(pg, "group_name", None) if not callable(getattr(pg, "group_name", None)) else None
    is_default = pg is default_group()
    ranks = group_ranks.get(pg)
    if ranks:
        ranks = [g for g, _ in sorted(ranks.items(), key=lambda kv: kv[1])]
    elif is_default or ranks is None:
        try:
            ranks = list(range(pg.size())) if is_default else None
        except Exception:
            ranks = None
    backend = None
    entry = pg_map.get(pg)
    if entry:
        backend = str(entry[0]) if not isinstance(entry, str) else entry
    if backend is None:
        try:
            backend = str(_c10d().get_backend(pg))
        except Exception:
            backend = "unknown"
    gid = name if name else ("default" if is_default else "unnamed")
    return {"group": str(gid), "name": name or "", "ranks": ranks, "backend": backend.lower(),
            "size": _safe(pg.size), "group_rank": _safe(pg.rank), "torch_timeout_s": group_timeout(pg)}


def group_timeout(pg):
    """The timeout torch applies to a group's collectives, in seconds, or None where torch does not say.

    Torch 2.0+ keeps it in the backend's options (``pg._get_backend(device).options._timeout``); 1.x keeps
    it in C++ only.  A group made by ``new_group`` without ``timeout=`` has torch's default (30 min, or
    10 min for NCCL), not the world group's.
    """
    get = getattr(pg, "_get_backend", None)
    if get is None:
        return None
    import torch
    for dev in ("cpu", "cuda"):
        try:
            t = get(torch.device(dev)).options._timeout
            return float(t.total_seconds())
        except Exception:
            continue
    return None


def backend_name(pg):
    """The backend of a group, also while torch is still registering it ("gloo", "nccl", ...)."""
    _, _, pg_map = _world_maps()
    entry = pg_map.get(pg)
    if entry:
        return (str(entry[0]) if not isinstance(entry, str) else entry).lower()
    for attr in ("name", "getBackendName"):
        try:
            return str(getattr(pg, attr)()).lower()
        except Exception:
            continue
    return "unknown"


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def rank_and_world():
    """The global rank and world size once the default group exists; else from torchrun's variables."""
    pg = default_group()
    if pg is not None:
        return pg.rank(), pg.size()
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return -1, -1


def hostname():
    return socket.gethostname()


# The functional collectives' ops (torch 2.3+ runs them in C++): op name -> (the op as the channel names
# it, the index of the tensor whose dtype and size must agree across ranks, or None)
FUNCOL_OPS = (
    ("_c10d_functional", "all_reduce", "all_reduce", 0),
    ("_c10d_functional", "all_reduce_", "all_reduce", 0),
    ("_c10d_functional", "all_reduce_coalesced", "all_reduce_coalesced", None),
    ("_c10d_functional", "all_reduce_coalesced_", "all_reduce_coalesced", None),
    ("_c10d_functional", "all_gather_into_tensor", "all_gather_into_tensor", 0),
    ("_c10d_functional", "all_gather_into_tensor_out", "all_gather_into_tensor", 0),
    ("_c10d_functional", "all_gather_into_tensor_coalesced", "all_gather_into_tensor_coalesced", None),
    ("_c10d_functional", "reduce_scatter_tensor", "reduce_scatter_tensor", None),
    ("_c10d_functional", "reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced", None),
    ("_c10d_functional", "all_to_all_single", "all_to_all_single", None),
    ("_c10d_functional", "broadcast", "broadcast", 0),
    ("_c10d_functional", "broadcast_", "broadcast", 0),
    ("_c10d_functional_autograd", "all_gather_into_tensor", "all_gather_into_tensor", 0),
    ("_c10d_functional_autograd", "reduce_scatter_tensor", "reduce_scatter_tensor", None),
    ("_c10d_functional_autograd", "all_to_all_single", "all_to_all_single", None),
)


def _op_packet(ns_name, name):
    """(the op's OpOverloadPacket, its argument names), or None.  A packet's ``__call__`` calls its
    ``_op`` attribute (torch/_ops.py, 2.3 to 2.15), which is what the observer wraps: the packet itself,
    which compiled graphs and torch's own code refer to, stays as it is."""
    import torch
    try:
        packet = getattr(getattr(torch.ops, ns_name), name)
        args = [a.name for a in packet.default._schema.arguments]
        if not callable(vars(packet).get("_op")):
            return None
    except Exception:  # the op or its namespace does not exist in this release
        return None
    return packet, args


def funcol_ops():
    """The native functional collectives of this torch, probed (never by version): ``(wait_tensor's
    packet, [(packet, op, channel op, group_name index, size index)], is_compiling)``, or None where there
    are none (before 2.3, or where ``wait_tensor`` is missing)."""
    wait = _op_packet("_c10d_functional", "wait_tensor")
    if wait is None:
        return None
    ops = []
    for ns_name, name, op_name, size_index in FUNCOL_OPS:
        found = _op_packet(ns_name, name)
        if found is None or "group_name" not in found[1]:
            continue
        ops.append((found[0], "%s.%s" % (ns_name, name), op_name, found[1].index("group_name"), size_index))
    return (wait[0], ops, _is_compiling()) if ops else None


def funcol_kind():
    """How this torch runs the functional collectives: "native" (the public API calls the C++ ops of
    ``torch.ops._c10d_functional``, 2.3+), "python" (through torch.distributed: 2.1, and 2.2, whose C++ ops
    exist but which the public API does not call), or None (none)."""
    try:
        fc = importlib.import_module("torch.distributed._functional_collectives")
    except Exception:
        return None
    return "native" if funcol_ops() is not None and _funcol_api_native(fc) else "python"


def _funcol_api_native(fc):
    """Whether ``funcol.all_reduce`` calls the native ops: its code names ``_c10d_functional`` (2.3+; 2.2
    names only the Python-implemented ``c10d_functional``), and torch's own switch, where it has one
    (``native_funcol_enabled``, off with TORCH_DISABLE_NATIVE_FUNCOL=1 on some releases), is on."""
    code = getattr(getattr(fc, "all_reduce", None), "__code__", None)
    if code is None or "_c10d_functional" not in code.co_names:
        return False
    for owner in (fc, sys.modules.get("torch.distributed._functional_collectives_impl")):
        switch = getattr(owner, "native_funcol_enabled", None)
        if callable(switch):
            try:
                return bool(switch())
            except Exception:
                return True
    return True


def _is_compiling():
    """torch.compiler.is_compiling (2.3+), else the older private names; a function returning False where
    none exists."""
    import torch
    for owner, name in (("compiler", "is_compiling"), ("_dynamo", "is_compiling"), ("_utils", "is_compiling")):
        try:
            fn = getattr(getattr(torch, owner), name)
        except Exception:
            continue
        if callable(fn):
            return fn
    return lambda: False
