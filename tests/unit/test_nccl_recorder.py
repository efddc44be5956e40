"""The NCCL recorder's reading, driven by readings recorded on a GPU.

STAND-IN for the GPU: ``tests/data/nccl/nccl-fr-readings-torch2.11.json`` holds what torch's legacy NCCL
flight recorder returned on one NVIDIA H100 (torch 2.11.0+cu130, NCCL 2.28.9, world size 1, a
``torch.cuda._sleep`` kernel keeping the GPU busy): per case, ``pg_status`` and the active entries before
the call, just after it was issued, 0.5 s later, and after the GPU finished.  ``compat.nccl_status`` and
``compat.nccl_active_entries`` return those readings in order; the clock is a number we move to each
reading's time.  The reader, the tracker, the channel (writer and reader) and the watchdog's decision
(``find_overdue``) are the real ones.  The same reading on a real GPU is tests/gpu/ (not run here).
"""
import json
import os
import types

import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader
from c10d_observer import compat
from c10d_observer import tracker as _tracker
from c10d_observer.sources import flight_recorder as fr
from c10d_observer.sources import recorder_books as books
from c10d_observer.sources import nccl_reader, recorder_reader, recorders
from c10d_observer.detector import find_overdue

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "data", "nccl", "nccl-fr-readings-torch2.11.json")) as _f:
    DATA = json.load(_f)
CASES = DATA["cases"]

TIMEOUT_S = 2.0
POLL_S = 0.2
PERIOD_S = POLL_S / 2
T0_NS = 10 ** 12  # the fake monotonic clock at t_ms = 0


class Clock(object):
    def __init__(self):
        self.now_ns = T0_NS
        self.wall_minus_mono = 0

    def at_ms(self, t_ms):
        self.now_ns = T0_NS + int(t_ms * 1e6)

    def monotonic_ns(self):
        return self.now_ns

    def time_ns(self):
        return self.now_ns + self.wall_minus_mono

    def time(self):
        return self.time_ns() / 1e9


class Readings(object):
    """What compat would read from torch: one recorded reading at a time."""

    def __init__(self):
        self.current = {"pg_status": {}, "active": []}
        self.entry_reads = 0

    def status(self):
        return compat.parse_status(json.dumps({"pg_status": self.current["pg_status"]}))

    def entries(self):
        self.entry_reads += 1
        return [dict(e) for e in self.current["active"]]


class FakePg(object):
    """A process group as far as the reader asks: its recorder uid and torch's collective counter."""

    def __init__(self, name, uid, seq):
        self.name, self.uid, self.seq = name, uid, seq


