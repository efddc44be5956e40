"""Who arrives last: each call's start per rank, joined across the ranks of its group, and the rank that
arrives last far more often than its share named a straggler, live.  No torch; nothing on the call path.

Each watchdog keeps the start of the last ``KEEP`` calls of each stream its rank completed (the channel's
slots: the calls the reader passed over since the last poll, read anyway to learn deadlines) and writes
them every ``PERIOD_S`` to ``arrivals-rank<R>-pid<P>.json``: one small document per rank and period.  The watchdog of the node's
lowest rank joins them per (stream, seq) where every member's start is known: the last arriver and by how
much it was last.  Over a group's last ``WINDOW`` calls, a rank that arrived last at the calls where the ranks
did not arrive together far more often than chance (``straggler``), by a median ``MIN_LAG_S`` or more, is a
straggler; ``stragglers.json`` says so, with since when, and every verdict carries it.

Times: starts are on each rank's monotonic clock, turned into wall time by its watchdog; the ranks of one
node share the clock (the join is exact to microseconds there).  The patch, funcol and pg_hooks sources
record each call's start on the call path; a recorder source (torch's flight recorders) puts the starts
torch recorded (``time_created_ns``) on the group's arrivals stream when it reads its buffer in batches
(sources/flight_recorder.py): every call, or, above 2,000 calls per batch period, a sample of them.
"""
import collections
import math
import os

from . import dumpdir as _dumpdir

PERIOD_S = 5.0  # how often a watchdog writes its rank's starts, and the node's leader joins them
WINDOW = 1000  # calls of a group the rule looks at
KEEP = 2000  # starts a watchdog keeps per stream until it writes them
MIN_CALLS = 50  # calls of a group joined before the rule names anyone
MIN_LAG_S = 0.001  # a median lag worth naming: at least this, and a tenth of the time between calls


class ArrivalLog(object):
    """One rank's starts (seq -> wall time) per stream, from the calls its reader passed over."""

    def __init__(self):
        self.starts = {}  # stream name -> OrderedDict(seq -> wall start)

    def observe(self, snapshot, now_ns, wall_now, exact=()):
        """``snapshot``: the streams' calls passed since the last poll, with their starts; ``exact``: the
        arrivals streams (channel.ARRIVALS) on which a recorder source puts the exact starts of the calls it
        read: their group's own stream has only the times its reader first saw its calls, and is left out."""
        read_later = {str(st.desc.get("stream")) for st in exact}
        for st in list(snapshot) + list(exact):
            if not st.passed or (st.desc.get("kind") != "arrivals" and str(st.desc.get("stream")) in read_later):
                continue
            name = str(st.desc.get("stream"))
            d = self.starts.get(name)
            if d is None:
                d = self.starts[name] = collections.OrderedDict()
            for seq, _, t in st.passed:
                d[seq] = wall_now - (now_ns - t) / 1e9
            while len(d) > KEEP:
                d.popitem(last=False)

    def document(self, rank, pid, job_id, wall_now, members):
        return {"format": "c10d_observer.arrivals", "version": 1, "rank": rank, "pid": pid, "job_id": job_id,
                "written_at": wall_now, "members": members,
                "streams": {s: [[q, round(t, 6)] for q, t in d.items()] for s, d in self.starts.items()}}


def join(docs):
    """{stream: {seq: {rank: start}}} from every rank's arrivals documents (one list of documents)."""
    out = {}
    for doc in docs:
        r = doc.get("rank")
        for stream, pairs in (doc.get("streams") or {}).items():
            calls = out.setdefault(stream, {})
            for seq, t in pairs:
                calls.setdefault(seq, {})[r] = t
    return out


def last_arrivals(calls, members):
    """[(seq, last rank, lag s, first start)] for the calls every member's start is known of, in seq order."""
    out = []
    need = set(members)
    for seq in sorted(calls):
        starts = calls[seq]
        if not need or not need <= set(starts):
            continue
        first = min(starts[r] for r in need)
        last = max(need, key=lambda r: (starts[r], r))
        out.append((seq, last, starts[last] - first, first))
    return out


