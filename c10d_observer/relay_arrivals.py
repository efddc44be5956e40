"""Rank side: the relay's exchange of who arrives last across nodes (relay.py's ``StoreRelay`` runs it, off
the gather): every ARRIVALS_EVERY_S the starts of a node's ranks on groups that span nodes go out through the
job's c10d store (``<P>arrivals/<rank>``, one ``set``; ``<P>arrival_nodes`` numbers the nodes that share),
the node numbered 1 (the collector) brings the others' into its ``dump_dir``, where its watchdog joins them
(arrivals.py), and its join goes back out (``<P>stragglers``, where it changed), so every node's report,
``watch`` and verdict name a straggler of a group across nodes.  Only ``set``, ``get`` and ``add``.

What goes out is a sample by seq, the same on every node: each stream's blocks of ARRIVALS_BLOCK consecutive
calls, one block every ``block_every`` calls (about three a round; every call in a short round), kept by the relay as its ranks' documents
show them (a document holds the last 3 s) and sent, the last ARRIVALS_BLOCKS of them, at its share.  Sent as
"the last 3 s", the nodes' shares spread over a round of 20 ms a node held no call in common past 150 nodes:
no call of a group across them was ever complete at the collector (docs/scale.md)."""
import os

from . import arrivals as _arrivals
from . import dumpdir as _dumpdir
from . import timelines as _timelines
from . import wire as _wire

ARRIVALS_EVERY_S = 3.0  # how often a node's starts on groups that span nodes go out (and the collector's come
# in); at least 20 ms a node (the collector reads one key per node: 50 a second at most)
ARRIVALS_BLOCK = 64  # consecutive calls of a stream that go out together (the same seqs on every node)
ARRIVALS_BLOCKS = 6  # a stream's last blocks a node keeps and sends (at most 384 starts a stream and rank): two
# rounds at least, so a block is in its key from the share after it ended until the collector read it once
KEEP_EVERY_S = 1.0  # how often the relay reads its ranks' arrivals documents for the blocks (they hold 3 s)
ARRIVALS_READS_PER_S = 50  # the collector's reads of other nodes' arrivals, at most, a second (over a round)


def block_every(rate, round_s, block=ARRIVALS_BLOCK):
    """How many calls of a stream from the start of one block that goes out to the next: ``block`` times a
    power of two, at least a third of a round's calls (``rate`` a second x ``round_s``): about three blocks a
    round, whatever its length, and every call where a round holds no more than three blocks (two nodes, 30
    calls a second: every call, as before the sample).  Nodes whose rates differ a little pick the same, or one
    of them twice the other's, whose blocks are among the other's."""
    every = block
    while 3 * every < rate * round_s and every < 2 ** 30:
        every *= 2
    return every


def sampled(seq, every, block=ARRIVALS_BLOCK):
    """Whether call ``seq`` (from 1) is in a block that goes out."""
    return (seq - 1) % every < block


def rate_of(pairs):
    """Calls a second of a stream, from one rank's [[seq, start], ...]; 0 where they do not tell."""
    if len(pairs) < 2:
        return 0.0
    (q0, t0), (q1, t1) = min(pairs), max(pairs)
    return (q1 - q0) / (t1 - t0) if t1 > t0 else 0.0


