"""Where a call ends is decided in one place, tracker._Group.end_call (issue 25): every source ends its calls
through it, and the one copy the patch source's call path inlines (a CPU backend's call with a work: every
gloo call, counted to the instruction by benchmarks/callpath_profile.py) is held to it here."""
import glob
import os
import re

import pytest

from c10d_observer import tracker

PACKAGE = os.path.dirname(os.path.abspath(tracker.__file__))


class _Stream(object):
    def __init__(self):
        self.done_seqs = []

    def done(self, seq):
        self.done_seqs.append(seq)


class _Gpu(object):
    def __init__(self):
        self.marked, self.followed = [], []

    def mark(self, st, seq):
        self.marked.append(seq)

    def follow(self, work, st, seq):
        self.followed.append((work, seq))


def _group(gpu):
    g = tracker._Group.__new__(tracker._Group)
    g.gpu, g.sink = gpu, {}
    return g


@pytest.mark.parametrize("backend,work,expect", [
    ("cpu", "w", "sink"),  # gloo: done when wait() returns or the poller sees it complete
    ("cpu", None, "done"),  # no work: done at once
    ("gpu", "w", "follow"),  # NCCL: done when the work says the GPU has finished
    ("gpu", None, "mark"),  # NCCL without a work (synchronous, 2.8+): a marker behind it on the stream
])
def test_end_call_decides_each_case(backend, work, expect):
    gpu = _Gpu() if backend == "gpu" else None
    g, st = _group(gpu), _Stream()
    g.end_call(st, 7, work)
    got = {"sink": g.sink == {"w": (st, 7)}, "done": st.done_seqs == [7],
           "follow": gpu is not None and gpu.followed == [("w", 7)], "mark": gpu is not None and gpu.marked == [7]}
    assert [k for k, v in got.items() if v] == [expect]


def _sources():
    return [p for p in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True)
            if os.path.basename(p) != "gpu.py"]


def test_no_source_ends_a_gpu_call_but_through_end_call():
    for path in _sources():
        text = open(path).read()
        for needle in ("gpu.mark(", "gpu.follow("):
            if needle in text:
                assert path.endswith("tracker.py"), "%s decides a GPU call's end itself (%s)" % (path, needle)


def test_the_patch_call_paths_inlined_copy_is_the_cpu_case_of_end_call():
    src = open(os.path.join(PACKAGE, "sources", "patch.py")).read()
    inline = re.findall(r"elif work is not None and g\.gpu is None:[^\n]*\n\s+g\.sink\[work\] = \(st, seq\)\n"
                        r"\s+else:[^\n]*\n\s+g\.end_call\(st, seq, work\)", src)
    assert len(inline) == 1, "the call path's end is no longer the inlined CPU case, then end_call"
    body = open(os.path.join(PACKAGE, "tracker.py")).read()
    cpu = re.search(r"def end_call\(self, st, seq, work\):.*?elif work is None:\n\s+st\.done\(seq\)\n\s+else:\n"
                    r"\s+self\.sink\[work\] = \(st, seq\)", body, re.S)
    assert cpu, "end_call's CPU case is not the one the call path inlines"
    for path in _sources():
        if not path.endswith(("tracker.py", os.path.join("sources", "patch.py"))):
            assert ".sink[" not in open(path).read(), "%s files a work for completion itself" % path
