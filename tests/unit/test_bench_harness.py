"""benchmarks/_harness.py: the one summary, table and child-process runner every benchmark script uses."""
import ast
import io
import os
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)

import _harness as h  # noqa: E402


def test_percentile_is_the_nearest_rank():
    vals = list(range(1, 101))
    assert [h.percentile(vals, q) for q in (1, 50, 90, 99, 100)] == [1, 50, 90, 99, 100]
    twenty = list(range(20))
    assert h.percentile(twenty, 99) == 19  # the smallest value with >= 99 % at or below it: the max
    assert h.percentile(twenty, 90) == 17
    assert h.percentile([7], 99) == 7


def test_summary_keys_scale_and_the_median_of_an_even_count():
    s = h.summary([4000, 1000, 3000, 2000], scale=1e-3, suffix="_us")
    assert s == {"n": 4, "min_us": 1.0, "median_us": 2.5, "p90_us": 4.0, "p99_us": 4.0, "mean_us": 2.5,
                 "max_us": 4.0}
    s = h.summary([3, 1, 2], keys=("median", "min"), prefix="ns_", keep_all=True)
    assert s == {"ns_median": 2, "ns_min": 1, "all": [3, 1, 2]}
    assert h.summary([]) is None


def test_summary_names_a_key_it_does_not_know():
    with pytest.raises(ValueError, match="keys=.*'p99x'.*pNN"):
        h.summary([1, 2], keys=("p99x",))


def test_table_aligns_columns_and_prints_missing_cells_as_dashes():
    out = io.StringIO()
    h.table(("op", "size", "us"), [("all_reduce", "4 B", "12.5"), ("broadcast", "4 MiB", None)], align="ll",
            rule_after=2, title="t", file=out)
    assert out.getvalue().splitlines() == [
        "t",
        "op          size  |   us",
        "------------------------",
        "all_reduce  4 B   | 12.5",
        "broadcast   4 MiB |    -",
    ]


def test_child_env_puts_the_checkout_first_and_removes_what_is_set_to_none(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    env = h.child_env(TORCH_FR_BUFFER_SIZE=None, OMP_NUM_THREADS=1)
    assert env["PYTHONPATH"].split(os.pathsep) == [ROOT, "/elsewhere"]
    assert "TORCH_FR_BUFFER_SIZE" not in env and env["OMP_NUM_THREADS"] == "1"


def test_run_logged_ends_the_whole_process_group_past_its_timeout():
    d = tempfile.mkdtemp()
    log, pidfile = os.path.join(d, "log"), os.path.join(d, "child.pid")
    # a shell that starts a child of its own, then waits: both must be gone after the timeout
    cmd = ["sh", "-c", "sleep 60 & echo $! > %s; echo started; wait" % pidfile]
    t0 = time.monotonic()
    rc, secs = h.run_logged(cmd, dict(os.environ), 1.0, log)
    assert rc == 124 and time.monotonic() - t0 < 30
    with open(log) as f:
        text = f.read()
    assert "started" in text and "ran past 1 s: ended" in text
    with open(pidfile) as f:
        child = int(f.read())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists("/proc/%d" % child):
        with open("/proc/%d/stat" % child) as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                break
        time.sleep(0.05)
    else:
        assert not os.path.exists("/proc/%d" % child), "the launched command's child outlived the timeout"


def test_run_logged_returns_the_exit_status():
    d = tempfile.mkdtemp()
    rc, _secs = h.run_logged(["sh", "-c", "exit 3"], dict(os.environ), 30, os.path.join(d, "log"))
    assert rc == 3


def test_no_benchmark_script_computes_statistics_of_its_own():
    """One definition of median and percentiles (the harness's): no script imports ``statistics`` or defines
    a percentile, stats or summary helper."""
    bad = []
    for name in sorted(os.listdir(BENCH)):
        if not name.endswith(".py") or name == "_harness.py":
            continue
        with open(os.path.join(BENCH, name)) as f:
            tree = ast.parse(f.read(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "statistics" for a in node.names):
                bad.append("%s imports statistics" % name)
            if isinstance(node, ast.ImportFrom) and node.module == "statistics":
                bad.append("%s imports from statistics" % name)
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in (
                    "pct", "percentile", "quantile", "median", "summary", "print_table", "write_json"):
                bad.append("%s defines %s" % (name, node.name))
    assert not bad


def test_the_fault_matrix_tables_repeated_runs_one_row_per_kind_with_every_outcome_counted():
    import fault_matrix as fm

    def row(kind, outcome, category, detect):
        return {"kind": kind, "torch": "2.13.0+cpu", "source": "auto", "timeout": None, "outcome": outcome,
                "category": category, "detect_s": detect, "verdict_s": detect}

    once = [row("skip", "exact", "never_arrived", 10.0), row("late", "exact", "never_arrived", 10.1)]
    assert not fm._repeated(once)
    twice = once + [row("skip", "undecided", "all_arrived", 11.5), row("late", "exact", "never_arrived", 10.1)]
    assert fm._repeated(twice)
    table = fm.repeats_markdown(twice + [row("exit", "torch raised", None, None)] * 2)
    assert table[2] == ("| skip | 2.13.0+cpu | auto | none | 2 | exact x1, undecided x1 | never_arrived x1, "
                        "all_arrived x1 | 10-11.5 | 10-11.5 |")
    assert table[3] == "| late | 2.13.0+cpu | auto | none | 2 | exact x2 | never_arrived x2 | 10.1 | 10.1 |"
    assert table[4] == "| exit | 2.13.0+cpu | auto | none | 2 | torch raised x2 | - | - | - |"
