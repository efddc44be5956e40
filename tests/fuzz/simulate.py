"""gloo's matching, simulated, and the documents the watchdogs would write at hang time (issue 42, first slice).

The model (gloo, synchronous calls):
- a group's collectives match by order: the k-th call of each member on a group is one collective (seq k of
  the group's stream, as the observer numbers it); it completes once every member has entered it, all with
  the same op, size and root; a broadcast, gloo's binomial tree (gloo/broadcast.cc), completes for each rank
  that received from its parent and whose children entered it, so a rank that never enters holds only its
  parent and its own subtree (``Sim._tree_done``).  A collective whose members issued different ops, sizes or roots never
  completes: the desync hangs with every member in it, the verdict's MISMATCH (real gloo raises at once on
  some of them, a size mismatch among others: README, the fault matrix; a later slice may model that);
- sends and recvs between two ranks match by order per direction: the n-th send from A to B and the n-th
  recv on B from A are seq n of stream ``<group>:p2p:A->B``; the pair completes once both have entered it;
- a batch (``batch_isend_irecv``: the isends and irecvs of one step's ring slot; or a burst of async
  all_reduces) is posted op by op, each matched as a send or recv of its stream or as a collective of its
  group, and the rank then waits until every op of it completed;
- a rank blocks in a call until it completes; a stalled rank stops in Python before its call, a dead rank's
  process ends there, a rank at the end of its program is done (it ends normally: the observer is disabled);
  a frozen rank (SIGSTOP, or a thread that holds the GIL) stops before its call, or inside it (``frozen_in``:
  it entered the collective, and gloo's algorithms need every member to run until they end, so the call never
  completes for any member, a broadcast's tree included); its watchdog, a process of its own, still writes
  its document: its helper thread's beat is older than ``FROZEN_AFTER_S`` (frozen), and no stacks come.
Ranks run until none can progress: that is the hang (or, every rank done, no hang).

``documents(sim)`` renders each rank as its watchdog writes it at the gather (documents.RankDoc's JSON, or,
``typed``, the RankDoc the verdict reads of it): a state (kind "state") per rank alive, the end (kind "end",
``alive`` false) of a dead rank, the end of a rank that finished (``alive`` true), with per stream
last_started / last_completed, the call in flight and the last 32 calls (``recent_ops``), and ``overdue``
entries (level hard) for calls in flight past the timeout, as one of three source models (``SOURCES``: the
exact sources, torch's gloo recorder, torch's NCCL recorder with each rank's Python ahead of its GPU).  Pure
Python, no torch.  Python 3.8.
"""
import bisect
import itertools
import math
import operator
import random

from c10d_observer import documents as _documents
from c10d_observer import streams as _streams

from . import programs
from .programs import ASYNC_OPS, DATA, OBJECT_OPS, P2P_OPS, POSTED_OPS

T0 = 1800000000.0  # the job's first step, Unix seconds
TIMEOUT_S = 5.0  # the observer's timeout in the documents' config
SEEN_LATE_S = 30.0  # the gather, this long after the last progress ("late")
POLL_S = 0.25  # a watchdog finds a call overdue within a poll of its deadline
HISTORY = 32  # calls per stream in a document (rank_docs.HISTORY)
STEP_S_BEFORE = 1.0  # ranks start this long before the loop's first step (the prologue runs in it)
FROZEN_AFTER_S = 3 * POLL_S + 1.0  # config.windows: no beat this long, the rank's Python is frozen
EPS = 1e-4  # a rank's next call starts at least this long after its previous call ended
END_S = 5e-4  # a call ends this long after its last member entered it


def coll_stream(gid):
    return gid


def p2p_stream(gid, src, dst):
    return _streams.p2p_name(gid, src, dst)


