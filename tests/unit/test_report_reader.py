"""The report at the boundary: dumpdir.write_json / report.load, load_dir, summarize, format_ranks,
rank_list.  Each kind of document through its type, and documents of the previous release:
tests/unit/test_documents.py.

The reader only parses JSON: a pickle handed to it is rejected and never unpickled.
"""
import json
import os
import pickle

import pytest

from c10d_observer import documents, dumpdir, report, text
from c10d_observer.report import ReportError


def make_report(rank=0, pid=100, seq=5, op="all_reduce", ranks=(0, 1, 2, 3), in_flight=True):
    """A report with the fields the watchdog writes."""
    return {
        "format": documents.FORMAT, "version": documents.VERSION, "kind": "report", "rank": rank,
        "world_size": 4, "host": "h",
        "pid": pid, "watchdog_pid": pid + 1, "torch_version": "0.0.0-test", "source": "patch",
        "source_reasons": {"patch": "test"}, "config": {"timeout": 10.0, "signal": "SIGUSR1"},
        "written_at": 1.7e9 + 20, "signal": "SIGUSR1", "on_timeout": "dump", "untracked_streams": 0,
        "stack_dump": "/somewhere/%s" % dumpdir.stacks_name(rank, pid),
        "overdue": [{"group": "0", "stream": "0", "group_ranks": list(ranks), "backend": "gloo",
                     "kind": "collective", "peer": None, "seq": seq, "op": op, "api": "",
                     "started_at": 1.7e9, "detected_at": 1.7e9 + 12.5, "age_s": 12.5, "in_flight": in_flight}],
        "groups": [{"group": "0", "stream": "0", "kind": "collective", "ranks": list(ranks), "backend": "gloo",
                    "peer": None, "last_started": seq, "last_completed": seq - 1, "in_flight_seq": seq,
                    "ring_overflow": 0}],
    }


def write_report(directory, rep):
    path = os.path.join(str(directory), dumpdir.report_name(rep["rank"], rep["pid"]))
    dumpdir.write_json(path, rep)
    return path


class UnpickleSideEffect(object):
    """Unpickling this creates ``path``: proof, if the file appears, that someone unpickled it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def no_pickle(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the report reader must never unpickle")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)


@pytest.fixture
def pickle_report(tmp_path):
    """A pickle under a report's name, and the file that unpickling it would create."""
    marker = tmp_path / "unpickled"
    path = tmp_path / "report-rank0-pid1.json"
    path.write_bytes(pickle.dumps(UnpickleSideEffect(str(marker))))
    return str(path), marker


# -- write_atomic / load --------------------------------------------------------------------------------

def test_report_round_trips(tmp_path):
    rep = make_report()
    path = write_report(tmp_path, rep)
    doc = report.load(path)
    assert doc == documents.RankDoc.from_json(rep, path)
    assert doc.overdue[0].seq == 5 and doc.groups[0].in_flight.seq == 5 and doc.extra["source"] == "patch"


def test_write_atomic_replaces_and_leaves_no_temporary_file(tmp_path):
    path = write_report(tmp_path, make_report(seq=5))
    write_report(tmp_path, make_report(seq=6))
    assert os.listdir(str(tmp_path)) == [os.path.basename(path)]
    assert report.load(path).overdue[0].seq == 6


def test_write_atomic_of_an_unserialisable_object_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        dumpdir.write_json(str(tmp_path / "r.json"), {"x": object()})
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("content", [{"hello": 1}, [1, 2], "text", {"format": "other", "version": 1}],
                         ids=["dict", "list", "string", "other-format"])
def test_json_that_is_not_a_report_is_rejected(tmp_path, content):
    path = tmp_path / "report-rank0-pid1.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ReportError, match="not a c10d-observer document"):
        report.load(str(path))


def test_text_that_is_not_json_is_rejected(tmp_path):
    path = tmp_path / "report-rank0-pid1.json"
    path.write_text("{not json")
    with pytest.raises(ReportError, match="not JSON"):
        report.load(str(path))


@pytest.mark.parametrize("version", [max(documents.READS) + 1, None, str(documents.VERSION)])
def test_other_report_version_is_rejected(tmp_path, version):
    rep = make_report()
    rep["version"] = version
    path = write_report(tmp_path, rep)
    with pytest.raises(ReportError, match="document version .*; this release reads versions 1, 2, 3"):
        report.load(path)


