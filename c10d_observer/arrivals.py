"""Who arrives last: each call's start per rank, joined across the ranks of its group, and the rank that
arrives last far more often than its share named a straggler, live.  No torch; nothing on the call path.

Each watchdog keeps the start of the last ``KEEP`` calls of each stream its rank completed (the channel's
slots: the calls the reader passed over since the last poll, read anyway to learn deadlines) and writes
them every ``PERIOD_S`` to ``arrivals-rank<R>-pid<P>.json``: one small document per rank and period.  The watchdog of the node's
lowest rank joins them per (stream, seq) where every member's start is known: the last arriver and by how
much it was last.  Over a group's last ``WINDOW`` calls, a rank that arrived last at a fraction of them far
above its share (at least ``max(0.5, 2 / n)`` of n ranks, 0.75 of two: 5 standard deviations above chance over 100 calls), by a median ``MIN_LAG_S`` or more,
is a straggler; ``stragglers.json`` says so, with since when, and every verdict carries it.

Times: starts are on each rank's monotonic clock, turned into wall time by its watchdog; the ranks of one
node share the clock (the join is exact to microseconds there).  Groups that span nodes are not joined
(their other members' starts stay on their nodes).  Under a recorder source a call's start is when the
reader first saw it (every half poll): too coarse to tell arrivals apart; the patch, funcol and pg_hooks
sources record each call's start on the call path.
"""
import collections
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

    def observe(self, snapshot, now_ns, wall_now):
        for st in snapshot:
            if not st.passed:
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
    "median_lag_s", "calls"} of the rank that arrives last far more often than its share, by a median lag
    worth naming (MIN_LAG_S and a tenth of the median time between the group's calls), or None."""
    if n < 2 or len(window) < MIN_CALLS:
        return None
    counts = collections.Counter(w[1] for w in window)
    rank, c = counts.most_common(1)[0]
    share = c / float(len(window))
    lags = sorted(w[2] for w in window if w[1] == rank)
    median = lags[len(lags) // 2]
    gaps = sorted(b[3] - a[3] for a, b in zip(window, window[1:]) if b[0] == a[0] + 1)
    between = gaps[len(gaps) // 2] if gaps else 0.0
    if share < (0.75 if n == 2 else max(0.5, 2.0 / n)) or median < max(MIN_LAG_S, 0.1 * between):
        return None
    return {"rank": rank, "share": round(share, 3), "median_lag_s": round(median, 4), "calls": len(window)}


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
    """The stragglers a document names, as a person reads them."""
    out = []
    for g in (doc or {}).get("groups") or ():
        s = g.get("straggler")
        if not s:
            continue
        text = "rank %d arrived last at %.0f %% of the last %d calls on group %s, median %.0f ms after the first" % (
            s["rank"], 100 * s["share"], s["calls"], g["stream"], 1000 * s["median_lag_s"])
        if now is not None and s.get("since") is not None and now - s["since"] >= 60:
            text += "; it has been the last to arrive for %.0f min" % ((now - s["since"]) / 60.0)
        out.append(text)
    return out


def read(directory):
    """The node's stragglers document (``stragglers.json``), or None."""
    doc = _dumpdir.read_json(os.path.join(directory, _dumpdir.STRAGGLERS))
    return doc if isinstance(doc, dict) and doc.get("format") == "c10d_observer.stragglers" else None
