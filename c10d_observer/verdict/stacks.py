"""Where a rank's main thread is, from its last stack dump: its first frame of user code, what it is doing
(waiting for a DataLoader worker, saving with torch.save, ...), and the ranks' main-thread stacks grouped by
their functions and files, each rank keeping its own line numbers."""
import collections
import os
import re
from typing import NamedTuple, Optional

from .. import stackfile as _stackfile
from .render import SHOWN
from .types import Stacks

_OWN = re.compile(r"[/\\]c10d_observer[/\\]")  # this package's frames (its wrappers of torch's functions)
_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib(64)?[/\\]python\d[.\d]*[/\\]|^<frozen|"
                      + _OWN.pattern)
# what a main thread is doing, by a frame it is in: (file ending, functions or None for any, words)
_ACTIVITIES = (
    ("torch/utils/data/dataloader.py", ("_try_get_data", "_get_data", "_next_data"), "waiting for a DataLoader worker"),
    ("torch/serialization.py", ("save", "_save"), "saving with torch.save"),
    ("torch/serialization.py", ("load", "_load"), "loading with torch.load"),
    ("torch/distributed/checkpoint/", None, "in torch.distributed.checkpoint"),
    ("torch/cuda/__init__.py", ("synchronize",), "waiting for the GPU (torch.cuda.synchronize)"),
    ("torch/cuda/streams.py", ("synchronize",), "waiting for the GPU (a stream's synchronize)"),
    ("threading.py", ("wait", "join", "acquire"), "waiting on a thread, lock or event"),
    ("queue.py", ("get", "put"), "waiting on a queue"),
    ("subprocess.py", ("wait", "communicate"), "waiting for a subprocess"),
)


def main_thread_frames(doc):
    """[(file, line, function)] innermost first of the rank's main thread in its last stack dump (the
    stacks file, or the summary relay.py brings from another node), or None."""
    text = doc.stacks_text if doc.stacks_text is not None else _stackfile.read_tail(doc.stack_dump)
    return _stackfile.thread_frames(text, doc.main_thread)


def frame_text(frame):
    return "%s (%s:%s)" % (frame[2], os.path.basename(frame[0]), frame[1])


def is_library(frame):
    return bool(_LIBRARY.search(frame[0].replace("\\", "/") if frame[0] else ""))


class Place(NamedTuple):
    """Where a main thread is: its first frame of user code (``main_thread``), its innermost frame, what the
    frames say it is doing (``activity``, or None), and all of it in words (``text``)."""
    main_thread: str
    innermost: str
    activity: Optional[str]
    text: str


def place(frames):
    """The Place of a main thread's frames (innermost first), or None for none."""
    if not frames:
        return None
    user = next((f for f in frames if not is_library(f)), frames[0])
    main, innermost = frame_text(user), frame_text(frames[0])
    activity = None
    for f in frames:
        path = f[0].replace("\\", "/")
        activity = next((words for end, funcs, words in _ACTIVITIES
                         if (path.endswith(end) or (end.endswith("/") and end in path))
                         and (funcs is None or f[2] in funcs)), None)
        if activity:
            break
    return Place(main, innermost, activity, "main thread at %s%s%s" % (
        main, ", in %s" % innermost if user is not frames[0] else "", "; %s" % activity if activity else ""))


def whereabouts(frames):
    """{"main_thread": the first frame of user code, "innermost": the innermost frame, "activity": what the
    frames say it is doing ('waiting for a DataLoader worker'), "text"} of a main thread's frames (``place``)."""
    p = place(frames)
    if p is None:
        return {}
    out = {"main_thread": p.main_thread, "innermost": p.innermost}
    if p.activity:
        out.update(activity=p.activity)
    out.update(text=p.text)
    return out


def _signature(frames):
    # frames without line numbers of the innermost few: ranks stuck at the same place share it
    return tuple("%s (%s)" % (f[2], os.path.basename(f[0])) for f in frames[:8])



_WORDS = {}  # a main thread's frames -> (its _signature, its frames' texts, its job frame): _stack_groups


def _own(frame):
    return bool(frame[0]) and bool(_OWN.search(frame[0]))


def _words(frames):
    """(_signature, the frame_text of each of the innermost 8 frames but this package's own (its wrappers of
    torch's functions: the job did not write them), a tuple, the frame_text of the job's innermost frame where it
    is not among the first SHOWN of them, else None) of a main thread's frames, made once per process for
    frames alike (the ranks waiting in one call share them)."""
    key = tuple(frames)
    got = _WORDS.get(key)
    if got is None:
        if len(_WORDS) >= 4096:
            _WORDS.clear()
        shown = [f for f in frames if not _own(f)] or list(frames)
        job = next((i for i, f in enumerate(shown) if not is_library(f)), None)
        got = _WORDS[key] = (_signature(frames), tuple([frame_text(f) for f in shown[:8]]),
                             frame_text(shown[job]) if job is not None and job >= SHOWN else None)
    return got


def _stack_groups(frames_by_rank):
    """Main-thread stacks grouped by their frames (functions and files, not line numbers), each group with
    its line-number variants and the ranks at each: ranks one line apart stay one group, but each rank's
    own lines are kept (the difference may be what the user looks for).  [Stacks]."""
    groups = collections.OrderedDict()  # signature -> (frames, ranks, {(frames, job frame): ranks}: its variants)
    for r, frames in sorted(frames_by_rank.items()):
        if not frames:
            continue
        signature, texts, job = _words(frames)
        first, ranks, variants = groups.setdefault(signature, ((list(texts), job), [], collections.OrderedDict()))
        ranks.append(r)
        variants.setdefault((texts, job), []).append(r)
    out = [_stacks(first, ranks, [_stacks((list(t), j), rs) for (t, j), rs in variants.items()])
           for first, ranks, variants in groups.values()]
    return sorted(out, key=lambda g: (len(g.ranks), g.ranks))


def _stacks(frames_job, ranks, variants=None):
    frames, job = frames_job
    more = {} if job is None else dict(job_frame=job)
    if variants is not None:
        more.update(variants=variants)
    return Stacks(frames=frames, ranks=ranks, **more)
