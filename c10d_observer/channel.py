"""The shared-memory channel between a rank and its watchdog: one fixed layout, which both halves share (the
rank's: channel_writer.py; the watchdog's: channel_reader.py).

The layout is written here alone, and nothing here imports torch.

Layout (native-endian signed 64-bit words; ``W`` = 8 bytes)::

    header        HEADER_WORDS words      magic, layout version, capacities, counters, rank, world size,
                                          the rank's heartbeat, its main thread's id, and whether the
                                          observer's signal handler is still the one installed
    descriptors   max_streams * DESC_BYTES  one UTF-8 JSON object per stream (NUL padded), written once
    stream heads  max_streams * HEAD_WORDS  last started seq, done hint, overflow count, and the pinned
                                            oldest call in flight (seq_a, op, start_ns, seq_b) when it fell
                                            out of the ring
    rings         max_streams * ring * SLOT_WORDS   one slot per call: seq_a, op, start_ns, seq_b, done_seq

A *stream* is what a sequence number counts: the collectives of one process group, or the point-to-point
calls of one group with one peer.  Sequence numbers start at 1.  A call with sequence number ``s`` lives in
slot ``s % ring`` of its stream's ring.

Writing is lock-free and sends no message: the rank writes a call's start as one ``struct.pack_into`` of
``seq_a, op, start_ns, seq_b`` (one C call, so no other thread of the rank can interleave with it), then
bumps the stream's ``last_started``.  Completion writes ``done_seq = seq`` into the slot, a single word.
Because start and completion touch different words and every word has a single writer at a time, async
work that completes out of order, on another thread, needs no lock.

Reading checks consistency: the reader loads ``seq_b`` first and ``seq_a`` last; equal values mean the
slot was not being rewritten in between (stores become visible in program order on x86 and in the order
of the single C call elsewhere; a torn slot is simply read again at the next poll).  ``done_hint`` is an
optimisation: the rank writes it only when every call up to it is known to be complete, so the reader can
skip finished slots without reading them.

Bursts: a ring holds the last ``ring`` calls of a stream.  When more calls are in flight than that (1,000
async calls issued at once while a peer is away), a new call's slot still holds an older call in flight,
which is then overwritten: the newest calls keep their detail.  But the call that will be overdue first is
the oldest, so the writer keeps it: the oldest call in flight that left the ring (overwritten, or skipped
by ``skip_to``) is *pinned* in its stream's head, and the reader takes it as the oldest.  When it
completes, the next oldest that left the ring is pinned (the writer kept the op and start time of every
overwritten call still in flight).  The head's overflow count says how many calls lost their slot or were
never given one (``untracked``): the report shows it as calls not individually tracked.
"""
import json
import os
import struct
import time

# The op word (names, codes, bit layout) lives in callword.py; re-exported here for the channel's readers.
from .callword import (API_CODES, APIS, DTYPE_CODES, DTYPES, OP_CODES, OPS, SCALAR_TYPES,  # noqa: F401
                       decode_op, decode_sig, encode_op, encode_sig)

MAGIC = 0x43313044_4F425356  # "C10DOBSV"
LAYOUT_VERSION = 3  # 3: the rank's declared phase in the header

HEADER_WORDS = 32
DESC_BYTES = 1024
HEAD_WORDS = 8
SLOT_WORDS = 5
DEFAULT_MAX_STREAMS = 1024
DEFAULT_RING = 256  # a power of two

# header word indices
(H_MAGIC, H_VERSION, H_MAX_STREAMS, H_RING, H_NSTREAMS, H_RANK, H_WORLD, H_PID, H_DROPPED_STREAMS,
 H_HEARTBEAT, H_MAIN_THREAD, H_HANDLER_REPLACED, H_PHASE_A, H_PHASE_SINCE, H_PHASE_UNTIL, H_PHASE_B) = range(16)
H_PHASE_NAME, PHASE_NAME_BYTES = 16, 128  # words 16-31: the declared phase's name (UTF-8, NUL padded)
# stream head word indices
S_LAST_STARTED, S_DONE_HINT, S_OVERFLOW, S_PIN = range(4)  # S_PIN..S_PIN+3: seq_a, op, start_ns, seq_b

SKIPPED = -1  # the op word of a slot whose number a skip passed over (StreamWriter.skip_to): no call, done
ARRIVALS = "arrivals"  # the kind of a stream that carries only exact starts of calls already read (no detection)

_START = struct.Struct("=4q")
_W = 8
SLOT_BYTES = SLOT_WORDS * _W
_monotonic_ns = time.monotonic_ns