class NodeWalks(object):
    """What each of a node's ranks went through between two calls of a group across nodes, read from the node's
    own documents, for the collector (arrivals.Timelines): the collector knows when such a group's call ended
    (every node's sample of its starts comes to it), but not the calls a rank issued on its node's own groups in
    between, nor when those ended; the rank's node knows those, not the former.  A rank of a 2x2 mesh over
    two nodes, held in its node's tp all_reduce by the slow rank, is last at its dp all_reduce with the other
    node's rank by a lateness not its own; without its walk, the collector could not tell it from the slow rank,
    and left every such call out (meshes across nodes: the slow rank named in 9 % of the fuzzer's cases).

    ``feed`` takes the node's ranks' arrivals documents as written; ``column`` the walks of a rank's calls on one
    stream (Timelines.walk), for the starts that go out: "?" for a call not final yet (a rank of the node has
    not written a document that covers its start: a call in between may not be in), then its answer for good."""

    def __init__(self):
        self.timelines = _timelines.Timelines()
        self.members = {}  # stream -> ranks, of every document fed
        self.until = {}  # rank -> the end of the span its documents cover whole (its clock: the node's)
        self.done = {}  # (rank, stream) -> {seq: walk}: final answers

    def feed(self, docs):
        """The node's ranks' documents, as written (every stream; ``whole``)."""
        docs = [d for d in docs if isinstance(d.get("rank"), int)]
        for d in docs:
            for st, v in (d.get("members") or {}).items():
                if v and st not in self.members:
                    self.members[st] = _arrivals.ranks_of(v)
            u = (d.get("whole") or {}).get("until", d.get("written_at"))
            if u is not None:
                self.until[d["rank"]] = max(self.until.get(d["rank"], u), u)
        self.timelines.add(_arrivals.join(docs), _arrivals.rooted(docs),
                           {d["rank"]: d.get("whole") or {} for d in docs})

    def column(self, rank, stream, pairs, ranks=None):
        """The walks of ``rank``'s calls ``pairs`` ([[seq, start], ...]) on ``stream`` (``walks``), as
        arrivals.walks_column sends them."""
        return _arrivals.walks_column([t for _, t in pairs], self.walks(rank, stream, pairs, ranks))

    def walks(self, rank, stream, pairs, ranks=None):
        """The walks of ``rank``'s calls ``pairs`` ([[seq, start], ...]) on ``stream`` (Timelines.walk, or
        DEFER); final ones kept until their seq is no longer among ``pairs``.  ``ranks``: the node's ranks
        whose documents must cover a call's start before its walk is final (all fed, by default)."""
        ends = [self.until[r] for r in (self.until if ranks is None else ranks) if r in self.until]
        horizon = min(ends) if ends else None
        done = self.done.setdefault((rank, stream), {})
        out = []
        for q, t in pairs:
            w = done.get(q, _arrivals.DEFER)
            if w == _arrivals.DEFER and horizon is not None and t < horizon:
                w = done[q] = self.timelines.walk(rank, stream, q, self.members)
            out.append(w)
        if len(done) > len(pairs):
            keep = {q for q, _ in pairs}
            for q in [q for q in done if q not in keep]:
                del done[q]
        return out


def phase(rank):
    """A fraction of a round, spread evenly over ranks (the golden ratio's): when a node shares in it."""
    return (rank * 0.6180339887498949) % 1.0


