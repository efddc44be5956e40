"""Rank side: carries the cross-rank gather between nodes through the job's c10d store.

On one node the watchdogs meet in ``dump_dir`` (watchdog.py).  Nodes share no filesystem, and the
watchdog has no torch, so a helper thread of each rank relays between its node's ``dump_dir`` and the
store every ``period``:

- a gather request made on this node is published under a number of its own (``n = <P>requests += 1``,
  ``<P>request/<n>``, then ``<P>request_ready/<n>`` = 1), so two nodes' requests never overwrite each
  other; requests numbered before a relay started are history;
- a request published by another node is written into this node's ``dump_dir`` (``"relayed": true``,
  dated by this node's clock: nodes' clocks may disagree), where the local watchdogs answer it as their
  own, unless this node has a fresh request of its own (two nodes that detect at once each merge their
  own gather, each hearing of the other's);
- while a gather is on, every local state written for it (also a dead or frozen rank's, which cannot
  relay itself) is published with the text of its last stack dump (``<P>state/<rank>``, then
  ``<P>ready/<rank>`` += 1);
- the rank whose watchdog made a request fetches the other nodes' states that answered any request of
  the gather's window into its ``dump_dir``, counted as answers to its request, where its watchdog merges
  them with the local ones.  No clock is compared across nodes.

Only ``set``, ``get`` and ``add`` are used (``get`` only of keys known to exist): they exist on every
store of every torch in the matrix and never block on a missing key.  Idle, a relay costs one ``add(k, 0)``
a period.  It runs only when the job spans several nodes (``LOCAL_WORLD_SIZE < WORLD_SIZE``, as torchrun
sets them); on one node ``dump_dir`` is enough.  A store that fails is retried later; the relay never
raises into training.
"""
import datetime
import glob
import json
import logging
import os
import threading
import time

from . import compat
from . import report as _report
from . import verdict as _verdict

log = logging.getLogger("c10d_observer")

PREFIX = "c10d_observer/"
STACKS_TAIL = 256 * 1024  # bytes of a stacks file sent: its last dump is at the end
STACKS_WAIT_S = 1.0  # how long a state's asked-for stack dump is waited for before it is sent without


def multi_node(env=None):
    env = os.environ if env is None else env
    try:
        return 0 < int(env["LOCAL_WORLD_SIZE"]) < int(env["WORLD_SIZE"])
    except (KeyError, ValueError):
        return False


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


