"""The store relay between two "nodes" (two dump_dirs) over one real torch HashStore, step by step.

No threads and no ranks: each node's relay is stepped by hand, and the watchdogs' files (requests and
states) are written by the test as the watchdogs would write them.  The whole path with real ranks,
watchdogs and torchrun agents is tests/integration/test_cli.py::test_two_nodes_on_loopback_*.
"""
import json
import os
import time

import pytest

from c10d_observer import stackfile
from c10d_observer import documents as _documents
from c10d_observer import dumpdir as _dumpdir
from c10d_observer import wire as _wire
from c10d_observer import relay as _relay

JOB = "run:unit"


@pytest.fixture
def nodes(tmp_path):
    from torch import distributed as dist
    store = dist.HashStore()
    dirs = [str(tmp_path / "node0"), str(tmp_path / "node1")]
    for d in dirs:
        os.makedirs(d)
    clock = Clock()  # both nodes' relays read it; a test moves it on by a period where one must pass
    relays = [started(_relay.StoreRelay(d, rank, JOB, 0.1, 5.0, store_factory=lambda: store, clock=clock))
              for d, rank in zip(dirs, (0, 2))]  # node0 holds ranks 0-1, node1 ranks 2-3
    return store, dirs, relays


class Clock(object):
    def __init__(self):
        self.t = time.time()

    def __call__(self):
        return self.t

    def advance(self, s):
        self.t += s


def started(relay):
    """A relay that started a second ago: a relay only beats for its first two periods before acting."""
    relay.started_at -= 1.0
    return relay


def node_relays(tmp_path, ranks, store, clock, timeout=5.0, before=None):
    """One node per rank of ``ranks``: its dump dir (``before(node, dir)`` first: its documents) and its relay
    on ``store``, with a period of 1 s, past its two periods of beats (it may act)."""
    dirs, relays = [], []
    for node, rank in enumerate(ranks):
        d = str(tmp_path / ("node%d" % node))
        os.makedirs(d)
        dirs.append(d)
        if before is not None:
            before(node, d)
        relays.append(started(_relay.StoreRelay(d, rank, JOB, 1.0, timeout, store_factory=lambda: store,
                                                clock=clock)))
        relays[-1].started_at -= 2.0
    return dirs, relays


def request(d, gid, by_rank, at=None):
    req = {"id": gid, "job_id": JOB, "by_rank": by_rank, "world_size": 4, "requested_at": at or time.time()}
    _dumpdir.write_json(os.path.join(d, _dumpdir.GATHER), req)
    return req


def state(d, rank, gid, groups=(), frames=None):
    """Rank ``rank``'s state in ``d``; ``frames``: its main thread's, written as a stack dump beside it."""
    doc = {"format": _documents.FORMAT, "version": _documents.VERSION, "kind": "state", "rank": rank,
           "pid": 100 + rank, "host": os.path.basename(d), "job_id": JOB, "gather_id": gid, "alive": True,
           "written_at": time.time(), "groups": [g.to_json() for g in groups], "stack_dump": None,
           "stacks_size_before": None}
    if frames is not None:
        thread = 0x7f0000001000 + rank  # each process's own main thread
        doc.update(main_thread=thread, stack_dump=os.path.join(d, "stacks-rank%d-pid%d.txt" % (rank, doc["pid"])))
        with open(doc["stack_dump"], "w") as f:
            f.write(stackfile.format_dump("stacks of rank %d" % rank, [(thread, frames)], thread))
    _dumpdir.write_json(os.path.join(d, _dumpdir.state_name(rank, doc["pid"])), doc)


def states_in(d):
    """rank -> state, from the ranks' own files and the files of other nodes' states (one per node)."""
    out = {}
    for n in os.listdir(d):
        if n.startswith("state-rank") or n.startswith("states-node"):
            for doc in _documents.load(os.path.join(d, n)):
                out[doc.rank] = doc
    return out


def test_a_request_reaches_the_other_node_and_its_states_come_back(nodes):
    store, (d0, d1), (r0, r1) = nodes
    for r in (r0, r1):
        r.step()  # connected: earlier requests are history
    request(d0, "gA", 0)
    state(d0, 0, "gA")
    state(d0, 1, "gA")
    r0.step()  # publishes gA
    r1.step()  # takes it: written into node1's dump_dir, dated by node1's clock
    relayed = _dumpdir.read_json(os.path.join(d1, _dumpdir.GATHER))
    assert relayed["id"] == "gA" and relayed["relayed"] is True
    frames = [("/opt/torch/distributed/distributed_c10d.py", 3252, "all_reduce"), ("train.py", 40, "step"),
              ("train.py", 60, "<module>")]
    state(d1, 2, "gA", frames=frames)  # node1's watchdogs answer it
    world = _documents.Position("0", "0", ranks=tuple(range(4096)), backend="nccl", last_started=4, last_completed=3,
                                in_flight=_documents.Call(4, "all_reduce", "4 x float32", 100.5, ""),
                                recent=(_documents.Call(3, "all_reduce", "4 x float32", 99.0),))
    p2p = _documents.Position("0:p2p:3->2", "0", kind="p2p", src=3, dst=2, peer=2, last_started=1, last_completed=1)
    state(d1, 3, "gA", groups=(world, p2p), frames=frames)
    r1.step()  # publishes ranks 2 and 3
    # as rows (documents.RankDoc.to_wire), version 5: rank 3's stacks summary ends in rank 2's frames
    sent = _wire.unpack(_wire.label_of(store.get(_relay.PREFIX + "node/1"))[1])
    assert [(d["version"], len(d["group_rows"])) for d in sent] == [(5, 0), (5, 2)]
    assert _documents.FRAMES_OF not in sent[0] and sent[1][_documents.FRAMES_OF][0] == 0
    assert "train.py" in sent[0]["stacks_text"] and "train.py" not in sent[1]["stacks_text"]
    r0.step()  # the requester's relay fetches them
    got = states_in(d0)
    assert sorted(got) == [0, 1, 2, 3]
    assert got[3].groups == (world, p2p)  # each position as rank 3's watchdog wrote it
    for r in (2, 3):  # each rank's summary whole, its own header and thread line with the frames
        doc = states_in(d1)[r]
        assert got[r].stacks_text == _relay.stacks_summary(doc.stack_dump, doc.main_thread)
        assert "stacks of rank %d" % r in got[r].stacks_text and "line 40 in step" in got[r].stacks_text
    assert got[2].relayed_from == "node1" and got[3].relayed_from == "node1"
    assert got[3].gather_id == "gA" and got[3].extra["answered_gather_id"] == "gA"
    assert got[0].relayed_from is None  # node0's own states are left alone


