"""The Python API's bad input: clear errors naming the argument (no process group needed)."""
import pytest

import c10d_observer
from c10d_observer.documents import Hang, Record, Verdict


def test_load_verdict_on_a_folder_without_observer_files_names_it(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing to see")
    with pytest.raises(ValueError, match="holds no c10d-observer report or state") as e:
        c10d_observer.load_verdict(str(tmp_path))
    assert str(tmp_path) in str(e.value)


def test_load_verdict_on_a_missing_folder_or_a_non_path():
    with pytest.raises(ValueError, match="is not a directory"):
        c10d_observer.load_verdict("/nonexistent/c10d")
    with pytest.raises(TypeError, match="dump_dir must be a path"):
        c10d_observer.load_verdict(3)


@pytest.mark.parametrize("bad", [3, "print", object()])
def test_on_hang_must_be_callable(bad):
    with pytest.raises(TypeError, match="on_hang must be a callable"):
        c10d_observer.enable(timeout=60, on_hang=bad)
    assert c10d_observer.observer.active() is None  # nothing started


def test_records_read_as_attributes_and_items_and_stay_read_only():
    v = Verdict({"hangs": [{"op": "all_reduce", "seq": 3, "group": "0", "group_ranks": [0, 1],
                            "missing": {"1": {"state": "no_collective"}}}],
                 "resolved": [], "culprit_ranks": [1]})
    h = v.hangs[0]
    assert isinstance(h, Hang) and h.seq == 3 and h["op"] == "all_reduce"
    assert isinstance(h.missing["1"], Record) and h.missing["1"].state == "no_collective"
    assert v.exit_code == 1 and Verdict({"hangs": [], "resolved": [{"seq": 2}]}).exit_code == 3
    assert Verdict({"hangs": [], "resolved": []}).exit_code == 0
    with pytest.raises(AttributeError, match="no field 'culprits'.*culprit_ranks"):
        v.culprits
    with pytest.raises(AttributeError, match="read-only"):
        v.culprit_ranks = []
    d = v.to_dict()
    d["culprit_ranks"].append(5)
    assert v.culprit_ranks == [1]  # a copy
