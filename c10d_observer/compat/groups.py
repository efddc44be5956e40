"""torch's process groups and classes: the group registry in any release (find a group by name, every
group, what identifies one on every rank, its timeout and backend), this rank and the world size, and the
classes and modules the sources wrap.  Part of ``compat``: callers read these names through
``c10d_observer.compat``."""
import importlib
import os
import socket


def _c10d():
    return importlib.import_module("torch.distributed.distributed_c10d")


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
