"""on_timeout="raise", the rank's half (raising.RankRaise): the request the watchdog writes becomes a
CollectiveHang in the thread named, once per gather, carrying the verdict; the groups of the stuck calls are
ended where torch can (NCCL's abort), left where it cannot (gloo).  No GPU here: a recording object stands in
for an NCCL ProcessGroup (the real one is checked in tests/gpu/ when a GPU is lent)."""
import threading
import time

from c10d_observer import dumpdir, raising, requests


class _Group(object):
    def __init__(self):
        self.aborted = 0

    def abort(self):
        self.aborted += 1


def test_nccl_groups_of_the_stuck_calls_are_aborted_gloo_groups_and_other_groups_are_not():
    nccl, other_nccl, gloo = _Group(), _Group(), _Group()
    out = raising.end_waits(["1", "2"], groups=[("1", "nccl", nccl), ("2", "gloo", gloo), ("3", "nccl", other_nccl)])
    assert (nccl.aborted, gloo.aborted, other_nccl.aborted) == (1, 0, 0)
    assert [(g, b) for g, b, _ in out] == [("1", "nccl"), ("2", "gloo")]
    assert out[0][2].startswith("aborted") and "not ended" in out[1][2] and "gloo" in out[1][2], out


def test_an_abort_that_raises_is_said_and_not_raised():
    class Broken(object):
        def abort(self):
            raise RuntimeError("communicator already gone")
    [(_, _, how)] = raising.end_waits(["0"], groups=[("0", "nccl", Broken())])
    assert how.startswith("not ended: abort raised") and "communicator already gone" in how, how


def _worker(stop, seen):
    """A thread that runs Python (as a rank's main thread does once its call returns)."""
    try:
        while not stop.is_set():
            time.sleep(0.001)
    except raising.CollectiveHang as e:
        seen.append(e)


def _rank_raise(tmp_path, thread, said, ended=()):
    dd = dumpdir.DumpDir(str(tmp_path))
    return dd, raising.RankRaise(dd, 4242, 0, time.time() - 1, said.append, main_thread_id=thread.ident,
                                 end=lambda groups: [(g, "nccl", "aborted (test)") for g in groups if g in ended])


def test_the_request_becomes_a_collective_hang_in_the_thread_carrying_the_verdict_once_per_gather(tmp_path):
    stop, seen, said = threading.Event(), [], []
    t = threading.Thread(target=_worker, args=(stop, seen))
    t.start()
    try:
        dd, rr = _rank_raise(tmp_path, t, said, ended=("3",))
        req = requests.RaiseRequest(gather_id="g1", groups=["3"], calls=["all_reduce #7 on group 3 (ranks 0-1)"],
                                    verdict="all_reduce #7 ... rank 1 never arrived", culprit_ranks=[1],
                                    verdict_path="/x/verdict.txt", written_at=time.time())
        req.send(dd, 4242)
        rr.check()
        t.join(10)
        assert not t.is_alive() and len(seen) == 1, seen
        e = seen[0]
        assert isinstance(e, RuntimeError) and isinstance(e, raising.CollectiveHang)
        assert (e.culprit_ranks, e.calls, e.groups, e.ended, e.verdict_path) == (
            (1,), ("all_reduce #7 on group 3 (ranks 0-1)",), ("3",), ("3",), "/x/verdict.txt")
        assert "rank 1 never arrived" in str(e) and "culprit ranks: 1" in str(e), str(e)
        assert len(said) == 1 and "raised when it is next in Python: as the aborted calls end" in said[0], said
        assert not dd.exists(dumpdir.raise_request_name(4242))  # taken away
        req.send(dd, 4242)  # the same gather again (a watchdog restarted): never a second exception
        rr.check()
        assert len(said) == 1
    finally:
        stop.set()
        t.join(10)


def test_a_request_older_than_the_rank_is_an_earlier_process_with_this_pid_and_is_ignored(tmp_path):
    stop, seen, said = threading.Event(), [], []
    t = threading.Thread(target=_worker, args=(stop, seen))
    t.start()
    try:
        dd, rr = _rank_raise(tmp_path, t, said)
        requests.RaiseRequest(gather_id="old", written_at=time.time() - 3600).send(dd, 4242)
        rr.check()
        assert said == [] and seen == []
    finally:
        stop.set()
        t.join(10)
    assert seen == []


