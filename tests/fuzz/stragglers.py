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


def named(case, slow=True, nodes=1):
    """(the ranks the straggler rule names, the stragglers document) of the case's run, its ranks on ``nodes``
    nodes (joined on node0, in its clock, as the relay's collector joins them: arrivals.clock_offsets)."""
    sim = simulate.Sim(case.program, case.program.calls, gaps=gaps(case, slow)).run()
    assert not sim.hung, "a program without a fault hangs"
    members = {gid: list(g.ranks) for gid, g in case.program.groups.items()}
    hosts = hosts_of(case, nodes) if nodes > 1 else None
    doc = _arrivals.Stragglers().update(arrivals_docs(sim, hosts), members, sim.last_progress, HOST)
    return sorted({s["rank"] for s in _arrivals.named(doc)}), doc


def classify(case, ranks):
    """exact (the slow rank, alone), undecided (nobody), wrong (any other rank)."""
    if not ranks:
        return "undecided"
    return "exact" if ranks == [case.rank] else "wrong"


def run(cases, seed, shape=None, nodes=1, out=sys.stdout, healthy_every=1):
    """``cases`` slow-rank cases from ``seed``: the table (by shape, by how much slower), each wrong case and
    each healthy program (of every ``healthy_every``-th case) the rule named anyone in; {"wrong": [...],
    "false": [...], "by_shape": ..., "by_factor": ...}."""
    t = time.time()
    by_shape, by_factor = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    wrong, false = [], []
    for i in range(cases):
        case = make_slow_case(seed * 1000000 + i, shape)
        ranks, _ = named(case, nodes=nodes)
        outcome = classify(case, ranks)
        by_shape[case.program.shape][outcome] += 1
        by_factor["%3d %% slower" % round(100 * case.factor)][outcome] += 1
        if outcome == "wrong":
            wrong.append((case, ranks))
        if i % healthy_every == 0:
            ranks, _ = named(case, slow=False, nodes=nodes)
            if ranks:
                false.append((case, ranks))
    dt = time.time() - t
    w = out.write
    w("%d slow-rank cases (seed %d%s%s) in %.1f s (%.0f cases/s, %s)\n\n" % (
        cases, seed, ", shape %s" % shape if shape else "", ", %d nodes, clocks off by up to 1 s" % nodes
        if nodes > 1 else "", dt, cases / dt if dt else 0, "each healthy run included" if healthy_every == 1
        else "a healthy run every %d cases" % healthy_every))
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
