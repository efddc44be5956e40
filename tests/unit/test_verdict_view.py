"""What a rank's watchdog keeps of a merged verdict (verdict.view.RankView, issue 44): the same answers as the
whole verdict to every question the watchdog asks of it, a size that does not grow with the job, and never a
file of its own."""
import json
import os
import shutil

import pytest

from c10d_observer import verdict
from c10d_observer.verdict import Level, RankView, Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1 = os.path.join(ROOT, "tests", "data", "documents-v1")


def _questions(v, rank):
    """What protocols.py (Gather, PendingSignal, Abort), watchdog_io.py and watchdog_end.py read of a verdict."""
    return {"gather_id": v.gather_id, "summary": v.summary, "level": v.level, "held": (v.held_until, v.held_why),
            "culprits": list(v.culprit_ranks or ()), "any_hangs": bool(v.hangs),
            "culprit_hosts": [((v.hosts or {}).get(str(r)).host, (v.hosts or {}).get(str(r)).pid)
                              for r in v.culprit_ranks or ()],
            "hangs": [(str(h.stream), h.seq, h.level, h.held_until, h.started_at, rank in (h.waiting_ranks or ()),
                       rank in (h.missing_ranks or ())) for h in v.hangs]}


@pytest.mark.parametrize("rank", [0, 1, 2, 7])
def test_a_ranks_view_answers_what_the_whole_verdict_answers(rank):
    path = os.path.join(V1, "verdict.json")
    whole = verdict.read(path)
    view = verdict.rank_view(path, rank)
    assert isinstance(view, RankView)
    assert _questions(view, rank) == _questions(whole, rank)
    assert view.hangs[0].level is Level.HARD  # written before levels: hard, as the whole verdict reads it


def test_a_view_keeps_the_culprits_and_its_own_rank_only_however_many_ranks_the_job_has():
    with open(os.path.join(V1, "verdict.json")) as f:
        doc = json.load(f)
    n = 16384
    doc["hosts"] = {str(r): {"host": "node%04d" % (r // 8), "pid": 5000 + r, "py_spy_dump": None} for r in range(n)}
    for h in doc["hangs"]:
        h["waiting_ranks"] = [r for r in range(n) if r not in h["missing_ranks"]]
        h["group_ranks"] = list(range(n))
    view = RankView(doc, 9000)
    assert sorted(view.hosts) == ["2", "9000"] and view.hosts["9000"].pid == 14000
    assert [h.waiting_ranks for h in view.hangs] == [[9000], [9000]]
    assert [h.missing_ranks for h in view.hangs] == [[], []]
    assert not any(h.has("group_ranks") or h.has("missing") for h in view.hangs)


def test_a_view_is_never_written_and_a_record_reads_as_its_verdict(tmp_path):
    d = str(tmp_path / "dumps")
    shutil.copytree(V1, d)
    view = verdict.rank_view(os.path.join(d, "verdict.json"), 1)
    with pytest.raises(ValueError):
        verdict.write(d, view)
    whole = verdict.read(os.path.join(d, "verdict.json"))
    os.makedirs(str(tmp_path / "again"))
    verdict.write(str(tmp_path / "again"), whole.replace(gather_id="g1"))
    record = [n for n in os.listdir(str(tmp_path / "again")) if n.startswith("verdict-")][0]
    assert _questions(verdict.rank_view(str(tmp_path / "again" / record), 1), 1) == _questions(
        whole.replace(gather_id="g1"), 1)
    assert verdict.rank_view(str(tmp_path / "none.json"), 1) is None
    assert isinstance(whole, Verdict)
