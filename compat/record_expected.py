"""Write compat/expected/torch<M><m>.json: the capabilities the installed torch line is expected to show.

    python compat/record_expected.py          # in an env with the torch line installed
    python compat/record_expected.py --replan # every record's auto_plan again, from its recorded capabilities
                                              # (after a change to the dispatch table; no torch needed)

Review the diff before committing it: this file is what tests/unit/test_compat_expected.py holds the
probes to, so recording a wrong probe's answer would hide it.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import c10d_observer  # noqa: E402
from c10d_observer import compat  # noqa: E402


def line_key(version):
    rel = compat.release(version) or (0, 0)
    return "torch%d%d" % (rel[0], rel[1])


# Features that depend on the build (CUDA or CPU wheel) rather than the release: recorded per build, as
# are the NCCL probes and plan ("nccl", "nccl_plan").
BUILD_FEATURES = ("nccl_trace",)


def build():
    import torch
    return "cuda" if torch.version.cuda else "cpu"


def expected_record(caps, previous=None):
    feats = dict(caps["features"])
    for name in BUILD_FEATURES:
        per_build = dict((previous or {}).get("features", {}).get(name) or {})
        per_build[build()] = feats[name]
        feats[name] = per_build
    out = {"torch_version": caps["torch_version"], "features": feats, "auto": caps["auto"],
           "usable_sources": sorted(s for s, r in caps["sources"].items() if r["usable"]),
           "funcol": caps.get("funcol")}
    # how NCCL groups are followed (compat.nccl_probe) and so auto's plan: a CPU wheel has no NCCL, so
    # per build too
    for name, value in (("nccl", caps["nccl"]), ("nccl_plan", caps["nccl_plan"]),
                        ("auto_plan", (caps.get("auto_plan") or {}).get("cells"))):
        per_build = dict((previous or {}).get(name) or {})
        per_build[build()] = value
        out[name] = per_build
    return out


def recorded_caps(record, build_name):
    """The capabilities record the dispatch table needs, as a recorded line holds it for one build."""
    if "funcol" not in record:
        raise SystemExit("%s: no 'funcol' recorded: record the line in its tox env first" % record["torch_version"])
    return {"sources": {s: {"usable": s in record["usable_sources"], "reason": "recorded"}
                        for s in ("hooks", "pg_hooks", "flight_recorder", "patch")},
            "funcol": record["funcol"], "nccl_plan": record["nccl_plan"][build_name],
            "nccl": record["nccl"][build_name]}


def replan():
    """auto's plan of every record, from the capabilities it records (sources/table.py is pure)."""
    from c10d_observer.sources import table
    directory = os.path.join(HERE, "expected")
    for fname in sorted(os.listdir(directory)):
        path = os.path.join(directory, fname)
        with open(path) as f:
            record = json.load(f)
        plans = {}
        for build_name in sorted(record["nccl_plan"]):
            plan = table.Plan(recorded_caps(record, build_name), None)
            plans[build_name] = plan.view()["cells"]
            if build_name == "cuda" or "cuda" not in record["nccl_plan"]:
                record["auto"] = plan.main_source()
        record["auto_plan"] = plans
        with open(path, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        print("replanned %s" % path)


def main():
    caps = c10d_observer.capabilities()
    path = os.path.join(HERE, "expected", line_key(caps["torch_version"]) + ".json")
    previous = None
    if os.path.exists(path):
        with open(path) as f:
            previous = json.load(f)
    with open(path, "w") as f:
        json.dump(expected_record(caps, previous), f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s" % path)


if __name__ == "__main__":
    if sys.argv[1:] == ["--replan"]:
        replan()
    else:
        main()