class Sim(object):
    """One run of a program's per-rank calls (``calls``: {rank: [programs.Call]}) to the end or the hang.

    ``stop``: {rank: (index, "stall" | "dead" | "frozen" | "frozen_in")}: the rank stops before its call
    ``index`` (frozen_in: once it entered it).
    After ``run()``: ``state[r]`` is "done", "blocked" (in ``blocked[r]``: (stream, seq)), "stall", "dead" or
    "frozen" (``frozen_at[r]``: since when);
    ``clock[r]`` the rank's time (its end, its stall, its death); ``hist[r][stream]``: [(seq, op, size,
    started_at)]; ``started`` / ``completed``: {rank: {stream: seq}}."""

    def __init__(self, program, calls, stop=None, nccl_sizes=False, gaps=None):
        self.program = program
        self.gaps = gaps  # {rank: [s]}: each call starts this long after the rank's previous call ended (its
        # compute: stragglers.py), where a call's nominal start would have it start on the clock
        self.nccl_sizes = nccl_sizes  # a collective of one op issued with different sizes: see _smaller
        self.calls = calls
        self.stop = stop or {}
        world = program.world
        self.ptr = [0] * world
        self.clock = [T0 - STEP_S_BEFORE] * world
        self.state = ["ready"] * world
        self.blocked = [None] * world
        self.started = [dict() for _ in range(world)]
        self.completed = [dict() for _ in range(world)]
        self.hist = [dict() for _ in range(world)]
        self.streams = [dict() for _ in range(world)]  # stream -> (gid, kind, peer, src, dst)
        self.entered = {}  # (stream, seq) -> [the first member's signature, whether every member's is the
        # same, the latest entry, {rank: started_at}, members] (run)
        self.through = {}  # (stream, seq) -> ranks a broadcast let through before every member entered it
        self.held = set()  # (stream, seq) of the calls a rank froze in: they never complete
        self.frozen_at = {}  # rank -> when it froze
        self.last_progress = T0
        self.preps = None  # what the run needs of each rank's calls (_prepared), made at its start
        self.paused = False  # run(pause=...) stopped before a rank's call (``follow``)
        for gid, g in program.groups.items():  # (each rank's in the order of the groups)
            info = (gid, "collective", None, None, None)
            for r in g.ranks:
                self.streams[r][coll_stream(gid)] = info

    def _begin(self):
        """The run's per-rank preparation (``preps``) and the state of its loop beside the attributes: the stack
        of the ranks ready, each rank's ops of its batch still in flight (``_pend``), whether it posted every
        op of its batch and waits for them (``_waits``), the latest end of its batch's ops that completed while
        it still posted (``_done_end``), and {(stream, seq): {rank: its signature}}, the members whose
        signature is not the first one's (``_odd``): kept on the Sim so that a run paused before a call can go
        on (``run``), or another run from where it paused (``follow``)."""
        world = self.program.world
        self.preps = [_prepared(self.program, self.calls[r], r) for r in range(world)]
        self._ready = list(range(world))
        self._pend = [set() for _ in range(world)]
        self._waits = [False] * world
        self._done_end = [0.0] * world
        self._odd = {}

    def follow(self, run):
        """This run (begun: ``_begin``, not run yet) from the state of ``run``, paused (``run(pause=...)``)
        before any rank issued a call where this run's calls or stops differ from its: up to there the two
        runs are one, step for step (the same calls, prepared alike, taken in the same order), so this one
        goes on from a copy of that one's state rather than from the first call (``run_pair``)."""
        assert run.paused and self.preps is not None and self.program is run.program
        self.ptr, self.clock, self.state, self.blocked = list(run.ptr), list(run.clock), list(run.state), list(
            run.blocked)
        self.completed = [dict(d) for d in run.completed]
        self.hist = [{stream: list(h) for stream, h in d.items()} for d in run.hist]
        self.entered = {key: [rec[0], rec[1], rec[2], dict(rec[3]), rec[4]] for key, rec in run.entered.items()}
        self.through = {key: set(ranks) for key, ranks in run.through.items()}
        self.held, self.frozen_at, self.last_progress = set(run.held), dict(run.frozen_at), run.last_progress
        self._ready = list(run._ready)
        self._pend = [set(p) for p in run._pend]
        self._waits, self._done_end = list(run._waits), list(run._done_end)
        self._odd = {key: dict(sigs) for key, sigs in run._odd.items()}
        return self

    def finish(self):
        """The whole run at once, without the loop, where every call of it starts at its nominal time: then
        the run is known without taking its calls one by one, and what it leaves is what ``run()`` leaves.
        Returns self, or None (nothing changed) where that is not shown: a run with stops, gaps, batches or
        ``nccl_sizes``, a stream whose members do not issue the same calls on it, a call that would start
        late, or a rank whose last call is a broadcast, gather or scatter in which a member it waits for did
        not start last (a member let through before every member entered keeps the end it left at, then not
        the instance's: whether it was is the order of the loop's steps, not known here).

        Why it is the run: a call starts at its nominal time where the rank's previous call ended at least EPS
        before it (``run``: ``t < when + EPS``); an instance (stream, seq) ends END_S after its members' latest
        start, so where every call's nominal start is at least END_S + EPS after the latest nominal start of
        its rank's previous instance, every call starts nominally (by induction over the instances in the
        order of those latest starts), that order increases along each rank's calls, and the first instance
        not yet complete in it has every member at it: none waits forever, every rank ends.  A broadcast's
        member let through ends no later than the instance, so its next call starts nominally too (its clock,
        where that is its last call: the instance's end where a member it waits for started last).  Each check is a pass over columns (map, zip, compress: no Python code a call), once per
        prepared list (a group's members share theirs) and stream: a healthy run of a program of no batch
        (seed 7: 91 % of the calls are in such runs) costs that, not the loop's some 9 k instructions a call."""
        if self.gaps is not None or self.stop or self.nccl_sizes or self.paused or any(self.ptr):
            return None
        if self.preps is None:
            self._begin()
        for prep in self.preps:
            prep.whole()
        preps, world, clock, mine = self.preps, self.program.world, self.clock, self.streams
        lists = {}  # id(a prepared list) -> [its calls, its ranks, {stream: its calls on it}]
        for r in range(world):
            out, _, _, batch = preps[r]
            if not out:
                continue
            got = lists.get(id(out))
            if got is not None:
                got[1].append(r)
                continue
            if any(batch):
                return None
            keys = preps[r][1]
            streams = list(map(_STREAM, keys))
            names = list(dict.fromkeys(streams))  # in the order of each one's first call
            if len(names) == 1:
                on = {names[0]: out}
            else:
                on = {s: list(itertools.compress(out, map(s.__eq__, streams))) for s in names}
            lists[id(out)] = [out, [r], on, streams]
        if not lists:
            return None
        latest, hists = {}, {}  # stream -> its instances' latest nominal starts; id(calls on it) -> their hist
        for out, ranks, on, _ in lists.values():
            for r in ranks:  # a rank issues a group's collectives only as its member (p2p: its name says so)
                if not mine[r].keys() >= on.keys() and any(s not in mine[r] for s in on if ":p2p:" not in s):
                    return None
            for s, calls in on.items():
                if s in latest:
                    continue
                members = calls[0][4]
                if len(set(members)) != len(members):
                    return None  # (a send to itself: never matched)
                theirs = []
                for m in members:
                    got = lists.get(id(preps[m][0]))
                    other = got[2].get(s) if got is not None else None
                    if other is None:
                        return None
                    if other is not calls and all(other is not c for c in theirs):
                        if len(other) != len(calls) or list(map(_SIG, other)) != list(map(_SIG, calls)):
                            return None
                        theirs.append(other)
                noms = list(map(_NOMINAL, calls))
                latest[s] = list(map(max, noms, *[list(map(_NOMINAL, c)) for c in theirs])) if theirs else noms
        ends = []  # each list's last call's end
        for out, ranks, on, streams in lists.values():
            tree = out[-1][7]
            if tree is not None:  # its last call a broadcast, gather or scatter: a member let through ends at
                # its parents' and children's latest start, which must be the instance's (else left to ``run``)
                s = streams[-1]
                top = latest[s][-1]
                for r in ranks:
                    need = next(need for m, need in tree[r] if m == r)
                    if max([lists[id(preps[y][0])][2][s][-1][5] for y in need]) != top:
                        return None
            noms = list(map(_NOMINAL, out))
            if len(on) == 1:
                lat = latest[streams[0]]
            else:
                its = {s: iter(latest[s]) for s in on}  # (a list's calls on a stream: seq 1, 2, ...)
                lat = list(map(next, map(its.__getitem__, streams)))
            end = list(map(operator.add, lat, itertools.repeat(END_S)))
            if not all(map(operator.ge, noms[1:], map(operator.add, end, itertools.repeat(EPS)))) or any(
                    noms[0] < clock[r] + EPS for r in ranks):
                return None
            ends.append(end[-1])
        # the ranks' state at the run's end, as ``run`` leaves it (once every check passed: else nothing changed)
        for (out, ranks, on, _), end in zip(lists.values(), ends):
            made = {s: list(zip(map(_SEQ, map(_KEY, calls)), map(_OP, calls), map(_TEXT, calls),
                                map(_NOMINAL, calls))) for s, calls in on.items()}
            last = {s: len(calls) for s, calls in on.items()}  # (seq 1, 2, ... on each)
            for r in ranks:
                self.ptr[r], clock[r] = len(out), end
                self.hist[r] = {s: list(h) for s, h in made.items()}
                self.completed[r], self.started[r] = dict(last), dict(last)
        self.state = ["done"] * world
        self.blocked = [None] * world
        lp = max(map(max, latest.values())) + END_S
        if lp > self.last_progress:
            self.last_progress = lp
        self._ready = []
        for r in range(world):
            for i, stream, info in preps[r][2]:
                mine[r][stream] = info
        return self

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self, pause=None):
        """The ranks run in one order, always (a stack of the ranks ready: the last set free goes first), one
        call at a time: rank r issues its next call (or stops); a call that completes sets its members free.
        The order matters (a broadcast lets ranks through before a rank froze in it): what was ``_advance``,
        inlined, its per-call work (stream, signature, members) done once per call list (``_prepared``).
        ``pause``: {rank: index}: stop before the first of those calls a rank comes to (``paused``: it was put
        back on the stack, as it was), to go on with ``run()``, and for another run to ``follow`` (a run
        without stops only)."""
        world = self.program.world
        if self.preps is None:
            self._begin()
        self.paused = False
        ready = self._ready
        pop, push = ready.pop, ready.append
        ptr, clock, state, blocked = self.ptr, self.clock, self.state, self.blocked
        started_of, completed_of, hist_of, streams_of = self.started, self.completed, self.hist, self.streams
        entered, through, held, frozen_at = self.entered, self.through, self.held, self.frozen_at
        preps = self.preps
        calls_of = [p[0] for p in preps]
        batch_of = [p[3] for p in preps]
        pend, waits, done_end = self._pend, self._waits, self._done_end
        posts = any(any(b) for b in batch_of)  # whether any rank posts calls (else settle never runs)

        def op_done(m, key, end):
            """Op ``key`` of rank m's batch ended at ``end``: a rank still posting its batch waits for that end
            later; one that waits leaves at the latest end once every op of its batch ended."""
            mine = pend[m]
            mine.discard(key)
            if not waits[m]:
                if done_end[m] < end:
                    done_end[m] = end
            elif not mine:
                clock[m] = max(clock[m], end, done_end[m])
                waits[m], state[m], blocked[m], done_end[m] = False, "ready", None, 0.0
                push(m)
            else:
                if clock[m] < end:
                    clock[m] = end
                blocked[m] = min(mine, key=_first_key(hist_of[m]))

        def settle(key, poster, after):
            """Complete call ``key`` where every member entered it, alike, and, on a group's stream, completed the
            call before it (a group's works run in order: gloo), then the calls after it that it held;
            the latest end, or None.  ``poster``: the rank posting it now (its clock is its own); ``after``:
            the end of the call before it, where that just completed."""
            stream, seq = key
            ordered = ":p2p:" not in stream  # a p2p op completes once its other half is posted (the rings, as
            latest = None                    # real gloo ranks ran them); a group's collectives, in order
            while True:
                rec = entered.get(key)
                if rec is None or not rec[1] or len(rec[3]) < len(rec[4]) or key in held or (ordered and any(
                        completed_of[m].get(stream, 0) != seq - 1 for m in rec[4])):
                    return latest
                end = rec[2] + END_S
                if after is not None and end < after + END_S:
                    end = after + END_S
                for m in rec[4]:
                    completed_of[m][stream] = seq
                    if key in pend[m]:
                        op_done(m, key, end)
                    elif m != poster:
                        if clock[m] < end:
                            clock[m] = end
                        if state[m] == "blocked" and blocked[m] == key:
                            state[m], blocked[m] = "ready", None  # a plain call as the other half
                            push(m)
                del entered[key]
                latest = after = end
                seq += 1
                key = (stream, seq)
        odd = self._odd
        nccl_sizes = self.nccl_sizes
        stops = self.stop
        stop_at = [stops[r][0] if r in stops else -1 for r in range(world)]
        if pause:
            assert not stops
            for r, i in pause.items():
                stop_at[r] = i
        lp = self.last_progress
        gaps = self.gaps
        # a rank's calls before ``lim`` need no test of a stop, of the end or of the calls made so far
        # (_Prepared.more): one comparison a call
        lim = [min(len(calls_of[r]), stop_at[r]) if stop_at[r] >= 0 else len(calls_of[r]) for r in range(world)]
        freezing = -1  # the rank entering the call it freezes in (its call's key put in ``held`` before it)
        while ready:
            r = pop()
            i = ptr[r]
            when = clock[r]
            if i >= lim[r]:
                prep = preps[r].calls  # (its whole list)
                if i >= len(calls_of[r]) and i < len(prep):  # made up to here: more
                    preps[r].more(i)
                lim[r] = min(len(calls_of[r]), stop_at[r]) if stop_at[r] >= 0 else len(calls_of[r])  # (a list
                # of ranks alike is made further by any of them)
                if i == stop_at[r] and (pause or stops[r][1] != "frozen_in"):
                    if pause:  # before the call: the rank back on the stack, the run as it was
                        push(r)
                        self.last_progress, self.paused = lp, True
                        return self
                    kind = stops[r][1]
                    t = max(T0 + self.calls[r][i].at, when + EPS) if i < len(prep) else when + EPS  # (after its last)
                    state[r], clock[r], blocked[r] = kind, t, None
                    if kind == "frozen":
                        frozen_at[r] = t
                    lp = max(lp, t)
                    continue
                if i >= len(prep):
                    state[r], blocked[r] = "done", None
                    lp = max(lp, when)
                    continue
                if i == stop_at[r]:  # its stop: it freezes in the call it enters (never an op of a batch)
                    held.add(calls_of[r][i][0])
                    freezing = r
            key, op, text, sig, members, t, root, tree = calls_of[r][i]
            ptr[r] = i + 1
            if gaps is not None:
                t = when + gaps[r][i]
            elif t < when + EPS:
                t = when + EPS
            clock[r] = t
            if t > lp:
                lp = t
            stream = key[0]
            hist = hist_of[r].get(stream)
            if hist is None:
                hist_of[r][stream] = [(key[1], op, text, t)]
            else:
                hist.append((key[1], op, text, t))
            # the call's instance: [the first member's signature, whether every member's is the same, the
            # latest entry, {rank: started_at}]; a rank enters a (stream, seq) once, and only its
            # members do
            rec = entered.get(key)
            if rec is None:
                rec = entered[key] = [sig, True, t, {}, members]
            else:
                if sig != rec[0]:
                    rec[1] = False
                    odd.setdefault(key, {})[r] = sig
                if t > rec[2]:
                    rec[2] = t
            inst = rec[3]
            inst[r] = t
            if posts and batch_of[r][i]:
                b = batch_of[r][i]
                # an op of a batch: posted, and the rank goes on to its next op; at its batch's last op it waits
                # for every op of the batch (the works' wait()), its own and its peers' halves matched by order
                mine = pend[r]
                mine.add(key)
                if len(inst) == len(members) and rec[1]:  # every member posted it, alike: it may complete
                    end = settle(key, r, None)
                    if end is not None and end > lp:
                        lp = end
                if b == 1 or not mine:
                    if b == 2:  # its batch's last op, every op of it completed: it leaves at the latest end
                        if clock[r] < done_end[r]:
                            clock[r] = done_end[r]
                        done_end[r] = 0.0
                    state[r], blocked[r] = "ready", None
                    push(r)
                else:
                    waits[r], state[r], blocked[r] = True, "blocked", min(mine, key=_first_key(hist_of[r]))
                continue
            state[r], blocked[r] = "blocked", key
            if held and key in held:
                if r == freezing:  # frozen in the call it entered
                    state[r], frozen_at[r] = "frozen", t
                    freezing = -1
                continue
            if len(inst) < len(members):
                if tree is not None and rec[1]:
                    # gloo's broadcast: the members whose parent chain and children all entered go through;
                    # only those whose chain or children r is in (or r itself) can have become so now: the
                    # others were let through at an earlier entry, or still wait (a gather, a scatter: flat)
                    gone = through.setdefault(key, set())
                    for m, need in tree[r]:
                        if m in gone or not inst.keys() >= need:
                            continue
                        end = max([inst[y] for y in need]) + END_S
                        if end > lp:
                            lp = end
                        completed_of[m][key[0]] = key[1]
                        clock[m] = end
                        state[m], blocked[m] = "ready", None
                        gone.add(m)
                        push(m)
                continue
            if not rec[1]:
                if nccl_sizes:  # NCCL: the members that sent and received fewer bytes finish
                    for m in _smaller(members, rec[0], odd.get(key, {})):
                        completed_of[m][key[0]] = key[1]
                        clock[m] = rec[2] + END_S
                        state[m], blocked[m] = "ready", None
                        push(m)
                continue  # a desync: never completes (for the others)
            end = rec[2] + END_S
            if end > lp:
                lp = end
            gone = through.pop(key, None) if through else None
            stream, seq = key
            if gone is None and not posts:  # no member let through, no batch: the loop below without its tests,
                # and a member's state and call left as they are ("blocked" in this one) until the rank is taken
                # off the stack: then it issues its next call (state and call set), stops, or ends (set there)
                for m in members:
                    completed_of[m][stream] = seq
                    clock[m] = end
                ready.extend(members)  # (pushed in the members' order)
            else:
                for m in members:
                    if gone and m in gone:
                        continue
                    completed_of[m][stream] = seq
                    if key in pend[m]:  # the other half was an op of a batch of m's
                        op_done(m, key, end)
                        continue
                    clock[m] = end
                    state[m] = "ready"
                    blocked[m] = None
                    push(m)
            del entered[key]
            if posts and (stream, seq + 1) in entered and any((stream, seq + 1) in pend[m] for m in members):
                end = settle((stream, seq + 1), None, end)  # posted after it, held
                if end is not None and end > lp:
                    lp = end
        self.last_progress = lp
        # what each rank issued: its counts per stream, its p2p streams (in the order it first used them)
        for r in range(world):
            n = ptr[r]
            started_of[r] = dict(preps[r][1][:n])
            for i, stream, info in preps[r][2]:
                if i < n:
                    streams_of[r][stream] = info
        return self

    @property
    def hung(self):
        return any(s != "done" for s in self.state)


BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "uint8": 1}


def _smaller(members, first, odd):
    """The members of a collective issued with one op but different sizes that finish it, as NCCL's kernels
    would (``Sim.nccl_sizes``, not measured: NCCL checks no size, and a rank whose count is smaller runs fewer
    steps of the ring and returns; those with more wait for bytes that never come): the members of the fewest
    bytes, where the ops agree and no two sizes are of one byte count; none otherwise."""
    sigs = {m: odd.get(m, first) for m in members}
    if len(set(sig[0] for sig in sigs.values())) != 1 or first[0] == "barrier":
        return []
    nbytes = {}
    for m, (_, text) in sigs.items():
        try:
            numel, dtype = (text or "").split(",")[0].split(" x ")
            nbytes[m] = int(numel) * BYTES[dtype]
        except (ValueError, KeyError):
            return []
    least = min(nbytes.values())
    if len(set(sigs[m] for m in members if nbytes[m] == least)) != 1:
        return []
    return [m for m in members if nbytes[m] == least]


def _first_key(hist):
    """A key function: the (stream, seq) of a batch's ops, by when the rank posted them (the first one it waits
    for is the one its stack and ``blocked`` name)."""
    def started(key):
        for q, _, _, t in reversed(hist[key[0]]):
            if q == key[1]:
                return t
        return 0.0
    return started


