"""Scale: the cross-node gather through the job's c10d store, at 64 to 16,384 simulated ranks.

A real ``TCPStore`` server in a process of its own (as torchrun's agent holds it) and simulated ranks in
this process: each rank has a real shared-memory channel with its groups and calls (the world group, its
node's group of 8, its data-parallel group across nodes), a real ``Watchdog`` reading it, and stands in
only for the rank's helper thread (the heartbeat, and its stacks written in faulthandler's format when the
watchdog asks by a file).  Each node has its own ``dump_dir`` and the relays the observer starts on a node
(``relay.node_relays``), talking to the server over TCP.  Each part wakes as its own loop does, with a random
phase (watchdog: as ``Watchdog.run``, a poll, or its first call's deadline, every 50 ms while a protocol is
under way, else a peek for a gather request four times a poll; helper: half a poll; relay: as
``StoreRelay._run``, its node's request looked for four times a period).  Also stood in for, as one machine holds every node: the nodes' disks (every
``dump_dir`` is in /dev/shm: this VM's one disk took the renames of 512 nodes at 0.68 ms each), and the
connects of the relays' store clients (opened when a relay first acts, outside the simulated time, with a
resolver that gives up after 1 s: this VM has no DNS, RESOLVER_ENV), and the channel's file (an anonymous
shared mapping: SimChannelWriter).

Time.  One thread runs every node in turn, but a real job's nodes run at once: so each node's parts read a
clock of their own (``Watchdog(clock=, wall=)``, ``StoreRelay(clock=)``, the channel's timestamps) that
leaves out the time the harness spent on the other nodes.  The simulated time moves in rounds: a round
lasts as long as the slowest node's work in it (everything its parts did, one after another: pessimistic,
as a node's watchdogs are processes of their own), and the next one starts then or when the next part is
due, whichever is later.  Store operations, files, JSON and the merge are real work, timed as they run; an
event published by one node within a round may be seen by a later node in the same round (up to one round
early) or by an earlier one in the next.  A round runs only the parts due at its start (a heap of their
next wakes).  (Until 2026-12-01 a round lasted at least 10 ms, and every part of every node was asked
whether it was due: a part stepped up to 10 ms late at each wake, so a relay stepped every 0.50-0.54 s
where its loop steps every 0.50 s.)  The times are those of nodes with a core each for the observer, on
this machine's cores; ``sim_wall_s`` says how long the simulation took.

Scenarios (each checks its verdict: the culprit named exactly, the silent ranks listed):
  culprit  - one rank never enters an all_reduce of the world group; every other rank waits in it and
             every node detects within one poll (the usual case: all waiting ranks time out together)
  cascade  - one rank never enters its data-parallel group's call; its DP peers (one per node) wait there,
             every other rank waits in a world-group call the DP peers never reached
  two      - one rank never enters a call of a group that spans two nodes (16 ranks): those two nodes
             detect at once, every other node only answers the request that reaches it through the store
  silent   - culprit, with 5 % of the ranks silent (no watchdog, no state, no relay)

    python benchmarks/scale.py                        # 64 and 256 ranks, every scenario (a few minutes)
    python benchmarks/scale.py --full                 # 64, 256, 1,024 and 4,096 ranks
    python benchmarks/scale.py --ranks 1024 --scenario culprit
    python benchmarks/scale.py --ranks 16384 --scenario culprit   # 2,048 nodes (docs/scale.md: minutes)

Measured per run: seconds from the first detection to the merged verdict, store operations and bytes
from the first detection until every verdict is written (of them, the straggler exchange's, which the real
relays run beside the gather: ``--no-arrivals`` runs the gather without it), store operations per minute while idle (all
relays' periods, nothing overdue), the store server's connections and CPU, and this process's resident
memory per simulated rank (the rank side: channel reader, watchdog, relay).
"""
import argparse
import datetime
import gc
import hashlib
import heapq
import json
import mmap
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, today, write_json  # noqa: E402
from c10d_observer import channel as ch  # noqa: E402
from c10d_observer import channel_writer as ch_writer  # noqa: E402
from c10d_observer import channel_reader as ch_reader  # noqa: E402
from c10d_observer import config as _config  # noqa: E402
from c10d_observer import dumpdir as _dumpdir  # noqa: E402
from c10d_observer import relay as _relay  # noqa: E402
from c10d_observer import requests as _requests  # noqa: E402
from c10d_observer import watchdog as _wd  # noqa: E402