def test_two_nodes_that_request_at_once_make_one_verdict_which_both_get(nodes):
    store, (d0, d1), (r0, r1) = nodes
    for r in (r0, r1):
        r.step()
    request(d0, "gA", 0)
    request(d1, "gB", 2)
    state(d0, 0, "gA")
    state(d0, 1, "gA")
    state(d1, 2, "gB")
    state(d1, 3, "gB")
    for _ in range(3):
        r0.step()
        r1.step()
        r0.clock.advance(0.1)  # during a gather, a node that does not merge reads the store once a period
    # gA was numbered first: node0 merges; node1's watchdog is told its own request is superseded
    assert _dumpdir.read_json(os.path.join(d0, _dumpdir.GATHER))["id"] == "gA"
    relayed = _dumpdir.read_json(os.path.join(d1, _dumpdir.GATHER))
    assert relayed["id"] == "gA" and relayed["supersedes"] == "gB" and relayed["relayed"] is True
    got = states_in(d0)
    assert sorted(got) == [0, 1, 2, 3] and got[2].gather_id == "gA" and got[2].extra["answered_gather_id"] == "gB"
    assert sorted(states_in(d1)) == [2, 3]  # node1 fetches nothing: one merge, not one per node
    # node0's watchdog merges; the verdict goes back to node1
    _dumpdir.write_json(os.path.join(d0, _dumpdir.VERDICT_JSON),
                         {"summary": "c10d_observer: the verdict", "gather_id": "gA", "hangs": []})
    with open(os.path.join(d0, _dumpdir.VERDICT_TEXT), "w") as f:
        f.write("c10d_observer verdict: ...\n")
    r0.step()
    r1.clock.advance(0.1)
    r1.step()
    v = _dumpdir.read_json(os.path.join(d1, _dumpdir.VERDICT_JSON))
    assert v["summary"] == "c10d_observer: the verdict" and v["relayed_from"] == "the node of rank 0"
    assert open(os.path.join(d1, _dumpdir.VERDICT_TEXT)).read() == open(os.path.join(d0, _dumpdir.VERDICT_TEXT)).read()


class CountingStore(object):
    def __init__(self, store):
        self.store, self.ops = store, 0

    def __getattr__(self, name):
        self.ops += 1
        return getattr(self.store, name)


def test_one_relay_per_node_acts_and_another_takes_over_when_it_stops(tmp_path):
    from torch import distributed as dist
    store = dist.HashStore()
    d = str(tmp_path / "node0")
    os.makedirs(d)
    counting = [CountingStore(store) for _ in range(3)]
    relays = [started(_relay.StoreRelay(d, rank, JOB, 0.1, 5.0, store_factory=lambda c=c: c))
              for rank, c in zip((4, 5, 6), counting)]
    for _ in range(5):  # idle: one store operation a period for the node, by its lowest rank
        for r in relays:
            r.step()
    assert [r.leader for r in relays] == [True, False, False]
    assert [c.ops for c in counting] == [1 + 5, 0, 0]  # the counter read at start, then one add a period
    os.utime(os.path.join(d, _dumpdir.beat_name(4)), (0, 0))  # rank 4's relay stopped beating (died, frozen)
    relays[1].step()
    relays[2].step()
    assert relays[1].leader and not relays[2].leader and counting[1].ops == 2


def test_another_node_gets_the_main_thread_of_the_last_dump_not_the_whole_file(tmp_path):
    path = str(tmp_path / "stacks.txt")
    main, other = 0x7f00aa, 0x7f00bb

    def dump(header, func):
        out = "\n=== c10d_observer: %s ===\n" % header
        for ident, f in ((other, "wait"), (main, func)):
            out += "Thread 0x%016x (most recent call first):\n" % ident
            out += "".join('  File "/x/%s.py", line %d in %s\n' % (f, i, f) for i in range(200))
            out += "\n"
        return out

    with open(path, "w") as f:
        f.write(dump("first", "old_place") + dump("second", "train_step"))
    text = _relay.stacks_summary(path, main)
    assert len(text) < os.path.getsize(path) / 3
    assert "second" in text and "train_step" in text and "old_place" not in text and "wait" not in text
    with open(str(tmp_path / "copy.txt"), "w") as f:
        f.write(text)
    assert stackfile.thread_frames(text, main)[0] == ("/x/train_step.py", 0, "train_step")

def test_requests_published_before_a_relay_started_are_history(nodes):
    store, (d0, d1), (r0, r1) = nodes
    r0.step()
    request(d0, "old", 0)
    r0.step()  # published while node1's relay was not running yet
    r1.step()  # starts now: takes the counter as it is
    r1.step()
    assert not os.path.exists(os.path.join(d1, _dumpdir.GATHER))