_PREPARED = {}  # id(program) -> (program, its calls per rank as they were, what _prepared made of each)


def _prepared(program, calls, r):
    """What the run needs of rank ``r``'s list of calls (``_prepare``): each call's stream, seq (the calls of a
    stream are numbered in the order the rank issues them), signature, members; made once per
    program's list: a case runs its program twice, and the faulty run's lists are the healthy ones (the same
    calls) but the fault's rank's; and once for the ranks whose lists are the same, without a p2p call (what
    _prepare makes of them is then not the rank's own: the members of a group, every rank of a world-only
    job)."""
    got = _PREPARED.get(id(program))
    if got is None or got[0] is not program:
        _PREPARED.clear()  # the last program's only: a case's two runs
        got = _PREPARED[id(program)] = (program, {}, {}, {})
    snap, preps, alike = got[1], got[2], got[3]
    own = snap.get(r)
    if own is not None and len(own) == len(calls) and all(map(operator.is_, own, calls)):
        return preps[r]
    mine = tuple(calls)
    for other, out in alike.get(len(mine), ()):
        if other == mine:  # another rank's calls, the same (a group's members: programs._steps shares them)
            break
    else:
        out = _prepare(mine, r, program)
        if _P2P.isdisjoint(map(_op_of, mine)):  # no p2p call: nothing of it is the rank's own (a p2p call's
            # stream names its rank)
            same = alike.setdefault(len(mine), [])
            if len(same) < 8:
                same.append((mine, out))
    if calls is program.calls.get(r):
        snap[r], preps[r] = mine, out
    return out


class _Prepared(tuple):
    """What ``_prepare`` makes of a rank's list of calls: the tuple ([(key: (stream, seq), op, size text,
    signature, members, nominal start, root, a broadcast's _tree)] per call, [(stream, seq)] per call, [(index,
    stream, its Sim.streams entry)] per p2p stream at the first call on it, batch flags per call), its first
    two lists (and the third) made as far as a run asks (``more``): a faulty run ends at its hang, some 40 % of
    the calls its lists hold (seed 7), and what comes after is never read; ``whole()`` makes every call (a run
    that ``finish``es at once, ``divergence``).  The batch flags are made for the whole list at once (a run
    needs to know whether any rank posts)."""

    def more(self, i):
        """Make the calls up to index ``i`` at least (CHUNK more where there are): a rank issues the calls of
        its slots again at every step, so what a call's group, op, size, root and peer give is made once per
        list (``made``), with its stream's counter of calls (itertools.count, one per stream)."""
        out, pairs, firsts = self[0], self[1], self[2]
        calls, made, counts, program = self.calls, self.made, self.counts, self.program
        start = len(out)
        end = min(len(calls), max(i + 1, start + CHUNK))
        add, pair, r = out.append, pairs.append, self.r
        for j in range(start, end):
            c = calls[j]
            what = c[:5]  # group, op, size, root, peer
            got = made.get(what)
            if got is None:
                gid, op, size, root, peer = what
                if op in P2P_OPS:  # a batch's isend and irecv are the send and recv of their streams
                    sends = op == "send" or op == "isend"
                    src, dst = (r, peer) if sends else (peer, r)
                    stream, info = _streams.p2p_name(gid, src, dst), (gid, "p2p", peer, src, dst)  # p2p_stream
                    got = ("send" if sends else "recv", size, ("p2p", size), (src, dst), None)
                else:  # coll_stream: the group
                    if op in ASYNC_OPS:
                        op = op[1:]  # iall_reduce: an all_reduce with async_op=True
                    op = INNER.get(op, op)  # an object collective's two calls: its inner op's
                    text = size if root is None else size_text(c, program)
                    members = program.groups[gid].ranks
                    tree = None
                    if root in members and op in TREES:
                        tree = TREES[op](members, root)
                    stream, info = gid, None
                    got = (op, text, (op, text), members, tree)
                count = counts.get(stream)
                if count is None:
                    count = counts[stream] = itertools.count(1)
                    if info is not None:  # a p2p stream: this call is its first
                        firsts.append((j, stream, info))
                got = made[what] = (stream, count) + got
            stream, count, op, text, sig, members, tree = got
            key = (stream, next(count))
            pair(key)
            add((key, op, text, sig, members, T0 + c[7], c[3], tree))
        return self

    def whole(self):
        """Every call made (``more``)."""
        if len(self[0]) < len(self.calls):
            self.more(len(self.calls) - 1)
        return self


CHUNK = 32  # calls a list's preparation makes at least at once (``_Prepared.more``): seed 7's faulty runs
# read about 40 % of their lists' calls; 32 at a time make some 60 %, the calls of a step or two past a hang


def _prepare(calls, r, program):
    """Rank ``r``'s list of calls as the run needs it (``_Prepared``), its first CHUNK calls made."""
    # a batch (batch_isend_irecv): the consecutive isends and irecvs of one step's slot; 1 for each op of it
    # but its last, 2 for its last (the rank waits there for every op of it), 0 for a call of no batch
    batch = [0] * len(calls)
    if not _POSTED.isdisjoint(map(_op_of, calls)):  # (most lists post nothing: no pass over them)
        for i, c in enumerate(calls):
            if c[1] in POSTED_OPS:
                nxt = calls[i + 1] if i + 1 < len(calls) else None
                batch[i] = 1 if nxt is not None and nxt[1] in POSTED_OPS and (nxt[5], nxt[6]) == (c[5], c[6]) else 2
    prep = _Prepared(([], [], [], batch))
    prep.calls, prep.r, prep.program, prep.made, prep.counts = calls, r, program, {}, {}
    return prep.more(0) if calls else prep


_POSTED = frozenset(POSTED_OPS)
_P2P = frozenset(P2P_OPS)
_STREAM = operator.itemgetter(0)  # a key's stream
_KEY, _OP, _TEXT, _SIG, _NOMINAL = (operator.itemgetter(i) for i in (0, 1, 2, 3, 5))  # of a prepared call (_prepare)
_SEQ = operator.itemgetter(1)  # a key's seq
_op_of = operator.itemgetter(1)  # a Call's op