@pytest.fixture
def rig(monkeypatch, tmp_path):
    writer = ch_writer.ChannelWriter(max_streams=8, ring=ch.DEFAULT_RING, directory=str(tmp_path))  # as in production
    reader = ch_reader.ChannelReader.attach(writer)
    clock = Clock()
    readings = Readings()
    monkeypatch.setattr(compat, "nccl_status", readings.status)
    monkeypatch.setattr(compat, "nccl_active_entries", readings.entries)
    # the whole buffer (the batch reads of every call's start): the recordings kept the active entries only.
    # These tests are about detection: no batch read is due (tests/unit/test_fr_batches.py has theirs)
    monkeypatch.setattr(compat, "nccl_entries", readings.entries)
    monkeypatch.setattr(compat, "describe_group", lambda pg: {"group": pg.name, "name": pg.name, "ranks": [0],
                                                              "backend": "nccl"})
    monkeypatch.setattr(compat, "nccl_uid", lambda pg: pg.uid)
    monkeypatch.setattr(compat, "torch_seq", lambda pg: pg.seq)
    monkeypatch.setattr(compat, "rank_and_world", lambda: (0, 1))
    for m in (fr, recorders, recorder_reader, nccl_reader):  # the source and its readers read the clock
        monkeypatch.setattr(m, "time", clock)
    tr = _tracker.Tracker(writer, completion_period=1.0)
    tr.native_for = lambda pg, desc, kind="collective": None if kind == "p2p" else "nccl"  # the plan: this recorder makes the NCCL groups' events
    src = fr.FlightRecorderSource(tr, period=PERIOD_S, timeout=TIMEOUT_S, dump_dir=str(tmp_path),
                                  recorders=[recorders.nccl_recorder()])
    src.activate("nccl")
    src.reader("nccl").batches = books._Batches()
    src.reader("nccl").batches.next_at = float("inf")
    rig = types.SimpleNamespace(src=src, tracker=tr, clock=clock, readings=readings, reader=reader,
                                tmp=str(tmp_path))

    pgs = {}

    def read(case, i):
        r = CASES[case][i]
        readings.current = r
        for pg_id, st in r["pg_status"].items():  # torch's collective counter moves with the calls
            if pg_id in pgs:
                pgs[pg_id].seq = int(st["last_enqueued_collective"])
        clock.at_ms(r["t_ms"])
        src.poll_once()
        return r

    def groups_of(case):
        """The groups of a case, registered as GroupWatch announces them (uid = pg_id; torch's collective
        counter as it was before the case's first reading: 0 for a group made during the case)."""
        pgs.clear()
        for r in CASES[case]:
            for pg_id in sorted(r["pg_status"]):
                if pg_id not in pgs:
                    before = CASES[case][0]["pg_status"].get(pg_id, {}).get("last_enqueued_collective", 0)
                    pgs[pg_id] = FakePg("g%s" % pg_id, pg_id, int(before))
                    src.register_group(pgs[pg_id])
        for r in CASES[case]:
            for e in r["active"]:  # line up the wall clock so that entries are dated at their reading
                clock.wall_minus_mono = e["time_created_ns"] - (T0_NS + int((r["t_ms"] - 1) * 1e6))
                return
        return

    def streams():
        return {st.desc["stream"]: st for st in reader.snapshot()}

    def overdue(after_ms):
        return find_overdue(reader.snapshot(), clock.now_ns + int(after_ms * 1e6), int(TIMEOUT_S * 1e9))

    rig.read, rig.groups_of, rig.streams, rig.overdue = read, groups_of, streams, overdue
    yield rig
    reader.close()
    writer.close()


def _issued(case):
    """(pg_id, torch's number) of the calls a case's 'issued' reading shows in flight."""
    r = CASES[case][1]
    out = []
    for pg_id, st in r["pg_status"].items():
        enq, comp = int(st["last_enqueued_collective"]), int(st["last_completed_collective"])
        out.extend((pg_id, n) for n in range(max(comp, 0) + 1, enq + 1))
    return out


STUCK = ["sync_all_reduce", "async_all_reduce", "coalesced", "subgroup", "ddp_backward"]


@pytest.mark.parametrize("case", STUCK)
def test_a_call_stuck_behind_a_busy_gpu_is_found_named_and_ended_when_the_gpu_finishes(rig, case):
    rig.groups_of(case)
    rig.read(case, 0)
    assert not rig.overdue(0), "nothing was in flight before the call"
    rig.read(case, 1)
    stuck = _issued(case)
    assert stuck, "the recording shows the call in flight"
    pg_id, first = stuck[0]
    st = rig.streams()["g%s" % pg_id]
    assert st.oldest[0] == first  # torch's own number of the call, not a count from enable()
    rig.read(case, 2)  # 0.5 s later: a quarter of the timeout, the entries name the call
    entry = [e for e in CASES[case][2]["active"] if e["collective_seq_id"] == first][0]
    [o] = [o for o in rig.overdue(TIMEOUT_S * 1000) if o.stream.desc["group"] == "g%s" % pg_id]
    assert o.seq == first
    assert ch.decode_op(o.op)[0] == compat.entry_op(entry)
    numel = 1
    for n in entry["input_sizes"][0]:
        numel *= n
    assert ch.decode_sig(o.op) == "%d x %s" % (numel, ch.SCALAR_TYPES[entry["input_dtypes"][0]])
    # dated by its entry's creation time, not by when the reader first saw it
    created_mono = entry["time_created_ns"] - rig.clock.wall_minus_mono
    assert o.start_ns == created_mono
    rig.read(case, 3)  # the GPU has finished
    assert all(s.oldest is None for s in rig.reader.snapshot())
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