def test_pickle_is_rejected_and_never_unpickled(pickle_report, no_pickle):
    path, marker = pickle_report
    with pytest.raises(ReportError):
        report.load(path)
    assert not marker.exists()


# -- load_dir -------------------------------------------------------------------------------------------

def test_load_dir_returns_reports_sorted_by_rank(tmp_path):
    paths = [write_report(tmp_path, make_report(rank=r, pid=100 + r)) for r in (3, 0, 2)]
    reports, problems = report.load_dir(str(tmp_path))
    assert problems == []
    assert [r.rank for r in reports] == [0, 2, 3]
    assert sorted(r.path for r in reports) == sorted(paths)


def test_load_dir_names_unreadable_files_and_never_unpickles(tmp_path, pickle_report, no_pickle):
    path, marker = pickle_report
    good = write_report(tmp_path, make_report(rank=1, pid=7))
    (tmp_path / "notes.json").write_text("{}")  # not named like a report: not looked at
    reports, problems = report.load_dir(str(tmp_path))
    assert [r.path for r in reports] == [good]
    assert len(problems) == 1 and path in problems[0]
    assert not marker.exists()


def test_load_dir_of_a_missing_directory(tmp_path):
    with pytest.raises(ReportError, match="not a directory"):
        report.load_dir(str(tmp_path / "missing"))


# -- summarize / format_ranks ---------------------------------------------------------------------------

def test_summary_names_op_seq_group_and_ranks(tmp_path):
    write_report(tmp_path, make_report(rank=2, seq=17, op="broadcast", ranks=(0, 1, 2, 3, 8)))
    text = report.summarize(*report.load_dir(str(tmp_path)))
    assert "broadcast #17" in text
    assert "group 0" in text
    assert "ranks 0-3,8" in text
    assert "rank 2/4" in text
    assert "stacks: /somewhere/" + dumpdir.stacks_name(2, 100) in text


def test_summary_says_how_an_overdue_call_ended():
    def rd(**kw):
        rep = make_report(in_flight=False)
        rep["overdue"][0].update(kw)
        return documents.RankDoc.from_json(rep)
    assert "completed later" in report.summarize([rd(ended="completed", resolved=True)])
    assert "once other ranks of it had ended (not resolved)" in report.summarize([rd(ended="peers ended")])
    assert "this rank ended while in it" in report.summarize([rd(ended="rank ended")])
    assert "completed later" not in report.summarize([documents.RankDoc.from_json(make_report(in_flight=True))])


def test_summary_of_nothing_and_of_problems():
    text = report.summarize([], ["/x/report-rank0-pid1.json is not JSON"])
    assert "no c10d-observer reports found" in text
    assert "unreadable: /x/report-rank0-pid1.json is not JSON" in text


@pytest.mark.parametrize("ranks,text_", [
    ([0, 1, 2, 3, 8], "0-3,8"),
    ([8, 3, 2, 1, 0], "0-3,8"),
    ([5], "5"),
    ([0, 2, 4], "0,2,4"),
    ([1, 2, 5, 6, 7, 9], "1-2,5-7,9"),
    ([], ""),
    (None, "?"),
])
def test_format_ranks(ranks, text_):
    assert text.format_ranks(ranks) == text_


@pytest.mark.parametrize("ranks,words", [
    ([2], "rank 2"), ([0, 2], "ranks 0, 2"), ([0, 1], "ranks 0, 1"), ([0, 1, 2, 3, 8], "ranks 0-3, 8"),
    ([3, 1, 2], "ranks 1-3"), ([], "none"), (None, "none"),
])
def test_rank_list_reads_as_a_list(ranks, words):
    assert text.rank_list(ranks) == words


@pytest.mark.parametrize("ranks", [[2], [0, 2], [0, 1, 2, 3, 8], [1, 2, 3], [0, 4, 5, 6, 9, 23]])
def test_ranks_in_reads_back_what_rank_list_wrote(ranks):
    """What a making's members say ("members 0-3, 8") read back as ranks (verdict/mismatch._members)."""
    assert text.ranks_in(text.rank_list(ranks).split(" ", 1)[1]) == set(ranks)


@pytest.mark.parametrize("words", ["of digest 3fa2c1", "", "0-2 step 2", "a, 1"])
def test_ranks_in_says_none_of_what_it_cannot_read(words):
    assert text.ranks_in(words) is None
