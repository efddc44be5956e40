"""Rank side: carries the cross-rank gather between nodes through the job's c10d store, one relay per node.

On one node the watchdogs meet in ``dump_dir`` (watchdog.py).  Nodes share no filesystem, and the
watchdog has no torch, so a helper thread of each rank runs a relay; of a node's relays only one acts, the
*leader*: the lowest rank whose relay beat (``relay-rank<R>.beat`` in dump_dir, touched every period)
within three periods (election.node_leader, the node's one election rule, which also picks the watchdog
that joins arrivals), so a node whose leader died or froze gets another within seconds.  Others open no
store connection and do nothing but beat; a relay beats two periods before it may lead (a node's ranks
start together).  The leader, every ``period``:

- idle: one store operation (``add(<P>requests, 0)``) every ``idle_read_every`` (a period, or longer past
  IDLE_READS_PER_S x period nodes: the store's load stays bounded): no per-rank store traffic while nothing
  is overdue;
- a gather request made on this node is published under a number of its own (``n = <P>requests += 1``,
  ``<P>request/<n>``, then ``<P>request_ready/<n>`` = 1).  Requests numbered before the node's relay
  started are history;
- *one merge per job*: of the requests seen within the gather window, the lowest-numbered wins.  Every
  node writes the winner into its ``dump_dir`` (``"relayed": true``, dated by this node's clock), where
  the local watchdogs answer it as their own; a node whose own request lost writes the winner with
  ``"supersedes": <its own id>`` and its watchdog leaves the merge to the winner's node.  Requests
  numbered after the first one a node read are counted, not read.  Answers to any request of the window
  count for the winner; during a gather a node that does not merge reads the store once a period;
- while a gather is on, the node's states (also a dead or frozen rank's, which cannot relay itself) go out
  as one bundle per node, once every rank of the node whose relay beats has answered (at most BUNDLE_HOLD_S
  after the first answer; a later change goes out again) (a line of JSON, its request's number and its
  host, then the states as zlib + base64 JSON, each as ``RankDoc.to_wire`` makes it, positions as rows;
  ``<P>node/<slot>``, then ``<P>node_ready/<slot>`` += 1 and ``<P>ready_all`` += 1), labelled with the
  number of the request the node takes for the merge's, each state with a summary of its stacks: the main
  thread of the last dump (what the verdict reads), not the whole file, which stays on its node
  (``stacks_remote`` names host and path);
- the winner's node reads ``<P>ready_all`` each step and only when it moved, the nodes' counters and
  the bundles that changed and are labelled with its request, each into one file of its ``dump_dir``
  (``states-node<slot>.json``), where its watchdog merges them with the local ones;
- the merged verdict goes back out (``<P>verdict/<n>``, squeezed), and every other node writes it into its
  ``dump_dir`` (``"relayed_from"``), so ``on_hang`` callbacks and ``report DIR`` see it on every node;
- off the gather, every ARRIVALS_EVERY_S, the starts of the node's ranks on groups that span nodes go out
  (``<P>arrivals/<rank>``, one ``set``; ``<P>arrival_nodes`` numbers the nodes that share), and the node
  numbered 1 brings the others' into its ``dump_dir``, where its watchdog joins them in its own clock
  (who arrives last, arrivals.py: the hosts' clock offsets come from the calls themselves); its join goes
  back out (``<P>stragglers``, where it changed) and the other nodes write it into theirs
  (``stragglers-relayed.json``), so every node names a straggler of a group across nodes (relay_arrivals.py).

No clock is compared across nodes for the gather.  Only ``set``, ``get`` and ``add`` are used (``get`` only of keys known
to exist): they exist on every store of every torch in the matrix and never block on a missing key; where the
store has ``multi_get`` (torch 2.x), the merging node reads a batch of keys known to exist with one (``_reads``).  It
runs only when the job spans several nodes (``LOCAL_WORLD_SIZE < WORLD_SIZE``, as torchrun sets them); on
one node ``dump_dir`` is enough.  A store that fails is retried later; the relay never raises into
training.  Costs at 64 to 4,096 ranks: benchmarks/scale.py, docs/scale.md.
"""
import datetime
import json
import logging
import os
import threading
import time

from . import stackfile as _stackfile
from . import election as _election
from . import compat
from . import documents as _documents
from . import wire as _wire
from . import dumpdir as _dumpdir
from . import relay_arrivals as _relay_arrivals
from . import relay_window as _relay_window
from . import requests as _requests
from . import verdict as _verdict