def straggler(window, n):
    """The rule, over a group's recent (seq, last rank, lag, first start) of n ranks: {"rank", "share",
    "median_lag_s", "calls", "apart"} of the rank that arrives last far more often than chance, by a lag
    worth naming, or None.

    Only the calls at which the ranks did not arrive together count (``apart``: the last came MIN_LAG_S or
    more after the first): after a straggler's late arrival at a step's first call, the ranks leave that call
    together, and who is last at the step's other calls is chance (a rank 50 ms late every step of three
    ranks was last at 66 % of all calls, and at every call of those its lateness decided).  Among them, a
    rank is named where it was last at a share of at least max(0.5, 1/n + 5 standard deviations of a fair
    draw: sqrt((1/n)(1 - 1/n) / calls)), over at least MIN_CALLS of them, with a median lag of at least
    MIN_LAG_S and a tenth of the median time between the group's calls.  Under the fair draw of a balanced
    job the share reaches that bound with odds below 1 in 3 million, at any world size."""
    if n < 2:
        return None
    apart = [w for w in window if w[2] >= MIN_LAG_S]
    if len(apart) < MIN_CALLS:
        return None
    counts = collections.Counter(w[1] for w in apart)
    rank, c = counts.most_common(1)[0]
    share = c / float(len(apart))
    fair = 1.0 / n
    need = max(0.5, fair + 5.0 * math.sqrt(fair * (1.0 - fair) / len(apart)))
    lags = sorted(w[2] for w in apart if w[1] == rank)
    median = lags[len(lags) // 2]
    gaps = sorted(b[3] - a[3] for a, b in zip(window, window[1:]) if b[0] == a[0] + 1)
    between = gaps[len(gaps) // 2] if gaps else 0.0
    if share < need or median < max(MIN_LAG_S, 0.1 * between):
        return None
    return {"rank": rank, "share": round(share, 3), "median_lag_s": round(median, 4), "calls": len(apart),
            "of_calls": len(window)}


class Stragglers(object):
    """The node leader's join: per group, its last WINDOW joined calls, and the straggler named, if any."""

    def __init__(self):
        self.windows = {}  # stream -> deque of (seq, last rank, lag, first start)
        self.done = {}  # stream -> the highest seq joined
        self.named = {}  # stream -> (rank, since wall)

    def update(self, docs, members, wall_now):
        """Join the documents; returns the stragglers document."""
        calls = join(docs)
        groups = []
        for stream, by_seq in sorted(calls.items()):
            ranks = members.get(stream)
            if not ranks or len(ranks) < 2:
                continue
            w = self.windows.setdefault(stream, collections.deque(maxlen=WINDOW))
            for item in last_arrivals({q: s for q, s in by_seq.items() if q > self.done.get(stream, 0)}, ranks):
                w.append(item)
                self.done[stream] = item[0]
            found = straggler(list(w), len(ranks))
            prev = self.named.get(stream)
            if found is None:
                self.named.pop(stream, None)
            else:
                since = prev[1] if prev is not None and prev[0] == found["rank"] else wall_now
                self.named[stream] = (found["rank"], since)
                found["since"] = since
            counts = collections.Counter(x[1] for x in w)
            groups.append({"stream": stream, "ranks": list(ranks), "calls": len(w),
                           "last_share": {str(r): round(c / float(len(w)), 3) for r, c in sorted(counts.items())}
                           if w else {}, "straggler": found})
        return {"format": "c10d_observer.stragglers", "version": 1, "written_at": wall_now, "groups": groups}


def lines(doc, now=None):
    """The stragglers a document names, as a person reads them, with since when."""
    from .text import clock
    out = []
    for g in (doc or {}).get("groups") or ():
        s = g.get("straggler")
        if not s:
            continue
        text = ("rank %d arrived last at %.0f %% of the last %d calls on group %s at which the ranks did not arrive "
                "together, median %.0f ms after the first" % (s["rank"], 100 * s["share"], s["calls"], g["stream"],
                                                             1000 * s["median_lag_s"]))
        if s.get("since") is not None:
            text += "; the straggler since %s" % clock(s["since"], ms=False)
            if now is not None and now - s["since"] >= 60:
                text += " (%.0f min)" % ((now - s["since"]) / 60.0)
        out.append(text)
    return out


def read(directory):
    """The node's stragglers document (``stragglers.json``), or None."""
    doc = _dumpdir.read_json(os.path.join(directory, _dumpdir.STRAGGLERS))
    return doc if isinstance(doc, dict) and doc.get("format") == "c10d_observer.stragglers" else None
