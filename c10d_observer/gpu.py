"""When a GPU call is over: its Work says so, or a marker recorded behind it on its stream does.

On a GPU backend a call ends when the GPU has finished it, not when Python's call returns.  A call that
returns a ``Work`` (async calls; every NCCL call before torch 2.8; p2p; NCCL2) is followed with
``Work.is_completed()``.  From 2.8 a synchronous legacy-NCCL collective returns no ``Work``: it runs on the
current CUDA stream, so a CUDA event recorded on that stream right after it completes with it (a pooled
event: ``record`` about 2.6 us, ``query`` about 1.1 us, measured on an H100 with torch 2.11,
``../shared/gpu-facts.md``); the tracker's poller queries it.

CUDA graph capture: a call issued while the current stream is being captured does not run now (it runs at
each replay, where neither torch's recorder nor the observer sees it), so it is ended at once and no event
is recorded.  And no event or work is queried while any capture is in progress: with torch's default
``capture_error_mode="global"``, a ``cudaEventQuery`` from another thread would invalidate the capture.
``torch.cuda.graphs.CUDAGraph.capture_begin``/``capture_end`` (what ``torch.cuda.graph``,
``make_graphed_callables`` and torch.compile's CUDA graphs use) are wrapped to count captures, under the
same lock the poller holds while it queries.

Nothing here imports torch until a GPU call needs an event; the event factory and the capture test are
injected so that the unit tests can stand in for CUDA (tests/unit/test_gpu_completion.py).
"""
import functools
import logging
import threading

log = logging.getLogger("c10d_observer")


def _cuda_event():
    import torch
    return torch.cuda.Event()


def _stream_capturing():
    import torch
    return torch.cuda.is_current_stream_capturing()


class GpuCompletion(object):
    def __init__(self, new_event=_cuda_event, stream_capturing=_stream_capturing):
        self.works = {}  # Work -> (stream, seq): done when work.is_completed()
        self.marks = {}  # CUDA event -> (stream, seq): done when event.query()
        self.capturing = 0  # CUDA graph captures in progress in this process
        self._free = []  # events whose call completed: recorded again for the next one
        self._new_event = new_event
        self._stream_capturing = stream_capturing
        self._lock = threading.Lock()  # held by the poller while it queries, and by capture_begin

    # -- the call path ---------------------------------------------------------------------------------
    def follow(self, work, st, seq):
        """A GPU call returned ``work``."""
        if self.capturing or self._captured():
            st.done(seq)  # captured into a graph: it runs at replay
        else:
            self.works[work] = (st, seq)

    def mark(self, st, seq):
        """A GPU call returned no work: it ran on the current stream; an event recorded there ends it."""
        if self.capturing or self._captured():
            st.done(seq)
            return
        free = self._free
        try:
            ev = free.pop() if free else self._new_event()
            try:
                ev.record()  # on the current stream of the current device
            except RuntimeError:  # a pooled event of another device: a fresh one
                ev = self._new_event()
                ev.record()
        except Exception:  # the observer never breaks a collective: this call is just not followed
            log.debug("c10d_observer: cannot record a completion marker", exc_info=True)
            st.done(seq)
            return
        self.marks[ev] = (st, seq)

    def _captured(self):
        try:
            return self._stream_capturing()
        except Exception:
            return False

    # -- the poller ------------------------------------------------------------------------------------
    def poll(self):
        """End every followed call the GPU has finished; nothing is queried while a graph is captured."""
        with self._lock:
            if self.capturing:
                return
            for work, entry in list(self.works.items()):
                try:
                    completed = work.is_completed()
                except Exception:
                    completed = True  # a work that cannot say is a failed one: no longer in flight
                if completed and self.works.pop(work, None) is not None:
                    entry[0].done(entry[1])
            for ev, entry in list(self.marks.items()):
                try:
                    completed = ev.query()
                except Exception:
                    completed = True
                if completed and self.marks.pop(ev, None) is not None:
                    entry[0].done(entry[1])
                    self._free.append(ev)

    def pending(self):
        return bool(self.works or self.marks)

    def clear(self):
        self.works.clear()
        self.marks.clear()

    # -- CUDA graph capture ----------------------------------------------------------------------------
    def watch_captures(self, registry):
        """Count captures through ``torch.cuda.graphs.CUDAGraph`` (where this torch has it)."""
        try:
            import torch.cuda.graphs as graphs
            cls = graphs.CUDAGraph
        except Exception:
            return False
        if "capture_begin" not in vars(cls) or "capture_end" not in vars(cls):
            return False
        registry.wrap(cls, "capture_begin", self._wrap_begin)
        registry.wrap(cls, "capture_end", self._wrap_end)
        return True

    def _wrap_begin(self, orig):
        @functools.wraps(orig)
        def capture_begin(*args, **kwargs):
            with self._lock:  # waits for a poll in progress: no query once the capture has begun
                self.capturing += 1
            try:
                return orig(*args, **kwargs)
            except BaseException:
                with self._lock:
                    self.capturing -= 1
                raise

        return capture_begin

    def _wrap_end(self, orig):
        @functools.wraps(orig)
        def capture_end(*args, **kwargs):
            try:
                return orig(*args, **kwargs)
            finally:
                with self._lock:
                    self.capturing = max(0, self.capturing - 1)

        return capture_end