def test_gloo_says_when_the_exception_comes():
    said = []
    stop, seen = threading.Event(), []
    t = threading.Thread(target=_worker, args=(stop, seen))
    t.start()
    try:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            dd = dumpdir.DumpDir(d)
            rr = raising.RankRaise(dd, 7, 2, time.time() - 1, said.append, main_thread_id=t.ident,
                                   end=lambda groups: [(g, "gloo", "not ended: torch cannot end a waiting gloo call "
                                                               "from outside it") for g in groups])
            requests.RaiseRequest(gather_id="g", groups=["0"], written_at=time.time()).send(dd, 7)
            rr.check()
            t.join(10)
        assert len(seen) == 1 and "once the call returns or raises" in said[0] and "abort" in said[0], said
    finally:
        stop.set()
        t.join(10)



def test_with_the_signal_the_observers_handler_raises_the_hang_after_the_jobs_own_handler(tmp_path):
    """The watchdog writes the request (signal_sent) and sends the job's signal at the same hard verdict: the
    job's handler runs, then the observer's handler raises CollectiveHang in the main thread, carrying the
    verdict and the groups the helper ended.  (Scheduled from another thread instead, the exception is raised
    at the first bytecode the main thread runs, the signal handler's own first line, and the job's handler
    never runs.)  A real signal to this process (SIGUSR2, so nothing else is disturbed), a real C wait
    (os.read) that the 'helper' ends, as an NCCL abort ends a wait."""
    import os
    import signal

    from c10d_observer.signals import NotifyHandler
    calls, saved = [], signal.getsignal(signal.SIGUSR2)

    def jobs(signum, frame):
        calls.append(signum)

    r, w = os.pipe()
    signal.signal(signal.SIGUSR2, jobs)
    h = NotifyHandler(signal.SIGUSR2)
    h.install()
    dd = dumpdir.DumpDir(str(tmp_path))
    said = []

    def end(groups):
        os.write(w, b"x")  # the wait ends
        return [(g, "nccl", "aborted (test)") for g in groups]

    rr = raising.RankRaise(dd, 4242, 0, time.time() - 1, said.append, end=end, handler=h)
    h.after = rr.from_signal

    def verdict():  # the watchdog's half, then the rank's helper thread's
        requests.RaiseRequest(gather_id="g1", groups=["3"], calls=["all_reduce #7 on group 3 (ranks 0-1)"],
                              verdict="rank 1 never arrived", culprit_ranks=[1], written_at=time.time(),
                              signal_sent=True).send(dd, 4242)
        os.kill(os.getpid(), signal.SIGUSR2)
        rr.check()

    caught = []
    t = threading.Thread(target=verdict)
    try:
        try:
            t.start()
            os.read(r, 1)  # the main thread waits in C
            for _ in range(1000):  # back in Python: the exception comes at the latest here
                pass
        except raising.CollectiveHang as e:
            caught.append(e)
        t.join(10)
    finally:
        h.uninstall()
        signal.signal(signal.SIGUSR2, saved)
        os.close(r)
        os.close(w)
    assert calls == [signal.SIGUSR2], "the job's handler did not run: %r" % calls
    assert len(caught) == 1, caught
    e = caught[0]
    assert (e.culprit_ranks, e.ended) == ((1,), ("3",)), (e.culprit_ranks, e.ended)
    # said once, by whichever came first: the helper thread, or the handler (the main thread back in Python)
    assert len(said) == 1 and "handler in the main thread, after the job's own handler" in said[0] \
        and "aborted (test)" in said[0], said
    assert not dd.exists(dumpdir.raise_request_name(4242))  # taken away by the handler
    rr.check()  # nothing left to do: no second line, no second exception
    assert len(said) == 1


def test_a_fault_of_the_observers_in_the_signal_handlers_half_is_said_and_never_reaches_the_job(tmp_path):
    """Only CollectiveHang ever leaves the handler's half: an error of the observer's own there (here the
    waits' ending breaks) is one line, and the job's main thread goes on."""
    dd = dumpdir.DumpDir(str(tmp_path))
    said = []

    def broken(groups):
        raise OSError("the observer's own fault")

    class Handler(object):
        signum, installed, via_faulthandler = 12, True, False

        def replaced_by(self):
            return None

    rr = raising.RankRaise(dd, 4242, 0, time.time() - 1, said.append, end=broken, handler=Handler())
    requests.RaiseRequest(gather_id="g1", groups=["3"], written_at=time.time(), signal_sent=True).send(dd, 4242)
    rr.from_signal()  # returns: nothing raised
    assert len(said) == 1 and "could not raise the verdict" in said[0] and "the job goes on" in said[0], said