class ArrivalsShare(object):
    """The arrivals half of a node's relay: a mixin of ``relay.StoreRelay``, whose ``store``, ``dd``,
    ``job_id``, ``rank``, ``arrivals_every`` and ``_key`` it uses; its own state is set in ``__init__``."""

    def _arrivals_init(self):
        self._arrivals_at = 0.0  # when this node's arrivals last went out (and, at the collector, came in)
        self._arrivals_index = None  # this node's number among those that share arrivals (1: the collector)
        self._arrivals_nodes = {}  # number -> the key another node shares its arrivals under
        self._stragglers_sent = None  # the collector: written_at of the join it last sent
        self._stragglers_taken = 0  # the others: the store's count of joins sent, last taken
        self._collect_n = 0  # the collector: the nodes of its round of reads (numbered 2 to this)
        self._collect_next = 1  # the collector: the next node of the round to read
        self._kept = {}  # rank -> {"doc": its latest arrivals document, "streams": {stream: {seq: start}},
        # "rooted": {stream: {seq}}}: its starts in the blocks that go out (ARRIVALS_BLOCK), on groups across nodes
        self._kept_at = 0.0  # when this relay last read its ranks' arrivals documents
        self._kept_files = {}  # path -> ((mtime_ns, size), its document) as last read: read again once it changed
        self._walks = NodeWalks()  # what its ranks went through between two calls of a group across nodes

    def keep_arrivals(self, now, round_s):
        """Read this node's ranks' arrivals documents (each KEEP_EVERY_S) and keep, of their groups that span
        nodes, the starts in the blocks that go out: a round of ``round_s`` holds about three blocks, every call
        where it holds no more than three, and the last ARRIVALS_BLOCKS of each stream are kept."""
        if now - self._kept_at < KEEP_EVERY_S:
            return
        self._kept_at = now
        docs, fresh, seen = [], [], {}
        for path in self.dd.glob(_dumpdir.ARRIVALS_GLOB):
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = seen[path] = (st.st_mtime_ns, st.st_size)
            old = self._kept_files.get(path)
            doc = old[1] if old is not None and old[0] == key else _dumpdir.read_json(path)  # written every 2 s
            if (isinstance(doc, dict) and doc.get("job_id") == self.job_id and isinstance(doc.get("rank"), int)
                    and now - (doc.get("written_at") or 0) < round_s + 10):
                docs.append(doc)
                if old is None or old[0] != key:
                    fresh.append(doc)
            seen[path] = (key, doc)
        self._kept_files = seen
        self._walks.feed(fresh)
        here = {d["rank"] for d in docs}
        every = {}  # stream -> calls from one block to the next, the same for every rank of the node
        for d in docs:
            members = d.get("members") or {}
            for st, pairs in (d.get("streams") or {}).items():
                if _arrivals.spans(members.get(st), here):
                    every[st] = max(every.get(st, ARRIVALS_BLOCK), block_every(rate_of(pairs), round_s))
        for d in fresh:  # a document read before holds nothing new
            k = self._kept.setdefault(d["rank"], {"streams": {}, "rooted": {}, "all": set()})
            k["doc"] = d
            k["all"].update(d.get("streams") or (), d.get("members") or ())  # every stream the rank has had
            rooted = d.get("rooted") or {}
            for st, pairs in (d.get("streams") or {}).items():
                n = every.get(st)
                if n is None:
                    continue
                mine = k["streams"].setdefault(st, {})
                for q, t in pairs:
                    if sampled(q, n):
                        mine[q] = t
                ro = k["rooted"].setdefault(st, set())
                ro.update(q for q in rooted.get(st, ()) if sampled(q, n))
                if mine:  # the last ARRIVALS_BLOCKS blocks: from the start of the block so many before the last
                    first = ((max(mine) - 1) // n - (ARRIVALS_BLOCKS - 1)) * n + 1
                    for q in [q for q in mine if q < first]:
                        del mine[q]
                    ro.intersection_update(mine)
        for r in [r for r, k in self._kept.items() if now - (k["doc"].get("written_at") or 0) >= round_s + 10]:
            del self._kept[r]  # a rank gone (or its watchdog): its starts go no more
        for r, k in self._kept.items():  # their walks, now, while the walker keeps the calls between (it keeps a
            for st, mine in k["streams"].items():  # rank's last calls, Timelines.KEEP_CALLS: a few s)
                self._walks.walks(r, st, [[q, mine[q]] for q in sorted(mine)], self._kept)

    def _share_arrivals(self, now, round_s=None):
        """The starts of this node's ranks on groups that span nodes, as kept (keep_arrivals: the blocks of a
        sample by seq), go out (one ``set``), and the node that shares first (the collector) brings the other
        nodes' and its own into its dump_dir (``arrivals-node-<key>.json``), where its watchdog joins them in
        its own clock (arrivals.clock_offsets).  Every round (ARRIVALS_EVERY_S, at least 20 ms a node), off the
        gather: the collector reads one key per node over the round (collect_arrivals)."""
        self.keep_arrivals(now, round_s or self.arrivals_every)
        docs = [k["doc"] for k in self._kept.values()]
        out = []
        for r in sorted(self._kept):
            k = self._kept[r]
            members = k["doc"].get("members") or {}
            streams = {st: [[q, mine[q]] for q in sorted(mine)] for st, mine in k["streams"].items() if mine}
            if streams:  # rank_streams: the collector reads a rank's calls between two of a group's (arrivals.
                # Timelines) only where it has no stream but that group's, its others' calls not sent, or where
                # the rank's node read them for it (walks: NodeWalks)
                d = dict(k["doc"], streams=streams, members={st: members.get(st) for st in streams},
                         rooted={st: sorted(k["rooted"].get(st, ())) for st in streams if k["rooted"].get(st)},
                         rank_streams=sorted(k["all"]),
                         walks={st: self._walks.column(r, st, p, self._kept) for st, p in streams.items()})
                d.pop("whole", None)  # a sample is not the rank's every call
                out.append(d)
        if out:  # the starts as columns, sent and brought so (arrivals.columns)
            out = [dict(d, streams={st: _arrivals.columns(p) for st, p in d["streams"].items()}) for d in out]
            self.store.set(self._key("arrivals", self.rank), _wire.pack({"written_at": now, "docs": out}))
            if self._arrivals_index is None:
                self._arrivals_index = int(self.store.add(self._key("arrival_nodes"), 1))
                self.store.set(self._key("arrival_node", self._arrivals_index), str(self.rank))
            if self._arrivals_index == 1:  # the collector's own: joined beside the others' (the same sample)
                self._bring(str(self.rank), out, now)
        if self._arrivals_index is not None and self._arrivals_index != 1:
            self._take_stragglers(now)
        if self._arrivals_index != 1:
            return
        self._send_stragglers(docs)
        self._collect_n = int(self.store.add(self._key("arrival_nodes"), 0))
        self._collect_next = 2
        self.collect_arrivals(now)

    def collect_arrivals(self, now):
        """The collector: the next nodes' arrivals, ARRIVALS_READS_PER_S x period of them a step (its relay's
        step calls this each period until the round started at ``_share_arrivals`` is done), each into
        ``arrivals-node-<key>.json``: at 2,048 nodes 50 reads a second over the round, not 2,047 at once."""
        if self._arrivals_index != 1 or self._collect_next > self._collect_n:
            return
        end = min(self._collect_n, self._collect_next + max(1, int(ARRIVALS_READS_PER_S * self.period)) - 1)
        for i in range(self._collect_next, end + 1):
            key = self._arrivals_nodes.get(i)
            if key is None:
                key = self._arrivals_nodes[i] = _wire.text(self.store.get(self._key("arrival_node", i)))
            got = _wire.unpack(self.store.get(self._key("arrivals", key)))
            self._bring(key, got.get("docs") or [], now)
        self._collect_next = end + 1

    def _bring(self, key, docs, now):
        self.dd.write_json(_dumpdir.ARRIVALS_NODE % key, {"format": "c10d_observer.arrivals_node",
                                                          "job_id": self.job_id, "written_at": now,
                                                          "from_rank": key, "docs": docs})

    def _send_stragglers(self, docs):
        """The collector: its node's join (stragglers.json, written by its watchdog from every node's arrivals)
        goes out where it changed (one ``set``), so that every node's report, watch and verdict name a
        straggler of a group across nodes, not only this one's."""
        doc = self.dd.read_json(_dumpdir.STRAGGLERS)
        if not isinstance(doc, dict) or doc.get("written_at") == self._stragglers_sent:
            return
        host = next((d.get("host") for d in docs if d.get("host")), None)
        self.store.set(self._key("stragglers"), _wire.pack(dict(doc, host=host, job_id=self.job_id)))
        self.store.add(self._key("stragglers_ready"), 1)
        self._stragglers_sent = doc.get("written_at")

    def _take_stragglers(self, now):
        """Another node: the collector's join, where a new one was sent, into this node's dump_dir
        (``stragglers-relayed.json``; arrivals.read puts its groups beside this node's own join)."""
        n = int(self.store.add(self._key("stragglers_ready"), 0))
        if n <= self._stragglers_taken:
            return
        self._stragglers_taken = n
        got = _wire.unpack(self.store.get(self._key("stragglers")))
        if isinstance(got, dict) and got.get("job_id") == self.job_id:
            self.dd.write_json(_dumpdir.STRAGGLERS_RELAYED, dict(got, relayed_at=now))