def test_op_names_are_the_ones_users_write(rig):
    names = {compat.entry_op(e) for rs in CASES.values() for r in rs for e in r["active"]}
    assert names == {"all_reduce", "all_reduce_coalesced"}
    assert compat.entry_op({"profiling_name": "nccl:_all_gather_base"}) == "all_gather_into_tensor"
    assert compat.entry_op({"profiling_name": "nccl:_reduce_scatter_base"}) == "reduce_scatter_tensor"
    assert compat.entry_op({"profiling_name": "nccl:all_reduce_barrier"}) == "barrier"
    assert compat.entry_op({"profiling_name": "nccl:send 0->1"}) == "send"
    assert compat.entry_op({"profiling_name": "nccl:recv 1<-0"}) == "recv"
    assert compat.entry_op({"profiling_name": "nccl:ALLGATHER_coalesced"}) == "all_gather_into_tensor_coalesced"
    assert compat.entry_op({"profiling_name": "nccl:REDUCE_SCATTER_coalesced"}) == "reduce_scatter_tensor_coalesced"
    assert compat.entry_op({"profiling_name": "nccl:all_to_all", "input_sizes": [[8]]}) == "all_to_all_single"
    assert compat.entry_op({"profiling_name": "nccl:all_to_all", "input_sizes": [[2], [2]]}) == "all_to_all"
    assert compat.entry_op({"profiling_name": "nccl:_broadcast_oop"}) == "broadcast"


def test_the_coalesced_block_pg_status_calls_completed_early_stays_in_flight_until_its_entry_retires(rig):
    # recorded: 0.5 s after the block was issued behind a busy GPU, pg_status says op 8 completed while
    # its entry is still active ("scheduled") and the GPU is still busy
    case = "coalesced"
    r2 = CASES[case][2]
    assert r2["pg_status"]["0"]["last_completed_collective"] == "8" and r2["active"][0]["op_id"] == 8
    rig.groups_of(case)
    rig.read(case, 0)  # the group's first sighting: its calls so far are checked once
    before = rig.readings.entry_reads
    rig.read(case, 1)
    rig.read(case, 2)
    assert rig.streams()["g0"].oldest[0] == 8
    assert rig.readings.entry_reads - before == 1  # one read of the active entries decided it
    rig.read(case, 3)
    assert rig.streams()["g0"].oldest is None


@pytest.mark.parametrize("case", sorted(CASES))
def test_calls_that_start_and_finish_between_two_reads_are_never_in_flight(rig, case):
    rig.groups_of(case)
    rig.read(case, 0)
    before = rig.readings.entry_reads
    rig.read(case, 3)  # the next read finds them completed
    for st in rig.reader.snapshot():
        assert st.oldest is None
        assert st.last_completed == max(int(s["last_completed_collective"]) for s in
                                        CASES[case][3]["pg_status"].values() if s is not None) or \
            st.desc["group"] != "g0"
    assert not rig.overdue(10 * TIMEOUT_S * 1000)
    moved = any(int(st["last_completed_collective"]) > int(CASES[case][0]["pg_status"].get(k, {}).get(
        "last_completed_collective", -1)) for k, st in CASES[case][3]["pg_status"].items())
    # NCCL's completions are checked against the active entries: one read where pg_status moved, none else
    assert rig.readings.entry_reads - before == (1 if moved else 0)


def test_a_quick_call_seen_in_flight_once_is_ended_without_a_report(rig):
    case = "async_all_reduce"
    rig.groups_of(case)
    rig.read(case, 0)
    rig.read(case, 1)
    assert rig.streams()["g0"].oldest[0] == 3
    r3 = dict(CASES[case][3], t_ms=CASES[case][1]["t_ms"] + 1000 * PERIOD_S)  # completed by the next read
    rig.readings.current = r3
    rig.clock.at_ms(r3["t_ms"])
    before = rig.readings.entry_reads
    rig.src.poll_once()
    assert rig.streams()["g0"].oldest is None
    assert rig.readings.entry_reads - before == 1  # its entry is no longer active: one read ended it
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


