"""One frame of ``c10d-observer watch`` (live.py) from documents as the watchdogs write them."""
import json
import os

from c10d_observer import dumpdir, live
from c10d_observer.documents import Call, Overdue, Position, RankDoc

NOW = 1000.0


def _write(d, doc):
    name = {"live": dumpdir.live_name, "end": dumpdir.end_name, "report": dumpdir.report_name}[doc.kind]
    with open(os.path.join(d, name(doc.rank, doc.pid)), "w") as f:
        json.dump(doc.to_json(), f)


def _pos(stream, ranks, last, fly=None):
    return Position(stream, stream, ranks=tuple(ranks), last_started=last + (1 if fly else 0), last_completed=last,
                    in_flight=Call(last + 1, "all_reduce", "4 x float32", fly) if fly else None)


def test_a_frame_shows_each_ranks_call_in_flight_per_group_and_the_overdue_call(tmp_path):
    d = str(tmp_path)
    cfg = {"timeout": 3.0}
    for r in (0, 1):
        over = (Overdue("0", "0", 6, "all_reduce", size="4 x float32", group_ranks=(0, 1, 2), started_at=NOW - 9,
                        detected_at=NOW - 6, age_s=3.0),)
        _write(d, RankDoc("live", r, 3, "vm", 10 + r, "job", NOW - 0.5, 1.0, config=cfg, overdue=over,
                          groups=(_pos("0", (0, 1, 2), 5, NOW - 9), _pos("1", (0, 1), 5))))
    _write(d, RankDoc("end", 2, 3, "vm", 12, "job", NOW - 1, 1.0, alive=False, exit_reason="it died", config=cfg,
                      groups=(_pos("0", (0, 1, 2), 5),)))
    text = live.frame(d, now=NOW, width=100, height=30)
    rows = {line.split()[0]: line for line in text.splitlines() if line[:1].isdigit()}
    assert "#6 all_reduce 9.0s !" in rows["0"] and "done #5" in rows["0"], text
    assert "ended: it died" in rows["2"], text
    assert "ranks 0, 1 live, rank 2 ended; hard deadline (timeout) 3 s" in text and "group 1 (0-1)" in text, text
    assert "OVERDUE (hard): all_reduce #6 on group 0 (ranks 0-2), 4 x float32, ranks 0, 1 in it for 9.0 s" in text


def test_an_empty_folder_says_what_the_view_waits_for(tmp_path):
    assert "no rank has written here yet" in live.frame(str(tmp_path), now=NOW)


def test_watch_on_a_missing_folder_exits_2_naming_it(tmp_path, capsys):
    assert live.watch(str(tmp_path / "nope"), once=True) == 2
    assert "nope is not a directory" in capsys.readouterr().err


def test_the_first_frame_of_a_view_waits_for_the_ranks_instead_of_calling_them_silent(tmp_path):
    """The watchdogs write live documents once a view asks: in its first seconds the reports they left are
    older than that, and "no rank live, ranks 0-3 silent" said a healthy job was gone."""
    d = str(tmp_path)
    for r in range(4):
        _write(d, RankDoc("report", r, 4, "vm", 10 + r, "job", NOW - 60, 1.0, config={"timeout": 300.0},
                          groups=(_pos("0", range(4), 5, NOW - 70),)))
    first = live.frame(d, now=NOW, since=NOW - 0.5)
    assert "waiting for the ranks' first positions" in first and "silent" not in first, first
    later = live.frame(d, now=NOW, since=NOW - 10)
    assert "no rank live, ranks 0-3 silent for 3 s or more" in later, later