SERVER = """
import datetime, socket, sys
import torch.distributed as d
t = datetime.timedelta(seconds=300)
try:
    s = d.TCPStore("127.0.0.1", 0, 1, True, t, wait_for_workers=False)
    port = s.port
except (TypeError, AttributeError):  # torch < 1.11: no wait_for_workers, no port read back
    so = socket.socket()
    so.bind(("127.0.0.1", 0))
    port = so.getsockname()[1]
    so.close()
    s = d.TCPStore("127.0.0.1", port, 1, True, t)
print(port, flush=True)
sys.stdin.read()
"""
PID_BASE = 4000000  # simulated pids: above pid_max's default, so no real process is ever named
JOB = "scale-bench"
STUCK_OP = ch.encode_op("all_reduce") | ch.encode_sig(ch.DTYPE_CODES.get("float32", 1), 1 << 20)


class Counter(object):
    def __init__(self):
        self.ops = self.bytes = 0
        self.arrivals_ops = self.arrivals_bytes = 0  # of them, the straggler exchange's (relay_arrivals: its
        # keys hold "arrival" or "stragglers")


class CountingStore(object):
    """A TCPStore client that counts what goes through it (operations, key and value bytes)."""

    def __init__(self, store, counter):
        self._s, self._c = store, counter

    def _n(self, *parts):
        self._c.ops += 1
        n = sum(len(p) for p in parts)
        self._c.bytes += n
        key = parts[0]
        if "arrival" in key or "stragglers" in key:
            self._c.arrivals_ops += 1
            self._c.arrivals_bytes += n

    def set(self, key, value):
        self._s.set(key, value)
        self._n(key, value)

    def get(self, key):
        v = self._s.get(key)
        self._n(key, v)
        return v

    def add(self, key, n):
        self._n(key, "12345678")
        return self._s.add(key, n)

    def multi_get(self, keys):  # one request and its answer, where the client has it (torch 2.x)
        if not hasattr(self._s, "multi_get"):
            raise AttributeError("multi_get")
        vs = self._s.multi_get(keys)
        self._n("".join(keys), b"".join(vs))
        return vs


def dist_tcpstore_client(port, _dt):
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", port, 1, False, _dt.timedelta(seconds=30))


def start_server():
    p = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         universal_newlines=True)
    return p, int(p.stdout.readline())