_TREES = {}  # (members, root) -> {rank: [(m, the ranks m needs entered to go through)]}: gloo's broadcast tree


def _tree(members, root):
    """gloo's binomial tree of a broadcast over ``members`` from ``root``: {r: [(m, need)]}, for each member r
    the members m whose ``need`` holds r, in the order of ``members``; ``need``: the frozenset of m, the ranks
    it receives through (its parent, its parent's parent, ... the root) and the ranks it sends to (its
    children)."""
    key = (members, root)
    tree = _TREES.get(key)
    if tree is not None:
        return tree
    n = len(members)
    base = members.index(root)
    real = [members[(x + base) % n] for x in range(n)]  # x: a rank's place in the tree, the root's 0
    dim = max(1, (n - 1).bit_length())

    def parent(x):  # it receives at the iteration of its highest bit, from the rank without that bit
        return None if x == 0 else x & ~(1 << (x.bit_length() - 1))

    need = {}
    for x in range(n):
        up, p = [], parent(x)
        while p is not None:
            up.append(real[p])
            p = parent(p)
        # it sends at each later iteration, to the rank with that bit set too
        down = [real[x | (1 << i)] for i in range(x.bit_length(), dim) if (x | (1 << i)) < n]
        need[real[x]] = frozenset([real[x]] + up + down)
    tree = {r: [(m, need[m]) for m in members if r in need[m]] for r in members}
    if len(_TREES) > 4096:
        _TREES.clear()
    _TREES[key] = tree
    return tree


def _flat(members, root):
    """gloo's gather and scatter (gloo/gather.cc, scatter.cc): the root receives from (sends to) every other
    member, and a send waits until its receiver posted the recv (tcp/pair.cc): a member other than the root goes
    through once it and the root entered, the root once every member did.  As ``_tree``'s {r: [(m, need)]}."""
    key = ("flat", members, root)
    tree = _TREES.get(key)
    if tree is None:
        need = {m: frozenset(members) if m == root else frozenset((m, root)) for m in members}
        tree = _TREES[key] = {r: [(m, need[m]) for m in members if r in need[m]] for r in members}
    return tree


TREES = {"broadcast": _tree, "gather": _flat, "scatter": _flat}  # the rooted ops whose members finish apart
INNER = dict([(op, op.split("_object")[0]) for op in OBJECT_OPS] + [(op + DATA, op.split("_object")[0])
                                                                   for op in OBJECT_OPS])


def size_text(call, program):
    """The size signature as the documents write it: "1024 x float32", ", root R" for a rooted op (R: the
    root's rank in the group, callword.decode_sig), None for a barrier."""
    if call.root is None:
        return call.size
    g = program.groups[call.group]
    idx = g.ranks.index(call.root) if call.root in g.ranks else call.root
    return ("%s, root %d" % (call.size, idx)) if call.size else "root %d" % idx


_STACKS = {}  # a main thread's frames (a tuple) -> its stacks text (_stacks): a few kinds of frames a run


def _stacks(frames, thread):
    return "".join(["\n=== c10d_observer: stacks ===\nCurrent thread 0x%016x (most recent call first):\n" % thread]
                   + ['  File "%s", line %d in %s\n' % f for f in frames])


MAIN_THREAD = 0xab
TORCH_C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def seen_at(sim, mode="late"):
    """When the gather's states are written: ``late``, SEEN_LATE_S after the last progress; ``early``, once the
    first watchdog found its call overdue and the gather ran (a poll and a second later), but never before
    the last progress."""
    if mode == "late":
        return sim.last_progress + SEEN_LATE_S
    starts = [sim.hist[r][s][-1][3] for r in range(sim.program.world) if sim.blocked[r] is not None
              for s in (sim.blocked[r][0],)]
    first = min(starts) if starts else sim.last_progress
    return max(sim.last_progress + 0.5, first + TIMEOUT_S + POLL_S + 1.0)


# The source models (issue 42, item 3): what a rank's document says of its calls.
# - "exact": the patch and hooks sources: every call's op, size and start, as it was issued.
# - "recorder": torch's gloo recorder (the default source on 2.8+; sources/flight_recorder.py): p2p calls and
#   roots come from the wrappers, exact; a collective is started from pg_status's counters at the source's
#   next poll (op "unknown", no size) and named, with its exact start, by a read of the buffer: a batch read
#   at each multiple of the rank's batch period (the ladder's: cost / 0.2 % budget, the same for the ranks
#   of a job), or, for a rank waiting in a call, once it has been still for a lookup period (then every call
#   it issued is named, the call in flight too), and once more at disable().  A rank stalled in Python or
#   dead keeps its calls since the last periodic read unnamed; a frozen rank too, and its p2p calls completed since
#   its completion poller's last tick read in flight (``_p2p_done_seen``).  Not modelled: the buffer's bound (2,000 entries; no program here
#   issues as many), gloo's completion counter going back (the source keeps its own).
# - "nccl": torch's NCCL recorders (ProcessGroupNCCL's, 2.5+, and NCCL2's, 2.14+: what most users run), named as
#   "recorder" names them (the NCCL reader names a call in flight by the recorder's active entries), where a
#   collective runs on the GPU and the rank's Python goes on: a synchronous call returns no Work on 2.8+, a
#   send or recv's wait() holds the stream, not the thread.  The run above is the GPUs' (a rank's calls run
#   in its order, matched by order per group, as gloo's); a rank whose GPU waits in a call has issued the calls
#   after it up to its next synchronisation (``ahead``): the end of its step (``loss.item()``), a barrier
#   (2.8+: enqueued, then a stream synchronize on the CPU) or the end of its program.  Those calls are in
#   pg_status's last_enqueued and in flight in its document from their enqueue (the observer dates an NCCL
#   call by its entry's time_created: the enqueue), overdue like the call the GPU waits in, and the main
#   thread's stack is at the synchronisation.  Not modelled: NCCL's own matching (a size mismatch that lets
#   the smaller ranks finish; the ring of a broadcast: gloo's tree stands for it), a process stopped with its
#   kernels running in the run (the GPUs': as gloo's), but in its document (``_kernels_ran_on``), a second fault's rank reached by its Python ahead of its
#   GPU (its run-ahead stops there), the 0-100 ms lag of last_completed (seconds after the hang it is
#   gone), coalesced blocks and p2p entries that stay "scheduled" (sources/nccl_reader.py checks them).
# - "nccl-sizes": "nccl", and a collective of one op issued with different sizes lets the members of the fewest
#   bytes finish it (``_smaller``: a hypothesis of how NCCL's kernels go, not measured; the verdict must not
#   depend on which way they go).
SOURCES = ("exact", "recorder", "nccl", "nccl-sizes")
READ_PERIODS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)  # recorder_books.LADDER
COMPLETION_POLL_S = POLL_S / 2.0  # the rank's completion poller while works are pending (tracker.py)
SOURCE_POLL_S = 0.05  # the recorder source's poll: a call started from the counters is dated at the next one
LOOKUP_S = TIMEOUT_S / 4.0  # flight_recorder: a call in flight this long is named; a still rank waiting, read


def period_of(seed):
    """The batch period of a case's job (recorder model): one of READ_PERIODS, a function of its seed."""
    return random.Random("period-%d" % seed).choice(READ_PERIODS)