log = logging.getLogger("c10d_observer")

PREFIX = "c10d_observer/"
STACKS_TAIL = 256 * 1024  # bytes of a stacks file sent: its last dump is at the end
SUMMARY_BYTES = 16 * 1024  # at most this much of a rank's stacks goes to another node
STACKS_WAIT_S = 1.0  # how long a state's asked-for stack dump is waited for before it is sent without
# a node's bundle waits until every rank of the node whose relay beats has answered, for at most this long after
# its first answer (one bundle a node where its ranks' answers came in over several relay steps: 1.7 bundles a
# node at 4,096 ranks, each fetched and read by the merging node, benchmarks/scale.py, 2026-12-02)
BUNDLE_HOLD_S = STACKS_WAIT_S
REQUEST_LOOK_S = 0.1  # an idle leader looks (one stat) for its node's gather request 4 times a period, at most this often
IDLE_READS_PER_S = 256  # the idle reads of the request counter all nodes make together, at most, a second
# (the store's server spends about 1 % of a core per 300 operations a second: benchmarks/store_load.py)
ARRIVALS_EVERY_S = _relay_arrivals.ARRIVALS_EVERY_S
FETCH_BATCH = 64  # slots whose counters, then moved bundles, the merging node reads with one multi_get each
FETCH_STEP_S = 0.5  # the most one step spends fetching bundles; the rest the next step, 0.1 s on.  A relay beats
# at each step, and one that did not beat for 3 periods and a second loses its node's lead: at 16,384 ranks one
# step fetched 2,047 bundles in 1.6 s (benchmarks/scale.py, 2026-12-01), 2.5 s being the limit at a period of 0.5 s


def multi_node(env=None):
    env = os.environ if env is None else env
    try:
        return 0 < int(env["LOCAL_WORLD_SIZE"]) < int(env["WORLD_SIZE"])
    except (KeyError, ValueError):
        return False


