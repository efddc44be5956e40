"""The merging node's own work, offline: read every answer, judge, write the verdict, on a dump_dir that
``benchmarks/scale.py --keep DIR`` copied from its merging node (at 16,384 ranks 2,047 other nodes' bundles
of states and the node's own eight).  Timed as a real merging watchdog runs it: the answers read as its scans
read them (``GatherFiles.scan``: ``documents.load`` of each file), ``verdict.load_docs`` of those, the
analysis and the write; each ``--repeat`` times in a fresh copy of the directory under /dev/shm, with the
cyclic collector on (a Python process as it starts) and off (as ``collector_paused`` runs the watchdog's
scan and merge since 2026-12-02; scale.py's harness runs with it off throughout).  Imports no torch.

    python benchmarks/scale.py --ranks 16384 --scenario cascade --keep /tmp/kept16k
    python benchmarks/merge_offline.py /tmp/kept16k [--repeat 3] [--json results/merge_offline_16384_cascade.json]

Each phase's time is the median of the repeats; the verdict's SHA-1 (its JSON, keys sorted) says the
verdicts of two versions are the same.
"""
import argparse
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import machine, median, today, write_json  # noqa: E402
from c10d_observer import arrivals as _arrivals  # noqa: E402
from c10d_observer import documents as _documents  # noqa: E402
from c10d_observer import dumpdir as _dumpdir  # noqa: E402
from c10d_observer import verdict as _verdict  # noqa: E402

PHASES = ("read", "load_docs", "analyze", "write")


def once(kept, gid, world_size, collector):
    """One merge in a fresh copy of ``kept``: {phase: seconds}, and the verdict."""
    work = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        for name in os.listdir(kept):
            if not name.startswith("verdict"):
                shutil.copy(os.path.join(kept, name), work)
        dd = _dumpdir.DumpDir(work)
        gc.collect()
        (gc.enable if collector else gc.disable)()
        t = [time.perf_counter()]
        loaded = {}
        for p in dd.glob(_dumpdir.STATE_GLOB) + dd.glob(_dumpdir.END_GLOB) + dd.glob(_dumpdir.NODE_GLOB):
            st = os.stat(p)
            loaded[p] = ((st.st_mtime_ns, st.st_size), _documents.load(p))
        t.append(time.perf_counter())
        docs, _ = _verdict.load_docs(work, gather_id=gid, loaded=loaded)
        t.append(time.perf_counter())
        v = _verdict.analyze(docs, world_size=world_size, stragglers=_arrivals.read(work))
        t.append(time.perf_counter())
        _verdict.write(dd, v, docs)
        t.append(time.perf_counter())
        return {k: t[i + 1] - t[i] for i, k in enumerate(PHASES)}, v
    finally:
        gc.enable()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kept", help="a merging node's dump_dir, as scale.py --keep copied it")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat: a count of 1 or more, got %d" % a.repeat)
    req = _dumpdir.read_json(os.path.join(a.kept, _dumpdir.GATHER))
    if not isinstance(req, dict) or "id" not in req:
        ap.error("%s holds no gather request (%s): not a merging node's dump_dir kept by scale.py --keep"
                 % (a.kept, _dumpdir.GATHER))
    rows = []
    for collector in (True, False):
        runs, v = [], None
        for _ in range(a.repeat):
            took, v = once(a.kept, req["id"], req.get("world_size"), collector)
            runs.append(took)
        row = {"collector": "on" if collector else "off", "repeat": a.repeat}
        row.update({k: round(median([r[k] for r in runs]), 3) for k in PHASES})
        row["total"] = round(sum(row[k] for k in PHASES), 3)
        row["verdict_sha1"] = hashlib.sha1(json.dumps(v.to_json(), sort_keys=True).encode("utf-8")).hexdigest()
        row["summary"] = v.summary
        rows.append(row)
        print("collector %-3s  read %.3f  load_docs %.3f  analyze %.3f  write %.3f  total %.3f s  (median of %d)"
              % (row["collector"], row["read"], row["load_docs"], row["analyze"], row["write"], row["total"],
                 a.repeat))
    print("verdict SHA-1 %s: %s" % (rows[0]["verdict_sha1"], rows[0]["summary"][:160]))
    if a.json:
        write_json(a.json, {"benchmark": "merge_offline", "date": today(), "machine": machine(),
                            "kept": os.path.abspath(a.kept), "world_size": req.get("world_size"),
                            "gather_id": req["id"], "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
