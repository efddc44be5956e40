"""requests.py: each request file a versioned type, both halves of its protocol in one module.  Real files in
a real dump_dir (DumpDir); the rank's exit is a real RankExit with its exit function replaced (ending the
test process is not what is tested)."""
import json
import os

import pytest

from c10d_observer import dumpdir, requests
from c10d_observer.config import HANG_EXIT_CODE


@pytest.fixture
def dd(tmp_path):
    return dumpdir.DumpDir(str(tmp_path))


def _file(dd, name):
    with open(dd.path(name)) as f:
        return json.load(f)


def test_a_stack_request_goes_from_the_watchdog_to_the_rank_once(dd):
    requests.StackRequest.ask(dd, 41, "stacks of rank 0: asked")
    doc = _file(dd, dumpdir.stack_request_name(41))
    assert doc == {"format": "c10d_observer.stack_request", "version": 1, "header": "stacks of rank 0: asked"}
    got = requests.StackRequest.take(dd, 41)
    assert got.header == "stacks of rank 0: asked"
    assert requests.StackRequest.take(dd, 41) is None  # taken away whole
    requests.StackRequest.ask(dd, 41, "again")
    requests.StackRequest.withdraw(dd, 41)
    assert requests.StackRequest.take(dd, 41) is None


def test_files_of_an_earlier_release_read_as_version_1_and_unknown_keys_are_kept(dd):
    """The landed release wrote bare dicts (no format, no version): they read as the same requests."""
    dd.write_json(dumpdir.GATHER, {"id": "g1", "job_id": "j", "by_rank": 3, "world_size": 4, "requested_at": 12.5,
                                   "level": "hard", "later_key": [1]})
    req = requests.GatherRequest.read(dd)
    assert (req.id, req.job_id, req.by_rank, req.world_size, req.at, req.level) == ("g1", "j", 3, 4, 12.5, "hard")
    assert req.extra == {"later_key": [1]}
    req.replace(merged_at=13.0).write(dd)
    doc = _file(dd, dumpdir.GATHER)
    assert doc["merged_at"] == 13.0 and doc["later_key"] == [1] and doc["version"] == requests.VERSION
    assert requests.GatherRequest.from_json(doc) == req.replace(merged_at=13.0)


def test_a_file_of_another_kind_is_no_request(dd):
    dd.write_json(dumpdir.GATHER, requests.WatchRequest(until=1.0, pid=1).to_json())
    assert requests.GatherRequest.read(dd) is None
    assert requests.GatherRequest.from_json(["not", "a", "dict"]) is None


def test_requests_are_immutable_and_refuse_unknown_fields():
    req = requests.GatherRequest(id="g")
    with pytest.raises(AttributeError):
        req.id = "h"
    with pytest.raises(TypeError, match="no field colour"):
        requests.GatherRequest(colour="red")


@pytest.mark.parametrize("stage, now, disarm", [("arm", False, None), ("now", True, None), ("disarm", False, True)])
def test_the_exit_request_keeps_the_files_shape_in_each_stage(dd, stage, now, disarm):
    requests.ExitRequest.send(dd, 7, stage, 100.0, culprit=True)
    doc = _file(dd, dumpdir.exit_request_name(7))
    assert doc["now"] is now and doc.get("disarm") is disarm and doc["code"] == HANG_EXIT_CODE
    assert doc["written_at"] == 100.0
    assert requests.ExitRequest.from_json(doc).stage == requests.ExitStage(stage)


def test_the_rank_arms_disarms_and_ends_as_asked(dd):
    said, ended = [], []
    rank_exit = requests.RankExit(dd, 7, 0, since=50.0, say=said.append, exit_=ended.append)
    requests.ExitRequest.send(dd, 7, requests.ExitStage.ARM, 49.0)  # an earlier process's with this pid
    rank_exit.check()
    assert not rank_exit.armed
    requests.ExitRequest.send(dd, 7, requests.ExitStage.ARM, 60.0)
    rank_exit.check()
    assert rank_exit.armed and not ended
    requests.ExitRequest.send(dd, 7, requests.ExitStage.DISARM, 61.0)
    rank_exit.check()
    assert not rank_exit.armed
    requests.ExitRequest.send(dd, 7, requests.ExitStage.NOW, 62.0, culprit=True)
    rank_exit.check()
    assert ended == [HANG_EXIT_CODE]
    assert "this rank is its culprit" in said[0] and "exit code %d" % HANG_EXIT_CODE in said[0]


