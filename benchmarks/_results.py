"""Shared by the benchmark scripts: where results go and how they are written."""
import json
import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def write_json(path, obj):
    """Write ``obj`` as JSON to ``path`` (its folder is created) and say so."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    print("wrote %s" % path)