def _at(reading, t_ms, **changes):
    out = json.loads(json.dumps(reading))
    out["t_ms"] = t_ms
    out.update(changes)
    return out


def _show(rig, reading):
    rig.readings.current = reading
    rig.clock.at_ms(reading["t_ms"])
    rig.src.poll_once()


def test_a_coalesced_block_pg_status_calls_completed_before_any_read_saw_it_is_still_found(rig):
    # seen on an H200 (torch 2.11, 2026-11-26): torch's watchdog called the block completed before the
    # reader's next read, so that no read saw it enqueued and not completed; its entry is still active
    case = "coalesced"
    rig.groups_of(case)
    rig.read(case, 0)
    _show(rig, _at(CASES[case][2], CASES[case][0]["t_ms"] + 1000 * PERIOD_S))
    st = rig.streams()["g0"]
    assert st.oldest[0] == 8
    [o] = rig.overdue(TIMEOUT_S * 1000)
    assert ch.decode_op(o.op)[0] == "all_reduce_coalesced"  # named from its entry at once
    rig.read(case, 3)  # the GPU has finished
    assert rig.streams()["g0"].oldest is None
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


def _coalesced_issued(rig):
    """The recorded coalesced case up to the reading that saw the block issued: (case, that reading)."""
    rig.groups_of("coalesced")
    rig.read("coalesced", 0)
    return "coalesced", rig.read("coalesced", 1)


def test_a_coalesced_block_called_completed_within_a_poll_stays_in_flight(rig):
    case, r1 = _coalesced_issued(rig)
    _show(rig, _at(CASES[case][2], r1["t_ms"] + 1000 * PERIOD_S))  # younger than a watchdog poll
    assert rig.streams()["g0"].oldest[0] == 8
    assert [o.seq for o in rig.overdue(TIMEOUT_S * 1000)] == [8]


def test_an_active_entry_behind_a_later_completed_call_never_completes_and_is_not_in_flight(rig):
    # a collective recorded while a CUDA graph was captured: its entry stays "scheduled"; the GPU runs a
    # group's calls in order, so a later call of the group that completed (no longer active) means it never will
    case, r1 = _coalesced_issued(rig)
    later = {"0": {"last_enqueued_collective": "9", "last_completed_collective": "9", "last_started_collective": "-1"}}
    _show(rig, _at(CASES[case][2], r1["t_ms"] + 1000 * PERIOD_S, pg_status=later))
    assert rig.streams()["g0"].oldest is None
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


def test_a_held_call_is_let_go_once_a_later_call_completes(rig):
    case = "coalesced"
    rig.groups_of(case)
    rig.read(case, 0)
    rig.read(case, 1)
    r2 = rig.read(case, 2)
    assert rig.streams()["g0"].oldest[0] == 8  # held: pg_status says completed, its entry is active
    later = {"0": {"last_enqueued_collective": "9", "last_completed_collective": "9", "last_started_collective": "-1"}}
    _show(rig, _at(r2, r2["t_ms"] + 1000 * PERIOD_S, pg_status=later))  # 9 completed, 8 still listed
    assert rig.streams()["g0"].oldest is None


def test_where_the_entries_cannot_be_read_pg_status_is_taken_at_its_word(rig, monkeypatch):
    case = "async_all_reduce"
    rig.groups_of(case)
    rig.read(case, 0)
    r1 = rig.read(case, 1)
    assert rig.streams()["g0"].oldest[0] == 3

    def broken():
        raise RuntimeError("this torch cannot list its active works")

    monkeypatch.setattr(compat, "nccl_active_entries", broken)
    _show(rig, _at(CASES[case][3], r1["t_ms"] + 1000 * PERIOD_S))
    assert rig.streams()["g0"].oldest is None  # ended, never left in flight for a false report
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


