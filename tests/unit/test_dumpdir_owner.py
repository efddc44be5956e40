"""dump_dir has one owner: dumpdir.DumpDir.  A module that joins a path onto dump_dir itself looks in the root
only, and on a full dump_dir (the watchdogs spill to the node's spill directory) it goes blind.  This guard
reads the package's source: no call that names a path (os.path.join, glob.glob, os.listdir, os.stat,
os.path.exists, open) is given dump_dir or one of dumpdir's file names, outside dumpdir.py."""
import ast
import os

import pytest

from c10d_observer import dumpdir

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "c10d_observer")
PATH_CALLS = {"os.path.join", "glob.glob", "os.listdir", "os.stat", "os.path.exists", "os.path.isfile",
              "os.path.getmtime", "os.remove", "os.utime", "open"}


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return inner + "." + node.attr if inner else None
    return None


def _mentions_dump_dir(node):
    for sub in ast.walk(node):
        name = _name(sub) if isinstance(sub, (ast.Name, ast.Attribute)) else None
        if name and (name.split(".")[-1] == "dump_dir" or name.startswith("_dumpdir.")):
            return name
    return None


def offenders(source, filename):
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and _name(node.func) in PATH_CALLS:
            for arg in node.args:
                found = _mentions_dump_dir(arg)
                if found:
                    out.append("%s:%d: %s(... %s ...)" % (filename, node.lineno, _name(node.func), found))
    return out


def _modules():
    for root, _dirs, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(root, f)


def test_no_module_but_dumpdir_builds_a_path_into_dump_dir():
    found = []
    for path in _modules():
        if os.path.samefile(path, dumpdir.__file__):
            continue
        with open(path) as f:
            found += offenders(f.read(), os.path.relpath(path, os.path.dirname(PKG)))
    assert not found, "paths into dump_dir built outside DumpDir:\n" + "\n".join(found)


@pytest.mark.parametrize("line", [
    "os.path.join(self.dump_dir, _dumpdir.GATHER)",
    "glob.glob(os.path.join(cfg.dump_dir, 'x'))",
    "open(os.path.join(directory, _dumpdir.VERDICT_TEXT))",
    "os.stat(_dumpdir.beat_name(3))",
])
def test_the_guard_sees_a_path_built_by_hand(line):
    assert offenders(line, "example.py")


def test_a_reader_finds_a_spilled_file_through_dumpdir(tmp_path):
    """What the guard buys: a file written to the spill directory (dump_dir was full) is found by path(),
    glob() and names(), as every reader of dump_dir now asks."""
    dd = dumpdir.DumpDir(str(tmp_path / "dumps"))
    os.makedirs(dd.root)
    os.makedirs(dd.spill, exist_ok=True)
    try:
        with open(os.path.join(dd.spill, dumpdir.VERDICT_JSON), "w") as f:
            f.write("{}\n")
        assert dd.path(dumpdir.VERDICT_JSON).startswith(dd.spill)
        assert dd.exists(dumpdir.VERDICT_JSON) and dd.stat(dumpdir.VERDICT_JSON) is not None
        assert dumpdir.VERDICT_JSON in dd.names()
        assert dd.read_text(dumpdir.VERDICT_JSON) == "{}\n"
        dd.touch(dumpdir.beat_name(0), 1000.0)
        assert dd.mtime(dumpdir.beat_name(0)) == 1000.0
    finally:
        dd.remove(dumpdir.VERDICT_JSON)
        dd.remove(dumpdir.beat_name(0))
        os.rmdir(dd.spill)
