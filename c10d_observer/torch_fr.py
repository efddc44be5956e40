"""torch's own flight-recorder dumps, in JSON, as input to the verdict (``report DIR``).  No torch here.

A dump (``torch._C._distributed_c10d._dump_fr_trace_json()`` or ``_dump_nccl_trace_json()``, one per
rank, saved to a file) holds ``pg_status`` (per group: last enqueued and last completed collective) and
``entries`` (op, sizes, creation time, retired, timeout).  Each becomes a state document like the
watchdog's: per group, the last call started and completed and the call in flight with its op and start
time.  Dumps written as pickles (torch's default for its dump-on-timeout files) are named, never read.

The rank is the dump's ``rank`` field, else the number at the end of the file name
(``nccl_trace_rank_3``, ``fr_rank3.json``), else the one rank of a single-rank job's default group
(``pg_config``).  The verdict calls every call in flight in a dump stuck: a dump is taken when something
hangs and has no observer timeout to compare with.

A dump carries no time of its own (no version of torch writes one), and a file's mtime is when it was
last copied, not when torch wrote it.  The dump's time is therefore the newest time torch wrote into it
(an entry created, seen started or seen completed): torch took the dump no earlier, so a call's age
measured from it is a lower bound, and reports say "at least".  The file's mtime is kept beside it.
"""
import json
import os
import re

from . import compat
from . import documents as _documents
from . import dumpdir as _dumpdir

KIND = "torch_fr_dump"
MAX_BYTES = 256 * 1024 * 1024