@pytest.mark.parametrize("case, last", [("funcol", 9), ("mixed_ops", 7)])
def test_the_functional_collective_and_the_barrier_are_counted_by_the_recorder(rig, case, last):
    # recorded: funcol.all_reduce, and broadcast, all_gather_into_tensor, reduce_scatter_tensor and a
    # barrier (which blocks the CPU until the GPU is done, torch 2.8+): the readings after them show them
    # enqueued and then completed, counted on the group's stream, none left in flight
    rig.groups_of(case)
    rig.read(case, 0)
    for i in (1, 2, 3):
        rig.read(case, i)
    st = rig.streams()["g0"]
    assert (st.last_started, st.last_completed, st.oldest) == (last, last, None)


def test_a_counter_that_drops_is_not_a_completion(rig):
    case = "sync_all_reduce"
    rig.groups_of(case)
    rig.read(case, 0)
    r1 = rig.read(case, 1)
    dropped = json.loads(json.dumps(r1))
    # a p2p work writes its own (lower) number into the same fields: enqueued and completed go back
    dropped["pg_status"]["0"] = {"last_enqueued_collective": "1", "last_completed_collective": "0"}
    rig.readings.current = dropped
    rig.clock.at_ms(r1["t_ms"] + 100)
    rig.src.poll_once()
    st = rig.streams()["g0"]
    assert (st.last_started, st.oldest[0]) == (2, 2)


def test_a_group_with_p2p_is_followed_by_its_active_entries(rig):
    # pg_status mixes p2p numbers with collective ones there: a p2p completing on its own stream must not
    # complete a stuck collective (p2p number 5 > collective 2 here)
    case = "sync_all_reduce"
    rig.groups_of(case)
    g = rig.tracker.group(rig.src.reader("nccl").by_uid["0"][0])
    g.p2p_stream(1, True)  # what the patch source's send wrapper does at the group's first send
    rig.read(case, 0)
    r1 = rig.read(case, 1)
    assert rig.streams()["g0"].oldest[0] == 2
    p2p_done = json.loads(json.dumps(r1))
    p2p_done["pg_status"]["0"] = {"last_enqueued_collective": "5", "last_completed_collective": "5"}
    rig.readings.current = p2p_done
    rig.clock.at_ms(r1["t_ms"] + 100)
    rig.src.poll_once()
    assert rig.streams()["g0"].oldest[0] == 2  # its entry is still active
    o = rig.overdue(TIMEOUT_S * 1000)
    assert [ch.decode_op(x.op)[0] for x in o] == ["all_reduce"]  # named at once from its entry
    rig.read(case, 3)
    assert rig.streams()["g0"].oldest is None


def test_a_group_the_recorder_never_lists_goes_back_to_the_patch_source(rig):
    pg = FakePg("g7", "7", 0)
    gone = []
    rig.src.on_not_recorded = gone.append
    rig.src.register_group(pg)
    rig.readings.current = {"pg_status": {}, "active": []}  # the recorder is off: pg_status is {}
    rig.src.poll_once()
    pg.seq = 3  # torch counted three collectives on it
    rig.clock.now_ns += int(5 * PERIOD_S * 1e9)
    rig.src.poll_once()
    assert gone == [pg]


# Recorded on an H200 (torch 2.11.0+cu130, NCCL 2.28.9, 2026-11-26; benchmarks/nccl_readings.py): pg_status
# read every millisecond while each call waited behind a ~1.3 s sleep kernel, a reading kept where it changed.
# The synchronous coalesced block was called completed 65 ms after it was issued, the GPU still busy.
with open(os.path.join(HERE, "..", "data", "nccl", "nccl-fr-readings-h200-torch2.11.json")) as _f:
    H200 = json.load(_f)
H200_CASES = sorted(k for k, v in H200["cases"].items() if isinstance(v, list))
# cases with a reading after the one that saw the call issued, the GPU still busy (pg_status changed then)
H200_FLIPS = [k for k in H200_CASES if any(r.get("gpu_busy") for r in H200["cases"][k][2:])]


