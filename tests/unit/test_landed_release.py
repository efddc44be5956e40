"""Files written by the landed release (85ac2b0; tests/data/documents-85ac2b0.md says how they were made)
read the same today: `report` prints what that release printed, and the verdict loads as the typed one."""
import json
import os
import re
import shutil
import subprocess
import sys

from c10d_observer import load_verdict
from c10d_observer.verdict import Level, OutcomeState, Verdict, Where

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
LANDED = os.path.join(DATA, "documents-85ac2b0")


def _report(path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "c10d_observer", "report", path] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def test_report_json_on_the_landed_releases_files_is_what_that_release_printed(tmp_path):
    d = str(tmp_path / "dumps")
    shutil.copytree(LANDED, d)  # elsewhere than where they were written: names come from the files
    out = _report(d, "--json")
    with open(os.path.join(DATA, "documents-85ac2b0.report.json")) as f:
        expected = json.load(f)
    assert out.returncode == 3, out.stderr.decode()
    assert json.loads(out.stdout.decode()) == expected


def _since_landed(expected, directory):
    """The report text of the landed release, with the changes made on purpose since, each named: issue 41,
    a report's positions say when they were read ("last completed seq: 0=407" under "OVERDUE ... #126" read
    as if 407 came before 126)."""
    from c10d_observer.report import load_dir
    from c10d_observer.text import clock
    reports, _ = load_dir(directory)
    stamps = iter(clock(r.written_at) for r in reports if r.groups)
    return re.sub(r"(?m)^(  last completed seq: .*)$",
                  lambda m: "%s (as of %s, this report's last write)" % (m.group(1), next(stamps)), expected)


def test_report_text_on_the_landed_releases_files_is_what_that_release_printed(tmp_path):
    d = str(tmp_path / "dumps")
    shutil.copytree(LANDED, d)
    out = _report(d)
    with open(os.path.join(DATA, "documents-85ac2b0.report.txt")) as f:
        expected = _since_landed(f.read(), d)
    assert out.returncode == 3 and out.stdout.decode() == expected


def test_the_landed_releases_verdict_loads_as_the_typed_verdict():
    v = load_verdict(LANDED)
    h = v.hangs[0]
    assert h.level is Level.HARD and h.op == "all_reduce" and h.seq == 31
    assert v.culprit_ranks == [2] and h.missing["2"].state is Where.NO_COLLECTIVE
    assert h.outcome.state is OutcomeState.RESOLVED
    for name in os.listdir(LANDED):  # the latest and the record, each written back as read
        if name.startswith("verdict") and name.endswith(".json"):
            with open(os.path.join(LANDED, name)) as f:
                doc = json.load(f)
            doc = doc["verdict"] if "documents" in doc else doc  # the record keeps the verdict beside its inputs
            assert Verdict.from_json(doc).to_json() == doc, name
