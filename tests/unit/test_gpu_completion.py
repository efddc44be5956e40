"""When a GPU call is over (c10d_observer/gpu.py): its Work, or a completion marker recorded behind it.

STAND-IN: ``StandInEvent`` replaces ``torch.cuda.Event`` and ``capturing`` replaces
``torch.cuda.is_current_stream_capturing()``; ``FakeGroup``/``FakeWork`` replace ProcessGroupNCCL and its
Work.  No GPU on this machine: a synchronous NCCL collective (torch 2.8+ returns no Work for it) cannot
run here.  The wrappers, the tracker, GpuCompletion and the channel are the real ones; the real CUDA path
is tests/gpu/ (run on one H200 with torch 2.11 only: docs/sources.md, "What ran on a GPU").
"""
import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader
from c10d_observer import gpu as _gpu
from c10d_observer import tracker as _tracker
from c10d_observer.sources import patch
from c10d_observer.sources.patch import PatchRegistry

OP = ch.OP_CODES["all_reduce"]


class StandInEvent(object):
    """Like torch.cuda.Event: record() puts it behind the work queued so far; query() says if it passed."""
    made = 0

    def __init__(self):
        StandInEvent.made += 1
        self.recorded = 0
        self.passed = False

    def record(self):
        self.recorded += 1
        self.passed = False

    def query(self):
        return self.passed


class FakeWork(object):
    def __init__(self):
        self.completed = False

    def is_completed(self):
        return self.completed


class FakeGroup(object):
    """Like ProcessGroupNCCL from torch 2.8: a synchronous collective returns None, an async one a Work."""

    def allreduce(self, tensors, opts=None, async_op=False):
        return FakeWork() if async_op else None

    def _start_coalescing(self, device):
        pass

    def _end_coalescing(self, device):
        return None


@pytest.fixture
def rig(tmp_path):
    writer = ch_writer.ChannelWriter(max_streams=8, ring=16, directory=str(tmp_path))
    tr = _tracker.Tracker(writer, completion_period=1.0)  # the poller thread is not started: poll_once()
    tr.rank = 0
    events = []

    def new_event():
        events.append(StandInEvent())
        return events[-1]

    capture = {"on": False}
    tr.gpu = _gpu.GpuCompletion(new_event=new_event, stream_capturing=lambda: capture["on"])
    tr.polling = tr.gpu.works
    pg = FakeGroup()
    tr.groups[pg] = _tracker._Group(tr, {"group": "g", "ranks": [0], "backend": "nccl"})
    call = patch._make_coll_wrapper(tr, FakeGroup.allreduce, OP)
    reader = ch_reader.ChannelReader.attach(writer)

    def in_flight():
        return {st.desc["stream"]: st.oldest[0] for st in reader.snapshot() if st.oldest}

    yield tr, pg, call, events, capture, in_flight
    reader.close()
    writer.close()


def test_a_synchronous_call_with_no_work_stays_in_flight_until_its_marker_passes(rig):
    tr, pg, call, events, _, in_flight = rig
    assert call(pg, ["t"]) is None
    assert len(events) == 1 and events[0].recorded == 1  # one marker, recorded behind the call
    tr.poll_once()
    assert in_flight() == {"g": 1}  # the GPU has not reached it
    events[0].passed = True
    tr.poll_once()
    assert in_flight() == {}


def test_markers_are_pooled_and_recorded_again(rig):
    tr, pg, call, events, _, in_flight = rig
    for i in range(50):
        call(pg, ["t"])
        events[-1].passed = True
        tr.poll_once()
    assert in_flight() == {}
    assert len(events) == 1 and events[0].recorded == 50  # one event for 50 calls


def test_an_async_call_is_followed_by_its_work_and_records_no_marker(rig):
    tr, pg, call, events, _, in_flight = rig
    work = call(pg, ["t"], async_op=True)
    assert events == [] and work in tr.gpu.works
    tr.poll_once()
    assert in_flight() == {"g": 1}
    work.completed = True
    tr.poll_once()
    assert in_flight() == {} and not tr.gpu.works


def test_calls_end_in_their_order_of_completion_one_stream_at_a_time(rig):
    tr, pg, call, events, _, in_flight = rig
    call(pg, ["a"])
    call(pg, ["b"])
    assert in_flight() == {"g": 1}
    events[0].passed = True
    tr.poll_once()
    assert in_flight() == {"g": 2}
    events[1].passed = True
    tr.poll_once()
    assert in_flight() == {}


