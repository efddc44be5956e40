"""Rank side: the relay's exchange of who arrives last across nodes (relay.py's ``StoreRelay`` runs it, off
the gather): every ARRIVALS_EVERY_S the starts of a node's ranks on groups that span nodes go out through the
job's c10d store (``<P>arrivals/<rank>``, one ``set``; ``<P>arrival_nodes`` numbers the nodes that share),
the node numbered 1 (the collector) brings the others' into its ``dump_dir``, where its watchdog joins them
(arrivals.py), and its join goes back out (``<P>stragglers``, where it changed), so every node's report,
``watch`` and verdict name a straggler of a group across nodes.  Only ``set``, ``get`` and ``add``."""
from . import arrivals as _arrivals
from . import dumpdir as _dumpdir
from . import wire as _wire

ARRIVALS_EVERY_S = 3.0  # how often a node's starts on groups that span nodes go out (and the collector's come
# in); at least 20 ms a node (the collector reads one key per node: 50 a second at most)
ARRIVALS_SENT = 400  # at most this many starts a stream and rank go out each time
ARRIVALS_READS_PER_S = 50  # the collector's reads of other nodes' arrivals, at most, a second (over a round)


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

    def _share_arrivals(self, now):
        """The starts of this node's ranks on groups that span nodes go out (one ``set``), and the node that
        shares first (the collector) brings the other nodes' into its dump_dir (``arrivals-node-<key>.json``),
        where its watchdog joins them in its own clock (arrivals.clock_offsets).  Every ARRIVALS_EVERY_S (at
        least 20 ms a node), off the gather: the collector reads one key per node over the round
        (collect_arrivals)."""
        docs = []
        for path in self.dd.glob(_dumpdir.ARRIVALS_GLOB):
            doc = _dumpdir.read_json(path)
            if (isinstance(doc, dict) and doc.get("job_id") == self.job_id and isinstance(doc.get("rank"), int)
                    and now - (doc.get("written_at") or 0) < self.arrivals_every + 10):
                docs.append(doc)
        here = {d["rank"] for d in docs}
        out = []
        for d in docs:
            members = d.get("members") or {}
            spanning = {st: pairs[-ARRIVALS_SENT:] for st, pairs in (d.get("streams") or {}).items()
                        if members.get(st) and not set(_arrivals.ranks_of(members[st])) <= here}
            if spanning:
                out.append(dict(d, streams=spanning, members={st: members[st] for st in spanning}))
        if out:
            self.store.set(self._key("arrivals", self.rank), _wire.pack({"written_at": now, "docs": out}))
            if self._arrivals_index is None:
                self._arrivals_index = int(self.store.add(self._key("arrival_nodes"), 1))
                self.store.set(self._key("arrival_node", self._arrivals_index), str(self.rank))
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
            self.dd.write_json(_dumpdir.ARRIVALS_NODE % key,
                               {"format": "c10d_observer.arrivals_node", "job_id": self.job_id, "written_at": now,
                                 "from_rank": key, "docs": got.get("docs") or []})
        self._collect_next = end + 1

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