def test_a_request_of_another_node_with_a_clock_far_behind_is_still_taken(nodes):
    store, (d0, d1), (r0, r1) = nodes
    r1.step()
    # published as node0's relay does, by a node whose clock is an hour behind node1's
    req = {"id": "gA", "job_id": JOB, "by_rank": 0, "world_size": 4, "requested_at": time.time() - 3600}
    n = store.add(_relay.PREFIX + "requests", 1)
    store.set(_relay.PREFIX + "request/%d" % n, json.dumps(req))
    store.add(_relay.PREFIX + "request_ready/%d" % n, 1)
    r1.step()
    relayed = _dumpdir.read_json(os.path.join(d1, _dumpdir.GATHER))
    assert relayed["id"] == "gA" and abs(relayed["requested_at"] - time.time()) < 60  # dated here
    assert relayed["requested_at_origin"] == req["requested_at"]


def test_a_number_published_before_its_request_is_written_is_read_next_time(nodes):
    store, (d0, d1), (r0, r1) = nodes
    r1.step()
    n = store.add(_relay.PREFIX + "requests", 1)  # node0 numbered its request, has not written it yet
    r1.step()  # must not block on the missing key
    assert not os.path.exists(os.path.join(d1, _dumpdir.GATHER))
    req = {"id": "gA", "job_id": JOB, "by_rank": 0, "world_size": 4, "requested_at": time.time()}
    store.set(_relay.PREFIX + "request/%d" % n, json.dumps(req))
    store.add(_relay.PREFIX + "request_ready/%d" % n, 1)
    r1.step()
    assert _dumpdir.read_json(os.path.join(d1, _dumpdir.GATHER))["id"] == "gA"


class KeyLog(object):
    """A store that notes the keys it is asked for (method, key)."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def add(self, key, n):
        self.calls.append(("add", key))
        return self.store.add(key, n)

    def get(self, key):
        self.calls.append(("get", key))
        return self.store.get(key)

    def set(self, key, value):
        self.calls.append(("set", key))
        return self.store.set(key, value)


def test_a_relay_beats_for_two_periods_before_it_may_act(tmp_path):
    """The ranks of a node start together: were every relay to act at once, each would open a store
    connection (1,024 at 1,024 ranks) before the lowest rank's beat told them not to."""
    from torch import distributed as dist
    d = str(tmp_path / "node0")
    os.makedirs(d)
    clock, log = Clock(), KeyLog(dist.HashStore())
    rel = _relay.StoreRelay(d, 5, JOB, 0.1, 5.0, store_factory=lambda: log, clock=clock)
    rel.step()
    clock.advance(0.1)
    rel.step()
    assert not rel.leader and log.calls == [] and os.path.exists(os.path.join(d, _dumpdir.beat_name(5)))
    clock.advance(0.11)
    rel.step()
    assert rel.leader and log.calls == [("add", _relay.PREFIX + "requests")] * 2  # at connect, and the period's


def test_a_node_that_took_itself_for_the_merging_one_sends_its_answers_once_it_learns_otherwise(nodes):
    store, (d0, d1), (r0, r1) = nodes
    r1.step()
    n = store.add(_relay.PREFIX + "requests", 1)  # node0 numbered its request first, not written yet
    request(d1, "gB", 2)
    state(d1, 2, "gB")
    r1.step()  # publishes gB (number 2): it knows of no earlier request, so it would merge; sends nothing
    assert r1._collecting() and store.add(_relay.PREFIX + "nodes", 0) == 0
    req = {"id": "gA", "job_id": JOB, "by_rank": 0, "world_size": 4, "requested_at": time.time()}
    store.set(_relay.PREFIX + "request/%d" % n, json.dumps(req))
    store.add(_relay.PREFIX + "request_ready/%d" % n, 1)
    r1.clock.advance(0.1)
    r1.step()  # reads number 1: the merge is node0's; its answers go out, labelled for node0's request
    assert not r1._collecting() and store.add(_relay.PREFIX + "nodes", 0) == 1
    label, packed = _wire.label_of(store.get(_relay.PREFIX + "node/1"))
    assert label["window"] == n and [doc["rank"] for doc in _wire.unpack(packed)] == [2]
    relayed = _dumpdir.read_json(os.path.join(d1, _dumpdir.GATHER))
    assert relayed["id"] == "gA" and relayed["supersedes"] == "gB"


def test_a_merging_node_keeps_only_bundles_labelled_for_its_request(nodes):
    store, (d0, d1), (r0, r1) = nodes
    r0.step()
    request(d0, "gA", 0)
    r0.step()  # number 1: node0 merges
    # a bundle of another gather (labelled 7) in slot 1, then node1's answers for this one in slot 2
    for slot, window, rank in ((1, 7, 2), (2, 1, 3)):
        doc = {"format": _documents.FORMAT, "version": _documents.VERSION, "kind": "state", "rank": rank,
               "pid": 1, "host": "node1", "gather_id": "g%d" % window, "alive": True}
        store.add(_relay.PREFIX + "nodes", 1)
        store.set(_relay.PREFIX + "node/%d" % slot, _wire.labelled({"window": window, "host": "node1"}, [doc]))
        store.add(_relay.PREFIX + "node_ready/%d" % slot, 1)
        store.add(_relay.PREFIX + "ready_all", 1)
    r0.step()
    got = states_in(d0)
    assert sorted(got) == [3] and got[3].gather_id == "gA" and got[3].extra["answered_gather_id"] == "g1"
    assert sorted(n for n in os.listdir(d0) if n.startswith("states-node")) == ["states-node2.json"]


def test_requests_numbered_after_the_first_of_a_window_are_not_read(tmp_path):
    """At 1,024 ranks every node detects and asks at once: each node reading every other's request was
    128 x 128 reads.  A node reads the first and counts the others."""
    from torch import distributed as dist
    store = dist.HashStore()
    d = str(tmp_path / "node1")
    os.makedirs(d)
    log = KeyLog(store)
    clock = Clock()
    rel = started(_relay.StoreRelay(d, 8, JOB, 0.1, 5.0, store_factory=lambda: log, clock=clock))
    rel.step()
    for i in range(1, 6):  # five other nodes ask, numbered 1 to 5
        req = {"id": "g%d" % i, "job_id": JOB, "by_rank": 8 * i, "world_size": 64, "requested_at": clock()}
        n = store.add(_relay.PREFIX + "requests", 1)
        store.set(_relay.PREFIX + "request/%d" % n, json.dumps(req))
        store.add(_relay.PREFIX + "request_ready/%d" % n, 1)
    del log.calls[:]
    clock.advance(0.1)
    rel.step()
    assert [k for m, k in log.calls if m == "get"] == [_relay.PREFIX + "request/1"]
    assert _dumpdir.read_json(os.path.join(d, _dumpdir.GATHER))["id"] == "g1"


