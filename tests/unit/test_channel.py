"""The shared-memory channel: what the rank writes is what the watchdog reads.

Every test runs once with a reader that maps the file by path (as the watchdog does) and once with a
reader attached to the writer's own mapping.
"""
import os
import struct

import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader

RING = 4
OP = ch.encode_op("all_reduce")


@pytest.fixture
def writer(tmp_path):
    w = ch_writer.ChannelWriter(max_streams=2, ring=RING, directory=str(tmp_path))
    yield w
    w.close()
    assert not os.path.exists(w.path)


@pytest.fixture(params=["path", "attach"])
def open_reader(request, writer):
    readers = []

    def _open():
        r = ch_reader.ChannelReader(writer.path) if request.param == "path" else ch_reader.ChannelReader.attach(writer)
        readers.append(r)
        return r

    yield _open
    for r in readers:  # before the writer closes: an attached reader shares its mapping
        r.close()


def _stream(writer, name="0"):
    idx = writer.add_stream({"group": "0", "stream": name, "ranks": [0, 1], "kind": "collective"})
    return idx, writer.stream_writer(idx)


def _state(reader, idx=0):
    return reader.snapshot()[idx]


def test_start_then_done_round_trip(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    seq = sw.start(OP, 12345)
    assert seq == 1
    st = _state(reader, idx)
    assert st.oldest == (1, OP, 12345)
    assert (st.last_started, st.last_completed) == (1, 0)

    sw.done(seq)
    st = _state(reader, idx)
    assert st.oldest is None
    assert (st.last_started, st.last_completed) == (1, 1)


def test_sequence_numbers_count_per_stream(writer, open_reader):
    _, a = _stream(writer, "a")
    _, b = _stream(writer, "b")
    assert [a.start(OP, 1), a.start(OP, 2), b.start(OP, 3)] == [1, 2, 1]
    reader = open_reader()
    assert [(s.desc["stream"], s.last_started) for s in reader.snapshot()] == [("a", 2), ("b", 1)]


def test_oldest_in_flight_reported_when_async_calls_complete_out_of_order(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in (100, 200, 300):
        sw.start(OP, t)
    sw.done(2)
    sw.done(3)
    st = _state(reader, idx)
    assert st.oldest == (1, OP, 100)
    assert (st.last_started, st.last_completed) == (3, 0)

    sw.done(1)
    st = _state(reader, idx)
    assert st.oldest is None
    assert st.last_completed == 3


def test_oldest_advances_to_next_call_in_flight(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in (100, 200, 300):
        sw.start(OP, t)
    sw.done(1)
    st = _state(reader, idx)
    assert st.oldest == (2, OP, 200)
    assert st.last_completed == 1


def test_done_hint_is_written_only_once_nothing_older_is_open(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    sw.start(OP, 100)
    sw.start(OP, 200)
    sw.done(2)  # call 1 is still open: no hint
    assert writer._mv[writer.layout.head(idx) + ch.S_DONE_HINT] == 0
    assert _state(reader, idx).oldest == (1, OP, 100)
    sw.done(1)
    assert writer._mv[writer.layout.head(idx) + ch.S_DONE_HINT] == 1


def test_done_hint_lets_the_reader_skip_slots(writer, open_reader):
    idx, sw = _stream(writer)
    sw.done(sw.start(OP, 100))
    sw.done(sw.start(OP, 200))
    writer._mv[_slot_word(writer, idx, 1, 4)] = 0  # call 1's done word lost: only the hint says it is done
    st = _state(open_reader(), idx)
    assert st.oldest is None and st.last_completed == 2


def test_ring_overflow_keeps_the_oldest_call_in_flight(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in range(1, RING + 2):  # RING + 1 calls in flight: the last one takes call 1's slot
        sw.start(OP, t * 100)
    st = _state(reader, idx)
    assert st.overflow == 1
    assert st.last_started == RING + 1
    assert st.oldest == (1, OP, 100)  # call 1 lost its slot but is the one that will be overdue first
    assert st.last_completed == 0


def test_a_burst_of_10000_calls_in_flight_never_loses_the_oldest(writer, open_reader):
    """Issue 13, case 1: 10,000 async calls issued at once while a peer is away (a ring of RING slots)."""
    import random
    idx, sw = _stream(writer)
    reader = open_reader()
    n = 10000
    for t in range(1, n + 1):
        sw.start(OP, t)
    sw.done(1)  # the first call completed; the second is the one stuck
    st = _state(reader, idx)
    assert st.oldest == (2, OP, 2) and st.last_completed == 1 and st.overflow == n - RING
    order = list(range(2, n + 1))
    random.Random(0).shuffle(order)  # async works complete in any order
    for i, seq in enumerate(order):
        sw.done(seq)
        if i % 997 == 0 or i > n - 10:
            left = sorted(order[i + 1:])
            st = _state(reader, idx)
            if left:  # always the smallest still in flight, with its own start time
                assert st.oldest == (left[0], OP, left[0]), (i, st.oldest, left[:3])
                assert st.last_completed < left[0]
    st = _state(reader, idx)
    assert st.oldest is None and st.last_completed == n


def test_a_burst_completed_in_order_keeps_the_oldest_pinned_call_by_call(writer, open_reader):
    """GPU markers and async works of a busy job end oldest first, each the pinned call: the next oldest kept
    aside is pinned at each done (found from the eviction order, not by looking at every open call)."""
    idx, sw = _stream(writer)
    reader = open_reader()
    n = 20 * RING
    for t in range(1, n + 1):
        sw.start(OP, t)
    for seq in range(1, n + 1):
        sw.done(seq)
        if seq < n and (seq % 37 == 0 or seq > n - RING - 3):
            assert _state(reader, idx).oldest == (seq + 1, OP, seq + 1), seq
    st = _state(reader, idx)
    assert st.oldest is None and st.last_completed == n


def test_a_call_left_behind_by_skip_to_is_pinned(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    first = sw.start(OP, 100)  # the oldest call in flight (a source that numbers by torch's counter)
    sw.skip_to(first + 10 * RING)  # calls in between were not recorded one by one
    sw.untracked(10 * RING)
    for t in range(RING):
        sw.start(OP, 1000 + t)
    st = _state(reader, idx)
    # 10 * RING skipped, and the first call's slot taken by a newer one (it is kept aside, and pinned)
    assert st.oldest == (first, OP, 100) and st.overflow == 10 * RING + 1
    sw.done(first)
    assert _state(reader, idx).oldest == (first + 10 * RING + 1, OP, 1000)


def test_amend_reaches_a_pinned_call(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in range(1, 2 * RING + 1):
        sw.start(OP, t)
    other = ch.encode_op("broadcast")
    sw.amend(1, other, 7)
    assert _state(reader, idx).oldest == (1, other, 7)


def test_starts_and_completions_on_two_threads_in_a_burst(writer, open_reader):
    """Calls start on the main thread while another thread completes them (the completion poller)."""
    import threading
    idx, sw = _stream(writer)
    reader = open_reader()
    started = []
    stop = threading.Event()

    def complete():
        while not stop.is_set() or len(started) > 1:
            if len(started) > 1:
                sw.done(started.pop(1))  # every call but the very first completes
    t = threading.Thread(target=complete)
    t.start()
    for i in range(1, 5001):
        started.append(sw.start(OP, i))
    stop.set()
    t.join(10)
    assert started == [1]
    st = _state(reader, idx)
    assert st.oldest == (1, OP, 1) and st.last_completed == 0 and st.last_started == 5000


def test_ring_reuse_after_completion_is_not_an_overflow(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in range(1, 3 * RING):
        seq = sw.start(OP, t)
        sw.done(seq)
    st = _state(reader, idx)
    assert st.overflow == 0
    assert st.oldest is None
    assert st.last_completed == 3 * RING - 1


def _slot_word(writer, idx, seq, word):
    return writer.layout.ring_base(idx) + (seq & writer.layout.mask) * ch.SLOT_WORDS + word


def test_torn_slot_is_not_in_flight_and_is_read_again(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    seq = sw.start(OP, 100)
    # As if the reader caught the writer between seq_a and seq_b of this slot.
    seq_b = _slot_word(writer, idx, seq, 3)
    writer._mv[seq_b] = 0
    assert _state(reader, idx).oldest is None

    writer._mv[seq_b] = seq  # the writer finishes the slot
    assert _state(reader, idx).oldest == (seq, OP, 100)


def test_torn_slot_is_not_reported_as_completed(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    sw.done(sw.start(OP, 100))
    seq = sw.start(OP, 200)
    writer._mv[_slot_word(writer, idx, seq, 3)] = 0
    assert _state(reader, idx).last_completed == seq - 1


def test_late_completion_of_an_overwritten_call_does_not_revive_its_successor(writer, open_reader):
    idx, sw = _stream(writer)
    reader = open_reader()
    for t in range(1, RING + 2):
        sw.start(OP, t)
    for seq in range(RING + 1, 0, -1):  # call 1, whose slot call RING + 1 reuses, completes last
        sw.done(seq)
    assert _state(reader, idx).oldest is None


def test_descriptor_round_trip(writer, open_reader):
    desc = {"group": "7", "name": "7", "stream": "7:p2p:0-3", "ranks": [0, 3, 5], "backend": "gloo",
            "kind": "p2p", "peer": 3, "size": 3, "group_rank": 0}
    idx = writer.add_stream(desc)
    assert _state(open_reader(), idx).desc == desc


@pytest.mark.parametrize("ranks", [list(range(16384)), list(range(3, 16384, 8)),  # world, a data-parallel group
                                   [0, 1, 2, 3, 8, 9, 10, 11], [5, 2, 7, 7, 1], [4]])
def test_the_ranks_of_a_large_group_reach_the_watchdog_whole(writer, open_reader, ranks):
    # a 1,024-rank group's list is 5 KB of JSON, over the descriptor's 1 KB: without runs, the verdict
    # would not know who the members are and could name no culprit
    desc = {"group": "big", "stream": "big", "ranks": ranks, "backend": "nccl", "kind": "collective"}
    idx = writer.add_stream(desc)
    assert _state(open_reader(), idx).desc == desc
    assert ch.expand_runs(ch.rank_runs(ranks)) == ranks


def test_too_long_descriptor_drops_ranks_but_stays_valid(writer, open_reader):
    ranks = list(range(0, 40000, 2))[::-1][:3000]  # descending: one run per rank, too long even so
    desc = {"group": "big", "stream": "big", "ranks": ranks, "backend": "gloo", "kind": "collective"}
    idx = writer.add_stream(desc)
    got = _state(open_reader(), idx).desc
    assert "corrupt_descriptor" not in got
    assert got == dict(desc, ranks=None, ranks_truncated=True)


def test_too_long_descriptor_without_ranks_is_not_corrupt(writer, open_reader):
    idx = writer.add_stream({"group": "g" * ch.DESC_BYTES, "stream": "s", "ranks": [0, 1]})
    got = _state(open_reader(), idx).desc
    assert "corrupt_descriptor" not in got
    assert got["stream"] == "s"


def test_full_channel_returns_minus_one_and_counts_dropped_streams(writer, open_reader):
    assert [writer.add_stream({"stream": str(i)}) for i in range(writer.layout.max_streams)] == [0, 1]
    assert writer.add_stream({"stream": "x"}) == -1
    assert writer.add_stream({"stream": "y"}) == -1
    reader = open_reader()
    assert reader.dropped_streams() == 2
    assert [s.desc["stream"] for s in reader.snapshot()] == ["0", "1"]


def test_rank_and_world_size(writer, open_reader):
    reader = open_reader()
    assert reader.rank() == (-1, -1)
    writer.set_rank(3, 8)
    assert reader.rank() == (3, 8)


@pytest.mark.parametrize("op", ch.OPS)
def test_op_round_trip(op):
    assert ch.decode_op(ch.encode_op(op)) == (op, "")


@pytest.mark.parametrize("api", ch.APIS)
def test_op_with_api_round_trip(api):
    assert ch.decode_op(ch.encode_op("all_gather", api)) == ("all_gather", api)


def test_unknown_op_names_and_codes():
    assert ch.decode_op(ch.encode_op("no_such_op", "no_such_api")) == ("unknown", "")
    assert ch.decode_op(len(ch.OPS) | (len(ch.APIS) << 16)) == ("unknown", "")


def test_slot_stores_the_op_word(writer, open_reader):
    idx, sw = _stream(writer)
    word = ch.encode_op("all_gather", "all_gather_object")
    sw.start(word, 5)
    st = _state(open_reader(), idx)
    assert ch.decode_op(st.oldest[1]) == ("all_gather", "all_gather_object")


def test_ring_must_be_a_power_of_two(tmp_path):
    with pytest.raises(ValueError, match="power of two"):
        ch_writer.ChannelWriter(max_streams=2, ring=3, directory=str(tmp_path))
    assert os.listdir(str(tmp_path)) == []


def test_close_removes_the_file_and_is_safe_twice(tmp_path):
    w = ch_writer.ChannelWriter(max_streams=2, ring=RING, directory=str(tmp_path))
    assert os.listdir(str(tmp_path)) == [os.path.basename(w.path)]
    w.close()
    w.close()
    assert os.listdir(str(tmp_path)) == []


def test_reader_keeps_working_after_unlink(writer):
    idx, sw = _stream(writer)
    reader = ch_reader.ChannelReader(writer.path)
    try:
        writer.unlink()
        sw.start(OP, 9)
        assert _state(reader, idx).oldest == (1, OP, 9)
    finally:
        reader.close()


def _write(path, data):
    with open(str(path), "wb") as f:
        f.write(data)
    return str(path)


def test_zeroed_file_is_not_a_channel(tmp_path):
    path = _write(tmp_path / "zeros", b"\0" * ch.layout_size(2, RING))
    with pytest.raises(ValueError, match="not a c10d-observer channel"):
        ch_reader.ChannelReader(path)


def test_other_layout_version_is_rejected(writer, tmp_path):
    with open(writer.path, "rb") as f:
        data = bytearray(f.read())
    struct.pack_into("=q", data, ch.H_VERSION * 8, ch.LAYOUT_VERSION + 1)
    path = _write(tmp_path / "v2", bytes(data))
    with pytest.raises(ValueError, match="layout version"):
        ch_reader.ChannelReader(path)


def test_truncated_channel_is_rejected(writer, tmp_path):
    with open(writer.path, "rb") as f:
        data = f.read()
    path = _write(tmp_path / "short", data[:len(data) // 2])
    with pytest.raises(ValueError, match="smaller than its layout"):
        ch_reader.ChannelReader(path)


@pytest.mark.parametrize("content", [b"not a channel\n", struct.pack("=2q", ch.MAGIC, 1)],
                         ids=["text", "header-only"])
def test_short_file_is_not_a_channel(tmp_path, content):
    path = _write(tmp_path / "short", content)
    with pytest.raises(ValueError):
        ch_reader.ChannelReader(path)


def test_size_signature_rides_in_the_op_word_and_leaves_the_op_alone():
    word = ch.encode_op("all_gather", "all_gather_object") | ch.encode_sig(ch.DTYPE_CODES["bfloat16"], 3 * 2 ** 24 + 5)
    assert ch.decode_op(word) == ("all_gather", "all_gather_object")
    assert ch.decode_sig(word) == "5 x bfloat16"  # the element count modulo 2**24
    assert ch.decode_sig(ch.encode_op("barrier")) is None
    assert ch.encode_sig(0, 10) == 0  # an unknown dtype: no signature
    assert word < 2 ** 63  # fits the slot's signed word


def test_two_calls_left_behind_by_skip_to_keep_their_start_times(writer, open_reader):
    """A source that skips past a burst (the flight-recorder reader) leaves two calls in flight; newer calls
    then take their slots.  When the first completes, the second is the oldest: with its own start time
    (a lost slot once read as 0, which reported calls hours old, measured from boot)."""
    idx, sw = _stream(writer)
    reader = open_reader()
    a, b = sw.start(OP, 100), sw.start(OP, 200)
    sw.skip_to(b + 10 * RING)
    for t in range(RING + 2):  # every slot taken by a newer call, those of a and b included
        sw.start(OP, 1000 + t)
    assert _state(reader, idx).oldest == (a, OP, 100)
    sw.done(a)
    assert _state(reader, idx).oldest == (b, OP, 200)
    sw.done(b)
    assert _state(reader, idx).oldest[2] >= 1000


@pytest.mark.parametrize("gap", [1, RING - 1, RING, 10 * RING])
def test_a_call_after_a_skip_is_seen_once_the_calls_before_it_completed(writer, open_reader, gap):
    """A source that numbers calls by torch's counter skips past calls that started and completed between
    two of its reads while an older call was still open, then starts the next one: once the older one
    completes, the new one is the oldest in flight.  The skipped numbers' slots were never written; the
    reader once took them for slots not visible yet and stopped there, so that a call behind a busy GPU after
    a burst of async calls was never found (tests/gpu healthy case, an H200, 2026-11-27)."""
    idx, sw = _stream(writer)
    reader = open_reader()
    first = sw.start(OP, 100)
    _state(reader, idx)  # the reader saw the older call in flight
    sw.skip_to(first + gap)
    stuck = sw.start(OP, 200)
    sw.done(first)
    st = reader.snapshot(passed=True)[idx]
    assert st.oldest == (stuck, OP, 200)
    assert st.last_completed == stuck - 1
    # the skipped numbers are no calls that passed; the older call is one, where no later number took its slot
    assert [s for s, _, _ in st.passed] == ([first] if first + RING > stuck else [])
    sw.done(stuck)
    st = reader.snapshot(passed=True)[idx]
    assert st.oldest is None and st.last_completed == stuck and [s for s, _, _ in st.passed] == [stuck]


def test_a_skip_over_an_open_calls_slot_keeps_that_call(writer, open_reader):
    """A skip whose numbers reuse the slot of a call still open keeps that call (aside, pinned)."""
    idx, sw = _stream(writer)
    reader = open_reader()
    first = sw.start(OP, 100)
    second = sw.start(OP, 150)
    sw.skip_to(second + RING)  # takes every slot, the open calls' too
    stuck = sw.start(OP, 200)
    assert _state(reader, idx).oldest == (first, OP, 100)
    sw.done(first)
    assert _state(reader, idx).oldest == (second, OP, 150)
    sw.done(second)
    assert _state(reader, idx).oldest == (stuck, OP, 200)
