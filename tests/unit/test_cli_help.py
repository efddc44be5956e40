"""The CLI's help and docs/usage.md say the same thing: every command and every option the parser has is in
the commands table of docs/usage.md, and the table names none the parser lacks."""
import argparse
import os
import re

from c10d_observer import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _table_rows():
    with open(os.path.join(ROOT, "docs", "usage.md")) as f:
        return [line for line in f if re.match(r"^\| `(\w+|--version)", line)]


def _cell(row):
    return re.split(r"(?<!\\)\|", row)[1]  # the first cell; "\\|" inside it is markdown's escaped bar


def _parsers():
    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return p, sub.choices


def test_every_command_and_option_of_the_parser_is_in_the_docs_table():
    rows = _table_rows()
    _, commands = _parsers()
    missing = []
    for name, parser in commands.items():
        mine = [_cell(r) for r in rows if r.startswith("| `%s" % name)]
        if not mine:
            missing.append(name)
            continue
        for action in parser._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help" and not any(opt in m for m in mine):
                    missing.append("%s %s" % (name, opt))
    assert not missing, "in the parser, not in docs/usage.md's table: %s" % missing


def test_the_docs_table_names_no_option_the_parser_lacks():
    rows = _table_rows()
    _, commands = _parsers()
    extra = []
    for row in rows:
        cell = _cell(row)
        name = cell.strip(" `").split()[0]
        if name not in commands:
            continue
        known = {o for a in commands[name]._actions for o in a.option_strings}
        extra += ["%s %s" % (name, o) for o in re.findall(r"(--[a-z][a-z-]*)", cell) if o not in known]
    assert not extra, "in docs/usage.md's table, not in the parser: %s" % extra
