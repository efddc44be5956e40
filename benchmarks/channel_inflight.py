#!/usr/bin/env python
"""The channel's cost per call when many calls are in flight at once (more than its ring of 256 slots).

    python benchmarks/channel_inflight.py

A busy NCCL job under the patch source: synchronous calls end when a CUDA event marker behind each has
passed, and the markers are read every half poll, so tens of thousands of calls can be in flight at once;
so can a burst of async works.  This starts N calls on one stream, then ends them oldest first (each end
is then the pinned call's, and the channel pins the next oldest), and prints microseconds per start and
per done.  Found on an H200 (2026-11-26: 4-byte all_reduces back to back under the patch source ran at
1,330 calls/s against 52,979 without the observer); before the fix, done() took 188 / 1,132 / 3,298 us at
2,000 / 8,000 / 24,000 calls in flight (this 2-core VM, torch-free).
"""
from __future__ import print_function

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from c10d_observer import channel_writer as ch_writer  # noqa: E402


def main():
    w = ch_writer.ChannelWriter(max_streams=8, directory=tempfile.gettempdir())
    try:
        idx = w.add_stream({"group": "g", "stream": "g", "kind": "collective"})
        st = w.stream_writer(idx)
        for n in (2000, 8000, 24000):
            t0 = time.perf_counter()
            seqs = [st.start(1) for _ in range(n)]
            t1 = time.perf_counter()
            for s in seqs:
                st.done(s)
            t2 = time.perf_counter()
            print("%6d in flight: start %.2f us/call, done %.2f us/call" % (
                n, 1e6 * (t1 - t0) / n, 1e6 * (t2 - t1) / n))
    finally:
        w.close()


if __name__ == "__main__":
    main()
