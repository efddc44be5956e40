"""How the observer names things to a person: ranks, calls, times.  No torch, no imports of the package."""
import datetime


STRIDED_OVER = 16  # more evenly spaced ranks than this (a step over 1) read 'first-last step s'


def format_ranks(ranks):
    """[0, 1, 2, 3, 8] -> '0-3,8' (compact: JSON-like places, the page, the grouped stacks); more than
    STRIDED_OVER ranks at one step over 1 -> '7-16383 step 8'.  (A data-parallel group of 2,048 ranks was 11 kB
    of words, in every line of the verdict that named its call: at 16,384 ranks the cascade's verdict.txt was
    22 MB and its verdict.json 24 MB, on every node, 2026-12-01.)"""
    if ranks is None:
        return "?"
    out = []
    ranks = sorted(ranks)
    n = len(ranks)
    if n > 1 and ranks[-1] - ranks[0] == n - 1 and ranks == list(range(ranks[0], ranks[0] + n)):
        return "%d-%d" % (ranks[0], ranks[-1])  # one run, found in C: a call's group of 16,384 ranks was 3.6 ms
    step = (ranks[-1] - ranks[0]) // (n - 1) if n > STRIDED_OVER else 0
    if step > 1 and ranks == list(range(ranks[0], ranks[-1] + 1, step)):
        return "%d-%d step %d" % (ranks[0], ranks[-1], step)  # one strided run (a data-parallel group), in C too
    return ",".join(_parts(ranks, 2))


def _parts(ranks, run_from):
    """The words of sorted ``ranks``: runs of ``run_from`` or more consecutive ranks as 'a-b', more than
    STRIDED_OVER of the others at one step over 1 as 'a-b step s', every other rank alone."""
    out, single = [], []  # single: ranks in no run, not yet written

    def flush():
        i = 0
        while i < len(single):
            j = i + 1
            step = single[j] - single[i] if j < len(single) else 0
            while step > 1 and j < len(single) and single[j] - single[j - 1] == step:
                j += 1
            if j - i > STRIDED_OVER:
                out.append("%d-%d step %d" % (single[i], single[j - 1], step))
                i = j
            else:
                out.append(str(single[i]))
                i += 1
        del single[:]

    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i + 1 >= run_from:
            flush()
            out.append("%d-%d" % (ranks[i], ranks[j]))
        else:
            single.extend(ranks[i:j + 1])
        i = j + 1
    flush()
    return out


def rank_list(ranks, none="none"):
    """Ranks as a list reads in a sentence: 'rank 2', 'ranks 0, 2', 'ranks 0-3, 8' (runs of three or more
    as a range; more than STRIDED_OVER evenly spaced ones as 'ranks 2-16378 step 8'), or ``none``.  A list of
    more than STRIDED_OVER parts whose gaps read in fewer than half as many reads as its span except them:
    'ranks 0-16383 except 2-16378 step 8' (the ranks of a world call that one data-parallel group never
    reached, at 16,384 ranks: 2,048 parts, 24 kB, 2026-12-01)."""
    ranks = sorted(set(ranks or ()))
    if not ranks:
        return none
    parts = _parts(ranks, 3)
    first, last = ranks[0], ranks[-1]
    if len(parts) > STRIDED_OVER and last - first + 1 - len(ranks) <= len(ranks):
        have = set(ranks)
        gaps = _parts([r for r in range(first, last + 1) if r not in have], 3)
        if 2 * len(gaps) < len(parts):
            return "ranks %d-%d except %s" % (first, last, ", ".join(gaps))
    return "%s %s" % ("rank" if len(ranks) == 1 else "ranks", ", ".join(parts))


def ranks_in(words):
    """The ranks of rank_list's words without their 'rank'/'ranks' ("0-2, 5": runs and single ranks; not its
    strided or 'except' forms, which a world of 24 ranks or fewer never gets), or None where they are not such."""
    ranks = set()
    for part in (words or "").split(", "):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or not (hi.isdigit() or not hi):
            return None
        ranks.update(range(int(lo), int(hi or lo) + 1))
    return ranks


def describe_call(entry):
    """'all_reduce #5 on group 0 (ranks 0-3), 1024 x float32' for a call (a dict with op, seq, group,
    group_ranks, kind, peer, api, size), its size where known."""
    return call_words(entry.get("op"), entry.get("seq"), entry.get("group"), entry.get("group_ranks"),
                      entry.get("kind"), entry.get("peer"), entry.get("api"), entry.get("size"))


def describe(call):
    """describe_call of a value with those attributes (the verdict's Hang, the analysis' draft of it)."""
    return call_words(call.op, call.seq, call.group, call.group_ranks, call.kind, call.peer, call.api, call.size)


def call_words(op, seq, group, group_ranks, kind=None, peer=None, api=None, size=None):
    """describe_call's words, from the call's parts."""
    op = op or "?"
    if api:
        op = "%s (in %s)" % (op, api)
    where = "group %s (ranks %s)" % (group, format_ranks(group_ranks))
    if kind == "p2p":
        where += ", peer %s" % ("any" if peer is None else peer)
    return "%s #%s on %s%s" % (op, seq, where, ", %s" % size if size else "")


def clock(ts, ms=True):
    """Unix seconds as local time, '2026-11-24 18:47:13.296' (or '?')."""
    if ts is None:
        return "?"
    text = datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if ms else text[:-7]


def short_clock(ts):
    """Unix seconds as '18:47:13.296', for console lines."""
    if ts is None:
        return "?"
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]
