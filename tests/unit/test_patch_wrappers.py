"""When the patch source's wrappers consider a call ended, on paths that gloo cannot take here.

STAND-IN: ``FakeGroup`` and ``FakeWork`` replace torch's ProcessGroup and Work.  They are needed for the
GPU paths only: NCCL (completion from ``Work.is_completed()``, coalesced launches between
``_start_coalescing`` and ``_end_coalescing``) cannot run on this CPU-only machine, and gloo refuses
``_start_coalescing``.  The wrappers, the tracker and the channel are the real ones; the gloo paths are
covered with real ranks in tests/integration.
"""
import pytest

from c10d_observer import channel as ch

from c10d_observer import channel_writer as ch_writer

from c10d_observer import channel_reader as ch_reader
from c10d_observer import tracker as _tracker
from c10d_observer.sources import patch

OP = ch.OP_CODES["all_reduce"]
SEND = ch.OP_CODES["send"]


class FakeWork(object):
    def __init__(self):
        self.completed = False

    def is_completed(self):
        return self.completed

    def wait(self):
        return True


class FakeGroup(object):
    """Like ProcessGroupNCCL in a recent torch: inside a coalescing block, calls return no work."""

    def __init__(self):
        self.coalescing = False
        self.issued = []

    def allreduce(self, tensors, opts=None):
        self.issued.append("allreduce")
        return None if self.coalescing else FakeWork()

    def send(self, tensors, dst, tag=0):
        self.issued.append("send")
        return None if self.coalescing else FakeWork()

    def broken(self, tensors):
        raise RuntimeError("the backend refused")

    def _start_coalescing(self, device):
        self.coalescing = True

    def _end_coalescing(self, device):
        self.coalescing = False
        return FakeWork()


@pytest.fixture
def rig(tmp_path):
    writer = ch_writer.ChannelWriter(max_streams=8, ring=16, directory=str(tmp_path))
    tr = _tracker.Tracker(writer, completion_period=1.0)  # the poller thread is not started: poll_once()
    tr.rank = 0

    def group(backend):
        pg = FakeGroup()
        tr.groups[pg] = _tracker._Group(tr, {"group": "g-" + backend, "ranks": [0, 1], "backend": backend})
        return pg

    def wrap(name, op=OP):
        orig = getattr(FakeGroup, name)
        if name == "send":
            return patch._make_p2p_wrapper(tr, orig, SEND, 1, "dst", True)
        if name == "_start_coalescing":
            return patch._make_start_coalescing_wrapper(tr, orig)
        if name == "_end_coalescing":
            return patch._make_end_coalescing_wrapper(tr, orig)
        return patch._make_coll_wrapper(tr, orig, op)

    reader = ch_reader.ChannelReader.attach(writer)

    def in_flight():
        return {st.desc["stream"]: st.oldest[0] for st in reader.snapshot() if st.oldest}

    yield tr, group, wrap, in_flight
    reader.close()
    writer.close()


def test_gpu_backend_call_ends_when_its_work_completes_not_when_waited(rig):
    tr, group, wrap, in_flight = rig
    pg = group("nccl")
    work = wrap("allreduce")(pg, ["t"])
    patch._make_wait_wrapper(tr, FakeWork.wait)(work)  # NCCL's wait() only orders streams
    assert in_flight() == {"g-nccl": 1}
    tr.poll_once()
    assert in_flight() == {"g-nccl": 1}
    work.completed = True  # the GPU has finished
    tr.poll_once()
    assert in_flight() == {}


def test_cpu_backend_call_ends_when_wait_returns(rig):
    tr, group, wrap, in_flight = rig
    pg = group("gloo")
    work = wrap("allreduce")(pg, ["t"])
    assert in_flight() == {"g-gloo": 1}
    patch._make_wait_wrapper(tr, FakeWork.wait)(work)
    assert in_flight() == {} and not tr.waiting


def test_the_tracker_says_a_rank_is_in_a_call_while_a_p2p_call_is_in_flight(rig):
    # what a recorder source asks before reading its buffer off its periods (sources/flight_recorder.py)
    tr, group, wrap, in_flight = rig
    pg = group("gloo")
    assert not tr.in_a_call()
    work = wrap("send")(pg, ["t"], 1)
    assert tr.in_a_call() and in_flight() == {"g-gloo:p2p:0->1": 1}
    patch._make_wait_wrapper(tr, FakeWork.wait)(work)
    assert not tr.in_a_call()


def test_coalesced_calls_end_with_the_work_of_end_coalescing(rig):
    tr, group, wrap, in_flight = rig
    pg = group("nccl")
    wrap("_start_coalescing")(pg, "cuda:0")
    assert wrap("allreduce")(pg, ["a"]) is None
    assert wrap("send")(pg, ["b"], 1) is None
    assert in_flight() == {"g-nccl": 1, "g-nccl:p2p:0->1": 1}  # no work: still in flight
    end_work = wrap("_end_coalescing")(pg, "cuda:0")
    tr.poll_once()
    assert in_flight() == {"g-nccl": 1, "g-nccl:p2p:0->1": 1}
    end_work.completed = True
    tr.poll_once()
    assert in_flight() == {}
    assert tr.groups[pg].batch is None
    assert wrap("allreduce")(pg, ["c"]) is not None  # after the block, calls are followed one by one


def test_a_call_that_raises_is_not_left_in_flight(rig):
    tr, group, wrap, in_flight = rig
    pg = group("gloo")
    with pytest.raises(RuntimeError, match="refused"):
        wrap("broken")(pg, ["t"])
    assert in_flight() == {}


def test_a_p2p_call_that_returns_no_work_ends_at_once(rig):
    tr, group, wrap, in_flight = rig
    pg = group("nccl")
    pg.coalescing = True  # the backend returns None, but no block was opened through the wrappers
    assert wrap("send")(pg, ["t"], 1) is None
    assert in_flight() == {} and not tr.polling


def test_the_api_that_issued_a_call_is_per_thread(rig):
    """A thread inside a composite call (all_gather_object) labels its own calls; a call another thread
    issues meanwhile is not labelled (it was process-wide before: the other thread's call got the label)."""
    import threading
    from c10d_observer import callword as cw
    tr, group, wrap, in_flight = rig
    a, b = group("gloo"), group("mpi")  # two groups, so that each call has a stream to itself
    allreduce = wrap("allreduce")
    code = cw.API_CODES["all_gather_object"]
    entered, release = threading.Event(), threading.Event()

    def composite(pg):
        allreduce(pg, ["t"])
        entered.set()
        release.wait(30)

    api = patch._make_api_wrapper(tr, composite, code)
    t = threading.Thread(target=api, args=(a,))
    t.start()
    try:
        assert entered.wait(30)
        assert tr.inside == {t.ident}
        allreduce(b, ["t"])  # this thread is inside no composite call
    finally:
        release.set()
        t.join(30)
    assert tr.inside == set() and tr.ctx.api == 0
    reader = ch_reader.ChannelReader.attach(tr.channel)
    try:
        ops = {st.desc["stream"]: cw.decode_op(st.oldest[1]) for st in reader.snapshot() if st.oldest}
    finally:
        reader.close()
    assert ops == {"g-gloo": ("all_reduce", "all_gather_object"), "g-mpi": ("all_reduce", "")}