def test_at_its_end_the_rank_takes_the_arm_its_helper_had_not_read_yet(dd, monkeypatch):
    # under gloo a rank's collective raises once the culprit ended, maybe before its helper's next poll read
    # the arm its watchdog wrote: its last look at the end still ends it with the hang's code
    ran = []
    monkeypatch.setattr(requests.atexit, "_run_exitfuncs", lambda: ran.append("the job's exit handlers"))
    said, ended = [], []
    rank_exit = requests.RankExit(dd, 7, 0, since=50.0, say=said.append, exit_=ended.append)
    rank_exit.last_look()  # nothing asked: the rank's end is its own
    assert ended == [] and ran == [] and not rank_exit.armed
    requests.ExitRequest.send(dd, 7, requests.ExitStage.ARM, 60.0)
    rank_exit.last_look()
    assert ended == [HANG_EXIT_CODE] and ran == ["the job's exit handlers"], (ended, ran)
    assert "being ended for it" in said[0] and "exit code %d" % HANG_EXIT_CODE in said[0], said


def test_the_notify_mark_is_taken_once(dd):
    assert not requests.NotifyMark.taken(dd, 9)
    requests.NotifyMark.mark(dd, 9, 1.0)
    assert requests.NotifyMark.taken(dd, 9)
    assert not requests.NotifyMark.taken(dd, 9)


def test_the_handler_replaced_file_names_the_handler(dd):
    assert requests.HandlerReplaced.read(dd, 0, 9) is None
    requests.HandlerReplaced.write(dd, 0, 9, "SIGUSR1", "lightning.requeue", 5.0)
    got = requests.HandlerReplaced.read(dd, 0, 9)
    assert (got.signal, got.replaced_by, got.detected_at) == ("SIGUSR1", "lightning.requeue", 5.0)


def test_a_watch_request_is_open_until_it_lapses_and_only_its_view_withdraws_it(dd):
    requests.WatchRequest.ask(dd, 100.0, pid=1234)
    assert requests.WatchRequest.present(dd)
    assert requests.WatchRequest.is_open(dd, 100.0 + requests.WatchRequest.FOR_S)
    assert not requests.WatchRequest.is_open(dd, 100.1 + requests.WatchRequest.FOR_S)
    requests.WatchRequest.withdraw(dd, pid=999)  # another view's
    assert requests.WatchRequest.present(dd)
    requests.WatchRequest.withdraw(dd, pid=1234)
    assert not requests.WatchRequest.present(dd)


def test_no_module_but_requests_writes_a_request_file():
    """One owner per message: the request files' names are used in requests.py (and named in dumpdir.py)."""
    pkg = os.path.dirname(requests.__file__)
    names = ("stack_request_name", "exit_request_name", "raise_request_name", "notify_name", "handler_name", "WATCH_REQUEST", "GATHER")
    found = []
    for root, _dirs, files in os.walk(pkg):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".py") or path in (requests.__file__, dumpdir.__file__):
                continue
            with open(path) as fh:
                text = fh.read()
            found += ["%s: _dumpdir.%s" % (os.path.relpath(path, pkg), n) for n in names if "_dumpdir.%s" % n in text]
    assert not found, found


def test_a_rank_takes_its_watchdogs_requests_only_when_written_since_its_process_started():
    from c10d_observer.requests import ExitRequest, RaiseRequest
    for cls in (ExitRequest, RaiseRequest):
        assert cls(written_at=10.0).written_since(10.0) and not cls(written_at=9.9).written_since(10.0)
        assert not cls().written_since(0.0) and not cls(written_at=True).written_since(0.0)


def test_requests_and_the_verdicts_values_stand_on_one_immutable_record_base():
    """Issue 43: one immutable record base (records.Record) for the request files and the verdict's values;
    the rank documents are typing.NamedTuples (immutable by construction).  Each refuses a change in place,
    copies with replace(), keeps unknown keys, and equals a record of the same JSON."""
    import inspect
    from c10d_observer import documents, records, requests
    from c10d_observer.verdict import fields, types
    kinds = [c for _, c in inspect.getmembers(requests, inspect.isclass) if issubclass(c, requests._Request)]
    values = [c for _, c in inspect.getmembers(types, inspect.isclass) if issubclass(c, fields.Value)]
    assert len(kinds) >= 7 and len(values) >= 12
    assert all(issubclass(c, records.Record) for c in kinds + values)
    assert all(issubclass(c, tuple) and hasattr(c, "_fields") for c in (documents.RankDoc, documents.Position,
                                                                          documents.Overdue, documents.Call))
    for made in (requests.GatherRequest(id="g", extra={"later": 1}), types.Culprit(rank=3, extra={"later": 1})):
        with pytest.raises(AttributeError, match="immutable"):
            made.extra = {}
        with pytest.raises(AttributeError, match="immutable"):
            del made.extra
        copy = made.replace()
        assert copy == made and copy is not made and copy.extra == {"later": 1}
        assert type(made).from_json(made.to_json()) == made
