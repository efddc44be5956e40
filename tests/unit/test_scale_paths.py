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
    for strided in (list(range(3, 16384, 8)), list(range(0, 40, 2)), list(range(5, 5 + 17 * 3, 3))):
        # one strided run is found in C (a cascade names a data-parallel group's call once per missing rank):
        # the words the loop gives
        assert text.format_ranks(strided) == ",".join(text._parts(strided, 2)), strided
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
             "Thread 0x10 (most recent call first):\n  File \"x.py\", line 5 in k", "",
             # faulthandler's padded ids, an id whose digits end another's, "Current thread", two dumps
             "Thread 0x0000000000258000 (most recent call first):\n  File \"a.py\", line 1 in f\n\n"
             "Current thread 0x00007f3a00258000 (most recent call first):\n  File \"b.py\", line 2 in g\n\n"
             "Thread 0x0000000000000010 (most recent call first):\n  File \"c.py\", line 3 in h\n",
             "Thread 0x00007f3a00258000 (most recent call first):\n  File \"d.py\", line 4 in k\n" + dump]
    for text in texts:
        for thread in (0x10, 0x20, 0x30, None, 0x258000, 0x7f3a00258000, 0x3a00258000):
            got = stackfile.thread_frames(text, thread)
            assert got == _thread_frames_loop(text, thread), (text, thread)
            if got:
                got.append("changed")  # a caller's list is its own
                assert stackfile.thread_frames(text, thread) == _thread_frames_loop(text, thread)


def test_a_sentences_ranks_read_as_runs_steps_or_the_span_except_its_gaps():
    assert text.rank_list([2]) == "rank 2" and text.rank_list([0, 1, 2, 3, 8]) == "ranks 0-3, 8"
    assert text.rank_list([0, 1, 5, 6]) == "ranks 0, 1, 5, 6"  # pairs as they were
    assert text.rank_list(range(0, 32, 2)) == "ranks " + ", ".join(str(r) for r in range(0, 32, 2))  # 16
    assert text.rank_list(range(2, 16384, 8)) == "ranks 2-16378 step 8"
    world_but_dp2 = [r for r in range(16384) if r % 8 != 2]  # 2,048 parts as runs: 24 kB (issue 44)
    assert text.rank_list(world_but_dp2) == "ranks 0-16383 except 2-16378 step 8"
    few_gaps = [r for r in range(100) if r not in (10, 50)]  # two parts' gaps: the runs, as they were
    assert text.rank_list(few_gaps) == "ranks 0-9, 11-49, 51-99"
    for seed in range(200):  # every form reads back as its ranks
        rng = random.Random(seed)
        ranks = sorted(rng.sample(range(300), rng.randint(1, 250)))
        if seed % 3 == 0:
            ranks = [r for r in range(rng.randint(40, 400)) if r % rng.randint(2, 9)]
        words = text.rank_list(ranks).partition(" ")[2].replace(", ", ",")
        span, _, gaps = words.partition(" except ")
        got = _parse_ranks(span)
        if gaps:
            got = sorted(set(got) - set(_parse_ranks(gaps)))
        assert got == sorted(ranks), (ranks, words)


def test_a_stuck_calls_many_missing_ranks_that_read_alike_share_one_line():
    """The cascade at 16,384 ranks: the world call's 2,047 missing ranks each wait in their data-parallel
    group's call: one line (300 kB of verdict.txt on every node before), each rank still in verdict.json."""
    from c10d_observer import verdict
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "documents-v1",
                        "verdict.json")
    with open(path) as f:
        doc = json.load(f)
    small = verdict.verdict_of(json.loads(json.dumps(doc))).text
    n = 16384
    doc["hosts"] = {str(r): {"host": "node%04d" % (r // 8), "pid": 5000 + r, "py_spy_dump": None} for r in range(n)}
    h = doc["hangs"][0]
    h["group_ranks"] = list(range(n))
    missing = [r for r in range(2, n, 8) if r != 5466] + [3]  # rank 5466: the culprit, in no call
    h["missing_ranks"] = sorted(missing)
    own = h["missing"]["2"]  # one rank's own whereabouts: rank 3's
    h["missing"] = {str(r): dict(own, state="stuck", text="it waits in all_reduce #3 on group dp2") for r in missing}
    h["missing"]["3"] = own
    h["waiting_ranks"] = [r for r in range(n) if r not in set(missing)]
    words = verdict.verdict_of(doc).text
    first = words[words.index("\n#0 "):words.index("\n#1 ")]
    lines = [line for line in first.splitlines() if line.startswith("  never arrived")]
    assert lines == ["  never arrived: ranks 2-5458 step 8, 5474-16378 step 8 (2047 ranks; their hosts and pids in "
                     "verdict.json), each: it waits in all_reduce #3 on group dp2",
                     "  never arrived: rank 3 (node0000, pid 5003): it is in no collective; main thread at "
                     "stall_until_released (rank_main.py:40)"], lines
    assert "  waiting in it: ranks 0-16383 except 2, 3, 10-5458 step 8, 5474-16378 step 8\n" in first
    assert len(words) < 5000, len(words)
    assert "never arrived: rank 2 (" in small  # one missing rank: its own line, as always
