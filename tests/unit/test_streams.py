"""A stream's name is written in one place and read in one (streams.py): the names the rank side gives are the
ones the straggler join, the ordering rules and the verdict read back."""
import pytest

from c10d_observer import streams


@pytest.mark.parametrize("group,src,dst", [("0", 0, 1), ("default_pg", 7, 3), ("12", None, 5), ("a:b", 10, 200)])
def test_a_p2p_name_reads_back_as_its_ends(group, src, dst):
    name = streams.p2p_name(group, src, dst)
    assert streams.is_p2p(name)
    assert streams.p2p_ends(name) == (src, dst)


@pytest.mark.parametrize("name", ["0", "3:monitored_barrier", "0:p2p:", "0:p2p:1-2", "0:p2p:x->1", "0:p2p:1->any",
                                  None, 4])
def test_a_name_that_is_no_p2p_streams_has_no_ends(name):
    assert streams.p2p_ends(name) is None


def test_no_module_but_streams_writes_or_parses_a_p2p_name():
    """The guard of the rule: the name's marker appears in the package's code (docstrings and comments aside)
    in streams.py only; tracker.py names its streams through it."""
    import ast
    import io
    import os
    import tokenize
    import c10d_observer
    root = os.path.dirname(c10d_observer.__file__)
    found = []
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".py") or f == "streams.py" and d == root:
                continue
            path = os.path.join(d, f)
            with open(path) as fh:
                text = fh.read()
            docs = {n.body[0].value.lineno for n in ast.walk(ast.parse(text)) if isinstance(
                n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)}
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.STRING and ":p2p" in tok.string and tok.start[0] not in docs:
                    found.append("%s:%d" % (os.path.relpath(path, root), tok.start[0]))
    assert found == []
    with open(os.path.join(root, "tracker.py")) as fh:
        assert "_streams.p2p_name(" in fh.read()
