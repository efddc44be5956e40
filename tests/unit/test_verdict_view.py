"""What a rank's watchdog keeps of a merged verdict (verdict.view.RankView, issue 44): the same answers as the
whole verdict to every question the watchdog asks of it, a size that does not grow with the job, read from the
view file written beside verdict.json only where that file is of verdict.json's very bytes."""
import json
import os
import shutil

import pytest

from c10d_observer import dumpdir, verdict
from c10d_observer.verdict import Level, RankView, Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1 = os.path.join(ROOT, "tests", "data", "documents-v1")


def _questions(v, rank):
    """What protocols.py (Gather, PendingSignal, Abort), watchdog_io.py and watchdog_end.py read of a verdict."""
    return {"gather_id": v.gather_id, "summary": v.summary, "level": v.level, "held": (v.held_until, v.held_why),
            "culprits": list(v.culprit_ranks or ()), "any_hangs": bool(v.hangs), "at": v.verdict_at,
            "culprit_hosts": [((v.hosts or {}).get(str(r)).host, (v.hosts or {}).get(str(r)).pid)
                              for r in v.culprit_ranks or ()],
            "hangs": [(str(h.stream), h.seq, h.level, h.held_until, h.started_at, rank in (h.waiting_ranks or ()),
                       rank in (h.missing_ranks or ())) for h in v.hangs]}


