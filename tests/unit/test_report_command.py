"""`report DIR` on folders that are not a dump_dir: an error (exit 2) with a hint, never "no stuck call"
(issue 13, case 5); the job's folder is read through its c10d_observer/ sub-folder."""
import os
import shutil
import subprocess
import sys

DUMP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "nccl",
                    "dumps-torch2.11", "sync-during.json")


def _report(directory):
    return subprocess.run([sys.executable, "-m", "c10d_observer", "report", str(directory)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


def test_an_empty_folder_is_an_error_with_a_hint(tmp_path):
    out = _report(tmp_path)
    assert out.returncode == 2, out
    assert "holds no c10d-observer report" in out.stderr and "./c10d_observer" in out.stderr, out.stderr
    assert "0 stuck call" not in out.stdout


def test_a_folder_of_other_files_is_an_error(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "notes.json").write_text('{"not": "a report"}')
    (tmp_path / "fr_rank0.pkl").write_bytes(b"\x80\x04\x95")  # a pickled torch dump: named, not read
    out = _report(tmp_path)
    assert out.returncode == 2, out
    assert "unreadable" in out.stderr and "fr_rank0.pkl" in out.stderr, out.stderr


def test_the_jobs_folder_is_read_through_its_dump_dir(tmp_path):
    inner = tmp_path / "c10d_observer"
    inner.mkdir()
    shutil.copy(DUMP, str(inner))
    (tmp_path / "train.py").write_text("print('hi')\n")
    out = _report(tmp_path)
    assert out.returncode == 1, out  # the dump holds a stuck all_reduce
    assert "reading %s" % inner in out.stderr, out.stderr
    assert "all_reduce #2" in out.stdout, out.stdout


def test_a_missing_folder_is_an_error(tmp_path):
    out = _report(tmp_path / "nope")
    assert out.returncode == 2 and "not a directory" in out.stderr, out