def _named_until(sim, r, written, period):
    """The time up to which the recorder source had read rank ``r``'s calls (named them, with their exact
    starts) when its document was written at ``written``: its last periodic read, the read of a rank that
    waited in a call (blocked) for LOOKUP_S, or the read at disable() of a rank that ended."""
    if sim.state[r] == "done":
        return written  # disable() reads the whole buffer once more (flight_recorder._last_batch)
    if sim.state[r] == "frozen":  # its reader thread runs in the rank's process: it stopped with the rank
        return math.floor(round(sim.frozen_at[r] / period, 9)) * period
    last = math.floor(round(written / period, 9)) * period
    if sim.state[r] == "blocked":
        stream, _ = sim.blocked[r]
        since = sim.hist[r][stream][-1][3]
        if written >= since + LOOKUP_S:
            last = max(last, since + LOOKUP_S)
    return last


def _kernels_ran_on(sim, r):
    """NCCL model, a rank whose process stopped before its call i (SIGSTOP; not inside a call): its Python had
    issued the calls of i's step before i at once (each returns as it is enqueued), and stopped before its
    GPU ran them; its kernels ran on, with its peers', and the GPUs' run (the Sim) is the same as gloo's.  Its
    document is what its reader thread (a thread of the stopped process) read last: those calls enqueued, none
    of them completed.  {stream: the last seq it shows completed} for the streams of those calls (a call first
    in its step: none, its Python waited at the step before's end for every call before it)."""
    i = sim.stop[r][0] if r in sim.stop and sim.stop[r][1] == "frozen" else None
    calls = sim.calls[r]
    if i is None or i >= len(calls):
        return None
    keys = sim.preps[r][1]
    out = {}
    j = i - 1
    while j >= 0 and calls[j].step == calls[i].step and calls[j].op != "barrier":
        stream, seq = keys[j]  # (a barrier: enqueued, then a stream synchronize: its Python waited there)
        out[stream] = seq - 1  # (walked back: the step's first call on the stream comes last)
        j -= 1
    return out or None


def _p2p_done_seen(sim, r, stream, completed):
    """The last p2p call on ``stream`` a frozen rank's document shows completed (recorder model): its
    completions are the completion poller's (tracker.py: a thread in the rank, every half poll while works
    are pending), which stopped with the rank, so those after its last tick before the freeze read in flight
    (found on 2.13: tests/data/frozen-p2p-real-17000008.json).  A call completed once the rank's next call
    started (or at the freeze)."""
    tick = math.floor(round(sim.frozen_at[r] / COMPLETION_POLL_S, 9)) * COMPLETION_POLL_S
    starts = sorted(h[3] for hs in sim.hist[r].values() for h in hs)
    seen = 0
    for q, _, _, t in sim.hist[r][stream]:
        if q > completed:
            break
        i = bisect.bisect_right(starts, t)
        if (starts[i] if i < len(starts) else sim.frozen_at[r]) > tick:
            break
        seen = q
    return seen


def ahead(sim, r):
    """NCCL model: ([(stream, seq, op, size text, enqueued at)] of the calls rank ``r``'s Python issued after
    the call its GPU waits in, where its main thread waits: "barrier" (the last of them, or the call the GPU
    waits in, is a barrier: enqueued, then a stream synchronize), "step" (the end of its step: a
    ``loss.item()``), "end" (its program issued every call: it waits for its GPU before it ends), or None (its
    GPU waits in no call)."""
    if sim.state[r] != "blocked":
        return [], None
    calls, prep = sim.calls[r], sim.preps[r][0]  # (made as far as the run went: ``more`` past it)
    i = sim.ptr[r] - 1
    if calls[i].op == "barrier":
        return [], "barrier"
    step, stop = calls[i].step, sim.stop[r][0] if r in sim.stop else -1
    out, t = [], sim.hist[r][sim.blocked[r][0]][-1][3]  # the start of the call its GPU waits in
    for j in range(i + 1, len(calls)):
        if j == stop or calls[j].step != step:
            return out, "step"
        if j >= len(prep):
            sim.preps[r].more(j)
        key, op, text = prep[j][0], prep[j][1], prep[j][2]
        t = max(prep[j][5], t + EPS)
        out.append((key[0], key[1], op, text, t))
        if op == "barrier":
            return out, "barrier"
    return out, "end"


def _polled(t):
    return math.ceil(round(t / SOURCE_POLL_S, 9)) * SOURCE_POLL_S


def documents(sim, mode="late", stacks=True, skew=None, source="exact", period=None, typed=False):
    """{rank: the JSON of its document at hang time}, as the watchdogs would write them.  ``skew``: {rank: seconds
    its clock is ahead} (ranks on other nodes: the verdict never compares two ranks' clocks).  ``source``: one
    of SOURCES; ``period``: the recorder's batch period (s).  ``typed``: each as the verdict reads that JSON
    (documents.RankDoc.from_json's RankDoc, equal to it: test_fuzz_corpus checks it), made from the same
    values without the JSON between: the fuzzer's cases (run.py) read each JSON once only to analyze it, and
    that read was a third of the verdict's time (seed 7)."""
    p = sim.program
    backend = "nccl" if source == "nccl" else "gloo"
    now = seen_at(sim, mode)
    hung = sim.hung
    out = {}
    seen = {}  # stream -> (the last rank's recent calls of it, their documents.Call values): the members of a
    # group mostly show the same calls (typed: made once, shared)
    for r in range(p.world):
        off = skew.get(r, 0.0) if skew else 0.0
        st = sim.state[r]
        written = now
        kind, alive, why = "state", True, None
        beat_age = now - sim.frozen_at[r] if st == "frozen" else 0.1
        if st == "dead":
            kind, alive, why = "end", False, "process %d ended without disable() (exit code 1)" % (1000 + r)
            written = sim.clock[r] + 0.05
        elif st == "done" and hung:
            kind, why = "end", "the observer was disabled"
            written = sim.clock[r] + 0.05
        named = _named_until(sim, r, written, period) if source != "exact" else None
        running_on = _kernels_ran_on(sim, r) if source == "nccl" and st == "frozen" else None
        streams, started_of, hist_of, waits = sim.streams[r], sim.started[r], sim.hist[r], None
        if source == "nccl":
            more, waits = ahead(sim, r)
            if more:
                streams, started_of, hist_of = dict(streams), dict(started_of), dict(hist_of)
                firsts = {stream: info for _, stream, info in sim.preps[r][2]}
                for stream, seq, op, text, t in more:
                    streams.setdefault(stream, firsts.get(stream))
                    started_of[stream] = seq
                    hist_of[stream] = hist_of.get(stream, []) + [(seq, op, text, t)]
        groups, overdue = [], []
        for stream in _sorted_streams(streams) if len(streams) > 1 else streams:
            gid, skind, peer, src, dst = streams[stream]
            g = p.groups[gid]
            started = started_of.get(stream, 0)
            completed = sim.completed[r].get(stream, 0)
            if running_on is not None and stream in running_on:
                completed = min(completed, running_on[stream])
            if source == "recorder" and st == "frozen" and skind == "p2p":
                completed = _p2p_done_seen(sim, r, stream, completed)
            hist = hist_of.get(stream, [])[-HISTORY:]
            if named is not None and skind == "collective":
                hist = [h if h[3] <= named else (h[0], "unknown", None, _polled(h[3])) for h in hist]
            if off:  # (t + 0.0 is t: no copy without a skew)
                hist = [(q, op, size, t + off) for q, op, size, t in hist]
            fly = None
            if started > completed:
                j = completed + 1 - hist[0][0]  # (a stream's calls shown are consecutive: seq j places on)
                seq, op, size, t = hist[j] if 0 <= j < len(hist) and hist[j][0] == completed + 1 else next(
                    h for h in hist if h[0] == completed + 1) if hist[0][0] <= completed + 1 else hist[0]
                api = "batch_isend_irecv" if skind == "p2p" and _in_batch(sim, r, stream, seq) else \
                    _api_of(sim, r, stream, seq) if skind == "collective" else ""
                fly = (seq, op, size, t, api)
                detected = t + TIMEOUT_S + POLL_S
                if alive and detected <= written + off:
                    overdue.append(_overdue(typed, stream, gid, seq, op, size, g.ranks, skind, peer, backend, t,
                                            detected))
            if typed:
                last = seen.get(stream)
                if last is not None and last[0] == hist:
                    made = last[1]
                else:
                    made = _calls(hist)
                    seen[stream] = (hist, made)
                groups.append(_new(_documents.Position, (
                    stream, gid, skind, g.ranks, backend, peer, src, dst, 1800.0, started, completed,
                    _new(_documents.Call, fly) if fly is not None else None, made, 0, None, None)))
                continue
            groups.append(_position(typed, stream, gid, skind, g.ranks, backend, peer, src, dst, started, completed,
                                    hist, fly))
        config = {"timeout": TIMEOUT_S, "source": "patch" if source == "exact" else "flight_recorder"}
        thread = text = None
        if stacks and alive and kind == "state" and st != "frozen":  # a frozen rank writes no stacks
            frames = _frames(sim, r, waits)
            key = tuple(frames)
            text = _STACKS.get(key)
            if text is None:
                text = _STACKS[key] = _stacks(frames, MAIN_THREAD)
            thread = MAIN_THREAD
        if typed:  # RankDoc.from_json's reading of the JSON below, field for field (in RankDoc's order)
            out[r] = _new(_documents.RankDoc, (
                kind, r, p.world, "sim", 1000 + r, "fuzz", written + off, T0 - 2.0 + off, alive, why,
                beat_age > FROZEN_AFTER_S and alive, round(beat_age, 3), thread, None, text, None, "fuzz-gather",
                None, tuple(groups), tuple(overdue), None, config, None, False, None, None, None, None, {}))
            continue
        doc = {"format": _documents.FORMAT, "version": _documents.VERSION, "kind": kind, "rank": r,
               "world_size": p.world, "host": "sim", "pid": 1000 + r, "job_id": "fuzz",
               "written_at": written + off, "watchdog_started_at": T0 - 2.0 + off, "alive": alive,
               "exit_reason": why, "frozen": beat_age > FROZEN_AFTER_S, "heartbeat_age_s": round(beat_age, 3),
               "config": config, "groups": groups, "overdue": overdue, "gather_id": "fuzz-gather"}
        if thread is not None:
            doc["main_thread"] = thread
            doc["stacks_text"] = text
        out[r] = doc
    return out