def _v1():
    with open(os.path.join(V1, "verdict.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("rank", [0, 1, 2, 7])
def test_a_ranks_view_answers_what_the_whole_verdict_answers(rank, tmp_path):
    whole = verdict.read(os.path.join(V1, "verdict.json"))
    view = verdict.view_of(_v1(), rank)
    assert isinstance(view, RankView) and _questions(view, rank) == _questions(whole, rank)
    assert view.hangs[0].level is Level.HARD  # written before levels: hard, as the whole verdict reads it
    verdict.write(str(tmp_path), whole)  # with its view file
    assert _questions(verdict.rank_view(dumpdir.DumpDir(str(tmp_path)), rank), rank) == _questions(whole, rank)


def test_a_view_keeps_the_culprits_and_its_rank_only_however_many_ranks_the_job_has(tmp_path):
    doc = _v1()
    n = 16384
    doc["hosts"] = {str(r): {"host": "node%04d" % (r // 8), "pid": 5000 + r, "py_spy_dump": None} for r in range(n)}
    for h in doc["hangs"]:
        h["waiting_ranks"] = [r for r in range(n) if r not in h["missing_ranks"]]
        h["group_ranks"] = list(range(n))
    view = verdict.view_of(doc, 9000)
    assert sorted(view.hosts) == ["2"] and view.hosts["2"].pid == 5002
    assert [h.waiting_ranks for h in view.hangs] == [[9000], [9000]]
    assert [h.missing_ranks for h in view.hangs] == [[], []]
    assert not any(h.has("group_ranks") or h.has("missing") for h in view.hangs)
    verdict.write(str(tmp_path), verdict.verdict_of(doc))
    size = os.path.getsize(str(tmp_path / dumpdir.VERDICT_VIEW))
    assert size < 2000 < os.path.getsize(str(tmp_path / dumpdir.VERDICT_JSON)) // 500, size
    dd = dumpdir.DumpDir(str(tmp_path))
    for rank in (1, 2, 9000, 16383):
        assert _questions(verdict.rank_view(dd, rank), rank) == _questions(verdict.view_of(doc, rank), rank)


def test_verdict_json_is_read_itself_where_the_view_file_is_of_other_bytes(tmp_path):
    d = str(tmp_path)
    dd = dumpdir.DumpDir(d)
    first = verdict.verdict_of(_v1())
    verdict.write(d, first)
    with open(os.path.join(d, dumpdir.VERDICT_JSON)) as f:
        assert f.read() == json.dumps(verdict.public(first), sort_keys=True) + "\n"  # as it always was
    # another verdict, written without its view (another writer): the old view file is not of these bytes
    later = first.replace(culprit_ranks=[1], summary="c10d_observer: later")
    dd.write_json(dumpdir.VERDICT_JSON, verdict.public(later))
    assert verdict.rank_view(dd, 1).culprit_ranks == [1] and verdict.rank_view(dd, 1).summary.endswith("later")
    os.remove(os.path.join(d, dumpdir.VERDICT_VIEW))
    assert verdict.rank_view(dd, 1).culprit_ranks == [1]
    dd.write_text(dumpdir.VERDICT_VIEW, "{not json")
    assert verdict.rank_view(dd, 1).culprit_ranks == [1]
    dd.write_text(dumpdir.VERDICT_JSON, '{"hangs": [')  # half a file: no view, as no verdict
    assert verdict.rank_view(dd, 1) is None
    os.remove(os.path.join(d, dumpdir.VERDICT_JSON))
    assert verdict.rank_view(dd, 1) is None


def test_a_view_is_never_written_and_a_record_reads_as_its_verdict(tmp_path):
    d = str(tmp_path / "dumps")
    shutil.copytree(V1, d)
    view = verdict.rank_view(dumpdir.DumpDir(d), 1)  # no view file there (a folder of an earlier release)
    with pytest.raises(ValueError):
        verdict.write(d, view)
    whole = verdict.read(os.path.join(d, "verdict.json"))
    assert _questions(view, 1) == _questions(whole, 1)
    os.makedirs(str(tmp_path / "again"))
    verdict.write(str(tmp_path / "again"), whole.replace(gather_id="g1"))
    record = [n for n in os.listdir(str(tmp_path / "again")) if n.startswith("verdict-")]
    assert len(record) == 1 and dumpdir.is_ours(dumpdir.VERDICT_VIEW)
    with open(str(tmp_path / "again" / record[0])) as f:
        rec = json.load(f)
    assert _questions(verdict.view_of(rec, 1), 1) == _questions(whole.replace(gather_id="g1"), 1)
    assert verdict.view_of({"no": "hangs"}, 1) is None and isinstance(whole, Verdict)


@pytest.mark.parametrize("source", ["documents-v1", "documents-85ac2b0", "wide"])
def test_a_relayed_verdict_is_written_byte_for_byte_as_the_typed_one_was(tmp_path, source):
    """write_relayed (each node's relay, issue 44) writes the files write() wrote from the typed verdict."""
    if source == "wide":
        doc = _v1()
        doc["hosts"] = {str(r): {"host": "node%04d" % (r // 8), "pid": 5000 + r, "py_spy_dump": None}
                        for r in range(4096)}
        doc["hangs"][0]["waiting_ranks"] = list(range(3, 4096))
        doc["later_key"] = {"kept": [1, 2.5, None, True]}
    else:
        with open(os.path.join(ROOT, "tests", "data", source, "verdict.json")) as f:
            doc = json.load(f)
    typed, relayed = str(tmp_path / "typed"), str(tmp_path / "relayed")
    os.makedirs(typed)
    os.makedirs(relayed)
    copy = json.loads(json.dumps(doc))
    verdict.write(typed, verdict.verdict_of(doc).with_extra(relayed_from="the node of rank 3"), text="words\n")
    v = verdict.write_relayed(relayed, copy, "words\n", relayed_from="the node of rank 3")
    assert v is not None and v.extra["relayed_from"] == "the node of rank 3"
    names = sorted(os.listdir(typed))
    assert names == sorted(os.listdir(relayed)) and len(names) == 3 + bool(doc.get("gather_id")), names
    for name in names:
        with open(os.path.join(typed, name), "rb") as a, open(os.path.join(relayed, name), "rb") as b:
            assert a.read() == b.read(), name
    assert verdict.write_relayed(relayed, {"no": "hangs"}, "t") is None
    rec = verdict.files._record_file(None, verdict.public(v))
    assert verdict.files._record_text(rec, dumpdir.json_text(rec.verdict)) == dumpdir.json_text(
        verdict.record(None, None, verdict.public(v)))