@pytest.mark.parametrize("case, seen_issued", [(k, True) for k in H200_CASES] + [(k, False) for k in H200_FLIPS])
def test_on_an_h200_a_call_behind_a_busy_gpu_stays_in_flight_until_the_gpu_is_free(rig, case, seen_issued):
    rows = H200["cases"][case]
    pg = FakePg("g0", "0", int(rows[0]["pg_status"]["0"]["last_enqueued_collective"]))
    rig.src.register_group(pg)
    stuck = int(rows[1]["pg_status"]["0"]["last_enqueued_collective"])
    busy = 0
    for i, r in enumerate(rows):
        if i == 1 and not seen_issued:
            continue
        pg.seq = int(r["pg_status"]["0"]["last_enqueued_collective"])
        _show(rig, r)
        if r.get("gpu_busy"):
            busy += 1
            st = rig.streams()["g0"]
            assert st.oldest is not None and st.oldest[0] == stuck, (r["t_ms"], r["pg_status"])
    assert busy >= 1
    assert rig.streams()["g0"].oldest is None  # the GPU finished it: ended
    assert not rig.overdue(10 * TIMEOUT_S * 1000)


def test_the_h200_recording_holds_the_early_completion_it_is_kept_for():
    rows = H200["cases"]["coalesced"]
    early = [r for r in rows if r.get("gpu_busy") and r["pg_status"]["0"]["last_completed_collective"] ==
             r["pg_status"]["0"]["last_enqueued_collective"] and r["active"]]
    assert early and early[0]["t_ms"] < 1000 * 0.1  # within one of torch's watchdog polls (100 ms)


def _active(template, numbers, t_created_ns):
    out = []
    for n in numbers:
        e = dict(template, collective_seq_id=n, op_id=n, record_id=n - 1, time_created_ns=t_created_ns)
        out.append(e)
    return out


def test_a_call_behind_a_busy_gpu_after_a_burst_of_async_calls_is_found(rig):
    """Seen on an H200 (torch 2.11, 2026-11-27; tests/gpu's healthy case failed 1 run in 6 of 10,000 quick
    calls and 1 in 2 of 2,000): a read found a burst of async calls (more than MAX_START in flight): the
    reader kept the oldest, skipped to the newest MAX_START and started those.  The next read found them all
    completed and the call after them stuck behind the GPU: it was started, yet the watchdog never saw it
    (the skipped numbers' slots, never written, stopped the channel's reader).  It is overdue at the
    timeout."""
    case = "sync_all_reduce"
    rig.groups_of(case)
    r0 = rig.read(case, 0)
    template = CASES[case][1]["active"][0]
    base = int(r0["pg_status"]["0"]["last_enqueued_collective"])
    burst = 2 * recorder_reader.MAX_START + 50
    t_ms = r0["t_ms"] + 1000 * PERIOD_S
    wall = template["time_created_ns"]
    first, last = base + 1, base + burst
    _show(rig, _at(r0, t_ms, pg_status={"0": {"last_enqueued_collective": str(last),
                                                "last_completed_collective": str(base),
                                                "last_started_collective": "-1"}},
                   active=_active(template, range(first, last + 1), wall)))
    st = rig.streams()["g0"]
    assert st.oldest[0] == first and st.last_started == last  # the oldest kept, the newest MAX_START started
    stuck = last + 1
    _show(rig, _at(r0, t_ms + 1000 * PERIOD_S, pg_status={"0": {"last_enqueued_collective": str(stuck),
                                                                  "last_completed_collective": str(last),
                                                                  "last_started_collective": "-1"}},
                   active=_active(template, [stuck], wall + int(2e8))))
    st = rig.streams()["g0"]
    assert st.oldest is not None and st.oldest[0] == stuck, st
    assert [o.seq for o in rig.overdue(2 * 1000 * TIMEOUT_S)] == [stuck]
