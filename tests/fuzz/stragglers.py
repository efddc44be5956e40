"""One slow rank, with its ground truth (issue 42's fault "one slow rank"): a program of programs.py, every rank's
compute between its calls drawn with jitter, one rank's slower by a factor from some step on, run by the
simulator on those durations (simulate.Sim's ``gaps``: a call starts its compute after the rank's previous call
ended), and the starts each rank's watchdog would write (its arrivals documents) joined by the real straggler
rule (``c10d_observer.arrivals.Stragglers``, nothing of it stood in for).  The job does not hang: the rule
must name the slow rank or nobody, never another; the same program without the slow rank must name nobody.

    python tests/fuzz/run.py --kind slow --cases 2000 --seed 1 [--shape mesh] [--nodes 4]

Pure Python, no torch.  Python 3.8.
"""
import collections
import random
import sys
import time
from collections import namedtuple

from c10d_observer import arrivals as _arrivals
from c10d_observer import callword as _cw

from . import programs, simulate

MIN_STEPS, MAX_STEPS = 60, 200  # a straggler is named over 50 calls of a group, at least
HOST = "node0"

OUTCOMES = ("exact", "undecided", "wrong")
SlowCase = namedtuple("SlowCase", "seed program rank factor from_step jitter")


def make_slow_case(seed, shape=None):
    """The case of one seed: a program of 60-200 steps, its slow rank, how much slower its compute is (10 % to
    twice as slow), from which step, and the jitter of every rank's compute (0 to 10 %)."""
    rng = random.Random("slow-%d" % seed)
    program = programs.make_program(rng, shape=shape, steps=rng.randint(MIN_STEPS, MAX_STEPS))
    rank = rng.randrange(program.world)
    factor = rng.choice((0.1, 0.2, 0.5, 1.0))
    from_step = 0 if rng.random() < 0.5 else rng.randint(0, program.steps // 2)
    return SlowCase(seed, program, rank, factor, from_step, rng.uniform(0.0, 0.1))


def _balanced_at(c, slots):
    """A call's nominal start in a balanced job: the step's slots spread over the step, the same instant for
    every rank (programs._timed spreads a rank's own calls, so a rank with more calls in a step would compute
    less before each: an imbalance of the generator's, not a straggler)."""
    return c.step * programs.STEP_S + (c.slot + 2) * programs.STEP_S / (slots + 3)


def gaps(case, slow=True):
    """{rank: [s]}: each call's compute before it, the time from its slot's nominal start to the next's (a
    balanced job; the calls of one slot back to back), with jitter; the slow rank's longer by ``factor`` from
    ``from_step`` (none where ``slow`` is false: the healthy run)."""
    rng = random.Random("gaps-%d-%s" % (case.seed, slow))
    slots = len(case.program.template)
    out = {}
    for r, calls in case.program.calls.items():
        prev, mine = -simulate.STEP_S_BEFORE, []
        for c in calls:
            at = _balanced_at(c, slots)
            g = max(at - prev, simulate.EPS)
            prev = max(prev, at)
            if slow and r == case.rank and c.step >= case.from_step:
                g *= 1.0 + case.factor
            mine.append(g * (1.0 + rng.uniform(-case.jitter, case.jitter)))
        out[r] = mine
    return out


def hosts_of(case, nodes):
    """{rank: (host, its clock's offset s)}: the ranks on ``nodes`` nodes in blocks (as torchrun places them),
    each node's clock off by up to a second (node0's not: the join's); one node where ``nodes`` is 1."""
    rng = random.Random("hosts-%d" % case.seed)
    world = case.program.world
    per = max(1, -(-world // max(1, nodes)))
    offsets = [0.0] + [rng.uniform(-1.0, 1.0) for _ in range(nodes)]
    return {r: ("node%d" % (r // per), offsets[r // per]) for r in range(world)}


def arrivals_docs(sim, hosts=None):
    """Each rank's arrivals document as its watchdog writes it (arrivals.ArrivalLog.document): the starts of its
    calls on every stream, its groups' and its p2p streams', in its host's clock, and its calls of rooted ops
    (``rooted``).  ``hosts``: hosts_of's, else every rank on HOST."""
    docs = []
    for r in range(sim.program.world):
        hist = sim.hist[r]
        host, off = hosts[r] if hosts else (HOST, 0.0)
        docs.append({"format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 1000 + r,
                     "job_id": "fuzz", "written_at": sim.last_progress, "host": host,
                     "streams": {s: [[q, t + off] for q, _, _, t in h] for s, h in hist.items()},
                     "rooted": {s: [q for q, op, _, _ in h if op in _cw.ROOTED] for s, h in hist.items()}})
    return docs


def named(case, slow=True, nodes=1, periods=False):
    """(the ranks the straggler rule names, the stragglers document) of the case's run, its ranks on ``nodes``
    nodes (joined on node0, in its clock, as the relay's collector joins them: arrivals.clock_offsets).
    ``periods``: as the watchdogs write and join them (``periodic``), not all at once at the end."""
    sim = simulate.Sim(case.program, case.program.calls, gaps=gaps(case, slow)).run()
    assert not sim.hung, "a program without a fault hangs"
    members = {gid: list(g.ranks) for gid, g in case.program.groups.items()}
    hosts = hosts_of(case, nodes) if nodes > 1 else None
    if periods:
        return periodic(case, sim, members, hosts or {r: (HOST, 0.0) for r in range(case.program.world)})
    doc = _arrivals.Stragglers().update(arrivals_docs(sim, hosts), members, sim.last_progress, HOST)
    return sorted({s["rank"] for s in _arrivals.named(doc)}), doc


PERIOD_S = 2.0  # arrivals.PERIOD_S: each watchdog writes its rank's document, each node's leader joins
POLL_S = 0.05  # a watchdog sees a call at its first poll after the rank's next call began (the call ended)


def periodic(case, sim, members, hosts, walk=True):
    """The rule as the watchdogs run it: each rank's document written every PERIOD_S at a phase of its own
    (ranks start apart), holding the starts it saw in the last RECENT_PERIODS periods (a call is seen at the
    watchdog's first poll after the rank's next call began); each node's leader joins its ranks' latest
    documents every PERIOD_S (watchdog_io.join_node: a group across nodes left out of its join), and node0's
    also the relay's sample of every node's ranks on groups across nodes (relay_arrivals.sampled, its last
    ARRIVALS_BLOCKS blocks, a round or two old).  Returns (every rank any join named at any time, node0's
    last stragglers document): a rank named for a while is named in ``watch`` and in any verdict then."""
    from c10d_observer import relay_arrivals as _ra
    from c10d_observer import watchdog_io as _io
    rng = random.Random("periods-%d" % case.seed)
    world = case.program.world
    seen = {}  # rank -> [(seen, stream, seq, start)]
    for r in range(world):
        calls = sorted((t, s, q, op in _cw.ROOTED) for s, h in sim.hist[r].items() for q, op, _, t in h)
        nxt = [c[0] for c in calls[1:]] + [sim.last_progress]
        off = hosts[r][1]
        seen[r] = sorted(((int(b / POLL_S) + 1) * POLL_S + off, s, q, t + off, ro)
                         for (t, s, q, ro), b in zip(calls, nxt))
    base = min(x[3] - hosts[r][1] for r in range(world) for x in seen[r][:1]) if any(seen.values()) else 0.0
    phase = {r: base + rng.uniform(0.0, PERIOD_S) + (rng.uniform(0.0, PERIOD_S) if rng.random() < 0.3 else 0.0)
             for r in range(world)}  # when its first document is written, after one period (some ranks start late)
    ranks_of = {r: sorted(g for g, m in members.items() if r in m) for r in range(world)}

    def doc(r, when):
        """Rank r's latest document written by ``when`` (the simulator's clock; its times on its host's), or
        None."""
        k = int((when - phase[r]) // PERIOD_S)
        if k < 1:
            return None
        w = phase[r] + k * PERIOD_S + hosts[r][1]
        since = w - _arrivals.RECENT_PERIODS * PERIOD_S
        out, rooted = {}, {}
        for t_seen, s, q, t, ro in seen[r]:
            if since <= t_seen <= w:
                out.setdefault(s, []).append([q, t])
                if ro:
                    rooted.setdefault(s, []).append(q)
        return {"format": "c10d_observer.arrivals", "version": 2, "rank": r, "pid": 1000 + r, "job_id": "fuzz",
                "written_at": w, "whole": {"since": since, "until": w}, "host": hosts[r][0],
                "members": {g: members[g] for g in ranks_of[r]}, "streams": out, "rooted": rooted}

    nodes = sorted({h for h, _ in hosts.values()})
    on = {n: [r for r in range(world) if hosts[r][0] == n] for n in nodes}
    joins = {n: _arrivals.Stragglers() for n in nodes}
    spans = {g for g, m in members.items() if len({hosts[r][0] for r in m}) > 1}
    lag = {n: rng.uniform(0.0, 2 * _ra.ARRIVALS_EVERY_S) for n in nodes}  # how old the collector's copy is
    walks = {n: _ra.NodeWalks() for n in nodes}
    named, last = set(), None
    t, end = base + PERIOD_S, sim.last_progress + 2 * PERIOD_S
    while t <= end:
        for n in nodes:
            leader = on[n][0]
            when = phase[leader] + int((t - phase[leader]) // PERIOD_S) * PERIOD_S  # it joins as it writes
            local = [d for d in (doc(r, when) for r in on[n]) if d is not None]
            relayed = []
            if n == nodes[0] and spans:
                for m in nodes:
                    mine = [d for d in (doc(r, when - lag[m]) for r in on[m]) if d is not None]
                    walks[m].feed(mine)  # the node's relay reads its ranks' documents (NodeWalks)
                    for d in mine:
                        r, sent = d["rank"], {}
                        for s, pairs in d["streams"].items():
                            if s in spans:
                                every = _ra.block_every(_ra.rate_of(pairs), _ra.ARRIVALS_EVERY_S)
                                sent[s] = [p for p in pairs if _ra.sampled(p[0], every)]
                        sent = {s: p for s, p in sent.items() if p}
                        if sent:
                            relayed.append(dict(d, streams=sent, relayed=True, whole=None,
                                                rank_streams=sorted(set(ranks_of[r]) | set(sim.hist[r])),
                                                walks=None if not walk else
                                                {s: walks[m].column(r, s, p, on[m]) for s, p in sent.items()}))
            if not local and not relayed:
                continue
            out = _io.join_node(joins[n], local, relayed, when + hosts[leader][1], n)
            named |= {x["rank"] for x in _arrivals.named(out)}
            if n == nodes[0]:
                last = out
        t += PERIOD_S
    return sorted(named), last


def classify(case, ranks):
    """exact (the slow rank, alone), undecided (nobody), wrong (any other rank)."""
    if not ranks:
        return "undecided"
    return "exact" if ranks == [case.rank] else "wrong"


def run(cases, seed, shape=None, nodes=1, out=sys.stdout, healthy_every=1, periods=False):
    """``cases`` slow-rank cases from ``seed``: the table (by shape, by how much slower), each wrong case and
    each healthy program (of every ``healthy_every``-th case) the rule named anyone in; {"wrong": [...],
    "false": [...], "by_shape": ..., "by_factor": ...}."""
    t = time.time()
    by_shape, by_factor = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    wrong, false = [], []
    for i in range(cases):
        case = make_slow_case(seed * 1000000 + i, shape)
        ranks, _ = named(case, nodes=nodes, periods=periods)
        outcome = classify(case, ranks)
        by_shape[case.program.shape][outcome] += 1
        by_factor["%3d %% slower" % round(100 * case.factor)][outcome] += 1
        if outcome == "wrong":
            wrong.append((case, ranks))
        if i % healthy_every == 0:
            ranks, _ = named(case, slow=False, nodes=nodes, periods=periods)
            if ranks:
                false.append((case, ranks))
    dt = time.time() - t
    w = out.write
    w("%d slow-rank cases (seed %d%s%s) in %.1f s (%.0f cases/s, %s)\n\n" % (
        cases, seed, ", shape %s" % shape if shape else "", ", %d nodes, clocks off by up to 1 s" % nodes
        if nodes > 1 else "", dt, cases / dt if dt else 0, "each healthy run included" if healthy_every == 1
        else "a healthy run every %d cases" % healthy_every))
    if periods:
        w("as the watchdogs write and join the documents: every %.0f s, at each rank's own phase (stragglers."
          "periodic)\n\n" % PERIOD_S)
    for title, rows in (("shape", by_shape), ("slower", by_factor)):
        width = max([len(title)] + [len(k) for k in rows])
        w("%-*s %6s %s\n" % (width, title, "cases", " ".join("%11s" % o for o in OUTCOMES)))
        total = collections.Counter()
        for label in sorted(rows) + ["all"]:
            c = rows[label] if label != "all" else total
            n = sum(c.values())
            w("%-*s %6d %s\n" % (width, label, n, " ".join("%5d %4.0f%%" % (c[o], 100.0 * c[o] / n if n else 0)
                                                          for o in OUTCOMES)))
            if label != "all":
                total.update(c)
        w("\n")
    w("healthy programs: %d run, %d named a straggler\n" % (len(range(0, cases, healthy_every)), len(false)))
    for case, ranks in false:
        w("  FALSE ALARM seed %d: %s, world %d: named %s\n" % (case.seed, case.program.shape, case.program.world,
                                                             ranks))
    w("WRONG stragglers: %d\n" % len(wrong))
    for case, ranks in wrong:
        w("  seed %d: %s, world %d, rank %d %.0f %% slower from step %d: named %s\n" % (
            case.seed, case.program.shape, case.program.world, case.rank, 100 * case.factor, case.from_step, ranks))
    return {"wrong": wrong, "false": false, "by_shape": by_shape, "by_factor": by_factor}