def test_a_call_captured_into_a_cuda_graph_ends_at_once_and_records_nothing(rig):
    tr, pg, call, events, capture, in_flight = rig
    capture["on"] = True  # the current stream is being captured: the call runs at each replay
    call(pg, ["t"])
    work = call(pg, ["t"], async_op=True)
    assert events == [] and work not in tr.gpu.works
    assert in_flight() == {}


def test_nothing_is_queried_while_a_capture_is_in_progress(rig):
    tr, pg, call, events, _, in_flight = rig
    call(pg, ["t"])
    events[0].passed = True

    class Graph(object):
        def capture_begin(self):
            pass

        def capture_end(self):
            pass

    reg = PatchRegistry()
    reg.wrap(Graph, "capture_begin", tr.gpu._wrap_begin)
    reg.wrap(Graph, "capture_end", tr.gpu._wrap_end)
    graph = Graph()
    queried = []
    events[0].query = lambda: queried.append(1) or True
    graph.capture_begin()
    tr.poll_once()
    assert queried == [] and in_flight() == {"g": 1}  # a query now would invalidate the capture
    graph.capture_end()
    tr.poll_once()
    assert queried == [1] and in_flight() == {}
    reg.restore()
    assert "capture_begin" not in vars(Graph) or Graph.capture_begin.__name__ == "capture_begin"


def test_a_capture_that_fails_to_begin_is_not_counted(rig):
    tr = rig[0]

    class Graph(object):
        def capture_begin(self):
            raise RuntimeError("no CUDA")

    begin = tr.gpu._wrap_begin(Graph.capture_begin)
    with pytest.raises(RuntimeError, match="no CUDA"):
        begin(Graph())
    assert tr.gpu.capturing == 0


def test_torchs_cuda_graph_class_is_wrapped_and_restored(rig):
    torch_graphs = pytest.importorskip("torch.cuda.graphs")
    tr = rig[0]
    before = (torch_graphs.CUDAGraph.capture_begin, torch_graphs.CUDAGraph.capture_end)
    reg = PatchRegistry()
    assert tr.gpu.watch_captures(reg) is True
    assert torch_graphs.CUDAGraph.capture_begin is not before[0]
    reg.restore()
    assert (torch_graphs.CUDAGraph.capture_begin, torch_graphs.CUDAGraph.capture_end) == before


def test_a_marker_that_cannot_be_recorded_ends_the_call_and_never_raises(rig):
    tr, pg, call, events, _, in_flight = rig

    def broken():
        raise RuntimeError("CUDA error: out of memory")

    tr.gpu._new_event = broken
    assert call(pg, ["t"]) is None  # the collective itself is untouched
    assert in_flight() == {}


def test_a_synchronous_coalesced_block_ends_with_its_marker(rig):
    tr, pg, _, events, _, in_flight = rig
    start = patch._make_start_coalescing_wrapper(tr, FakeGroup._start_coalescing)
    end = patch._make_end_coalescing_wrapper(tr, FakeGroup._end_coalescing)
    call = patch._make_coll_wrapper(tr, FakeGroup.allreduce, OP)
    start(pg, "cuda:0")
    call(pg, ["a"])
    call(pg, ["b"])
    assert end(pg, "cuda:0") is None  # torch 2.8+: a synchronous block returns no work
    assert len(events) == 1
    tr.poll_once()
    assert in_flight() == {"g": 1}
    events[0].passed = True
    tr.poll_once()
    assert in_flight() == {}


def test_a_patch_followed_nccl_group_numbers_its_calls_after_torchs_own_count(rig):
    """STAND-IN: ``seq_base`` stands in for torch's ``_get_sequence_number_for_group`` of a legacy NCCL
    group (sources.Dispatch.seq_base): 41 collectives issued before the observer first saw the group."""
    tr, _, _, events, _, in_flight = rig
    tr.seq_base = lambda pg, desc: 41
    pg = FakeGroup()
    tr.groups[pg] = _tracker._Group(tr, {"group": "late", "ranks": [0], "backend": "nccl"}, pg)
    patch._make_coll_wrapper(tr, FakeGroup.allreduce, OP)(pg, ["t"])
    assert in_flight() == {"late": 42}
