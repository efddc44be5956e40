"""The op word's layout lives in callword.py alone: every writer takes its numbers from there."""
import ast
import glob
import os

import pytest

from c10d_observer import callword as cw

PACKAGE = os.path.dirname(os.path.abspath(cw.__file__))
LAYOUT = {cw.API_SHIFT, cw.ROOT_SHIFT, cw.SIG_SHIFT, cw.DTYPE_SHIFT}
MASKS = {cw.NUMEL_MASK, cw.OP_MASK, cw.DTYPE_MASK, cw.ROOT_MASK}


@pytest.mark.parametrize("op", cw.OPS)
def test_every_op_with_every_api_and_dtype_comes_back(op):
    for api in cw.APIS:
        for dtype, code in cw.DTYPE_CODES.items():
            if dtype in (cw.MEMBERS, cw.MEMBERS_DIGEST):
                continue  # a group's members, not a dtype: below
            word = cw.encode_op(op, api) | cw.encode_sig(code, 3 * 2 ** 24 + 1000)
            assert cw.decode_op(word) == (op, api)
            assert cw.decode_sig(word) == (None if code == 0 else "1000 x %s" % dtype)


@pytest.mark.parametrize("members, world, text", [
    ([0, 1], 4, "members 0, 1"), ([3, 2], 4, "members 2, 3"), ([0, 1, 2, 3], 4, "members 0-3"), ([23], 24, "members 23"),
    (list(range(0, 24, 2)), 24, "members 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22")])
def test_a_group_s_members_come_back_where_the_world_has_24_ranks_or_fewer(members, world, text):
    word = cw.encode_op("new_group") | cw.encode_members(members, world)
    assert cw.decode_op(word) == ("new_group", "") and cw.decode_sig(word) == text


def test_a_larger_world_s_groups_differ_by_a_digest_of_their_members():
    a, b = (cw.decode_sig(cw.encode_members(m, 64)) for m in ([0, 1], [2, 3]))
    assert a.startswith("members of digest ") and b.startswith("members of digest ") and a != b
    assert cw.decode_sig(cw.encode_members([1, 0, 1], 64)) == a  # the members, not the order they were given in


def test_a_group_s_making_is_one_deadline_whatever_its_members():
    words = [cw.encode_op("new_group") | cw.encode_members(m, w) for m, w in (([0, 1], 4), ([2, 3], 4), ([5], 64))]
    assert {cw.signature(w) for w in words} == {cw.signature(cw.encode_op("new_group"))}


@pytest.mark.parametrize("root", [None, 0, 1, 7, 4095, 65534])
def test_a_root_comes_back_beside_the_op_api_and_size(root):
    for op in cw.ROOTED:
        word = cw.encode_op(op, "broadcast_object_list") | cw.encode_root(root) | cw.encode_sig(
            cw.DTYPE_CODES["float32"], 1024)
        assert cw.decode_op(word) == (op, "broadcast_object_list") and cw.decode_root(word) == root
        assert cw.decode_sig(word) == "1024 x float32" + ("" if root is None else ", root %d" % root)
        assert cw.signature(word) == cw.signature(word & ~(cw.ROOT_MASK << cw.ROOT_SHIFT))  # one deadline


def test_the_op_and_api_codes_fit_their_bits():
    assert len(cw.OPS) <= cw.OP_MASK + 1 and len(cw.APIS) <= cw.API_MASK + 1


def _layout_numbers_written(path):
    """(line, text) of each shift by a layout number, or mask by a layout mask, of a value that is not
    itself a constant (``1 << 16`` is a size, not a word)."""
    tree = ast.parse(open(path).read(), path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp) or isinstance(node.left, (ast.Constant, getattr(ast, "Num", ast.Constant))):
            continue
        right = getattr(node.right, "value", getattr(node.right, "n", None))
        if (isinstance(node.op, (ast.LShift, ast.RShift)) and right in LAYOUT) or (
                isinstance(node.op, ast.BitAnd) and right in MASKS):
            found.append((node.lineno, ast.dump(node)[:80]))
    return found


def test_no_module_but_callword_writes_the_layout_s_numbers():
    paths = [p for p in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True)
             if os.path.basename(p) != "callword.py"]
    assert any(p.endswith(os.path.join("sources", "patch.py")) for p in paths)
    offenders = {os.path.relpath(p, PACKAGE): f for p in paths for f in [_layout_numbers_written(p)] if f}
    assert offenders == {}, offenders


def test_the_check_finds_an_inlined_layout(tmp_path):
    p = tmp_path / "writer.py"
    p.write_text("def w(op, api, code, x):\n    word = op | api << 16\n"
                 "    return word | (code << 24 | (x & 0xFFFFFF)) << 32\n")
    assert len(_layout_numbers_written(str(p))) == 4