def load_dir(directory):
    """(state documents converted from the JSON dumps in ``directory``, problems)."""
    docs, problems = [], []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if _dumpdir.is_ours(name) or not os.path.isfile(path):
            continue
        try:
            if os.path.getsize(path) > MAX_BYTES:
                continue
            with open(path, "rb") as f:
                head = f.read(1)
                if head == b"\x80":  # pickle protocol 2+: torch's default dump format
                    problems.append("%s looks like a pickled flight-recorder dump: not read (pickles are never "
                                    "loaded; dump JSON with _dump_fr_trace_json / _dump_nccl_trace_json)" % path)
                    continue
                if head.strip() != b"{":
                    continue
                d = json.loads((head + f.read()).decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not isinstance(d, dict) or "pg_status" not in d or "entries" not in d:
            continue
        try:
            docs.append(_documents.RankDoc.from_json(to_state(d, path), path))
        except ValueError as e:
            problems.append(str(e))
    if docs:
        world = max([d.rank + 1 for d in docs] + [d.world_size or 0 for d in docs])
        # the world group's ranks: gloo dumps name none
        docs = [d._replace(world_size=world, groups=tuple(
            g._replace(ranks=tuple(range(world))) if g.ranks is None and g.group == "0" else g for g in d.groups))
            for d in docs]
    return docs, problems


def dump_time(d):
    """The newest time (s since the epoch) torch wrote into a dump, or None: the dump is no older."""
    newest = 0
    for e in d.get("entries") or []:
        if isinstance(e, dict):
            for key in ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns"):
                try:
                    newest = max(newest, int(e.get(key) or 0))
                except (TypeError, ValueError):
                    continue
    return newest / 1e9 if newest else None


def _rank(d, path, config):
    if isinstance(d.get("rank"), int):
        return d["rank"]
    m = re.search(r"(\d+)(?:\.json)?$", os.path.basename(path))
    if m:
        return int(m.group(1))
    world = _ranks((config.get("0") or {}).get("ranks"))
    if world is not None and len(world) == 1:  # a one-rank job: its default group names the rank
        return world[0]
    raise ValueError("%s: a flight-recorder dump with no rank (no 'rank' field, no number at the end of the "
                     "file name, and more than one rank in its default group): name it <anything>_rank<N>.json"
                     % path)


def to_state(d, path):
    config = d.get("pg_config") if isinstance(d.get("pg_config"), dict) else {}
    rank = _rank(d, path, config)
    by_pg = {}
    for e in d.get("entries") or []:
        if isinstance(e, dict) and not e.get("is_p2p"):
            by_pg.setdefault(str(e.get("pg_id")), []).append(e)
    groups, world = [], None
    for pg_id, st in sorted((d.get("pg_status") or {}).items()):
        try:
            enq = int(st.get("last_enqueued_collective", -1))
            comp = int(st.get("last_completed_collective", -1))
        except (TypeError, ValueError, AttributeError):
            continue
        entries = sorted(by_pg.get(str(pg_id), []), key=lambda e: int(e.get("op_id", -1)))
        name = str(pg_id)
        if entries and entries[0].get("process_group"):
            name = str(entries[0]["process_group"][0])
        ranks = _ranks((config.get(name) or config.get(str(pg_id)) or {}).get("ranks"))
        if name == "0" and ranks:
            world = len(ranks)
        by_op = {int(e.get("op_id", -1)): e for e in entries}
        # gloo's last_completed can lag behind (its worker threads each write the work they finished)
        while comp + 1 <= enq and (by_op.get(comp + 1) or {}).get("retired"):
            comp += 1
        g = {"group": name, "stream": name, "kind": "collective", "ranks": ranks,
             "backend": _backend(entries), "peer": None, "src": None, "dst": None,
             "last_started": max(enq, 0), "last_completed": max(comp, 0), "ring_overflow": 0,
             "recent_ops": [[k, _op(by_op[k]), _size(by_op[k]), _created(by_op[k])] for k in sorted(by_op)[-16:]]}
        if comp < enq:
            e = by_op.get(comp + 1) or {}
            g["in_flight_seq"] = comp + 1
            g["in_flight_op"] = _op(e) if e else "unknown"
            g["in_flight_api"] = ""
            g["in_flight_size"] = _size(e)
            # dated by its entry; a call enqueued before its entry was written is dated by the newest entry
            # (a dump lists what is in flight: no call in it is younger than the dump)
            created = [int(x.get("time_created_ns") or 0) for x in ([e] if e else entries)]
            g["in_flight_since"] = max(created) / 1e9 if created and max(created) else None
            if e.get("timeout_ms"):
                g["torch_timeout_s"] = int(e["timeout_ms"]) / 1000.0
            if g["backend"] == "nccl" and e.get("state") in _documents.GPU_STATES:
                # NCCL's own view of the call on the GPU; "started" needs start events (TORCH_NCCL_ENABLE_TIMING):
                # without them no entry ever reads "started" and no start time is written
                g["in_flight_gpu_state"] = e["state"]
                g["gpu_timing"] = _timing(d, entries)
        else:
            g["in_flight_seq"] = None
        groups.append(g)
    mtime = os.path.getmtime(path)
    taken = dump_time(d)
    return {"format": _documents.FORMAT, "version": _documents.VERSION, "kind": KIND, "rank": rank,
            "world_size": world, "host": d.get("host"), "pid": d.get("pid"), "job_id": KIND,
            "written_at": taken if taken is not None else mtime, "ages_at_least": taken is not None,
            "file_mtime": mtime, "groups": groups, "alive": True, "frozen": False,
            "config": {"timeout": 0}, "source": "torch flight-recorder dump (version %s)" % d.get("version")}


def _timing(d, entries):
    """Whether NCCL recorded start events in this dump: a start time in an entry, or a group's
    ``last_started_collective`` past -1 (it stays -1 with timing off, ../shared/gpu-facts.md)."""
    if any(int(x.get("time_discovered_started_ns") or 0) for x in entries):
        return True
    for st in (d.get("pg_status") or {}).values():
        try:
            if int(st.get("last_started_collective", -1)) >= 0:
                return True
        except (TypeError, ValueError, AttributeError):
            continue
    return False


def _ranks(value):
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return [int(r) for r in value] if isinstance(value, list) and value else None


def _op(e):
    return compat.entry_op(e)


def _size(e):
    """``"<numel> x <dtype>"`` of an entry's tensor that must agree across ranks, or None."""
    return compat.entry_size(e)


def _created(e):
    try:
        t = int(e.get("time_created_ns") or 0)
    except (TypeError, ValueError):
        return None
    return t / 1e9 if t else None


def _backend(entries):
    for e in entries:
        name = str(e.get("profiling_name", ""))
        if ":" in name:
            return name.split(":", 1)[0]
    return None