def layout_size(max_streams, ring):
    return _W * (HEADER_WORDS + max_streams * (DESC_BYTES // _W + HEAD_WORDS + ring * SLOT_WORDS))


class _Layout(object):
    """Offsets of one channel, in words, shared by the writer and the reader."""

    def __init__(self, max_streams, ring):
        if ring & (ring - 1):
            raise ValueError("ring must be a power of two, got %r" % (ring,))
        self.max_streams = max_streams
        self.ring = ring
        self.mask = ring - 1
        self.desc_word = HEADER_WORDS
        self.head_word = self.desc_word + max_streams * (DESC_BYTES // _W)
        self.ring_word = self.head_word + max_streams * HEAD_WORDS
        self.size = layout_size(max_streams, ring)

    def head(self, idx):
        return self.head_word + idx * HEAD_WORDS

    def ring_base(self, idx):
        return self.ring_word + idx * self.ring * SLOT_WORDS


class ChannelError(OSError):
    """The channel could not be made (no room anywhere): the observer stays off, the job goes on."""


def default_shm_dir():
    import tempfile
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def directories():
    """Where a channel may be made, in order: /dev/shm (memory), then the temporary directory."""
    import tempfile
    out = []
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        out.append("/dev/shm")
    out.append(tempfile.gettempdir())
    return out


def rank_runs(ranks):
    """A list of global ranks as runs [first, count, step]: a group of 1,024 ranks in a few bytes.

    A group whose ranks are evenly spaced (the world, a data- or tensor-parallel group) is one run, found by
    one comparison in C: every rank's arrivals document and every document it writes carry its groups as
    runs, and the loop below took 1.3 ms for the world of 16,384 ranks, each time (0.27 ms now, 2026-12-01)."""
    n = len(ranks)
    if n > 2:
        first, step = ranks[0], ranks[1] - ranks[0]
        if step > 0 and ranks[-1] == first + step * (n - 1) and (
                ranks if isinstance(ranks, list) else list(ranks)) == list(range(first, first + step * n, step)):
            return [[first, n, step]]
    runs, i = [], 0
    while i < n:
        step = ranks[i + 1] - ranks[i] if i + 1 < n else 1
        j = i + 1
        while j < n and ranks[j] - ranks[j - 1] == step and step > 0:
            j += 1
        if step <= 0:  # not ascending: one rank per run, as given
            j = i + 1
        runs.append([ranks[i], j - i, step if j - i > 1 else 1])
        i = j
    return runs


_MEMO_MAX = 4096
_RUNS_OF = {}  # id(members) -> (members, their length, their runs): runs_of
_TUPLES = {}  # id(members list) -> (the list, its length, the tuple): ranks_tuple


def _once_per_object(memo, ranks, make):
    """make(ranks), made once per object ``ranks`` while its length is the same (``memo``: id -> (the object,
    its length, what was made)); what was made is shared: not to be changed."""
    got = memo.get(id(ranks))
    if got is not None and got[0] is ranks and got[1] == len(ranks):
        return got[2]
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    made = make(ranks)
    memo[id(ranks)] = (ranks, len(ranks), made)
    return made


def runs_of(ranks):
    """rank_runs(ranks), made once per members list or tuple: a rank's groups are the same objects poll after
    poll (the channel reader's descriptors, and the tuples ranks_tuple makes of them), written as runs into
    every arrivals document (each rank, every 2 s) and every document a rank writes: at 4,096 ranks 224,000
    times in scale.py's culprit run, 12 s (2026-12-01).  The package changes none of these lists in place;
    a length that changed makes them again all the same.  The runs are shared: not to be changed."""
    return _once_per_object(_RUNS_OF, ranks, rank_runs)


def ranks_tuple(ranks):
    """tuple(ranks) of a descriptor's members list, the same tuple each time (runs_of finds its runs made)."""
    return _once_per_object(_TUPLES, ranks, tuple)


def expand_runs(runs):
    return [first + k * step for first, count, step in runs for k in range(count)]


RUNS_OVER = 16  # a ranks list longer than this goes into a document as runs (documents, arrivals)
_EXPANDED = {}  # runs (_runs_key) -> the ranks they stand for: one tuple per group, however many documents


_LISTS = {}  # runs (_runs_key) -> the members list they stand for: members_list


def _runs_key(runs):
    """``runs`` as a key: its tuples (a document's runs are lists of three ints), else its JSON (json.dumps for
    every group of every document was 0.15 s of a 4,096-rank merge's 1.6 s under cProfile, 2026-12-02)."""
    try:
        k = tuple(map(tuple, runs))
        hash(k)
        return k
    except TypeError:  # not lists of numbers: as before
        return json.dumps(runs)


def _once_per_runs(memo, runs, make):
    """make(expand_runs(runs)), made once per runs (by their value) in this process; shared: not to be
    changed."""
    k = _runs_key(runs)
    got = memo.get(k)
    if got is None:
        if len(memo) > 1024:
            memo.clear()
        got = memo[k] = make(expand_runs(runs))
    return got


def members_list(runs):
    """The ranks ``runs`` stand for as a list made once per group in this process and shared by every channel
    reader that finds them (a descriptor's members: never changed in place).  A watchdog has one reader; a
    process with many (benchmarks/scale.py holds every simulated rank's) held one list of the world each:
    16,384 ranks x 16,384 ints, some 9 GB."""
    return _once_per_runs(_LISTS, runs, list)


def ranks_from_runs(runs):
    """The ranks ``runs`` stand for, as a tuple made once per group, however many documents hold them."""
    return _once_per_runs(_EXPANDED, runs, tuple)


def _encode_desc(desc):
    """JSON of at most DESC_BYTES - 1 bytes: the ranks as runs (rank_runs), dropped if still too long,
    then every string shortened."""
    if isinstance(desc.get("ranks"), list) and desc["ranks"] and all(isinstance(r, int) for r in desc["ranks"]):
        desc = dict(desc, ranks=None, ranks_runs=rank_runs(desc["ranks"]))
    data = json.dumps(desc, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if len(data) < DESC_BYTES:
        return data
    short = dict(desc, ranks=None, ranks_runs=None, ranks_truncated=True)
    data = json.dumps(short, separators=(",", ":"), sort_keys=True).encode("utf-8")
    limit = 256
    while len(data) >= DESC_BYTES:
        short = {k: (v[:limit] + "..." if isinstance(v, str) and len(v) > limit else v) for k, v in short.items()
                 if k not in ("ranks", "ranks_runs") or v is None}
        data = json.dumps(short, separators=(",", ":"), sort_keys=True).encode("utf-8")
        limit //= 2
        if limit < 8:
            data = json.dumps({"group": "?", "stream": "?", "ranks_truncated": True}).encode("utf-8")
    return data