def nodes(env=None):
    """How many nodes the job spans (WORLD_SIZE / LOCAL_WORLD_SIZE, as torchrun sets them), at least 1."""
    env = os.environ if env is None else env
    try:
        return max(1, -(-int(env["WORLD_SIZE"]) // int(env["LOCAL_WORLD_SIZE"])))
    except (KeyError, ValueError, ZeroDivisionError):
        return 1


def idle_read_every(period, env=None):
    """How often an idle node reads the store's request counter: every period, or, where the job has more
    than IDLE_READS_PER_S x period nodes, every nodes / IDLE_READS_PER_S seconds, so that all the nodes'
    idle reads together stay at IDLE_READS_PER_S a second (at 2,048 nodes every 8 s).  A node whose own
    ranks are overdue publishes its request at once and reads every period while the gather is on; only a
    node that detects nothing learns of another's gather up to this much later (docs/scale.md)."""
    return max(period, nodes(env) / float(IDLE_READS_PER_S))


def open_store(timeout_s=10.0):
    """A store client of the job's own, or None before init_process_group.

    A TCPStore gets a connection of the relay's own (no client of older torch is known to be safe from
    two threads); other stores (FileStore, HashStore) are used as torch made them.
    """
    from torch import distributed as dist
    d = compat._c10d()
    try:
        if not dist.is_initialized():
            return None
        store = d._get_default_store()
    except Exception:
        return None
    base = store
    while getattr(base, "underlying_store", None) is not None:
        base = base.underlying_store
    if isinstance(base, getattr(dist, "TCPStore", ())):
        host = getattr(base, "host", None) or os.environ.get("MASTER_ADDR")
        port = getattr(base, "port", None) or os.environ.get("MASTER_PORT")
        if host and port:
            try:
                return dist.TCPStore(str(host), int(port), 1, False, datetime.timedelta(seconds=timeout_s))
            except Exception:
                log.debug("c10d_observer: cannot open a store client of the relay's own", exc_info=True)
    return store


def node_relays(dump_dir, ranks, job_id, period, window_s, store_factory=open_store, clock=time.time):
    """The relays of one node's (rank, local rank) pairs, as its ranks start them: one each, one acts."""
    return [StoreRelay(dump_dir, r, job_id, period, window_s, store_factory, clock) for r, _ in ranks]


class StoreRelay(_relay_arrivals.ArrivalsShare):
    def __init__(self, dump_dir, rank, job_id, period, window_s, store_factory=open_store, clock=time.time,
                 arrivals_every=ARRIVALS_EVERY_S):
        self.dump_dir = dump_dir
        self.dd = _dumpdir.DumpDir(dump_dir)
        self.rank = rank
        self.job_id = job_id
        self.period = period
        self.window_s = window_s
        self.arrivals_every = arrivals_every  # ARRIVALS_EVERY_S, else config.Timing's relay_period (tests)
        self._store_factory = store_factory
        self.clock = clock  # wall seconds (benchmarks/scale.py gives each simulated node its own)
        self.store = None
        self.started_at = clock()
        self._requests_seen = None  # the store's request counter last seen
        self._local_key = None  # (mtime_ns, size) of the request file last read
        self._seen_files = {}  # state file -> (mtime_ns, size) last looked at
        self._node_docs = {}  # rank -> this node's state last bundled
        self._bundled_for = None  # the request number the last bundle was labelled with
        self._unsent_at = None  # when this node's states changed since its last bundle (None: they did not)
        self._slot = None  # this node's bundle number in the store
        self._ready_all = 0  # the store's bundle counter last seen (collecting)
        self._fetched = {}  # slot -> its counter last fetched
        self._fetch_from, self._pass_total = 1, 0  # where a pass over the slots goes on, the counter it began at
        self._counted_to = 0  # the slots up to this one have a bundle counter in the store (this relay's add)
        self._multi_get = None  # whether the store has a multi_get that works (found at the first read)
        self.window = _relay_window.RelayWindow(window_s)  # the gather window's requests, and its phase
        self._verdict_sent = None  # gather id whose verdict this node sent
        self._verdict_taken = None  # request number whose verdict this node took
        self._next_read = 0.0  # when this relay next reads the request counter: idle_read_every, or a period
        # while a gather is on (a node that does not merge reads the store once a period)
        self._ahead = None  # a lower rank of this node whose relay beat: this one does not act while it does
        self._arrivals_init()
        self.leader = False
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="c10d_observer-relay", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.dd.remove(_dumpdir.beat_name(self.rank))

    def active(self):
        return self.window.open

    def _run(self):
        failures = 0
        last, stamp = self.clock(), None
        look = min(self.period, max(REQUEST_LOOK_S, self.period / 4))
        while not self._stop.wait(min(self.period, 0.1) if self.window.open else look):
            if not self.window.open:  # idle: a step a period, or at once where this node's watchdog asked a gather
                seen = _requests.GatherRequest.stamp(self.dd) if self.leader else None  # one stat (files only)
                fresh = seen is not None and seen != stamp
                stamp = seen if seen is not None else stamp
                if not fresh and self.clock() - last < self.period * min(1 + failures, 10):
                    continue
            last = self.clock()
            try:
                self.step()
                failures = 0
            except Exception:
                failures += 1
                self.store = None  # reconnect next time
                log.debug("c10d_observer: store relay step failed", exc_info=True)

    # -- which relay of the node acts ----------------------------------------------------------------------
    def _beat_and_lead(self, now):
        """Touch this relay's beat file; True when this is the lowest rank of the node with a fresh beat.
        While the lower rank found last time stays fresh, one stat of its file decides."""
        if self.rank < 0:
            return False
        self.dd.touch(_dumpdir.beat_name(self.rank), now)
        if now - self.started_at < 2 * self.period:
            return False  # beat a while first: the node's relays start together, and one of them acts
        within = 3 * self.period + 1.0
        if self._ahead is not None:  # the lower rank that led last time: one stat while it still beats
            if _election.node_leader({self._ahead: self.dd.mtime(_dumpdir.beat_name(self._ahead))}, now,
                                    within) is not None:
                return False
            self._ahead = None
        heard = {self.rank: now}
        for name in self.dd.names():
            r = _dumpdir.beat_rank(name)
            if r is not None and r < self.rank:
                heard[r] = self.dd.mtime(name)
        leader = _election.node_leader(heard, now, within)
        if leader != self.rank:
            self._ahead = leader
            return False
        return True

    # -- one period --------------------------------------------------------------------------------------
    def step(self):
        if self.rank < 0:
            self.rank = compat.rank_and_world()[0]
        now = self.clock()
        lead = self._beat_and_lead(now)
        if not lead:
            if self.leader:  # a lower rank came back: it acts from here
                self.leader, self.store = False, None
            return
        if self.store is None:
            self.store = self._store_factory()
            if self.store is None:
                return
            if self._requests_seen is None:  # requests published before this node's relay ran are history
                seen = self.dd.read_json(_dumpdir.RELAY_SEEN)
                n = int(self.store.add(self._key("requests"), 0))
                self._requests_seen = min(n, int(seen.get("n"))) if isinstance(seen, dict) and seen.get(
                    "job_id") == self.job_id and isinstance(seen.get("n"), int) else n
        self.leader = True
        if self._publish_local_request(now):
            self._next_read = now  # the requests numbered before its own: which one merges, at once
        # idle: one store operation every idle_read_every (a period up to IDLE_READS_PER_S nodes); during a
        # gather the relay steps faster (files only) and a node that does not merge still reads the store
        # once a period; the merging node fetches each step
        every = idle_read_every(self.period)
        read = now >= self._next_read or (not self.window.open and every <= self.period)
        if read:
            self._take_remote_requests(now)
            # idle, the loop steps once a period: the read after ``every`` is the step half a period short of it
            self._next_read = now + (self.period if self.window.open else every - self.period / 2.0)
        if self.window.open:
            if not self._collecting():  # the merging node's own states are in its dump_dir already
                self._publish_states(now)
            if self._collecting():
                self._fetch_states()
                self._send_verdict()
            elif read:
                self._take_verdict()
        share_every = max(self.arrivals_every, 0.02 * nodes())
        if not self.window.open:
            self.keep_arrivals(now, share_every)  # the blocks of its ranks' starts that go out at its share
        if not self.window.open and now - self._arrivals_at >= share_every:
            # after the first round, a phase of this node's own: the nodes' shares spread over the round, where
            # the job's start would have them all in the same second every round (2,048 sets at once)
            first = not self._arrivals_at
            self._arrivals_at = now - (share_every * _relay_arrivals.phase(self.rank) if first else 0.0)
            self._share_arrivals(now, share_every)
        elif not self.window.open:
            self.collect_arrivals(now)
        if self.window.expire(now):  # the window ended (or none was on): the next gather starts from nothing
            self._bundled_for, self._unsent_at = None, None
            self._node_docs, self._seen_files = {}, {}

    def _host(self):
        for doc in self._node_docs.values():
            return doc.get("host")
        return None

    def _key(self, *parts):
        return PREFIX + "/".join(str(p) for p in parts)

    def _collecting(self):
        return self.window.merging

    def _publish_local_request(self, now):
        """This node's gather request, where its watchdog wrote a new one, out under a number: True."""
        key = _requests.GatherRequest.stamp(self.dd)
        if key is None or key == self._local_key:
            return False
        self._local_key = key
        req = _requests.GatherRequest.read(self.dd)
        if not self._fresh(req, now) or req.id in self.window or req.relayed:
            return False
        n = int(self.store.add(self._key("requests"), 1))  # numbered: no node's request overwrites another's
        self.store.set(self._key("request", n), json.dumps(req.to_json()))
        self.store.add(self._key("request_ready", n), 1)
        if self.window.published(n, req, now):
            self._relay_winner()  # another node's request came first (written here before this one): it stays
        return True

    def _take_remote_requests(self, now):
        n = int(self.store.add(self._key("requests"), 0))
        changed = False
        while self._requests_seen < n:
            k = self._requests_seen + 1
            if self.window.after_first(k):
                # numbered after the window's first: it loses and its body is not needed (its node learns
                # the winner from the counter, as this one, and labels its answers with it)
                self._requests_seen = k
                changed = True
                continue
            if int(self.store.add(self._key("request_ready", k), 0)) <= 0:
                break  # numbered but not written yet: next period
            self._requests_seen = k
            changed = True
            req = _requests.GatherRequest.from_json(json.loads(_wire.text(self.store.get(self._key("request", k)))))
            if req is None or req.job_id != self.job_id or req.id in self.window:
                continue
            # new by the counter; dated by this node's clock from here on (nodes' clocks may disagree)
            req = req.replace(requested_at_origin=req.requested_at, requested_at=now)
            if self.window.read(k, req, now):
                self._relay_winner()
        if changed:
            self.dd.write_json(_dumpdir.RELAY_SEEN,
                               {"job_id": self.job_id, "n": self._requests_seen})

    def _relay_winner(self):
        """Write the window's winning request (another node's) into dump_dir, for the local watchdogs."""
        (n, req), own = self.window.winner, self.window.own
        req = req.replace(relayed=True)
        if own is not None and own[0] != n:
            req = req.replace(supersedes=own[1])  # this node's watchdog leaves the merge to the winner's node
        req.write(self.dd)
        key = _requests.GatherRequest.stamp(self.dd)
        if key is not None:
            self._local_key = key

    def _fresh(self, req, now):
        return req is not None and req.valid(self.job_id, now=now, within=self.window_s,
                                             since=self.started_at - self.window_s)

    def _publish_states(self, now):
        """This node's states that answer a request of the window (or a dead rank's end): one bundle."""
        changed = False
        for path in self.dd.glob(_dumpdir.STATE_GLOB) + self.dd.glob(_dumpdir.END_GLOB):
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            if self._seen_files.get(path) == key:
                continue
            try:
                doc = _documents.load(path)[0]
            except (_documents.DocumentError, OSError, IndexError):
                continue
            if doc.relayed_from:
                self._seen_files[path] = key  # another node's, fetched here: never sent back
                continue
            dead = doc.dead and doc.job_id == self.job_id and (doc.written_at or 0) >= self.started_at
            if not (doc.gather_id in self.window or dead):
                continue
            if doc.stacks_size_before is not None and _dumpdir.size(doc.stack_dump) <= doc.stacks_size_before \
                    and not doc.frozen and not doc.dead and now - (doc.written_at or 0) < STACKS_WAIT_S:
                continue  # its rank is still writing the stack dump its watchdog asked for
            self._seen_files[path] = key
            out = doc.to_wire()
            out["stacks_text"] = stacks_summary(doc.stack_dump, doc.main_thread)
            out["stacks_remote"] = "%s:%s" % (doc.host, doc.stack_dump)
            prev = self._node_docs.get(doc.rank)
            if prev is None or not (prev.get("kind") == "state" and doc.kind == "end" and not doc.dead):
                self._node_docs[doc.rank] = out
            changed = True
        if changed and self._unsent_at is None:
            self._unsent_at = now
        window = self.window.number
        relabel = self._bundled_for is not None and window != self._bundled_for
        if not self._node_docs or not (self._unsent_at is not None or relabel):
            return
        if not relabel and now - self._unsent_at < BUNDLE_HOLD_S and not self._node_answered(now):
            return  # its other ranks' answers are on their way: one bundle, not one for each step they took
        if self._slot is None:
            self._slot = int(self.store.add(self._key("nodes"), 1))
        # labelled with the request this node takes for the merge's: the merging node keeps only bundles
        # of its own (sent again, relabelled, when this node learns of an earlier request)
        self._bundled_for = window
        self.store.set(self._key("node", self._slot), _wire.labelled(
            {"window": window, "host": self._host()}, _documents.shared_stacks(list(self._node_docs.values()))))
        self.store.add(self._key("node_ready", self._slot), 1)
        self.store.add(self._key("ready_all"), 1)
        self._unsent_at = None

    def _node_answered(self, now):
        """Whether every rank of this node whose relay beats has its answer in the bundle to be sent."""
        within = 3 * self.period + 1.0
        for name in self.dd.names():
            r = _dumpdir.beat_rank(name)
            if r is not None and r not in self._node_docs and now - (self.dd.mtime(name) or 0) < within:
                return False
        return True

    def _fetch_states(self):
        """The bundles that changed, each into its file; for at most FETCH_STEP_S a step (a pass over the
        slots goes on where it stopped), a new pass where the bundle counter moved since the last pass began.
        The slots go FETCH_BATCH at a time: their counters, then the bundles that moved, each with one
        ``multi_get`` where the store has it (``_reads``)."""
        if self._fetch_from == 1:
            total = int(self.store.add(self._key("ready_all"), 0))
            if total == self._ready_all:
                return
            self._pass_total = total
        until, fetched = time.monotonic() + FETCH_STEP_S, 0
        slot, last = self._fetch_from, int(self.store.add(self._key("nodes"), 0))
        while slot <= last:
            if fetched and time.monotonic() > until:
                self._fetch_from = slot  # the rest next step: this relay beats in between
                return
            batch = [s for s in range(slot, min(last + 1, slot + FETCH_BATCH)) if s != self._slot]
            slot += FETCH_BATCH
            counts = self._counters(batch)
            moved = [(s, n) for s, n in zip(batch, counts) if n > self._fetched.get(s, 0)]
            # a bundle is set before its counter moves: each key read here exists
            for (s, n), raw in zip(moved, self._reads([self._key("node", s) for s, _ in moved])):
                label, packed = _wire.label_of(raw)
                self._fetched[s] = n
                fetched += 1
                if label is not None and label.get("window") == self.window.own[0]:
                    self._write_remote(s, label.get("host"), packed)
        self._fetch_from, self._ready_all = 1, self._pass_total

    def _counters(self, slots):
        """The bundle counters of ``slots``: read together where the store has ``multi_get`` and this relay made
        each exist before (an ``add`` of 0 creates a counter: ``get`` and ``multi_get`` wait for a missing key),
        else one ``add`` each (torch 1.x's ``get`` is two requests, a wait and a get: 0.29 ms a bundle where an
        ``add`` makes it 0.24, benchmarks/fetch_reads.py)."""
        known = [s for s in slots if s <= self._counted_to] if self._has_multi_get() else []
        values = dict(zip(known, (int(v) for v in self._reads([self._key("node_ready", s) for s in known]))))
        for s in slots:
            if s not in values:
                values[s] = int(self.store.add(self._key("node_ready", s), 0))
        self._counted_to = max([self._counted_to] + list(slots))
        return [values[s] for s in slots]

    def _has_multi_get(self):
        if self._multi_get is None:
            self._multi_get = callable(getattr(self.store, "multi_get", None))
        return self._multi_get

    def _reads(self, keys):
        """The values of ``keys``, each known to exist: one ``multi_get`` where the store has it (torch 2.x; at
        16,384 ranks the merging node read 2,047 bundles one ``get`` each, with its counter's ``add`` about 0.2 ms
        of a bundle's 0.55 ms on loopback; batched 0.011 ms: benchmarks/fetch_reads.py), else a ``get`` each
        (torch 1.x, or a store that refused it once)."""
        if not keys:
            return []
        if self._has_multi_get():
            try:
                values = self.store.multi_get(keys)
                if len(values) == len(keys):
                    return values
            except Exception:
                log.debug("c10d_observer: the store's multi_get failed; a get a key from now on", exc_info=True)
            self._multi_get = False
        return [self.store.get(k) for k in keys]

    def _write_remote(self, slot, host, packed):
        """One file per node (``states-node<slot>.json``, read by verdict.load_docs): a file per rank cost
        the merging node 2 ms each to create at 1,024 ranks, on the path to the verdict.  It is labelled with
        the gather its states count for here (``answers``); each state keeps what it answered on its node, and
        reads as relayed from ``host`` (documents.load).  The states stay packed as they came: the watchdog
        unpacks them once."""
        self.dd.write_json(_dumpdir.node_states_name(slot),
                           _documents.node_states_json(host, self.window.own[1], packed=packed))

    def _send_verdict(self):
        n, gid = self.window.own
        if self._verdict_sent == gid:
            return
        v = _verdict.read(self.dd.path(_dumpdir.VERDICT_JSON))
        if v is not None and v.gather_id == gid:
            text = self.dd.read_text(_dumpdir.VERDICT_TEXT)
            if text is None:
                return
            self.store.set(self._key("verdict", n), _wire.pack({"json": v.to_json(), "text": text}))
            self.store.add(self._key("verdict_ready", n), 1)
            self._verdict_sent = gid

    def _take_verdict(self):
        n = self.window.number
        if n is None or self._verdict_taken == n or int(self.store.add(self._key("verdict_ready", n), 0)) <= 0:
            return
        self._verdict_taken = n
        got = _wire.unpack(self.store.get(self._key("verdict", n)))
        _verdict.write_relayed(self.dd, got["json"], got["text"],
                               relayed_from="the node of rank %s" % self.window.winner[1].by_rank)


def stacks_summary(path, main_thread, limit=SUMMARY_BYTES):
    """What the verdict reads of a stacks file, for another node: the last dump's main thread (its header
    line and frames), else the file's last ``limit`` bytes.  The whole file stays on its node."""
    return _stackfile.thread_summary(_stackfile.read_tail(path, STACKS_TAIL), main_thread, limit)
