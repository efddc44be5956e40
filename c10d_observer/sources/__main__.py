"""python -m c10d_observer.sources --rows | --lines: the dispatch table's rows (docs/sources.md) or auto's
plan per torch line as compat/expected records it (docs/support.md); tests/unit/test_dispatch_table.py holds
both files to this output."""
import os
import sys

from . import table


def main(argv):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if argv == ["--rows"]:
        print(table.coverage_markdown())
    elif argv == ["--lines"]:
        print(table.lines_markdown(table.expected_plans(os.path.join(repo, "compat", "expected"))))
    else:
        sys.stderr.write("usage: python -m c10d_observer.sources --rows | --lines\n")
        return 2
    return 0


raise SystemExit(main(sys.argv[1:]))
