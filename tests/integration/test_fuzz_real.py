"""A few of the fuzzer's programs run by real gloo ranks under C10D_OBSERVER=1 (issue 42, item 4;
tests/fuzz/real.py), on every line: the verdict names exactly the rank the fault put there, as the simulated
documents of the same program do.  The seeds are the first of a fixed series, one per fault kind (skip,
stall, a different op), whose program has 2-4 ranks and no bfloat16 tensor (gloo on torch 1.8 has no bfloat16
all_reduce) and whose simulated documents name the culprit exactly: the real ranks must agree.  ``python benchmarks/fuzz.py --real-only``
runs many more."""
import os
import sys

import pytest

from harness import TEST_TIMING

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests/

from fuzz import programs, real, run, simulate  # noqa: E402

KINDS = ("skip", "stall", "mismatch_op")


def _simulated(case):
    from c10d_observer import verdict
    _, _, docs = simulate.run_case(case)
    return verdict.analyze(docs).culprit_ranks


def _seeds():
    out, i = {}, 0
    while len(out) < len(KINDS) and i < 20000:
        seed = run.case_seed(42, i)
        i += 1
        case = programs.make_case(seed)
        f = case.fault
        if f is None or f.kind not in KINDS or f.kind in out or not 2 <= case.program.world <= 4:
            continue
        if any(c.size and "bfloat16" in c.size for cs in case.program.calls.values() for c in cs):
            continue
        if simulate.classify(case, _simulated(case)) == "exact":
            out[f.kind] = seed
    return [out[k] for k in KINDS]


@pytest.mark.parametrize("seed", _seeds(), ids=KINDS)
def test_a_real_program_with_one_fault_is_named_as_its_simulation_is(seed, tmp_path):
    case = programs.make_case(seed)
    row = real.run_real(seed, wait_s=60.0, timeout=3.0, tmp=str(tmp_path), keep=True,
                        env={"C10D_OBSERVER_TIMING": TEST_TIMING})
    assert row["outcome"] == "exact", (programs.describe(case), row)
