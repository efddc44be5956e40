"""Write compat/expected/torch<M><m>.json: the capabilities the installed torch line is expected to show.

    python compat/record_expected.py          # in an env with the torch line installed

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
    # how NCCL groups are followed (compat.nccl_probe): a CPU wheel has no NCCL, so per build too
    for name in ("nccl", "nccl_plan"):
        per_build = dict((previous or {}).get(name) or {})
        per_build[build()] = caps[name]
        out[name] = per_build
    return out


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
    main()