_new = tuple.__new__  # a namedtuple built from its fields' tuple, without its __new__'s call (thousands a case)
_CALL, _NO_API = itertools.repeat(_documents.Call), itertools.repeat("")


def _calls(hist):
    """(documents.Call(seq, op, size, started_at, "") of each (seq, op, size, started_at) of ``hist``), made in
    one pass (the columns zipped with the api, no Python code a call)."""
    return tuple(map(_new, _CALL, zip(*zip(*hist), _NO_API))) if hist else ()


def _position(typed, stream, gid, kind, ranks, backend, peer, src, dst, started, completed, hist, fly):
    """One stream of a rank's document: its JSON (``groups``' entry), or, ``typed``, the documents.Position
    Position.from_json reads of it; ``fly``: (seq, op, size, started_at, api) of the call in flight, or None."""
    if typed:
        return _new(_documents.Position, (
            stream, gid, kind, ranks, backend, peer, src, dst, 1800.0, started, completed,
            _new(_documents.Call, fly) if fly is not None else None,
            tuple([_new(_documents.Call, (q, op, size, t, "")) for q, op, size, t in hist]), 0, None, None))
    d = {"stream": stream, "group": gid, "kind": kind, "ranks": list(ranks), "backend": backend,
         "peer": peer, "src": src, "dst": dst, "torch_timeout_s": 1800.0, "last_started": started,
         "last_completed": completed, "ring_overflow": 0,
         "recent_ops": list(map(list, hist)), "in_flight_seq": None}
    if fly is not None:
        seq, op, size, t, api = fly
        d.update(in_flight_seq=seq, in_flight_op=op, in_flight_api=api, in_flight_size=size, in_flight_since=t)
    return d


def _overdue(typed, stream, gid, seq, op, size, ranks, kind, peer, backend, t, detected):
    """An ``overdue`` entry (level hard, the call in flight past the timeout): its JSON, or, ``typed``, the
    documents.Overdue Overdue.from_json reads of it."""
    if typed:
        return _new(_documents.Overdue, (stream, gid, seq, op, "", size, ranks, kind, peer, backend, t, detected,
                                         round(detected - t, 3), True, None, None, None, "hard", TIMEOUT_S, None))
    return {"stream": stream, "group": gid, "seq": seq, "op": op, "api": "", "size": size,
            "group_ranks": list(ranks), "kind": kind, "peer": peer, "backend": backend,
            "started_at": t, "detected_at": detected, "age_s": round(detected - t, 3),
            "in_flight": True, "ended": None, "completed_at": None,
            "resolved_after_s": None, "level": "hard", "deadline_s": TIMEOUT_S,
            "held_until": None}


def _index(sim, r, key):
    """The index of rank ``r``'s call ``key`` (stream, seq) in its list (the call in flight is most often the
    last it issued: looked at first), or ValueError."""
    keys, i = sim.preps[r][1], sim.ptr[r] - 1
    if 0 <= i < len(keys) and keys[i] == key:
        return i
    return keys.index(key)  # (a list's keys are unique: the one index)


def _in_batch(sim, r, stream, seq):
    """Whether rank ``r``'s call ``seq`` on ``stream`` is an op of a batch (the api its document gives it)."""
    try:
        return bool(sim.preps[r][3][_index(sim, r, (stream, seq))])
    except ValueError:
        return False


def _api_of(sim, r, stream, seq):
    """The api of rank ``r``'s call ``seq`` on a group's ``stream``: an object collective's, else ''."""
    try:
        op = sim.calls[r][_index(sim, r, (stream, seq))].op
    except (ValueError, IndexError):
        return ""
    api = _APIS.get(op)
    if api is None:
        api = _APIS[op] = op.split(".")[0] if op.split(".")[0] in OBJECT_OPS else ""
    return api


_APIS = {}  # a Call's op -> the api its document gives it (_api_of): a few ops a program


def _frames(sim, r, waits=None):
    """The main thread's frames, innermost first: in the call it waits in, or in the user's code (``waits``:
    where an NCCL rank's Python waits for its GPU, ``ahead``)."""
    st = sim.state[r]
    if waits == "barrier":
        return [(TORCH_C10D, 2500, "barrier"), ("/job/train.py", 40, "step"), ("/job/train.py", 90, "<module>")]
    if waits == "step":
        return [("/job/train.py", 44, "step"), ("/job/train.py", 90, "<module>")]
    if waits == "end":
        return [("/job/train.py", 95, "<module>")]
    if st == "blocked":
        stream, seq = sim.blocked[r]
        op = sim.hist[r][stream][-1][1]
        return [(TORCH_C10D, 2500, op), ("/job/train.py", 40, "step"), ("/job/train.py", 90, "<module>")]
    if st == "stall":
        return [("/job/train.py", 61, "compute"), ("/job/train.py", 41, "step"), ("/job/train.py", 90, "<module>")]
    return [("/job/train.py", 95, "<module>")]


def _stream_key(stream):
    head = stream.split(":")[0]
    return (int(head) if head.isdigit() else 0, stream)


_SORTED = {}  # a rank's streams (a tuple, in its dict's order) -> them sorted by _stream_key: a few sets a run