class StoreRelay(object):
    def __init__(self, dump_dir, rank, job_id, period, window_s, store_factory=open_store):
        self.dump_dir = dump_dir
        self.rank = rank
        self.job_id = job_id
        self.period = period
        self.window_s = window_s
        self._store_factory = store_factory
        self.store = None
        self.started_at = time.time()
        self._requests_seen = None  # the store's request counter last seen
        self._local_key = None  # (mtime_ns, size) of the request file last read
        self._published = {}  # state file -> (mtime_ns, size) last sent from this node
        self._fetched = {}  # rank -> its ready counter last fetched
        self._local_ranks = {rank}  # ranks whose states this node's watchdogs write
        self._active = {}  # gather id -> (deadline, collect?, world size), for the gather window
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="c10d_observer-relay", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self):
        failures = 0
        while not self._stop.wait(min(self.period, 0.1) if self._active else self.period * min(1 + failures, 10)):
            try:
                self.step()
                failures = 0
            except Exception:
                failures += 1
                self.store = None  # reconnect next time
                log.debug("c10d_observer: store relay step failed", exc_info=True)

    # -- one period --------------------------------------------------------------------------------------
    def step(self):
        if self.store is None:
            self.store = self._store_factory()
            if self.store is None:
                return
            if self.rank < 0:
                self.rank = compat.rank_and_world()[0]
                self._local_ranks.add(self.rank)
            if self._requests_seen is None:  # requests published before this relay ran are history
                self._requests_seen = int(self.store.add(self._key("requests"), 0))
        now = time.time()
        self._publish_local_request(now)
        self._take_remote_request(now)
        if self._active:
            self._publish_states()
        for gid, (deadline, collect, world) in list(self._active.items()):
            if collect:
                self._fetch_states(gid, world)
            if now > deadline:
                del self._active[gid]

    def _key(self, *parts):
        return PREFIX + "/".join(str(p) for p in parts)

    def _publish_local_request(self, now):
        path = os.path.join(self.dump_dir, _verdict.GATHER_NAME)
        try:
            st = os.stat(path)
        except OSError:
            return
        key = (st.st_mtime_ns, st.st_size)
        if key == self._local_key:
            return
        self._local_key = key
        req = _report.read_json(path)
        if not self._fresh(req, now) or req["id"] in self._active:
            return
        collect = req.get("by_rank") == self.rank and not req.get("relayed")
        self._active[req["id"]] = (now + self.window_s, collect, int(req.get("world_size") or 0))
        if not req.get("relayed"):  # numbered, so that two nodes' requests never overwrite each other
            n = int(self.store.add(self._key("requests"), 1))
            self.store.set(self._key("request", n), json.dumps(req))
            self.store.add(self._key("request_ready", n), 1)

    def _take_remote_request(self, now):
        n = int(self.store.add(self._key("requests"), 0))
        while self._requests_seen < n:
            k = self._requests_seen + 1
            if int(self.store.add(self._key("request_ready", k), 0)) <= 0:
                return  # numbered but not written yet: next period
            self._requests_seen = k
            self._take(json.loads(_text(self.store.get(self._key("request", k)))), now)

    def _take(self, req, now):
        if not isinstance(req, dict) or req.get("job_id") != self.job_id or req.get("id") in self._active:
            return
        # new by the counter; dated by this node's clock from here on (nodes' clocks may disagree)
        req["requested_at_origin"], req["requested_at"] = req.get("requested_at"), now
        self._active[req["id"]] = (now + self.window_s, False, 0)
        path = os.path.join(self.dump_dir, _verdict.GATHER_NAME)
        mine = _report.read_json(path)
        if self._fresh(mine, now) and not mine.get("relayed"):
            return  # this node is gathering already: its states go to the store for both requests
        req["relayed"] = True
        _report.write_atomic(path, req)

    def _fresh(self, req, now):
        return (isinstance(req, dict) and req.get("id") and req.get("job_id") == self.job_id
                and now - (req.get("requested_at") or 0) < self.window_s
                and (req.get("requested_at") or 0) >= self.started_at - self.window_s)

    def _publish_states(self):
        for path in glob.glob(os.path.join(self.dump_dir, _verdict.STATE_GLOB)):
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            if self._published.get(path) == key:
                continue
            doc = _report.read_json(path)
            if not isinstance(doc, dict) or doc.get("relayed_from"):
                continue
            self._local_ranks.add(doc.get("rank"))
            dead = (doc.get("alive") is False and doc.get("job_id") == self.job_id
                    and (doc.get("written_at") or 0) >= self.started_at)
            if not (doc.get("gather_id") in self._active or dead):
                continue
            if not _verdict.stacks_arrived(doc) and time.time() - (doc.get("written_at") or 0) < STACKS_WAIT_S:
                continue  # its rank is still writing the stack dump its watchdog asked for
            doc["stacks_text"] = _tail(doc.get("stack_dump"))
            r = doc.get("rank")
            self.store.set(self._key("state", r), json.dumps(doc))
            self.store.add(self._key("ready", r), 1)
            self._published[path] = key

    def _fetch_states(self, gid, world):
        for r in range(world):
            n = int(self.store.add(self._key("ready", r), 0))
            if n <= self._fetched.get(r, 0):
                continue
            doc = json.loads(_text(self.store.get(self._key("state", r))))
            self._fetched[r] = n
            if r in self._local_ranks or (doc.get("gather_id") not in self._active and doc.get("alive") is not False):
                continue  # a state of this node, or one that answered no request of this gather's time
            pid = doc.get("pid")
            text = doc.pop("stacks_text", None)
            if text:
                stacks = os.path.join(self.dump_dir, _report.stacks_name(r, pid))
                with open(stacks + ".tmp", "w") as f:
                    f.write(text)
                os.replace(stacks + ".tmp", stacks)
                doc["stack_dump"] = stacks
            doc["relayed_from"] = doc.get("host")
            doc["answered_gather_id"] = doc.get("gather_id")
            doc["gather_id"] = gid  # answered within this gather's window: the merge counts it
            doc["stacks_size_before"] = None  # its node waited for the dump already
            _report.write_atomic(os.path.join(self.dump_dir, _verdict.state_name(r, pid)), doc)


def _tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - STACKS_TAIL))
            return f.read().decode("utf-8", "replace")
    except (OSError, TypeError):
        return None


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)
