"""The table of what source="auto" adds to a 4-byte gloo all_reduce on each torch line, in instructions
counted by callgrind (``PROFILE=1 bash .ci/matrix`` writes ``results/callpath/<env>.json``, one
``callpath_profile.py --configs observer:auto`` per line, under torch's defaults).

    python benchmarks/callpath_lines.py        # markdown, oldest line first

Targets (issue 14): nothing per call where a recorder makes the events; under 3 µs per call for the patch
source, under 1 µs added to torch's own hook cost for pg_hooks.  Instructions are not microseconds: the
patch source's +14,400 instructions took 1.5 µs per call in a tight loop and 4-13 µs in context on the
2-core VM (docs/cost.md), where caches are cold between collectives.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = {"flight_recorder": "0 (recorder)", "patch": "< 3 µs", "pg_hooks": "< 1 µs over torch's hooks",
          "hooks": "0"}


def rows(directory):
    out = []
    for fname in os.listdir(directory):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(directory, fname)) as f:
            r = json.load(f)
        v = r["torch_version"].split("+")[0]
        out.append((tuple(int(p) for p in v.split(".")[:3]), r))
    out.sort(key=lambda x: x[0])
    return [r for _, r in out]


def markdown(results):
    lines = ["| torch | Python | auto: gloo collectives by | baseline instructions per call | added by auto | target |",
             "|---|---|---|---|---|---|"]
    for r in results:
        auto = r.get("auto") or {}
        added = (r.get("added_per_call") or {}).get("observer:auto")
        lines.append("| %s | %s | `%s` | %s | %s | %s |" % (
            r["torch_version"], r["python_version"], auto.get("gloo_collectives"),
            "{:,.0f}".format(r["instructions_per_call"]["baseline"]),
            "?" if added is None else "{:+,.0f}".format(added), TARGET.get(auto.get("source"), "")))
    return "\n".join(lines)


def main(argv=None):
    directory = os.path.join(HERE, "results", "callpath")
    if not os.path.isdir(directory):
        sys.stderr.write("no %s: run PROFILE=1 bash .ci/matrix first\n" % directory)
        return 2
    print(markdown(rows(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