def _sorted_streams(streams):
    key = tuple(streams)
    got = _SORTED.get(key)
    if got is None:
        if len(_SORTED) > 4096:
            _SORTED.clear()
        got = _SORTED[key] = sorted(key, key=_stream_key)
    return got


MODES = ("late", "early")


def mode_of(seed):
    """When the gather of a case ran (``seen_at``): one of MODES, a function of the case's seed."""
    return random.Random("mode-%d" % seed).choice(MODES)


def skew_of(seed, world, spread=7200.0):
    """{rank: clock offset in seconds}, a function of the case's seed: ranks as on different nodes."""
    rng = random.Random("skew-%d" % seed)
    return {r: rng.uniform(-spread, spread) for r in range(world)}


def run_case(case, mode=None, skew=False, source="exact", healthy=True, typed=False):
    """(healthy Sim, faulty Sim, the faulty run's documents) of a case; ``mode`` defaults to mode_of(seed);
    ``source``: the source model of the documents (SOURCES); ``healthy``: False, no healthy run (None): it
    checks the generator, not the verdict, and costs more than the faulty run, which ends at the hang;
    ``typed``: the documents as the verdict reads their JSON (``documents``)."""
    mode = mode or mode_of(case.seed)
    nccl_sizes = source == "nccl-sizes"
    source = "nccl" if nccl_sizes else source
    stop = case.stop
    if source == "nccl" and stop and any(kind == "frozen_in" for _, kind in stop.values()):
        # a process stopped inside a call it enqueued: its kernel runs on (NCCL's call is the GPU's), and its
        # Python stands before its next call, its document as _kernels_ran_on reads it
        stop = {r: (i + 1, "frozen") if kind == "frozen_in" else (i, kind) for r, (i, kind) in stop.items()}
    if case.fault is None:
        healthy, faulty = Sim(case.program, case.program.calls), None
        healthy = healthy.finish() or healthy.run()
    elif healthy:
        healthy, faulty = run_pair(case.program, case.calls, stop, nccl_sizes=nccl_sizes)
    else:
        healthy, faulty = None, Sim(case.program, case.calls, stop, nccl_sizes=nccl_sizes).run()
    docs = None
    if stop is not case.stop and faulty is not None and not any(st == "blocked" for st in faulty.state):
        faulty.state = ["done" if st == "frozen" else st for st in faulty.state]  # its last kernel ran: no call
        # of any rank waits (the launcher waits for the stopped process: no hang of a collective)
    if faulty is not None and faulty.hung:
        docs = documents(faulty, mode, skew=skew_of(case.seed, case.program.world) if skew else None,
                         source=source, period=period_of(case.seed), typed=typed)
    return healthy, faulty, docs


def run_pair(program, calls, stop, nccl_sizes=False):
    """(the healthy run, the faulty run) of a program and its faulty ``calls`` and ``stop``, each as its own
    ``Sim(...).run()`` gives it, the calls both runs share run once: the healthy run pauses before the first call
    at which the faulty run would go another way (``divergence``), the faulty run goes on from a copy of its
    state (``Sim.follow``), and the healthy run goes on to its end.  A fault at step s leaves the steps before it alike:
    the faulty run's own work is what comes after it (the faulty run is some 40 % of a healthy one: seed 7).
    With ``nccl_sizes`` (a desync the faulty run finishes another way, wherever it comes) each runs alone."""
    healthy = Sim(program, program.calls)
    faulty = Sim(program, calls, stop, nccl_sizes=nccl_sizes)
    if nccl_sizes:
        return healthy.run(), faulty.run()
    healthy._begin()
    faulty._begin()
    if healthy.finish() is not None:  # the healthy run at once (``Sim.finish``): the faulty one runs alone
        return healthy, faulty.run()
    at = divergence(healthy.preps, faulty.preps, faulty.stop)
    if at:
        healthy.run(pause=at)
        if healthy.paused:
            faulty.follow(healthy)
    return healthy.run(), faulty.run()


def divergence(preps, other, stop):
    """{rank: the index of its first call at which a run of ``other`` (_prepared's, per rank) and ``stop`` goes
    another way than a run of ``preps`` without stops}: where the prepared calls (stream, seq, op, size,
    members, start, tree) or batch flags differ, one list ends before the other, or the rank stops; ranks
    whose calls are the same (the same prepared lists: _prepared made them once) are left out."""
    out = {}
    for r, (mine, theirs) in enumerate(zip(preps, other)):
        if mine is not theirs:
            a, b, flags_a, flags_b = mine.whole()[0], theirs.whole()[0], mine[3], theirs[3]
            n = min(len(a), len(b))
            i = 0
            while i < n and a[i] == b[i] and flags_a[i] == flags_b[i]:
                i += 1
            if i < n or len(a) != len(b):
                out[r] = i
        if r in stop:
            out[r] = min(out.get(r, stop[r][0]), stop[r][0])
    return out


def healthy_docs(sim, typed=False):
    """The documents of a run that ended (every rank done): states with nothing in flight."""
    return documents(sim, "late", typed=typed)


# the source models whose documents are a function of the calls each rank ran, so that a twin's calls that no
# rank ran (past a rank's hang) leave them alike: programs.undecidable_at_hang's flags hold (test_fuzz_twins).
# Not the NCCL model: a rank's Python issues the calls after the one its GPU waits in, and a twin's may differ;
# there a flag holds where its twin, built (twins.same_documents), leaves the same documents.
AT_HANG_SOURCES = ("exact", "recorder")


# the flags built under every model (programs.undecidable_at_hang's reasons end so): each stands where its twin does
BUILT_FLAGS = (programs.MIRRORED, programs.P2P_SPARSE, programs.LINK_SPARSE, programs.LATER, programs.LINK_EXTRA,
               programs.LINK_LATER)


def flag_at_hang(case, faulty, source="exact"):
    """The case, flagged undecidable where the faulty run's state at the hang shows a twin
    (programs.undecidable_at_hang; ``faulty``: the case's Sim, run), or no longer where it shows none of the flag
    the program and the fault gave it (programs.desync_at_the_place): under the NCCL model only where that twin,
    built, leaves the case's NCCL documents; under nccl-sizes (a desync's smaller members finish) never."""
    if source not in AT_HANG_SOURCES and source != "nccl":
        return case
    world = case.program.world
    blocked = {r: faulty.blocked[r] for r in range(world) if faulty.state[r] == "blocked"}
    if case.undecidable:  # the program and the fault flagged it: where the hang is no desync at the place, a
        # skip's calls shifted instead, and that flag's twin is none; the hang's own twins are judged below
        if programs.desync_at_the_place(case.program, case.fault, blocked):
            return case
        case = case._replace(undecidable=False, why_undecidable=None)
    why = programs.undecidable_at_hang(case.program, case.fault, case.calls, dict(enumerate(faulty.started)),
                                       blocked)
    if not why:
        return case
    flagged = case._replace(undecidable=True, why_undecidable=why)
    from . import twins  # twins builds on this module
    if why.endswith(BUILT_FLAGS) or why.startswith((programs.EXTRA_PREFIX, programs.REPEAT_PREFIX)):
        # built under every model: the flag stands where its twin does
        return flagged if twins.same_documents(flagged, faulty, source) is not None else case
    if source == "nccl":
        kind = twins.same_documents(flagged, faulty, source)
        if kind is None:
            return case
        flagged = flagged._replace(why_undecidable=why + " (its twin built: the same NCCL documents)")
    return flagged


def classify(case, culprits):
    """exact | undecided_ok (named none, the case is flagged undecidable) | undecided | partial | wrong."""
    got = set(culprits)
    if got == case.expected:
        return "exact"
    if not got:
        return "undecided_ok" if case.undecidable else "undecided"
    if got - case.expected:
        return "wrong"
    return "partial"