def server_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def server_connections(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n - 1  # the listening socket


def settled_connections(pid, timeout=5.0):
    """server_connections once the count has held for 0.3 s: a torch 1.9-era client opens a second socket
    (its watch listener) a moment after the first, so a count read at once may miss it."""
    last, t_end = server_connections(pid), time.monotonic() + timeout
    since = time.monotonic()
    while time.monotonic() < t_end and time.monotonic() - since < 0.3:
        time.sleep(0.05)
        n = server_connections(pid)
        if n != last:
            last, since = n, time.monotonic()
    return last


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def stack_text(rank, main_tid, header, stuck):
    """One dump in faulthandler's format (signals.dump_threads): the main thread and 7 others, 30 frames."""
    out = ["\n=== c10d_observer: %s ===\n" % header]
    lib = "/opt/conda/lib/python3.11/site-packages/torch/"
    for t in range(8):
        ident = main_tid if t == 0 else main_tid + 0x100000 * t
        out.append("Thread 0x%016x (most recent call first):\n" % ident)
        if t == 0:
            inner = (["all_reduce (%sdistributed/distributed_c10d.py:3252)" % lib] if stuck else
                     ["_busy_elsewhere (/job/train.py:%d)" % (200 + rank % 7)])
        else:
            inner = ["wait (/usr/lib/python3.11/threading.py:320)"]
        for i, fr in enumerate(inner + ["_call_impl (%snn/modules/module.py:%d)" % (lib, 1500 + i)
                                        for i in range(29)]):
            func, where = fr.split(" (", 1)
            path, line = where.rstrip(")").rsplit(":", 1)
            out.append('  File "%s", line %s in %s\n' % (path, line, func))
        out.append("\n")
    return "".join(out)


class SimChannelWriter(ch_writer.ChannelWriter):
    """The rank's channel in an anonymous shared mapping, where a rank's is a file in /dev/shm that it keeps a
    descriptor of (and Python's mmap a second): this process holds every rank's channel, and its descriptors
    are limited to 20,000 here (16,384 ranks took 32,768).  The layout, the writer's and the reader's code are
    the channel's own; the watchdog reads it through ChannelReader.attach, as in one process it would."""

    def _create(self, directory):
        self._mm = mmap.mmap(-1, self.layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.fd, self.path = -1, os.path.join(directory or "/nonexistent", "anonymous-channel")


class SimRank(object):
    def __init__(self, rank, pid, world, host, dump_dir, groups, poll, timeout, shm, clock, ring=16):
        self.rank, self.host, self.dump_dir = rank, host, dump_dir
        self.pid = pid
        self.main_tid = 0x7f3a00000000 + rank * 0x1000
        self.writer = SimChannelWriter(max_streams=4, ring=ring, directory=shm)
        self.writer.set_rank(rank, world)
        self.writer.set_main_thread(self.main_tid)
        self.writer.heartbeat()
        self.streams = {}
        for name, ranks in groups:
            idx = self.writer.add_stream({"group": name, "stream": name, "kind": "collective", "ranks": ranks,
                                          "backend": "nccl", "torch_timeout_s": 600.0, "name": name,
                                          "size": len(ranks), "group_rank": ranks.index(rank)})
            self.streams[name] = self.writer.stream_writer(idx)
        self.reader = ch_reader.ChannelReader.attach(self.writer)
        self.writer.unlink()
        self.stack_path = os.path.join(dump_dir, _dumpdir.stacks_name(rank, self.pid))
        with open(self.stack_path, "w") as f:  # an earlier dump: the file a rank has after a while
            f.write(stack_text(rank, self.main_tid, "an earlier request", True))
        nodes = _relay.nodes({"WORLD_SIZE": world, "LOCAL_WORLD_SIZE": len(groups[1][1])})
        cfg = _config.WatchdogConfig(rank_pid=self.pid, dump_dir=dump_dir, stack_path=self.stack_path, timeout=timeout,
                                     poll_interval=poll, nodes=nodes, host=host, job_id=JOB, signal=10,
                                     signal_name="SIGUSR1", dump_signal=None, on_timeout="dump", py_spy=None)
        self.wd = _wd.Watchdog(cfg, self.reader, clock=clock.mono_ns, wall=clock.wall, kill=lambda pid, sig: None,
                               log=self._log)
        self.stuck = False
        self.logged = []

    def _log(self, msg):
        self.logged.append((time.monotonic(), msg))

    def calls(self, name, n):
        for _ in range(n):
            s = self.streams[name]
            s.done(s.start(STUCK_OP))

    def enter(self, name, t_ns):
        self.streams[name].start(STUCK_OP, t_ns)
        self.stuck = True

    def helper(self, t_ns):
        """The rank's helper thread: its heartbeat, and the stacks the watchdog asks for by a file."""
        self.writer.heartbeat(t_ns)
        req = os.path.join(self.dump_dir, _dumpdir.stack_request_name(self.pid))
        if os.path.exists(req):
            doc = _dumpdir.read_json(req) or {}
            os.remove(req)
            with open(self.stack_path, "a") as f:
                f.write(stack_text(self.rank, self.main_tid, doc.get("header") or "asked", self.stuck))

    def close(self):
        self.reader.close()
        self.writer.close()


def gather_wait_max(poll, world, per_node):
    """As the observer sets it for a job of several nodes (config.windows)."""
    return _config.windows(poll, _relay.nodes({"WORLD_SIZE": world, "LOCAL_WORLD_SIZE": per_node})).gather_wait_max


class NodeClock(object):
    """The clocks of the node the harness is working on: real time less ``offset_ns``, the time spent on
    other nodes (set before each node's turn)."""

    def __init__(self):
        self.offset_ns = 0

    def mono_ns(self):
        return time.monotonic_ns() - self.offset_ns

    def wall(self):
        return time.time() - self.offset_ns / 1e9


class Node(object):
    def __init__(self, index, ranks, pids, world, root, groups_of, poll, timeout, shm, store_factory, clock,
                 ring=16):
        self.host = "node%04d" % index
        self.dump_dir = os.path.join(root, self.host)
        os.makedirs(self.dump_dir)
        self.ranks = [SimRank(r, pids[r], world, self.host, self.dump_dir, groups_of(r), poll, timeout, shm, clock,
                              ring) for r in ranks]
        # as observer.py starts them: the window is the merge's longest wait and a second
        self.relays = _relay.node_relays(self.dump_dir, [(r.rank, i) for i, r in enumerate(self.ranks)], JOB,
                                         poll, gather_wait_max(poll, world, len(ranks)) + 1.0, store_factory,
                                         clock.wall)


GC_EVERY_S = 10.0  # wall seconds between the harness's collections of its heap (outside the simulated time)
SLOW_STEP_NS, SLOWEST = 50 * 10 ** 6, 12  # the steps over 50 ms since the hang: the slowest 12 are reported
PROFILE = os.environ.get("SCALE_PROFILE")  # a file: the merging node's steps since the hang under cProfile


# This VM has no DNS server: torch's client looks up the name of its socket's address once per connect (for
# a log line: "The hostname of the client socket cannot be retrieved"), and every 25th such lookup waited
# out the resolver's 5 s: 1,024 ranks spent 30 of their 78 s of wall time opening 256 clients (32 at a
# time: the lookups wait one after another), 2,048 nodes would spend some 7 minutes.  A resolver that gives
# up after 1 s, once: 300 connects in 2.0 s where 55 s (2026-12-01).  Connects are outside the simulated time.
RESOLVER_ENV = {"RES_OPTIONS": "timeout:1 attempts:1"}


def run(world, per_node, scenario, poll=0.5, timeout=3.0, idle_s=None, seed=0, limit_s=30.0, keep=None,
        serial_parts=False, arrivals=True, history=0):
    """One simulated job; ``idle_s`` and ``limit_s`` are simulated seconds; ``keep``: a path to copy the merging
    node's dump_dir to.  WORLD_SIZE and LOCAL_WORLD_SIZE
    are the job's, as torchrun sets them in each rank (the relays read how many nodes the job spans).
    ``arrivals``: the relays run the straggler exchange beside the gather, as they do in a job (False: none of
    it, every relay's share put off past the run: what the exchange costs the gather, side by side).
    ``history``: calls each rank completes on each of its groups before the job's own few (0: none; 32 or more
    fills a document's record of every stream, ``rank_docs.HISTORY``, as a job some steps in has it)."""
    env = dict(RESOLVER_ENV, WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(per_node))
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    gc_was = gc.isenabled()
    try:
        return _run(world, per_node, scenario, poll, timeout, idle_s, seed, limit_s, keep, serial_parts, arrivals,
                    history)
    finally:
        if gc_was:
            gc.enable()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(world, per_node, scenario, poll, timeout, idle_s, seed, limit_s, keep, serial_parts=False, arrivals=True,
         history=0):
    rng = random.Random(seed)
    nodes_n = world // per_node
    # every node's dump_dir in memory: one disk here takes the writes of up to 2,048 nodes' watchdogs and
    # relays, where each node has its own (a rename into place took 0.68 ms on this VM's disk at 4,096
    # ranks, 87,620 of them 60 s of a 324 s run; 0.013 ms in /dev/shm, 2026-12-01)
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix="c10d-scale-", dir=memory)
    shm = tempfile.mkdtemp(prefix="c10d-scale-shm-", dir=memory)
    import torch.distributed  # noqa: F401  (imported before the memory baseline)
    server, port = start_server()
    import datetime as _dt
    base_connections = settled_connections(server.pid)  # the server's own client
    # sockets per client (more than one where torch's client keeps a second socket, as torch 1.9's watch
    # listener may): a probe client, kept open to the end so that it is counted on both sides
    probe = dist_tcpstore_client(port, _dt)
    per_client = max(1, settled_connections(server.pid) - base_connections)
    base_connections += per_client
    counter = Counter()
    clock = NodeClock()
    sim = {"connect_ns": 0}  # the simulated time (ns) at the start of a round, and its bookkeeping
    wall0 = time.monotonic()

    def client():
        import torch.distributed as dist
        return dist.TCPStore("127.0.0.1", port, 1, False, datetime.timedelta(seconds=30))

    def store_factory():
        # a relay's store client, opened once by the node's acting relay, when it first acts: its connect is
        # left out of the simulated time, as a start-up cost (RESOLVER_ENV)
        t = time.monotonic_ns()
        store = CountingStore(client(), counter)
        took = time.monotonic_ns() - t
        clock.offset_ns += took
        sim["connect_ns"] += took
        return store

    world_ranks = list(range(world))

    def groups_of(r):
        node, local = divmod(r, per_node)
        pair = node // 2 * 2 * per_node
        return [("0", world_ranks), ("tp%d" % node, list(range(node * per_node, (node + 1) * per_node))),
                ("dp%d" % local, list(range(local, world, per_node))),
                ("pair%d" % (node // 2), list(range(pair, min(pair + 2 * per_node, world))))]

    rss0 = rss_bytes()
    # pids in no order, as a real job's (they go into the verdict every node gets: sequential ones would
    # compress better than real ones)
    pids = [PID_BASE + p for p in rng.sample(range(190000), world)]
    ring = 16  # the channel's ring of calls a stream: a power of two over the calls made before the hang
    while ring < history + 4:
        ring *= 2
    nodes = [Node(n, range(n * per_node, (n + 1) * per_node), pids, world, root, groups_of, poll, timeout, shm,
                  store_factory, clock, ring) for n in range(nodes_n)]
    ranks = [r for n in nodes for r in n.ranks]
    if not arrivals:
        for n in nodes:
            for rel in n.relays:
                rel.arrivals_every = 1e12  # its share (and the collector's reads) never due
    culprit = world // 3 + 5
    for r in ranks:
        r.calls("0", 3 + history)
        r.calls("tp%d" % (r.rank // per_node), 2 + history)
        r.calls("dp%d" % (r.rank % per_node), 2 + history)
        r.calls("pair%d" % (r.rank // (2 * per_node)), 1 + history)
    silent = set()
    if scenario == "silent":
        silent = set(rng.sample([r for r in world_ranks if r != culprit], max(1, world // 20)))
    result = {"ranks": world, "nodes": nodes_n, "per_node": per_node, "scenario": scenario, "poll_s": poll,
              "parts": "serial" if serial_parts else "side by side", "arrivals": arrivals,
              "timeout_s": timeout, "relays": sum(len(n.relays) for n in nodes), "history": history}
    # every simulated rank's objects live in this one process: a full collection of its heap (seconds at
    # 4,096 ranks) would land in whichever node's turn it falls, where a real rank's small heap costs
    # nothing of the kind.  Set aside what exists now, and collect what the run makes between rounds, outside
    # every node's turn (automatic collections made single steps of a helper's heartbeat 0.3 s long at 4,096
    # ranks, 2026-12-01)
    gc.collect()
    gc.freeze()
    gc.disable()  # enabled again by run()
    sim["collected"] = time.monotonic()

    # the simulated time: every node's parts see sim["now"] (ns) at the start of a round
    sim["now"], sim["max_work"] = time.monotonic_ns(), 0
    t_start = sim["now"]
    verdicts = {}

    # Each part's next wake, soonest first: (due, node, order in its node's turn, kind, tie, part).  A round
    # runs the parts due at its start, each node's in the order of a turn (its ranks' helpers and watchdogs,
    # then its relays).  (Every part of every node was asked whether it was due, every round: at 16,384
    # ranks 100,000 questions a round.)  A watchdog and a relay wake as their loops do (Watchdog.run,
    # StoreRelay._run): a watchdog polls every poll, or at its first call's deadline where that comes sooner,
    # looks every 50 ms while a protocol is under way, and else peeks (a stat) for a gather request four
    # times a poll, polling at once where one came; an idle relay looks (a stat, its node's leader) for its
    # node's request four times a period and steps at once where one came, else once a period, and every
    # 0.1 s while a gather is on.
    heap = []
    tie = iter(range(1 << 62))
    poll_ns = int(poll * 1e9)
    peek_ns = int(max(_wd.REQUEST_LOOK_S, poll / 4) * 1e9)
    relay_look_ns = int(min(poll, max(_relay.REQUEST_LOOK_S, poll / 4)) * 1e9)
    next_poll = {}  # rank -> when its watchdog polls next (Watchdog.run's next_tick)
    relay_last, relay_stamp = {}, {}  # rank -> when its relay last stepped, the request file it last saw

    def push(at, n, order, kind, part):
        heapq.heappush(heap, (at, n, order, kind, next(tie), part))

    for i, n in enumerate(nodes):  # at a random phase, as processes started at different moments
        for j, r in enumerate(n.ranks):
            if r.rank not in silent:
                push(t_start + int(rng.random() * poll / 2 * 1e9), i, 2 * j, "h", r)
                next_poll[r.rank] = t_start + int(rng.random() * poll_ns)
                push(next_poll[r.rank], i, 2 * j + 1, "w", r)
        for j, rel in enumerate(n.relays):
            if rel.rank not in silent:  # a silent rank is gone, its relay thread with it
                relay_last[rel.rank] = t_start - int(rng.random() * poll_ns)
                push(t_start + int(rng.random() * relay_look_ns), i, 2 * per_node + j, "r", rel)

    def watchdog_wakes(r, mono):
        """One wake of Watchdog.run's loop at ``mono`` (its node's clock); returns the next wake."""
        wd, actions = r.wd, ()
        if mono >= next_poll[r.rank]:
            next_poll[r.rank] = mono + poll_ns
            actions = wd.step(mono)
        elif wd.busy():  # between polls: only the protocols under way
            wd.look(mono)
        elif _requests.GatherRequest.stamp(wd.dd) != wd.files.request_key:  # Watchdog.peek: a request came
            actions = wd.step(mono)
            next_poll[r.rank] = mono + poll_ns
        if any(a.kind == "say_overdue" for a in actions) and result.get("first_detection") is None:
            result["first_detection"] = mono
        due = wd.detector.next_deadline_ns(wd.snap)
        if due is not None and mono < due < next_poll[r.rank]:
            next_poll[r.rank] = due  # the next poll at the first call's deadline
        # the loop waits from where its work ended
        return min(next_poll[r.rank], clock.mono_ns() + (int(wd.w.merge_look * 1e9) if wd.busy() else peek_ns))

    def relay_wakes(rel, mono):
        """One wake of StoreRelay._run's loop at ``mono``; returns the next wake."""
        if not rel.window.open:
            seen = _requests.GatherRequest.stamp(rel.dd) if rel.leader else None
            fresh = seen is not None and seen != relay_stamp.get(rel.rank)
            if seen is not None:
                relay_stamp[rel.rank] = seen
            if not fresh and mono - relay_last[rel.rank] < poll_ns:
                return clock.mono_ns() + relay_look_ns
        relay_last[rel.rank] = mono
        try:
            rel.step()
        except Exception as e:  # as StoreRelay._run: never stops the rank
            result.setdefault("relay_errors", []).append(repr(e))
        return clock.mono_ns() + (int(min(poll, 0.1) * 1e9) if rel.window.open else relay_look_ns)  # from its end

    profiler, merging = None, set()
    if PROFILE:
        import cProfile
        profiler = cProfile.Profile()
    slow = []  # the slowest steps since the hang: (seconds, at s after the hang, host, kind, rank), SLOWEST kept

    def note(ts, connects, now, n, kind, part):
        took = time.monotonic_ns() - ts - (sim["connect_ns"] - connects)
        if sim.get("hang") is not None and took > SLOW_STEP_NS:
            heapq.heappush(slow, (took / 1e9, round((now - sim["hang"]) / 1e9, 2), n.host, kind, part.rank))
            if len(slow) > SLOWEST:
                heapq.heappop(slow)

    def node_turn(i, steps, now):
        n = nodes[i]
        t0, connects = time.monotonic_ns(), sim["connect_ns"]
        clock.offset_ns = t0 - now
        for _, _, order, kind, _, part in sorted(steps, key=lambda e: (e[2], e[4])):
            ts, c0 = time.monotonic_ns(), sim["connect_ns"]
            if not serial_parts:  # each part from the round's start: the node's parts are processes of their own
                clock.offset_ns = ts - now
            profiled = profiler is not None and sim.get("hang") is not None and (
                n.host in merging or kind == "r" and part.window.merging)
            if profiled:
                merging.add(n.host)
                profiler.enable()
            if kind == "h":
                part.helper(clock.mono_ns())
                push(now + int(poll / 2 * 1e9), i, order, "h", part)
            elif kind == "w":
                push(watchdog_wakes(part, clock.mono_ns()), i, order, "w", part)
            else:
                push(relay_wakes(part, clock.mono_ns()), i, order, "r", part)
            if profiled:
                profiler.disable()
            note(ts, c0, now, n, kind, part)
            if kind != "h" and n.host not in verdicts and os.path.exists(os.path.join(n.dump_dir, _dumpdir.VERDICT_JSON)):
                verdicts[n.host] = clock.mono_ns()  # at the end of the step that wrote it
            if not serial_parts:
                sim["max_work"] = max(sim["max_work"], time.monotonic_ns() - ts - (sim["connect_ns"] - c0))
        if serial_parts:
            sim["max_work"] = max(sim["max_work"], time.monotonic_ns() - t0 - (sim["connect_ns"] - connects))

    def round_():
        now, sim["max_work"] = sim["now"], 0
        due = {}
        while heap and heap[0][0] <= now:
            e = heapq.heappop(heap)
            due.setdefault(e[1], []).append(e)
        for i in sorted(due):
            node_turn(i, due[i], now)
        sim["now"] = now + max(sim["max_work"], 1)
        if time.monotonic() - sim["collected"] > GC_EVERY_S:
            gc.collect()
            sim["collected"] = time.monotonic()
        if heap and heap[0][0] > sim["now"]:  # the next round when its first part is due
            sim["now"] = heap[0][0]
        return sim["max_work"] / 1e9

    # idle: every part at its own period, nothing overdue
    idle_s = idle_s if idle_s is not None else max(3 * poll, 2.0)
    while sim["now"] - t_start < 3 * poll * 1e9:  # relays start, one per node comes to act (the others
        round_()                                   # see its beat and close their store clients)
    gc.collect()
    ops0, cpu0, t0, a0 = counter.ops, server_cpu_s(server.pid), sim["now"], counter.arrivals_ops
    while sim["now"] - t0 < idle_s * 1e9:
        round_()
    el = (sim["now"] - t0) / 1e9
    result["idle_store_ops_per_min"] = round((counter.ops - ops0) * 60.0 / el, 1)
    result["idle_arrivals_ops_per_min"] = round((counter.arrivals_ops - a0) * 60.0 / el, 1)
    # the gather's own, the exchange's left out (a share of a round falls in the idle time or not: 1.0 to 1.5 an
    # operation a node and poll at 3 nodes)
    result["idle_gather_ops_per_node_per_poll"] = round(
        (counter.ops - ops0 - (counter.arrivals_ops - a0)) * poll / el / nodes_n, 3)
    result["idle_store_ops_per_node_per_poll"] = round((counter.ops - ops0) * poll / el / nodes_n, 3)
    result["idle_server_cpu_pct"] = round(100.0 * (server_cpu_s(server.pid) - cpu0) / el, 2)
    result["server_connections"] = round((settled_connections(server.pid) - base_connections) / float(per_client), 2)
    result["server_sockets_per_client"] = per_client

    # the hang: every rank enters its call at the same simulated moment
    t_hang = sim["hang"] = sim["now"]
    for r in ranks:
        if scenario == "cascade":
            dp = "dp%d" % (culprit % per_node)
            if r.rank == culprit:
                continue
            r.enter(dp if r.rank % per_node == culprit % per_node else "0", t_hang)
        elif scenario == "two":
            if r.rank != culprit and r.rank // (2 * per_node) == culprit // (2 * per_node):
                r.enter("pair%d" % (culprit // (2 * per_node)), t_hang)
        elif r.rank != culprit:
            r.enter("0", t_hang)
    ops0, bytes0, cpu0 = counter.ops, counter.bytes, server_cpu_s(server.pid)
    a_ops0, a_bytes0 = counter.arrivals_ops, counter.arrivals_bytes
    rounds = []
    longest = gather_wait_max(poll, world, per_node)
    while sim["now"] - t_hang < limit_s * 1e9:
        rounds.append(round_())
        if verdicts and (sim["now"] - max(verdicts.values())) / 1e9 > longest + 1.0:
            break  # no other node merges now
    if profiler is not None:
        profiler.dump_stats(PROFILE)
    result["round_max_s"] = round(max(rounds), 3)  # the slowest node's work in one round (simulated time)
    result["rss_per_rank_kib"] = round((rss_bytes() - rss0) / 1024.0 / world, 1)
    first = result.pop("first_detection", None)
    result["detected_after_s"] = round((first - t_hang) / 1e9, 2) if first else None
    result["verdicts_written"] = len(verdicts)
    result["gather_store_ops"] = counter.ops - ops0
    result["gather_store_mib"] = round((counter.bytes - bytes0) / 2.0 ** 20, 2)
    result["gather_arrivals_ops"] = counter.arrivals_ops - a_ops0  # of them, the straggler exchange's
    result["gather_arrivals_mib"] = round((counter.arrivals_bytes - a_bytes0) / 2.0 ** 20, 2)
    result["gather_server_cpu_s"] = round(server_cpu_s(server.pid) - cpu0, 2)
    result["slowest_steps"] = [{"s": round(s, 3), "after_hang_s": at, "host": host, "part": kind, "rank": rank}
                               for s, at, host, kind, rank in sorted(slow, reverse=True)]
    checks, read = [], {}
    for host in sorted(verdicts):
        with open(os.path.join(root, host, _dumpdir.VERDICT_JSON), "rb") as f:
            data = f.read()
        key = hashlib.sha1(data).hexdigest()  # every node the verdict was relayed to holds the same bytes: read once
        v = read[key] if key in read else read.setdefault(key, json.loads(data.decode("utf-8")))
        ok = v.get("culprit_ranks") == [culprit] and sorted(v.get("ranks_silent") or []) == sorted(silent)
        checks.append({"host": host, "ok": ok, "summary": (v.get("summary") or "")[:300],
                       "culprits": v.get("culprit_ranks"), "silent": len(v.get("ranks_silent") or []),
                       "merged_on": not v.get("relayed_from")})
    result["merges"] = sum(c["merged_on"] for c in checks)
    result["verdicts_ok"] = bool(checks) and all(c["ok"] for c in checks) and result["merges"] == 1
    if verdicts and first:
        # from the merging node's verdict.  A node whose turn came after the merging node's in the round of
        # the merge took the verdict in that round, at its clock: before the merge's own step ended (the
        # harness's one-round error, as long as that step: 2.5 s at 16,384 ranks).  No node has it before the
        # merging node: such a node's time is the merging node's (``verdict_early_nodes`` counts them).
        merged = [verdicts[c["host"]] for c in checks if c["merged_on"]]
        t_merged = min(merged) if merged else min(verdicts.values())
        at = sorted(max(t, t_merged) for t in verdicts.values())
        result["verdict_s"] = round((t_merged - first) / 1e9, 2)
        result["all_verdicts_s"] = round((at[-1] - first) / 1e9, 2)
        result["verdict_early_nodes"] = sum(t < t_merged for t in verdicts.values())
        # how the verdict reached the nodes: by when half, 90 % and 99 % of them had it
        result["verdict_nodes_s"] = {"p%d" % q: round((at[min(len(at) - 1, len(at) * q // 100)] - first) / 1e9, 2)
                                     for q in (50, 90, 99)}
        # the last nodes to have it, and since when their relay had been stepping without its lead
        result["verdict_last_nodes"] = [{"host": h, "s": round((max(t, t_merged) - first) / 1e9, 2)}
                                        for h, t in sorted(verdicts.items(), key=lambda kv: kv[1])[-5:]]
    else:
        result["verdict_s"] = result["all_verdicts_s"] = None
    if keep and checks:  # the merging node's dump_dir, for a look at its merge (docs/scale.md)
        host = ([c["host"] for c in checks if c["merged_on"]] or [checks[0]["host"]])[0]
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(os.path.join(root, host), keep)
    result["verdict_summary"] = checks[0]["summary"] if checks else None
    if not result["verdicts_ok"]:
        result["verdict_checks"] = [c for c in checks if not c["ok"]][:3]
    for r in ranks:
        r.close()
    gc.unfreeze()
    del probe
    server.kill()
    server.wait()
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)
    result["sim_wall_s"] = round(time.monotonic() - wall0, 1)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default=None, help="comma-separated sizes (default 64,256; --full: to 4,096)")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--scenario", default="all", choices=["all", "culprit", "cascade", "two", "silent"])
    ap.add_argument("--poll", type=float, default=0.5)
    ap.add_argument("--json", default=os.path.join(RESULTS, "scale.json"))
    ap.add_argument("--keep", default=None, help="copy the merging node's dump_dir here (one size and scenario)")
    ap.add_argument("--no-arrivals", action="store_true",
                    help="no straggler exchange beside the gather (every relay's share put off past the run): the "
                         "gather alone, to compare")
    ap.add_argument("--history", type=int, default=0,
                    help="calls each rank completes on each of its groups before the job's own few (default 0; 32 "
                         "fills every stream's record in a document, as in a job some steps in)")
    ap.add_argument("--serial-parts", action="store_true",
                    help="a node's parts one after another in its turn (before 2026-12-02: pessimistic, as a node's "
                         "watchdogs and relays are processes of their own)")
    args = ap.parse_args(argv)
    if args.history < 0:
        ap.error("--history: a count of calls, 0 or more; got %d" % args.history)
    sizes = [int(s) for s in args.ranks.split(",")] if args.ranks else ([64, 256, 1024, 4096] if args.full
                                                                          else [64, 256])
    scenarios = ["culprit", "cascade", "two", "silent"] if args.scenario == "all" else [args.scenario]
    rows = []
    cols = ("ranks", "nodes", "scenario", "verdict_s", "all_verdicts_s", "merges", "verdicts_written", "verdicts_ok",
            "gather_store_ops", "gather_arrivals_ops", "gather_store_mib", "idle_store_ops_per_node_per_poll",
            "server_connections",
            "idle_server_cpu_pct", "gather_server_cpu_s", "rss_per_rank_kib", "round_max_s", "sim_wall_s")
    print(" ".join("%-10s" % c[:10] for c in cols))
    for n in sizes:
        for sc in scenarios:
            r = run(n, args.per_node, sc, poll=args.poll, keep=args.keep, serial_parts=args.serial_parts,
                    arrivals=not args.no_arrivals, history=args.history)
            rows.append(r)
            print(" ".join("%-10s" % (r.get(c),) for c in cols), flush=True)
            for s in r.get("slowest_steps", [])[:4]:  # where the simulated time goes: the rounds they lengthened
                print("  slow step: %(s).2f s, %(after_hang_s)s s after the hang, %(host)s %(part)s rank %(rank)s" % s)
            if not r["verdicts_ok"]:
                print("  verdict not as expected: %s" % r.get("verdict_checks"))
    import platform
    write_json(args.json, {"benchmark": "scale", "date": today(),
                           "machine": "%s, %d cpus" % (platform.machine(), os.cpu_count()),
                           "python": platform.python_version(), "rows": rows})
    return 0 if all(r["verdicts_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
