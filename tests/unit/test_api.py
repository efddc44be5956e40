"""The Python API's bad input: clear errors naming the argument (no process group needed)."""
import pytest

import c10d_observer
from c10d_observer.verdict import Hang, Level, Verdict, Where, Whereabouts


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


def test_a_verdict_is_typed_read_as_attributes_and_immutable():
    """Issue 32: the verdict is a type (verdict/types.py); its categories are str-valued enums whose values are
    the JSON's strings; it turns into the same JSON it was read from."""
    doc = {"hangs": [{"op": "all_reduce", "seq": 3, "group": "0", "group_ranks": [0, 1], "level": "soft",
                      "missing": {"1": {"state": "no_collective", "text": "it is in no collective"}}}],
           "resolved": [], "culprit_ranks": [1], "a_key_of_a_later_release": {"kept": True}}
    v = Verdict.from_json(doc)
    h = v.hangs[0]
    assert isinstance(h, Hang) and h.seq == 3 and h.op == "all_reduce" and h.level is Level.SOFT
    assert h.level == "soft" and str(h.level) == "soft"  # a str enum: the JSON's string
    assert isinstance(h.missing["1"], Whereabouts) and h.missing["1"].state is Where.NO_COLLECTIVE
    assert h.whereabouts(1).text == "it is in no collective" and h.whereabouts(0) is None
    assert v.exit_code == 1 and Verdict.from_json({"hangs": [], "resolved": [{"seq": 2}]}).exit_code == 3
    assert Verdict.from_json({"hangs": [], "resolved": []}).exit_code == 0
    assert Verdict.from_json({"hangs": [{"seq": 1}]}).hangs[0].level is Level.HARD  # files of before levels
    with pytest.raises(AttributeError, match="no field 'culprit'.*culprit_ranks"):
        v.culprit
    with pytest.raises(AttributeError, match="immutable"):
        v.culprit_ranks = []
    assert v.to_json() == doc and v.replace(summary="x").to_json() == dict(doc, summary="x")
    d = v.to_dict()
    d["culprit_ranks"].append(5)
    assert v.culprit_ranks == [1]  # a copy