def test_what_goes_through_the_store_comes_back_the_same_and_smaller():
    hosts = {str(r): {"host": "node%04d" % (r // 8), "pid": 4000000 + (r * 7919) % 100003, "py_spy_dump": None}
             for r in range(1024)}
    verdict = {"hosts": hosts, "ranks_reporting": list(range(1024)), "culprit_ranks": [90],
               "hangs": [{"waiting_ranks": [r for r in range(1024) if r != 90], "missing": {"90": {"state": "x"}},
                          "group_ranks": list(range(0, 1024, 8))}],
               "mixed": [1, "a", None, 2.5] * 10, "small": {"1": {"a": 1}}, "uneven": {str(i): {"a": i} if i % 2 else
                                                                                      {"b": i} for i in range(40)}}
    packed = _wire.pack(verdict)
    assert _wire.unpack(packed) == verdict
    plain = len(__import__("base64").b64encode(__import__("zlib").compress(json.dumps(verdict).encode(), 6)))
    assert len(packed) < plain / 2, (len(packed), plain)


def test_one_election_rule_for_a_node_the_lowest_rank_heard_from_lately():
    from c10d_observer.election import node_leader
    assert node_leader({3: 100.0, 1: 99.0, 2: 100.0}, 100.0, 5.0) == 1
    assert node_leader({3: 100.0, 1: 90.0, 2: None}, 100.0, 5.0) == 3  # rank 1 silent too long, rank 2 never
    assert node_leader({}, 100.0, 5.0) is None


def test_a_straggler_joined_on_the_collecting_node_reaches_the_other_node(nodes):
    """Issue 44: a group across nodes is joined on one node only (the one that collects the arrivals); the
    other node's report and watch said nothing of its straggler ("calls": 0 there).  The collector's join goes
    out through the store and the other node's arrivals.read names the straggler, marked with where it was
    joined; a group this node joined itself keeps its own join."""
    from c10d_observer import arrivals as _arrivals
    store, (d0, d1), (r0, r1) = nodes
    now = r0.clock()
    for d, ranks in ((d0, (0, 1)), (d1, (2, 3))):  # each node's ranks' starts on the world group (spans both)
        for r in ranks:
            _dumpdir.write_json(os.path.join(d, _dumpdir.ARRIVALS % (r, 100 + r)), {
                "format": "c10d_observer.arrivals", "version": 1, "rank": r, "pid": 100 + r, "job_id": JOB,
                "written_at": now, "members": {"0": [0, 1, 2, 3], "1": [2, 3]}, "host": os.path.basename(d),
                "streams": {"0": [[1, now]], "1": [[1, now]]}})
    named = {"rank": 3, "share": 0.9, "median_lag_s": 0.05, "calls": 60, "since": now - 30}
    _dumpdir.write_json(os.path.join(d1, _dumpdir.STRAGGLERS), {  # node1's leader joined its own group only
        "format": "c10d_observer.stragglers", "version": 1, "written_at": now, "groups": [
            {"stream": "0", "ranks": [0, 1, 2, 3], "calls": 0, "last_share": {}, "straggler": None},
            {"stream": "1", "ranks": [2, 3], "calls": 80, "last_share": {}, "straggler": None}]})
    r0.step()  # node0 shares first: the collector
    r1.step()
    assert r0._arrivals_index == 1 and r1._arrivals_index == 2
    assert _arrivals.read(d1)["groups"][0]["straggler"] is None  # nothing joined across nodes yet
    _dumpdir.write_json(os.path.join(d0, _dumpdir.STRAGGLERS), {  # node0's watchdog joined every node's starts
        "format": "c10d_observer.stragglers", "version": 1, "written_at": now + 1, "groups": [
            {"stream": "0", "ranks": [0, 1, 2, 3], "calls": 60, "last_share": {"3": 0.9}, "straggler": named}]})
    for r in (r0, r1):
        r.clock.advance(r.arrivals_every)
        r.step()
    doc = _arrivals.read(d1)
    world, sub = doc["groups"]
    assert world["straggler"] == named and world["joined_on"] == "node0"
    assert sub["calls"] == 80 and "joined_on" not in sub  # its own join stands
    assert "rank 3 arrived last" in _arrivals.lines(doc)[0] and "joined on node0" in _arrivals.lines(doc)[0]
    sent = store.add(_relay.PREFIX + "stragglers_ready", 0)
    r0.clock.advance(r0.arrivals_every)
    r0.step()  # the join did not change: nothing sent again
    assert store.add(_relay.PREFIX + "stragglers_ready", 0) == sent


def test_a_node_sends_with_its_ranks_starts_what_they_went_through_on_its_own_groups_in_between(nodes):
    """The collector knows when a group across nodes ended its call, not what a rank of another node did on
    that node's own groups before its next call of it.  Node1's relay reads its ranks' calls between two dp
    calls (relay_arrivals.NodeWalks) and sends that beside the starts: rank 2 waited 20 ms in tp for rank 3
    there (its lateness at dp #2 is rank 3's), rank 3 waited none; the collector's dump_dir holds both."""
    from c10d_observer import arrivals as _arrivals
    from c10d_observer import watchdog_io
    store, (d0, d1), (r0, r1) = nodes
    now = r0.clock()
    t = now - 1.0
    members = {0: {"1": [0, 1], "3": [0, 2]}, 1: {"1": [0, 1], "4": [1, 3]}, 2: {"2": [2, 3], "3": [0, 2]},
               3: {"2": [2, 3], "4": [1, 3]}}
    streams = {0: {"1": [[1, t + 0.01]], "3": [[1, t], [2, t + 0.04]]},
               1: {"1": [[1, t + 0.01]], "4": [[1, t], [2, t + 0.04]]},
               2: {"2": [[1, t + 0.01]], "3": [[1, t], [2, t + 0.04]]},  # waits in tp #1 for rank 3
               3: {"2": [[1, t + 0.03]], "4": [[1, t], [2, t + 0.05]]}}
    for d, ranks in ((d0, (0, 1)), (d1, (2, 3))):
        for r in ranks:
            _dumpdir.write_json(os.path.join(d, _dumpdir.ARRIVALS % (r, 100 + r)), {
                "format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 100 + r, "job_id": JOB,
                "written_at": now, "whole": {"since": now - 3.0, "until": now}, "members": members[r],
                "host": os.path.basename(d), "streams": streams[r]})
    r0.step()  # node0 shares first: the collector
    r1.step()
    r0.clock.advance(r0.arrivals_every)
    r0.step()  # node0 reads node1's share
    got = watchdog_io.read_relayed_arrivals(_dumpdir.DumpDir(d0), JOB, 0.0)
    walks = _arrivals.walks_of(got)
    assert sorted(walks) == ["3", "4"] and set(walks["3"][2]) == {0, 2}  # node0's ranks' too (no call between)
    nxt, lo, hi = walks["3"][2][2]
    u = _arrivals.WALK_UNIT_S + 2e-6  # sent in its units, rounded the safe way; the starts to the microsecond
    assert t + 0.01 - 2e-6 <= nxt <= t + 0.01 + u and lo <= 0.02 + 1e-6 <= hi + 2e-6 and hi - lo <= 2 * u
    nxt, lo, hi = walks["4"][2][3]
    assert t + 0.03 - 2e-6 <= nxt <= t + 0.03 + u and lo == 0.0 and hi <= u
    assert walks["3"][1][2] is None  # its call before is not in: not known


class _Counting(object):
    """The store, counting the reads of the request counter (an idle relay's one operation)."""

    def __init__(self, store):
        self.store, self.reads = store, 0

    def add(self, key, n):
        self.reads += key == _relay.PREFIX + "requests" and n == 0
        return self.store.add(key, n)

    def set(self, key, value):
        return self.store.set(key, value)

    def get(self, key):
        return self.store.get(key)


def test_a_large_job_s_idle_nodes_read_the_store_less_often_yet_learn_of_a_gather(tmp_path, monkeypatch):
    """2,048 nodes at a period of 1 s: each idle node reads the request counter every 8 s, not every second
    (all of them together: IDLE_READS_PER_S a second), and still learns of another node's gather at its next
    read; a node with a request of its own reads at once, and defers to the request numbered first."""
    from torch import distributed as dist
    monkeypatch.setenv("WORLD_SIZE", "16384")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert _relay.idle_read_every(1.0) == 8.0 and _relay.idle_read_every(1.0, {}) == 1.0
    store = _Counting(dist.HashStore())
    clock = Clock()
    dirs, relays = node_relays(tmp_path, (0, 8, 16), store, clock, timeout=30.0)
    r0, r1, r2 = relays
    for r in relays:
        r.step()
    before = store.reads
    for _ in range(24):  # 24 idle periods: 3 reads each, not 24
        clock.advance(1.0)
        r1.step()
        r2.step()
    assert store.reads - before == 6
    due = r2._next_read
    while r2._next_read == due:  # node2 reads the counter (nothing new); its next read is 8 s off
        clock.advance(1.0)
        r2.step()
    request(dirs[0], "gA", 0, at=clock())
    r0.step()  # node0 detects: its request goes out at once
    clock.advance(0.5)
    assert r2._next_read > clock()  # node2 is not due to read the counter
    request(dirs[2], "gC", 16, at=clock())  # node2 detects after gA went out: it reads at once
    r2.step()
    relayed = _dumpdir.read_json(os.path.join(dirs[2], _dumpdir.GATHER))
    assert relayed["id"] == "gA" and relayed["supersedes"] == "gC"  # one merge: node0's
    learnt = None
    for i in range(1, 10):  # node1 detects nothing: it learns of gA at its next read
        clock.advance(1.0)
        r1.step()
        if _dumpdir.read_json(os.path.join(dirs[1], _dumpdir.GATHER)):
            learnt = i
            break
    assert learnt is not None and learnt <= 8


def test_the_collector_reads_other_nodes_arrivals_a_few_a_period_not_all_at_once(tmp_path, monkeypatch):
    """At 2,048 nodes the collector would read 2,047 keys in one step: it reads ARRIVALS_READS_PER_S x period
    of them a step over its round (here 2 a step, 5 other nodes: 3 steps), and starts the next round only when
    the next share is due."""
    from torch import distributed as dist
    from c10d_observer import relay_arrivals
    monkeypatch.setattr(relay_arrivals, "ARRIVALS_READS_PER_S", 2)
    store = dist.HashStore()
    clock = Clock()
    now = clock()

    def arrivals_doc(node, d):
        r = 2 * node
        _dumpdir.write_json(os.path.join(d, _dumpdir.ARRIVALS % (r, 100 + r)), {
            "format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 100 + r, "job_id": JOB,
            "written_at": now, "members": {"0": {"runs": [[0, 12, 1]]}}, "host": "node%d" % node,
            "streams": {"0": [[1, now]]}})
    dirs, relays = node_relays(tmp_path, range(0, 12, 2), store, clock, before=arrivals_doc)
    for r in relays:  # every node shares; node0 first: the collector, whose round finds only itself
        r.step()
    collector = relays[0]

    def brought():  # the other nodes' (its own sample is brought at its share, beside theirs)
        return len([n for n in os.listdir(dirs[0]) if n.startswith("arrivals-node-")
                    and n != _dumpdir.ARRIVALS_NODE % "0"])

    assert collector._arrivals_index == 1 and brought() == 0
    assert os.path.exists(os.path.join(dirs[0], _dumpdir.ARRIVALS_NODE % "0"))
    clock.advance(collector.arrivals_every)  # the next share: a round over the 5 others
    collector.step()
    got = [brought()]
    for _ in range(4):
        clock.advance(1.0)
        collector.step()
        got.append(brought())
    assert got == [2, 4, 5, 5, 5]


def test_past_150_nodes_a_straggler_of_a_group_across_nodes_is_joined_and_named_on_every_node(tmp_path,
                                                                                             monkeypatch):
    """A job of 2,048 nodes (WORLD_SIZE 16,384): a round of shares is 41 s, and a node sent the starts of its
    last 3 s at its own phase of it, so no call of a group across nodes was ever complete at the collector and
    no straggler was named (docs/scale.md).  Four nodes of such a job, two ranks each, a world group of 30
    calls a second (10 steps of three), rank 7 (node 3) 10 ms late at each step's first: every node's relay keeps the same blocks of seqs
    (relay_arrivals.sampled), the collector's watchdog joins them (watchdog_io.join_node, every 2 s as its
    loop would), and within seven rounds rank 7 is named there and, relayed, on every other node."""
    import random
    from torch import distributed as dist
    from c10d_observer import arrivals as _arrivals
    from c10d_observer import watchdog_io as _io
    monkeypatch.setenv("WORLD_SIZE", "16384")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    store, clock, rng = dist.HashStore(), Clock(), random.Random(5)
    t0 = clock()
    dirs, relays = node_relays(tmp_path, range(0, 8, 2), store, clock)
    round_s = max(relays[0].arrivals_every, 0.02 * _relay.nodes())
    assert round_s > 40  # the case of the defect: a round far longer than the 3 s a document holds

    starts = {r: {} for r in range(8)}

    def step(seq):  # a step of three calls each 0.1 s: its first with a jitter of 0-4 ms, rank 7 10 ms late;
        # the next two each issued at once after the one before ended (DDP's buckets: these tell the clocks apart)
        at = t0 + seq // 3 / 10.0
        for r in range(8):
            starts[r][seq] = at + rng.uniform(0, 0.004) + (0.010 if r == 7 else 0.0)
        for q in (seq + 1, seq + 2):
            end = max(starts[r][q - 1] for r in range(8))
            for r in range(8):
                starts[r][q] = end + rng.uniform(0, 0.0005)

    stragglers, doc, seq, t, next_doc, next_join = _arrivals.Stragglers(), None, 0, 0.0, 0.0, 2.0
    while t < 7 * round_s:
        t += 1.0
        clock.t = t0 + t
        while t0 + (seq + 3) // 3 / 10.0 <= clock.t:
            step(seq + 1)
            seq += 3
        if t >= next_doc:  # each rank's watchdog: its starts of the last 3 s, every 2 s
            next_doc = t + 2.0
            for r in range(8):
                recent = [[q, s] for q, s in sorted(starts[r].items()) if s >= clock.t - 3.0]
                _dumpdir.write_json(os.path.join(dirs[r // 2], _dumpdir.ARRIVALS % (r, 100 + r)), {
                    "format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 100 + r, "job_id": JOB,
                    "written_at": clock.t, "members": {"0": list(range(8))}, "host": "node%d" % (r // 2),
                    "streams": {"0": recent}, "rooted": {}})
        for r in relays:
            r.step()
        if t >= next_join:  # the collector's watchdog (node 0's leader): its join, every 2 s
            next_join = t + 2.0
            dd = _dumpdir.DumpDir(dirs[0])
            doc = _io.join_node(stragglers, _io.read_arrivals(dd, JOB, clock.t - 6.0),
                                _io.read_relayed_arrivals(dd, JOB, clock.t - 6.0), clock.t, "node0")
            _dumpdir.write_json(os.path.join(dirs[0], _dumpdir.STRAGGLERS), doc)
    assert relays[0]._arrivals_index == 1
    (world,) = doc["groups"]
    assert world["calls"] >= _arrivals.MIN_CALLS and (world["straggler"] or {}).get("rank") == 7, (doc.get("clocks"), world)
    for d in dirs[1:]:  # relayed: named on every node, marked as joined on node 0
        named = [g for g in _arrivals.read(d)["groups"] if g.get("straggler")]
        assert [(g["straggler"]["rank"], g["joined_on"]) for g in named] == [(7, "node0")]


def test_a_share_goes_as_seq_runs_and_microsecond_steps_and_comes_back_as_it_was():
    """arrivals.columns: a node's share at 2,048 nodes holds 6,144 starts; sent as [seq, start] pairs of
    floats it packed to 43 kB, and the collector took in 50 a second at 20-25 ms each.  Sent (and brought) as
    runs of seqs and whole-microsecond steps in one string it is less than half that, and reads back
    (arrivals.pairs_of, the watchdog's read of what the relay brought) to the microsecond."""
    import random
    from c10d_observer import arrivals as relay_arrivals, wire
    rng = random.Random(3)
    seqs = list(range(1, 65)) + list(range(513, 577)) + [600]
    pairs = [[q, round(1795990000.0 + q / 20.0 + rng.uniform(0, 0.002), 6)] for q in seqs]
    col = relay_arrivals.columns(pairs)
    assert col["seqs"] == [[1, 64, 1], [513, 64, 1], [600, 1, 1]] and isinstance(col["us"], str)
    assert relay_arrivals.pairs_of(wire.unpack(wire.pack(col))) == pairs
    assert relay_arrivals.pairs_of(relay_arrivals.columns([])) == []
    assert relay_arrivals.pairs_of(pairs) == pairs  # a share sent as pairs reads as it was
    docs = [{"rank": r, "streams": {st: [[q, round(1795990000.0 + q / 20.0 + rng.uniform(0, 0.002), 6)]
                                         for q in range(100001, 100385)] for st in ("0", "dp")}} for r in range(8)]
    as_columns = wire.pack([dict(d, streams={st: relay_arrivals.columns(p) for st, p in d["streams"].items()})
                            for d in docs])
    assert 2 * len(as_columns) < len(wire.pack(docs))


def test_wire_leaves_flat_lists_as_they_are_and_still_squeezes_a_long_list_of_ranks():
    from c10d_observer import wire
    obj = {"pairs": [[1, 2.5], [2, 3.5]] * 20, "ranks": list(range(100)), "nested": [{"ranks": list(range(0, 64, 2))}]}
    packed = wire.pack(obj)
    assert wire.unpack(packed) == obj
    assert wire._squeeze(obj)["ranks"] == {"__runs__": [[0, 100, 1]]}
    assert wire._squeeze(obj)["nested"][0]["ranks"] == {"__runs__": [[0, 32, 2]]}
    assert wire._squeeze(obj)["pairs"] is obj["pairs"]


def _gathered(tmp_path, nodes_n, store, clock):
    """``nodes_n`` nodes of two ranks; node 0 asks a gather, every other node sends its bundle."""
    dirs, relays = node_relays(tmp_path, [2 * n for n in range(nodes_n)], store, clock)
    for r in relays:
        r.step()
    request(dirs[0], "gA", 0)
    relays[0].step()
    for d, r in zip(dirs[1:], relays[1:]):
        r.step()  # each takes the request
        for rank in (r.rank, r.rank + 1):
            state(d, rank, "gA")
        r.step()  # and sends its bundle
    return dirs, relays


def test_the_merging_node_fetches_for_a_bounded_time_a_step_and_goes_on_where_it_stopped(tmp_path, monkeypatch):
    """At 16,384 ranks one step fetched 2,047 bundles in 1.6 s, without a beat in between (issue 44): a step
    now fetches for FETCH_STEP_S at most (here: one bundle a step) and the next goes on from there."""
    from torch import distributed as dist
    store, clock = dist.HashStore(), Clock()
    dirs, relays = _gathered(tmp_path, 4, store, clock)
    monkeypatch.setattr(_relay, "FETCH_STEP_S", -1.0)  # past the budget at once: the first slot, then stop
    monkeypatch.setattr(_relay, "FETCH_BATCH", 1)  # (slots are read FETCH_BATCH at a time)
    seen = []
    for _ in range(6):
        relays[0].step()
        seen.append(sorted(r for r in states_in(dirs[0])))
    assert seen[0] == [2, 3] and seen[1] == [2, 3, 4, 5] and seen[2] == seen[-1] == [2, 3, 4, 5, 6, 7], seen
    slot, before = relays[3]._slot, dict(relays[0]._fetched)
    state(dirs[3], 6, "gA")  # node3 answers again: a new pass finds its bundle
    relays[3].step()
    for _ in range(3):
        relays[0].step()
    assert relays[0]._fetched[slot] == before[slot] + 1 and relays[0]._fetch_from == 1


def test_unpack_undoes_runs_and_columns_as_the_walk_over_the_object_did():
    """wire.unpack undoes the runs and columns in JSON's object hook (a bundle's unpack was 0.6 of the merging
    node's 0.8 ms a bundle as a walk, issue 44): the same objects as the walk, on random nests of lists, maps of
    records (columns), long lists of ranks (runs), and on a landed verdict made as large as 4,096 ranks."""
    import base64
    import random
    import zlib
    from c10d_observer import wire

    def unsqueeze(obj):  # wire.unpack's work as the walk over the object it was until 2026-12-01
        if isinstance(obj, list):
            return [unsqueeze(x) for x in obj]
        if isinstance(obj, dict):
            if len(obj) == 1 and "__runs__" in obj:
                return [first + k * step for first, count, step in obj["__runs__"] for k in range(count)]
            if len(obj) == 1 and "__rows__" in obj:
                keys, fields, columns = obj["__rows__"]
                keys, columns = unsqueeze(keys), [unsqueeze(c) for c in columns]
                return {str(k): {f: col[i] for f, col in zip(fields, columns)} for i, k in enumerate(keys)}
            return {k: unsqueeze(v) for k, v in obj.items()}
        return obj

    def walked(packed):
        return unsqueeze(json.loads(zlib.decompress(base64.b64decode(packed)).decode("utf-8")))

    rng = random.Random(5)

    def nest(depth):
        k = rng.random()
        if depth > 3 or k < 0.3:
            return rng.choice([rng.randint(-5, 9999), rng.random(), "x%d" % rng.randint(0, 9), None, True])
        if k < 0.45:
            return sorted(rng.sample(range(5000), rng.randint(0, 60)))  # ranks: runs past 16
        if k < 0.6:  # rank -> record of the same fields: columns past 16
            return {str(r): {"host": "n%d" % (r // 8), "pid": r, "sub": nest(depth + 1)} for r in range(rng.randint(0, 40))}
        if k < 0.8:
            return [nest(depth + 1) for _ in range(rng.randint(0, 5))]
        return {"k%d" % i: nest(depth + 1) for i in range(rng.randint(0, 5))}

    for _ in range(400):
        obj = nest(0)
        packed = wire.pack(obj)
        assert wire.unpack(packed) == walked(packed) == obj
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "documents-v1",
                           "verdict.json")) as f:
        doc = json.load(f)
    doc["hosts"] = {str(r): {"host": "node%04d" % (r // 8), "pid": 5000 + r, "py_spy_dump": None} for r in range(4096)}
    doc["hangs"][0]["waiting_ranks"] = [r for r in range(4096) if r != 2]
    packed = wire.pack(doc)
    assert "__rows__" in zlib.decompress(base64.b64decode(packed)).decode("utf-8")
    assert wire.unpack(packed) == walked(packed) == doc


def test_a_nodes_states_go_as_one_bundle_once_every_rank_of_it_answered(tmp_path):
    """Issue 44: a node's ranks answer a gather over several relay steps; each step that found a new answer sent
    the node's bundle again (1.7 bundles a node at 4,096 ranks, each fetched and read by the merging node).
    Now the bundle waits until every rank of the node whose relay beats has answered, at most
    BUNDLE_HOLD_S after its first answer: a node whose rank never answers still sends what it has."""
    from torch import distributed as dist
    store, clock = dist.HashStore(), Clock()
    dirs, (r0, r2) = node_relays(tmp_path, (0, 2), store, clock)
    d0, d1 = dirs
    mate = started(_relay.StoreRelay(d1, 3, JOB, 1.0, 5.0, store_factory=lambda: store, clock=clock))
    mate.started_at -= 2.0
    for r in (r0, r2, mate):
        r.step()  # connected; rank 3's relay beats beside rank 2's (it leads nothing: rank 2 is lower)
    request(d0, "gA", 0)
    state(d0, 0, "gA")
    state(d0, 1, "gA")
    r0.step()
    r2.step()  # takes gA
    state(d1, 2, "gA")
    r2.step()  # rank 3 has not answered yet: nothing goes out
    assert store.add(_relay.PREFIX + "ready_all", 0) == 0
    state(d1, 3, "gA")
    r2.step()  # both: one bundle
    assert store.add(_relay.PREFIX + "ready_all", 0) == 1
    r0.step()
    assert sorted(states_in(d0)) == [0, 1, 2, 3]
    # the next gather: rank 3 never answers; its node's bundle goes once BUNDLE_HOLD_S has passed
    clock.advance(10.0)
    for r in (r0, r2, mate):
        r.step()  # the window of gA expired
    request(d0, "gB", 0, at=clock())
    state(d0, 0, "gB")
    r0.step()
    clock.advance(1.0)  # rank 2's relay reads the store once a period while no gather is on
    r2.step()
    state(d1, 2, "gB")
    r2.step()
    assert r2.window.open and store.add(_relay.PREFIX + "ready_all", 0) == 1
    mate.step()  # rank 3's relay still beats, its rank silent
    clock.advance(_relay.BUNDLE_HOLD_S)
    r2.step()
    assert store.add(_relay.PREFIX + "ready_all", 0) == 2
    r0.step()
    got = states_in(d0)
    assert got[2].gather_id == "gB" and 3 not in got  # what node1 has: rank 2's answer


class _Reads(object):
    """The store, counting its reads (``get``, ``multi_get``: one request each) and ``add`` operations, with a
    ``multi_get`` that raises where ``refuse`` (a store without one) and none where the store has none."""

    def __init__(self, store, refuse=False):
        self.store, self.refuse, self.gets, self.multi, self.adds = store, refuse, 0, 0, 0
        if not hasattr(store, "multi_get"):
            self.multi_get = None

    def add(self, key, n):
        self.adds += 1
        return self.store.add(key, n)

    def set(self, key, value):
        return self.store.set(key, value)

    def get(self, key):
        self.gets += 1
        return self.store.get(key)

    def multi_get(self, keys):
        if self.refuse:
            raise RuntimeError("multi_get is not implemented by this store")
        self.multi += 1
        return self.store.multi_get(keys)


@pytest.mark.parametrize("refuse", [False, True], ids=["multi_get", "refused"])
def test_the_merging_node_reads_the_bundles_a_batch_at_a_time_and_each_reaches_it(tmp_path, monkeypatch, refuse):
    """Issue 44: at 16,384 ranks the merging node read 2,047 bundles with one get each, and each bundle's
    counter with one add, about 0.2 ms of a bundle's 0.55 ms on loopback (benchmarks/fetch_reads.py).  Now a batch
    of FETCH_BATCH slots costs one multi_get for the counters this relay made before and one for the bundles
    that moved, where the store has one (torch 2.x); a store that refuses it gets an add a counter and a get a
    bundle, as before, and every bundle still arrives."""
    from torch import distributed as dist
    monkeypatch.setattr(_relay, "FETCH_BATCH", 8)
    base = dist.HashStore()
    if not hasattr(base, "multi_get") and not refuse:
        pytest.skip("this torch's stores have no multi_get (torch 1.x): the relay reads a get a key")
    store = _Reads(base, refuse=refuse)
    clock = Clock()
    dirs, relays = _gathered(tmp_path, 20, base, clock)
    relays[0]._store_factory = lambda: store
    relays[0].store = store
    relays[0].step()  # the first pass: one add a counter (none existed for this relay), the bundles read
    assert sorted(states_in(dirs[0])) == list(range(2, 40))  # every other node's two ranks
    first = (store.adds, store.gets, store.multi)
    for d, r in zip(dirs[1:], relays[1:]):  # every node answers again
        state(d, r.rank, "gA")
        r.step()
    store.adds = store.gets = store.multi = 0
    relays[0].step()  # the second pass: the counters this relay made, read together
    assert all(d.extra.get("answered_gather_id", d.gather_id) == "gA" for d in states_in(dirs[0]).values())
    batches = -(-20 // 8)
    if refuse:
        # a get a bundle; each counter an add (a get is two requests on torch 1.x)
        assert first[1] == 19 and store.gets == 19 and store.adds >= 19 and store.multi == 0, (first, store.gets)
    else:
        assert first[2] == batches and first[1] == 0, first  # the bundles: one multi_get a batch
        assert store.gets == 0 and store.multi == 2 * batches and store.adds <= 2, (store.adds, store.multi)
