"""A STAND-IN for ``torch.distributed.hooks`` / ``_hooks`` (PR #108815, reverted; in no torch release).

It implements exactly that module's contract, so that the observer's ``hooks`` source can be tested on
released torch: ``register_collective_start_hook``, ``register_collective_end_hook``,
``register_process_group_hook`` and the ``CollectiveStatus`` dataclass (``pg_name``, ``backend``,
``sequence_number``, ``operation``, ``timestamp`` in whole seconds, ``duration``, ``drop_count``);
callbacks run on a background thread; hooks cannot be unregistered; a failing callback is logged and
ignored.  Where torch's C++ backends emitted the events, this stand-in is driven by real collectives: it
wraps the ProcessGroup collective methods and emits START when a collective is issued and END when its
work is done, as gloo's worker thread did.  "Done" is read without waiting on the work from a second
thread (which can block behind the caller, or not return for some works): a completion thread polls
``Work.is_completed()`` every millisecond, and a work whose ``wait()`` returned in the caller is done too
(gloo's reduce_scatter work on torch 2.15 never reports ``is_completed()``).  Only the emitting side
is simulated.
"""
import functools
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Optional

logger = logging.getLogger(__name__)

__all__ = ["CollectiveStatus", "register_collective_start_hook", "register_collective_end_hook",
           "register_process_group_hook"]

# ProcessGroup methods that issue an op, and the operation name torch's C++ (opTypeToString) gave them
_OPS = {m: m.upper() for m in (
    "allreduce", "broadcast", "reduce", "allgather", "_allgather_base", "all_gather_single", "gather",
    "scatter", "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_single", "alltoall", "alltoall_base",
    "all_to_all_single", "barrier", "allreduce_coalesced", "allgather_coalesced",
    "allgather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced", "gather_single", "send", "recv",
    "recv_anysource")}


@dataclass
class CollectiveStatus:
    pg_name: str = "unknown"
    backend: str = "unknown"
    sequence_number: int = -1
    operation: str = "unknown"
    timestamp: int = 0
    duration: Optional[float] = None
    drop_count: int = 0


_start_callbacks = []
_end_callbacks = []
_pg_callbacks = []
_events = queue.Queue()
_pending = {}  # id(work) -> (work, status, t0): issued, END not emitted yet
_seq = {}
_lock = threading.Lock()
_started = []


def _dispatch():
    while True:
        kind, status = _events.get()
        for cb in (_start_callbacks if kind == "start" else _end_callbacks):
            try:
                cb(status)
            except Exception as e:  # the contract: exceptions in callbacks are ignored
                logger.info("c10d event callback %s threw %s", cb, e)


def _end(key):
    with _lock:
        entry = _pending.pop(key, None)
    if entry is not None:
        work, status, t0 = entry
        _events.put(("end", CollectiveStatus(status.pg_name, status.backend, status.sequence_number,
                                             status.operation, int(time.time()), (time.time() - t0) * 1e3)))


def _poll_works():
    while True:
        time.sleep(0.001)
        with _lock:
            works = list(_pending.items())
        for key, (work, _, _) in works:
            try:
                done = work.is_completed()
            except Exception:
                done = False
            if done:
                _end(key)


def _wrap_wait(orig):
    @functools.wraps(orig)
    def wait(self, *args, **kwargs):
        result = orig(self, *args, **kwargs)
        _end(id(self))
        return result

    return wait


def _wrap(method, orig):
    @functools.wraps(orig)
    def wrapper(self, *args, **kwargs):
        import torch.distributed as dist
        names = dist.distributed_c10d._world.pg_names if hasattr(dist.distributed_c10d, "_world") \
            else dist.distributed_c10d._pg_names
        name = names.get(self, "unknown")
        with _lock:
            seq = _seq[name] = _seq.get(name, 0) + 1
        status = CollectiveStatus(name, "gloo", seq, _OPS[method], int(time.time()))
        work = orig(self, *args, **kwargs)  # an op that raises was never started: no event
        _events.put(("start", status))
        if work is not None:
            with _lock:
                _pending[id(work)] = (work, status, time.time())
        return work

    return wrapper


def _lazy_init():
    if _started:
        return
    _started.append(True)
    from torch._C import _distributed_c10d as C
    for method in _OPS:
        if method in vars(C.ProcessGroup):
            setattr(C.ProcessGroup, method, _wrap(method, vars(C.ProcessGroup)[method]))
    threading.Thread(target=_dispatch, daemon=True, name="standin-c10d-hooks").start()
    work_cls = getattr(C, "Work", None) or C.ProcessGroup.Work
    work_cls.wait = _wrap_wait(work_cls.wait)
    threading.Thread(target=_poll_works, daemon=True, name="standin-c10d-works").start()


# torch's backends emit the events from C++, below any Python wrapper: wrap at import, before anything else
_lazy_init()


def register_collective_start_hook(hook):
    _start_callbacks.append(hook)
    _lazy_init()


def register_collective_end_hook(hook):
    _end_callbacks.append(hook)
    _lazy_init()


def register_process_group_hook(hook):
    _pg_callbacks.append(hook)
