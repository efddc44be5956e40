"""The shortcuts taken for 16,384 ranks (issue 44) give what the long ways gave: ranks as runs and in words
(where words were not made shorter on purpose: a long evenly spaced group), which watchdog of a node leads
its join of arrivals, and a thread's frames."""
import json
import os
import random

import pytest

from c10d_observer import channel, dumpdir, election, stackfile, text
from c10d_observer import watchdog_io as _io


def _format_ranks_loop(ranks):  # text.format_ranks before its shortcut
    out, ranks, i = [], sorted(ranks), 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else "%d-%d" % (ranks[i], ranks[j]))
        i = j + 1
    return ",".join(out)


def _parse_ranks(words):  # text.format_ranks read back
    out = []
    for token in words.split(",") if words else ():
        span, _, step = token.partition(" step ")
        first, _, last = span.partition("-")
        out.extend(range(int(first), int(last or first) + 1, int(step or 1)))
    return out


def _rank_runs_loop(ranks):  # channel.rank_runs before its shortcut
    runs, i, n = [], 0, len(ranks)
    while i < n:
        step = ranks[i + 1] - ranks[i] if i + 1 < n else 1
        j = i + 1
        while j < n and ranks[j] - ranks[j - 1] == step and step > 0:
            j += 1
        if step <= 0:
            j = i + 1
        runs.append([ranks[i], j - i, step if j - i > 1 else 1])
        i = j
    return runs


def _lists(seed=3, n=3000):
    rng = random.Random(seed)
    for _ in range(n):
        k = rng.randint(0, 12)
        kind = rng.random()
        if kind < 0.3:
            yield list(range(rng.randint(0, 5), rng.randint(5, 40), rng.randint(1, 4)))
        elif kind < 0.6:
            yield sorted(rng.sample(range(40), k))
        else:
            yield [rng.randint(0, 20) for _ in range(k)]  # duplicates, any order
    yield list(range(16384))
    yield [r for r in range(16384) if r != 5466]


def test_ranks_as_runs_and_in_words_are_what_the_loops_gave():
    for ranks in _lists():
        assert channel.rank_runs(ranks) == _rank_runs_loop(ranks) == channel.rank_runs(tuple(ranks)), ranks
        words = text.format_ranks(ranks)
        assert _parse_ranks(words) == sorted(ranks), (ranks, words)
        if len(ranks) <= text.STRIDED_OVER or "step" not in words:  # the words as they were
            assert words == _format_ranks_loop(ranks), ranks
        assert channel.runs_of(ranks) == _rank_runs_loop(ranks) and channel.runs_of(ranks) is channel.runs_of(ranks)
    assert text.format_ranks(range(7, 16384, 8)) == "7-16383 step 8"  # 11 kB of words before (issue 44)
    assert text.format_ranks(list(range(0, 32, 2))) == _format_ranks_loop(range(0, 32, 2))  # 16: as they were
    assert text.format_ranks([0, 1, 2] + list(range(10, 100, 3)) + [200, 201]) == "0-2,10-97 step 3,200-201"
    members = list(range(0, 64, 2))
    assert channel.runs_of(members) == [[0, 32, 2]]
    members.append(99)  # longer: made again
    assert channel.runs_of(members) == [[0, 32, 2], [99, 1, 1]]
    assert channel.ranks_tuple(members) is channel.ranks_tuple(members) == tuple(members)


@pytest.mark.parametrize("seed", range(40))
def test_a_node_s_watchdog_reads_the_lower_ranks_only_and_finds_the_same_leader(tmp_path, seed):
    rng = random.Random(seed)
    d = str(tmp_path)
    dd = dumpdir.DumpDir(d)
    now, since = 1000.0, 994.0
    for rank in rng.sample(range(8), rng.randint(0, 8)):
        doc = {"rank": rank, "job_id": "job" if rng.random() < 0.85 else "other",
               "written_at": rng.choice([now, now - 2.0, now - 7.0, now - 30.0])}
        dd.write_json(dumpdir.arrivals_name(rank, 100 + rank), doc)
    if rng.random() < 0.3:  # a document no rank is named by
        with open(os.path.join(d, "arrivals-rankunknown-pid7.json"), "w") as f:
            json.dump({"rank": rng.choice([-1, 9]), "job_id": "job", "written_at": now}, f)
    for rank in range(8):
        written = {x["rank"]: x.get("written_at") for x in _io.read_arrivals(dd, "job", since)}
        written[rank] = now  # its own, written just before it asks
        leader = election.node_leader(written, now, now - since)
        assert _io.lower_rank_arrivals(dd, "job", since, rank) == (leader != rank), (rank, written)


def _thread_frames_loop(text, thread):  # stackfile.thread_frames before its memo
    heads = [m for m in stackfile._THREAD.finditer(text) if int(m.group(2), 16) == thread] if thread and text else []
    if not heads:
        return None
    frames = []
    for line in text[heads[-1].end():].splitlines()[1:]:
        m = stackfile._FRAME.match(line)
        if not m:
            break
        frames.append((m.group("file"), int(m.group("line")), m.group("func")))
    return frames


def test_a_threads_frames_are_what_the_parse_gave_however_its_block_ends():
    dump = stackfile.format_dump("asked", [(0x10, [("a.py", 1, "f"), ("b.py", 2, "g")]), (0x20, [("c.py", 3, "h")])])
    texts = [dump, dump + dump.replace('"a.py", line 1', '"z.py", line 9'), dump.rstrip("\n"),
             dump.replace('  File "b.py"', "  <no Python frame>\n  File \"b.py\""), dump.replace("\n\n", "\r\n\r\n"),
             "Thread 0x10 (most recent call first):\n  File \"x.py\", line 5 in k", ""]
    for text in texts:
        for thread in (0x10, 0x20, 0x30, None):
            got = stackfile.thread_frames(text, thread)
            assert got == _thread_frames_loop(text, thread), (text, thread)
            if got:
                got.append("changed")  # a caller's list is its own
                assert stackfile.thread_frames(text, thread) == _thread_frames_loop(text, thread)
