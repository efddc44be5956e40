"""The only module that knows torch releases: probes the installed torch and returns a capabilities record.

Features are probed (``hasattr``, imports); the version string is recorded but never decides alone
(``2.6.0a0+nv...`` builds exist).  Everything that reads torch's private state (group names, ranks,
backends) lives here too, so that a torch change is mended in one place.

This is the package's face: callers read every name through it (``compat.X``), so a test that stands in for
torch patches it here.  Here: the release (``release``, ``probe``, ``recorder_on_before_init``); in its
rooms: ``ops`` (torch's op methods and names, what a recorder entry says), ``fr`` (the flight recorder:
its variables, whether it records, its dumps), ``nccl`` (the NCCL recorders and backends), ``groups``
(the group registry, this rank, the classes the sources wrap), ``funcol`` (the functional collectives).
"""
import os

from packaging.version import Version, InvalidVersion

from .fr import FR_ENV, fr_buffer_env, fr_entries, fr_recording, fr_status, parse_status
from .funcol import FUNCOL_OPS, funcol_kind, funcol_ops
from .groups import (_c10d, _ddp_class, _hooks_module_name, all_groups, backend_name, c10d_module, ddp_class,
                     default_group, describe_group, find_group, group_timeout, hostname, process_group_class,
                     rank_and_world, work_class)
from .nccl import (NCCL_TRACE_ENV, NCCL_TRACE_SIZE, RecorderOn, _nccl_plan, cuda_backend, fr_hooked,
                   nccl2_active_entries, nccl2_entries, nccl2_status, nccl_active_entries, nccl_entries, nccl_kind,
                   nccl_probe, nccl_status, nccl_uid, torch_seq)
from .ops import (COMPOSITE_APIS, OP_ALIASES, P2P_METHODS, PG_METHODS, ROOT_ARG, SIZE_TENSOR, dtype_codes, entry_op,
                  entry_size, entry_tensor, op_name)

__all__ = [
    "COMPOSITE_APIS", "FR_ENV", "FR_OFF_BY_DEFAULT", "FUNCOL_OPS", "NCCL_TRACE_ENV", "NCCL_TRACE_SIZE", "OP_ALIASES",
    "P2P_METHODS", "PG_METHODS", "ROOT_ARG", "RecorderOn", "SIZE_TENSOR", "SOURCES", "all_groups", "backend_name",
    "c10d_module", "cuda_backend", "ddp_class", "default_group", "describe_group", "dtype_codes", "entry_op",
    "entry_size", "entry_tensor", "find_group", "fr_buffer_env", "fr_entries", "fr_hooked", "fr_recording",
    "fr_status", "funcol_kind", "funcol_ops", "group_timeout", "hostname", "nccl2_active_entries", "nccl2_entries",
    "nccl2_status", "nccl_active_entries", "nccl_entries", "nccl_kind", "nccl_probe", "nccl_status", "nccl_uid",
    "op_name", "parse_status", "probe", "process_group_class", "rank_and_world", "recorder_on_before_init",
    "release", "torch_seq", "work_class",
]

SOURCES = ("hooks", "pg_hooks", "flight_recorder", "patch")  # what source= accepts (sources/table.py ranks them)


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
