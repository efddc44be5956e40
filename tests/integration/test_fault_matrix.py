"""The whole fault matrix (benchmarks/fault_matrix.py): real gloo ranks under C10D_OBSERVER=1, one run per kind
(40: skips, stalls, a late rank, exits and SIGKILL, frozen ranks, mismatches, orders, unmatched p2p, roots,
bursts, checkpoints and evals, batches, stragglers, two and four nodes, a 2 x 2 mesh, FSDP, functional
collectives, DTensor, Lightning and Accelerate, a 3D job of 8 ranks (FSDP2 x tensor x pipeline parallel), a
healthy loop; a kind a torch cannot run is said, not missed), the default source, no timeout given, as
users leave it.  The full tier (tests/README.md): about 10 minutes a line.

What it asserts are promises, not timings (benchmarks/ and docs/fault-matrix.md hold those): no verdict
names a wrong rank, every hang gets a verdict, a healthy run gets no verdict and no signal.  The matrix's
own ``--gate`` decides it; its table and rows are printed for the log.
"""
import ast
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.full  # tests/README.md: the full tier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATRIX = os.path.join(ROOT, "benchmarks", "fault_matrix.py")


def _kinds():
    """fault_matrix.KINDS, read from its source (importing it would put benchmarks/ on sys.path)."""
    with open(MATRIX) as f:
        tree = ast.parse(f.read(), MATRIX)
    [value] = [n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "KINDS"]
    return list(ast.literal_eval(value))


@pytest.mark.timeout(3000)  # 40 runs of 10-90 s each on a loaded 2-core machine, with room
def test_the_fault_matrix_names_no_wrong_rank_finds_every_hang_and_raises_no_false_alarm(tmp_path):
    out = str(tmp_path / "fault_matrix.json")
    proc = subprocess.run([sys.executable, MATRIX, "--sources", "auto", "--timeouts", "none",
                           "--gate", "--out", out], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=2900)
    print(proc.stdout)
    with open(out) as f:
        rows = json.load(f)["rows"]
    assert [r["kind"] for r in rows] == _kinds(), rows  # one run of each kind
    assert [r for r in rows if r["outcome"] == "wrong"] == []
    assert [r for r in rows if r["outcome"] == "missed"] == []
    [healthy] = [r for r in rows if r["kind"] == "healthy"]
    assert healthy["calls"] > 0 and (healthy["soft"], healthy["hard"], healthy["signals"]) == (0, 0, 0), healthy
    assert healthy["stragglers"] == [], healthy
    assert proc.returncode == 0, proc.stdout  # the gate agrees
