"""Random distributed programs shaped like users' jobs, and one fault injected into each, with its ground truth
(issue 42, the first slice: pure Python, no torch, no processes).

A program is a world size, the groups the job makes (the world, ``new_group`` subgroups: pairs, halves, a
subset of the ranks; a 2D mesh: tp x dp; where asked, a 3D mesh of up to 64 ranks: pp x dp x tp, whose
pipeline stages send and receive along each pp group; where asked, a p2p job whose traffic is
``batch_isend_irecv`` rings), and a per-step template of *slots*: a collective on a family of
groups (every rank calls it on its own group of the family: "each step a tp all_reduce"), or point-to-point
traffic (a pipeline-style chain of send/recv, or pairs that exchange tensors).  Every rank's list of calls is
made from that one template (an optional prologue, the loop of 0-60 steps, an optional epilogue), so the
members of a group issue its calls in one order and each send has its recv: the healthy program completes.

A fault changes one rank's list at one call: ``skip`` (the call is left out), ``stall`` (the rank stops in
Python before it, forever), ``exit`` (the rank dies before it), ``mismatch_op`` / ``mismatch_size`` /
``mismatch_root`` (the call is issued with another op, element count or dtype, or root); drawn only where
asked (EXTRA_KINDS): ``swap``, ``freeze`` (the rank's process stops before the call) and ``freeze_in`` (inside
it).  The culprit is that rank; ``undecidable`` flags cases where the evidence the documents can carry cannot tell that rank from
another (see ``undecidable``).

Deterministic: a case is a function of its seed (``make_case(seed)``).  Python 3.8.
"""
import itertools
import random
from collections import namedtuple

from c10d_observer.analogs import MIN_SHARED

STEP_S = 0.1  # the nominal wall time of one step (the simulator's clock)
MAX_WORLD = 16
MAX_STEPS = 60

Group = namedtuple("Group", "gid ranks family")  # gid: torch's group name ("0" the world); ranks: global
# One call of one rank.  size: "1024 x float32" (None for a barrier); root: the global rank of a rooted op's
# root (None otherwise); peer: the other end of a send or recv (global rank); step: the loop step (-1 the
# prologue, ``steps`` the epilogue); slot: the template slot; at: the nominal start, seconds after t0.
Call = namedtuple("Call", "group op size root peer step slot at")
# A template slot: kind "coll" (op on every group of ``family``; root_index: the root's rank in the group;
# every: the slot runs at steps s with s % every == every - 1) or "p2p" (pattern "chain": pairs is the chain
# of ranks, each sends to the next; "exchange": pairs of ranks that send to each other; group: the p2p group).
Slot = namedtuple("Slot", "kind family op size root_index every pattern pairs group only")
# only: the gids of ``family`` the slot runs on, where not every one (shape "stages"); None: every group
Slot.__new__.__defaults__ = (None,)

Program = namedtuple("Program", "world shape groups families template steps prologue epilogue calls")
Fault = namedtuple("Fault", "kind rank index call step detail")
Case = namedtuple("Case", "seed program fault calls stop expected undecidable why_undecidable making")
# making: {rank: [(gid, ranks), ...]}, the faulty rank's ``new_group`` calls in the order it makes them, where a
# fault is in the making (MAKING_KINDS); None: every rank makes the program's groups in the order of their names
Case.__new__.__defaults__ = (None,)

COLL_OPS = ("all_reduce", "broadcast", "all_gather", "barrier")
# "ops" (EXTRA_SHAPES): every other collective a job issues on gloo, beside COLL_OPS (issue 42: "every
# collective including rooted, coalesced and object ones"): rooted reduce, gather and scatter, all_to_all (as
# all_to_all_single), all_reduce_coalesced (one call), and the object collectives, each two calls of its
# inner op (the sizes, 1 x int64, then the pickled bytes, N x uint8, as torch issues them), named by their api
MORE_OPS = ("reduce", "gather", "scatter", "all_to_all", "all_reduce_coalesced", "all_gather_object",
            "broadcast_object_list")
OBJECT_OPS = ("all_gather_object", "broadcast_object_list")
DATA = ".data"  # the op of an object collective's second call: "all_gather_object.data"
ROOTED = ("broadcast", "reduce", "gather", "scatter", "broadcast_object_list")
ALL_OPS = COLL_OPS + MORE_OPS + OBJECT_OPS  # shape "ops": an object collective twice as likely as another op
FAULT_KINDS = ("skip", "stall", "exit", "mismatch_op", "mismatch_size", "mismatch_root")
FAULT_WEIGHTS = (4, 3, 2, 2, 2, 1)
# Fault kinds drawn only where asked for (``make_case(seed, kind=...)``, run.py --kind), as EXTRA_SHAPES: drawn
# among FAULT_KINDS they would change every seed's case.  "swap": the rank issues two consecutive collectives
# of two different groups the other way round (issue 42: "swap two calls across groups"): an ordering
# deadlock where the groups' other members keep the program's order.  "freeze": the rank's process is stopped
# (SIGSTOP, or a thread holds the GIL) before a call; "freeze_in": inside a collective it entered (simulate.py).
# "mismatch_p2p": a send or recv (an isend or irecv of a batch too) issued with another element count or dtype
# than its other half (issue 42's "change the size of one call", for p2p: gloo raises on some, a recv too
# small for what comes; NCCL checks nothing).
EXTRA_KINDS = ("swap", "freeze", "freeze_in", "mismatch_p2p")
# Faults in the making of the groups, before step 0, drawn only where asked, run by real ranks and simulated as
# torch holds ranks in new_group (making.py; not by simulate.py's Sim, which starts at step 0): "make_order", the rank makes two of the program's groups of other members,
# one of them its own, the other way round (torch names a group by its place in every rank's sequence of
# ``new_group`` calls, so the two names cross on that rank); "make_members", the rank passes one ``new_group``
# other members (one rank more or fewer: a member leaves itself or another rank out or adds one, or a rank not in
# the group adds itself) than every other rank passes it.  Each is the rank's own fault whatever follows: a hang
# in the making, a hang later on groups wired across, torch raising, or nothing (a group the rank never uses).
# "make_skip": the rank leaves out the ``new_group`` of one group it is not in (as ``if rank in ranks:
# new_group(ranks)`` does), before one it is in, whose name (the next) then differs from its peers'.
# "make_own": every rank makes only the groups it is in, the same guard on every rank (the common mistake): no
# rank is the odd one, the case is flagged undecidable and a rank named is a wrong culprit.
MAKING_KINDS = ("make_order", "make_members", "make_skip", "make_own")
SHAPES = ("world", "pairs", "halves", "subset", "mesh", "p2p")
# Shapes drawn only where asked for (``make_case(seed, shape=...)``, run.py --shape): drawing them among SHAPES
# would change every seed's program, and the seeds the tests keep.  "mesh3d": pp x dp x tp (each 2-4, 8-64
# ranks), a tensor-parallel and a data-parallel collective each step and the pipeline's sends and recvs
# along each pp group (forward, sometimes backward too), as torch.distributed.pipelining over a DeviceMesh.
# "ring": a p2p job whose traffic is batch_isend_irecv rings (each rank of a ring of 2-8 posts an isend to the
# next and an irecv from the one before in one batch, and waits for both), beside world collectives; a skip of
# one op of a batch leaves it out of the batch (issue 42: "one op left out of a batch_isend_irecv ring").
# "async": collectives as DDP's buckets issue them: bursts of 2-4 all_reduces with async_op=True on one group,
# waited together at the burst's end, beside synchronous collectives (issue 42: "async calls waited later").
# "ops": the groups of one of SHAPES' collective shapes, and slots drawn from COLL_OPS and MORE_OPS.
# "stages": the groups of pairs, halves or a 2D mesh, and beside the slots every group of a family runs, one or two
# that only some of its groups run: a pipeline's first or last stage (its embedding's or its loss's collectives on
# its own tensor-parallel group), stages of uneven depth (one more layer's all_reduce on some groups), a call made on
# some groups only.  The analogy rules (analogs.py) read groups of one size as one program: this shape is where
# that is not so.
EXTRA_SHAPES = ("mesh3d", "ring", "async", "ops", "stages")
BATCH_OPS = ("isend", "irecv")  # a batch's ops (simulate.py: a rank posts every op of its batch, then waits)
P2P_OPS = ("send", "recv") + BATCH_OPS
ASYNC_OPS = ("iall_reduce",)  # an all_reduce with async_op=True (the documents' op: all_reduce)
POSTED_OPS = BATCH_OPS + ASYNC_OPS  # posted, then waited for with the others of their step's slot
MESH3D_WORLDS = (8, 12, 16, 18, 24, 27, 32, 36, 48, 64)
MESH3D_MAX_STEPS = 30  # a 64-rank program of 60 steps is 15,000 calls a run
NUMELS = (1, 4, 1024, 4096, 65536, 1048576)
DTYPES = ("float32", "float32", "float32", "bfloat16", "int64")


def _size(rng):
    return "%d x %s" % (rng.choice(NUMELS), rng.choice(DTYPES))


def _coll_slot(rng, family, groups_of_family, every=1, ops=None):
    """A collective on each group of ``family``, its op drawn from ``ops`` (by default COLL_OPS, all_reduce the most
    often); an object collective's size is its pickled bytes (its second call's)."""
    op = rng.choice(ops or ("all_reduce",) * 4 + ("broadcast",) * 2 + ("all_gather",) * 2 + ("barrier",))
    size = None if op == "barrier" else "%d x uint8" % rng.randint(40, 4000) if op in OBJECT_OPS else _size(rng)
    root_index = None
    if op in ROOTED:
        smallest = min(len(groups_of_family[g].ranks) for g in groups_of_family)
        root_index = 0 if rng.random() < 0.6 else rng.randrange(smallest)
    if every == 1 and rng.random() < 0.12:
        every = rng.randint(2, 10)  # an evaluation every few steps, a periodic checkpoint barrier
    return Slot("coll", family, op, size, root_index, every, None, None, None)


def _p2p_slot(rng, world):
    ranks = list(range(world))
    if rng.random() < 0.5:
        n = rng.randint(2, min(world, 6))
        start = rng.randrange(world - n + 1)
        chain = ranks[start:start + n]
        if rng.random() < 0.3:
            chain.reverse()  # the backward pass of a pipeline
        return Slot("p2p", None, None, _size(rng), None, 1, "chain", tuple(chain), "0")
    rng.shuffle(ranks)
    npairs = rng.randint(1, world // 2)
    pairs = tuple((ranks[2 * i], ranks[2 * i + 1]) for i in range(npairs))
    return Slot("p2p", None, None, _size(rng), None, 1, "exchange", pairs, "0")


def _async_slot(rng, family, groups_of_family):
    """A burst of 2-4 async all_reduces on each group of ``family`` (DDP's gradient buckets), waited together."""
    return Slot("coll", family, "iall_reduce", _size(rng), None, 1, "async", rng.randint(2, 4), None)


def _ring_slot(rng, world):
    n = rng.randint(2, min(world, 8))
    start = rng.randrange(world - n + 1)
    ring = list(range(start, start + n))
    if rng.random() < 0.3:
        ring.reverse()  # the other way round
    return Slot("p2p", None, None, _size(rng), None, 1, "ring", tuple(ring), "0")


def _groups(rng, world, shape):
    """(groups by gid, families: name -> [gid]), in the order the job makes them (every rank calls
    new_group for every group, so the names agree)."""
    groups = {"0": Group("0", tuple(range(world)), "world")}
    families = {"world": ["0"]}
    made = []

    def new(family, ranks):
        gid = str(len(groups))
        groups[gid] = Group(gid, tuple(ranks), family)
        families.setdefault(family, []).append(gid)
        made.append(gid)

    if shape == "async" and world >= 4 and rng.random() < 0.5:
        shape = "halves"  # bursts on the world or on each half
    if shape == "stages":
        shape = rng.choice(("pairs", "halves", "mesh"))
        if shape == "pairs" and world % 2 or shape == "mesh" and not [
                d for d in range(2, world) if world % d == 0 and world // d >= 2]:
            shape = "halves"
    if shape == "ops":
        shape = rng.choice(("world", "pairs", "halves", "subset", "mesh"))
        if shape == "pairs" and world % 2 or shape in ("halves", "mesh") and world < 4 or shape == "subset" and world < 3:
            shape = "world"
        if shape == "mesh" and not [d for d in range(2, world) if world % d == 0 and world // d >= 2]:
            shape = "world"
    if shape == "pairs":
        for i in range(0, world, 2):
            new("pairs", range(i, i + 2))
    elif shape == "halves":
        half = world // 2
        new("halves", range(half))
        new("halves", range(half, world))
    elif shape == "subset":
        n = rng.randint(2, world - 1)
        new("subset", sorted(rng.sample(range(world), n)))
    elif shape == "mesh3d":
        pp, dp, tp = rng.choice([(p, d, t) for p in (2, 3, 4) for d in (2, 3, 4) for t in (2, 3, 4)
                                 if p * d * t == world])
        rank = lambda p, d, t: (p * dp + d) * tp + t  # noqa: E731 (pp outermost, as init_device_mesh's first dim)
        for p in range(pp):
            for d in range(dp):
                new("tp", [rank(p, d, t) for t in range(tp)])
        for p in range(pp):
            for t in range(tp):
                new("dp", [rank(p, d, t) for d in range(dp)])
        for d in range(dp):
            for t in range(tp):
                new("pp", [rank(p, d, t) for p in range(pp)])
    elif shape == "mesh":
        tp = rng.choice([d for d in range(2, world) if world % d == 0 and world // d >= 2])
        dp = world // tp
        for d in range(dp):
            new("tp", [d * tp + t for t in range(tp)])
        for t in range(tp):
            new("dp", [d * tp + t for d in range(dp)])
    return groups, families


def _world_for(rng, shape):
    if shape == "pairs":
        return rng.choice(range(2, MAX_WORLD + 1, 2))
    if shape == "halves":
        return rng.randint(4, MAX_WORLD)
    if shape == "subset":
        return rng.randint(3, MAX_WORLD)
    if shape == "mesh":
        return rng.choice([4, 6, 8, 9, 10, 12, 14, 15, 16])
    if shape == "mesh3d":
        return rng.choice(MESH3D_WORLDS)
    if shape == "stages":
        return rng.randint(4, MAX_WORLD)
    return rng.randint(2, MAX_WORLD)


def _template(rng, shape, groups, families, world):
    if shape == "mesh3d":
        return _template3d(rng, groups, families)
    fams = [f for f in families if f != "world"]
    slots = []
    n = rng.randint(1, 4)
    for _ in range(n):
        if shape == "ops":
            fam = rng.choice(fams + ["world"] if fams else ["world"])
            slots.append(_coll_slot(rng, fam, {g: groups[g] for g in families[fam]}, ops=ALL_OPS))
            continue
        if shape == "async":
            fam = rng.choice(fams + ["world"] if fams else ["world"])
            of = {g: groups[g] for g in families[fam]}
            slots.append(_async_slot(rng, fam, of) if rng.random() < 0.6 else _coll_slot(rng, fam, of))
            continue
        if shape in ("p2p", "ring"):
            p2p = _ring_slot if shape == "ring" else _p2p_slot
            slots.append(p2p(rng, world) if rng.random() < 0.5 else _coll_slot(
                rng, "world", {"0": groups["0"]}))
            continue
        fam = rng.choice(fams + ["world"] if fams else ["world"])
        slots.append(_coll_slot(rng, fam, {g: groups[g] for g in families[fam]}))
    # every family of the shape takes part in each step (a mesh: a tp call and a dp call; a p2p job: traffic)
    for fam in fams:
        if not any(s.kind == "coll" and s.family == fam and s.every == 1 for s in slots):
            slots.insert(rng.randrange(len(slots) + 1), _coll_slot(
                rng, fam, {g: groups[g] for g in families[fam]})._replace(every=1))
    if shape == "async" and not any(s.pattern == "async" for s in slots):
        slots.insert(rng.randrange(len(slots) + 1), _async_slot(rng, "world", {"0": groups["0"]}))
    if shape in ("p2p", "ring") and not any(s.kind == "p2p" for s in slots):
        slots.insert(rng.randrange(len(slots) + 1), (_ring_slot if shape == "ring" else _p2p_slot)(rng, world))
    if shape == "stages":
        for _ in range(rng.randint(1, 2)):
            slots.insert(rng.randrange(len(slots) + 1), _stage_slot(rng, slots, groups, families))
    return slots


def _stage_slot(rng, slots, groups, families):
    """A collective that only some groups of a family run (shape "stages"): the first group's or the last's (a
    pipeline's first stage, its last), or a random part of them; half the time a copy of a slot that every group
    of the family runs (one more layer on some stages), else a new call (an embedding's, a loss's)."""
    fam = rng.choice([f for f in families if f != "world" and len(families[f]) >= 2])
    gids = families[fam]
    pick = rng.random()
    if pick < 0.4:
        only = (gids[-1],)
    elif pick < 0.7:
        only = (gids[0],)
    else:
        only = tuple(sorted(rng.sample(gids, rng.randint(1, len(gids) - 1)), key=int))
    same = [s for s in slots if s.kind == "coll" and s.family == fam and s.only is None]
    if same and rng.random() < 0.5:
        return rng.choice(same)._replace(only=only)
    return _coll_slot(rng, fam, {g: groups[g] for g in gids})._replace(only=only)


def _template3d(rng, groups, families):
    """A pipeline step over a 3D mesh: the stages' forward sends and recvs along each pp group, a tp
    collective and a dp collective (in a random order), sometimes a backward pass (the chains reversed),
    sometimes a periodic world call; rank order within the step is the template's."""
    chains = tuple(tuple(groups[g].ranks) for g in families["pp"])
    size = _size(rng)
    slots = [Slot("p2p", "pp", None, size, None, 1, "chains", chains, "0")]
    colls = [_coll_slot(rng, fam, {g: groups[g] for g in families[fam]})._replace(every=1) for fam in ("tp", "dp")]
    rng.shuffle(colls)
    slots += colls
    if rng.random() < 0.5:
        slots.append(Slot("p2p", "pp", None, size, None, 1, "chains", tuple(c[::-1] for c in chains), "0"))
    if rng.random() < 0.3:
        slots.insert(rng.randrange(len(slots) + 1), _coll_slot(rng, "world", {"0": groups["0"]}))
    return slots


def _chain_calls(out, chain, slot, index, step):
    for i, r in enumerate(chain):
        if i > 0:
            out.setdefault(r, []).append(Call(slot.group, "recv", slot.size, None, chain[i - 1], step, index, None))
        if i + 1 < len(chain):
            out.setdefault(r, []).append(Call(slot.group, "send", slot.size, None, chain[i + 1], step, index, None))


def _slot_calls(slot, index, step, groups, families):
    """{rank: [Call without ``at``]} of one slot at one step."""
    out = {}
    if slot.kind == "coll":
        for gid in families[slot.family]:
            if slot.only is not None and gid not in slot.only:
                continue
            g = groups[gid]
            root = g.ranks[slot.root_index] if slot.root_index is not None else None
            for r in g.ranks:
                if slot.op in OBJECT_OPS:  # the sizes, then the bytes
                    out.setdefault(r, []).extend([Call(gid, slot.op, "1 x int64", root, None, step, index, None),
                                                  Call(gid, slot.op + DATA, slot.size, root, None, step, index, None)])
                    continue
                out.setdefault(r, []).extend([Call(gid, slot.op, slot.size, root, None, step, index, None)]
                                             * (slot.pairs if slot.pattern == "async" else 1))
        return out
    if slot.pattern == "chain":
        _chain_calls(out, slot.pairs, slot, index, step)
        return out
    if slot.pattern == "ring":  # batch_isend_irecv: an isend to the next rank, an irecv from the one before
        ring, n = slot.pairs, len(slot.pairs)
        for i, r in enumerate(ring):
            out.setdefault(r, []).extend([Call(slot.group, "isend", slot.size, None, ring[(i + 1) % n], step, index,
                                               None),
                                          Call(slot.group, "irecv", slot.size, None, ring[i - 1], step, index, None)])
        return out
    if slot.pattern == "chains":  # one chain per pp group (mesh3d)
        for chain in slot.pairs:
            _chain_calls(out, chain, slot, index, step)
        return out
    for a, b in slot.pairs:
        out.setdefault(a, []).extend([Call(slot.group, "send", slot.size, None, b, step, index, None),
                                      Call(slot.group, "recv", slot.size, None, b, step, index, None)])
        out.setdefault(b, []).extend([Call(slot.group, "recv", slot.size, None, a, step, index, None),
                                      Call(slot.group, "send", slot.size, None, a, step, index, None)])
    return out


def _timed(calls, step):
    """The calls of one rank at one step, each with its nominal start (spread over the step)."""
    n = len(calls)
    return [Call(c[0], c[1], c[2], c[3], c[4], c[5], c[6], step * STEP_S + (i + 1) * STEP_S / (n + 1))
            for i, c in enumerate(calls)]


def make_program(rng, shape=None, world=None, steps=None):
    shape = shape or rng.choice(SHAPES)
    world = world or _world_for(rng, shape)
    groups, families = _groups(rng, world, shape)
    template = _template(rng, shape, groups, families, world)
    if steps is None:
        most = MESH3D_MAX_STEPS if shape == "mesh3d" else MAX_STEPS
        steps = rng.randint(0, 3) if rng.random() < 0.1 else rng.randint(0, most)
    prologue = rng.random() < 0.5  # DDP's broadcast of the parameters from rank 0
    epilogue = rng.random() < 0.6  # a barrier before destroy_process_group
    calls = {r: [] for r in range(world)}

    def add(step, per_rank):
        for r in range(world):
            calls[r].extend(_timed(per_rank.get(r, []), step))

    if prologue:
        add(-1, {r: [Call("0", "broadcast", "%d x float32" % rng.choice(NUMELS[2:]), 0, None, -1, -1, None)]
                 for r in range(world)})
        # one size for every rank (the same tensor)
        size = calls[0][0].size
        for r in range(world):
            calls[r][0] = calls[r][0]._replace(size=size)
    # each slot's calls, made once (a step's differ only in ``step`` and ``at``: _steps makes them)
    made = [_slot_calls(slot, i, None, groups, families) for i, slot in enumerate(template)]
    _steps(calls, template, made, steps, world)
    if epilogue:
        add(steps, {r: [Call("0", "barrier", None, None, None, steps, len(template), None)] for r in range(world)})
    return Program(world, shape, groups, families, template, steps, prologue, epilogue, calls)


def _steps(calls, template, made, steps, world):
    """The loop's calls, appended to each rank's list: what ``add(s, per_rank)`` of the slots' calls at each
    step gives, without making each call twice (a case's program is about 500 calls).  A step's calls depend
    on which slots run at it (``every``): each rank's calls of such a set, with their offsets in the step, are
    made once (the same floats: ``s * STEP_S + (i + 1) * STEP_S / n``), and ranks whose calls of a step are
    alike (the members of one group: a world collective's every rank) share the step's Call values (immutable;
    made once, not once a rank).  The Calls of one such set of calls at every step it runs at are made in one
    pass (``map`` over their fields' columns, no Python code a call), then handed out step by step."""
    new = tuple.__new__
    plans = {}  # which slots run -> [its steps, [(a rank's list, [(group, op, size, root, peer, slot, offset)])]]
    everys = [slot.every for slot in template]
    order = []  # the plan of each step
    if all(e == 1 for e in everys):
        runs = tuple([True] * len(everys))
        plans[runs] = [list(range(steps)), None]
        order = [plans[runs]] * steps
    else:
        for s in range(steps):
            runs = tuple([s % e == e - 1 for e in everys])
            plan = plans.get(runs)
            if plan is None:
                plan = plans[runs] = [[], runs]
            plan[0].append(s)
            order.append(plan)
    for runs, plan in plans.items():
        per_rank = {}
        for on, by_rank in zip(runs, made):
            if not on:
                continue
            for r, cs in by_rank.items():
                got = per_rank.get(r)
                if got is None:
                    per_rank[r] = list(cs)
                else:
                    got.extend(cs)
        groups = []
        alike = {}  # a rank's items -> the lists of the ranks whose items they are
        for r in range(world):
            cs = per_rank.get(r)
            if not cs:
                continue
            n = len(cs) + 1
            items = tuple([(c[0], c[1], c[2], c[3], c[4], c[6], (i + 1) * STEP_S / n) for i, c in enumerate(cs)])
            outs = alike.get(items)
            if outs is None:
                outs = alike[items] = []
                groups.append((items, outs))
            outs.append(calls[r])
        # each group's Calls at every step of the plan, in one pass: the fields' columns, a step's calls after
        # the step before's
        its = plan[0]
        made_groups = []
        for items, outs in groups:
            n, k = len(items), len(its)
            cols = [[it[f] for it in items] * k for f in range(6)]
            made_groups.append((n, list(map(new, itertools.repeat(Call), zip(
                cols[0], cols[1], cols[2], cols[3], cols[4], [s for s in its for _ in items], cols[5],
                [s * STEP_S + it[6] for s in its for it in items]))), outs))
        plan[1] = made_groups
    if len(plans) == 1:  # every step the same calls: each list takes its group's Calls at once
        for n, all_calls, outs in order[0][1] if order else ():
            for out in outs:
                out.extend(all_calls)
        return
    done = {}  # id(plan) -> the steps of it handed out
    for plan in order:
        k = done.get(id(plan), 0)
        done[id(plan)] = k + 1
        for n, all_calls, outs in plan[1]:
            step_calls = all_calls[k * n:(k + 1) * n]
            for out in outs:
                out.extend(step_calls)


# -- the fault ----------------------------------------------------------------------------------------------
def _other_op(rng, call, group):
    op = rng.choice([o for o in COLL_OPS if o != call.op])
    if op == "barrier":
        return call._replace(op=op, size=None, root=None)
    size = call.size or _size(rng)
    root = group.ranks[0] if op in ROOTED else None
    return call._replace(op=op, size=size, root=root)


def _other_size(rng, call):
    numel, dtype = call.size.split(" x ")
    if rng.random() < 0.5:
        return call._replace(size="%d x %s" % (int(numel) * rng.choice((2, 3)) + rng.choice((0, 1)), dtype))
    return call._replace(size="%s x %s" % (numel, rng.choice([d for d in ("float32", "bfloat16", "int64")
                                                               if d != dtype])))


_ANY_CALL = ("skip", "stall", "exit", "freeze")  # the faults any call takes (but an object collective's second)


def _applies(kind, call):
    if call.op.endswith(DATA):
        return False  # an object collective's faults are its first call's (the second goes with it)
    if kind == "mismatch_size" and call.op in OBJECT_OPS:
        return False  # another object's size is no fault: torch pads every rank's bytes to the largest
    if kind in _ANY_CALL:
        return True
    if kind == "freeze_in":  # a p2p call a rank froze in may have sent its data or not: not modelled
        return call.op not in P2P_OPS + ASYNC_OPS
    if kind == "mismatch_p2p":
        return call.op in P2P_OPS
    if call.op in P2P_OPS:
        return False  # desyncs of p2p calls: mismatch_p2p, drawn only where asked
    if kind == "mismatch_op" and call.op in ASYNC_OPS:
        return False  # another op in a burst: its all_reduce issued synchronously is the same call to gloo
    if kind == "mismatch_size":
        return call.size is not None
    if kind == "mismatch_root":
        return call.op in ROOTED
    return True


def _swappable(calls, i):
    """Calls ``i`` and ``i + 1`` are two collectives of two different groups."""
    if i + 1 >= len(calls):
        return False
    a, b = calls[i], calls[i + 1]
    return (a.group != b.group and a.op not in POSTED_OPS + P2P_OPS + OBJECT_OPS and b.op not in POSTED_OPS + P2P_OPS
            and not a.op.endswith(DATA) and not b.op.endswith(DATA) and b.op not in OBJECT_OPS)


def _pick_call(rng, calls, kind, early):
    if kind == "swap":
        idx = [i for i in range(len(calls)) if _swappable(calls, i)]
    elif kind in _ANY_CALL:  # _applies, inlined: every call but an object collective's second
        idx = [i for i, c in enumerate(calls) if not c[1].endswith(DATA)]
    else:
        idx = [i for i, c in enumerate(calls) if _applies(kind, c)]
    if early:
        first = [i for i in idx if calls[i].step <= 2]
        if first:
            idx = first
    return rng.choice(idx) if idx else None


def inject(rng, program, kind=None):
    """One fault, at a random call of a random rank (steps 0-2, the prologue included, about a third of the
    time): (Fault, faulty per-rank calls, stop: {rank: (index, "stall" | "dead" | "frozen" | "frozen_in")})."""
    for _ in range(50):
        k = kind or rng.choices(FAULT_KINDS, FAULT_WEIGHTS)[0]
        r = rng.randrange(program.world)
        i = _pick_call(rng, program.calls[r], k, rng.random() < 0.35)
        if i is None:
            continue
        return _apply(rng, program, k, r, i)
    if kind:
        return None  # no call of the program takes that fault
    for r in range(program.world):  # a program where nothing but a skip applies
        if program.calls[r]:
            return _apply(rng, program, "skip", r, rng.randrange(len(program.calls[r])))
    return None  # no calls at all


def _apply(rng, program, kind, r, i, calls=None, stop=None):
    calls = {q: list(cs) for q, cs in (calls or program.calls).items()}
    orig = calls[r][i]
    stop = dict(stop or {})
    detail = ""
    two = orig.op in OBJECT_OPS  # an object collective: its second call goes with its first
    if kind == "skip":
        del calls[r][i:i + 2 if two else i + 1]
    elif kind == "swap":  # each keeps its place in time: the rank issues the later call first
        nxt = calls[r][i + 1]
        calls[r][i], calls[r][i + 1] = nxt._replace(at=orig.at), orig._replace(at=nxt.at)
        detail = "%s, then %s" % (_words(nxt, program), _words(orig, program))
    elif kind in ("stall", "exit", "freeze", "freeze_in"):
        stop[r] = (i, {"stall": "stall", "exit": "dead", "freeze": "frozen", "freeze_in": "frozen_in"}[kind])
    else:
        group = program.groups[orig.group]
        if kind == "mismatch_op":
            new = _other_op(rng, orig, group)
            if two:
                del calls[r][i + 1]
        elif kind in ("mismatch_size", "mismatch_p2p"):
            new = _other_size(rng, orig)
        else:
            new = orig._replace(root=rng.choice([q for q in group.ranks if q != orig.root]))
            if two:
                calls[r][i + 1] = calls[r][i + 1]._replace(root=new.root)
        calls[r][i] = new
        detail = "%s -> %s" % (_words(orig, program), _words(new, program))
    return Fault(kind, r, i, orig, orig.step, detail), calls, stop


def _words(c, program):
    text = "%s on group %s" % (c.op, c.group)
    if c.op in P2P_OPS:
        text = "%s %s %d on group %s" % (c.op, "to" if c.op in ("send", "isend") else "from", c.peer, c.group)
    if c.size:
        text += " (%s)" % c.size
    if c.root is not None:
        text += " root %d" % c.root
    return text


def undecidable(program, fault, faulty=None):
    """Why no verdict can name the culprit from the documents (a reason), or None.

    The documents carry, per rank and stream, its counts, the call in flight and its last 32 calls with their
    ops, sizes and start times on the rank's own clock: what every rank did, never what the program says it
    should have done.  Where another single fault on another rank, in a program the generator could make,
    leaves the same documents, no rule can tell the two apart.  Flagged here: the certain cases, and only
    those (a heuristic on the program, not a search over every other program; an undecided case left
    unflagged is counted apart, as a gap of the verdict's or a case this rule does not see):

    - a desync, or a skip after which the rank's next call is another op, size or group, on a group of two
      ranks that no other group of the job mirrors (the world of a 2-rank job, a subset of two ranks), at a
      call that is the first of its slot (the prologue, the first step its slot runs, the epilogue): the two
      ranks went different ways at their first chance and nothing before it, nor a group like theirs, says
      which way the program meant (a program with the slots the other way round, the other rank at fault,
      leaves the same documents: rank 0 issued X where rank 1 issued Y).  A skip followed by a call just like
      the skipped one shifts the rank's calls on the group by one: the hang comes later (the rank ends with one
      call fewer than its partner, which no fault of this model makes of the partner): not flagged.

    - the same desync or skip past the first call of its slot, where one of the two calls at the place (the
      one the program puts there, or the one the rank issued instead) is not among the group's calls shown
      before it (its last SHOWN): the program may hold a slot that runs there for the first time, or once in
      more steps than the record spans, which the other rank skipped (or issued something else for), and
      that program leaves the same documents (``_unseen_at_place``).  That twin is a program a user may write,
      not always one this generator makes (its slots run every 10 steps at most): the verdict must not bet
      on the generator's limits.

    - a skip of a rank's first op of a p2p exchange at the first step the exchange runs, where no other slot
      moves tensors between the two ranks: rank a skips its send to b (a sends, then receives; b the other
      way round), so each waits to receive from the other; the program with the pair the other way round,
      b skipping its send, leaves the same documents (each rank's first call with the other a recv, at the
      same seq of the same streams), and the same for a skipped first recv (each waits to send).

    The flags that need the hang's state (which ranks wait where): ``undecidable_at_hang`` (run.py and real.py
    apply it after the run; test_fuzz_twins builds each of its twins).  A swap takes the first rule only: the
    call it issued instead is another group's.

    Not flagged, though strictly undecidable too: a program may hold a slot that runs every k steps, so a
    divergence of two ranks at any step could be the other rank skipping such a slot's call that the history
    never showed (its last 32 calls per stream); the verdict that names a rank there bets on the program
    repeating what the documents show (the wrong-culprit cases run.py lists so far are of this kind).
    """
    if fault.kind in ("stall", "exit", "freeze", "freeze_in"):
        return None
    c = fault.call
    if c.op in P2P_OPS:
        return _exchange_twin(program, fault)
    group = program.groups.get(c.group)
    if group is None or len(group.ranks) != 2:
        return None
    if fault.kind == "skip":
        calls = program.calls[fault.rank]
        nxt = fault.index + (2 if c.op in OBJECT_OPS else 1)
        after = calls[nxt] if nxt < len(calls) else None
        if after is None or _signature(after) == _signature(c):
            return None  # the rank's calls shift by one (or it ends): it ends one call short, never a desync here
    siblings = mirrors(program, group.gid, coll_place(program.calls[fault.rank], fault.index))
    if siblings:
        return None  # another group of the family ran the same slot: its ranks show the program's way
    unlike = " (its family's other groups run other calls there)" if len(program.families[group.family]) > 1 else ""
    first = c.step <= 0 or c.step >= program.steps or c.step <= _first_step(program, c)
    if first:
        return ("%s at the first call of its slot on group %s, whose two ranks no other group mirrors%s: either "
                "may be the odd one" % (fault.kind, c.group, unlike))
    if fault.kind == "swap":
        return None  # the call it issued instead is another group's: whether the pair's record showed it says
        # nothing; the order of the two groups' calls its earlier steps show does (the verdict's rule 2)
    unseen = _unseen_at_place(program, fault, faulty) if faulty is not None else None
    if unseen is not None:
        return ("%s on group %s, whose two ranks no other group mirrors%s, where %s at the place is a call the "
                "group's last %d calls never showed: a program with a slot run there for the first time or once "
                "in more steps than they span, the other rank at fault, leaves the same documents"
                % (fault.kind, c.group, unlike, unseen, SHOWN))
    return None


def desync_at_the_place(program, fault, blocked):
    """Whether ``undecidable``'s pair rules, which stand for two ranks that went different ways at the place, still
    describe the hang (``blocked``: {rank: (stream, seq) it waits in}): False for a skip on a group of two whose
    partner does not wait at the place.  Skipped there, the rank went on to a call on another group and then to
    its next one on the group, just like the skipped one: its partner's call at the place met that one, and the
    rank's calls on the group shifted by one (shape "stages", seed 98019728: a tp pair's barrier skipped at step
    0, a dp broadcast next, the pair's barriers one short at the end, where the verdict names the rank that
    ended one call short: no twin).  Nor where the rank waits nowhere (it ended its program) while its partner
    waits at the place: the call it skipped was its last there, and the program with the two slots the other way
    round, the partner at fault, would have the rank wait in that call at its end (shape "stages", NCCL model,
    seed 179013534: a one-step program, rank 2's dp pair's second all_gather skipped)."""
    c = fault.call
    if fault.kind != "skip" or c.op in P2P_OPS:
        return True
    group = program.groups.get(c.group)
    if group is None or len(group.ranks) != 2:
        return True
    partner = [x for x in group.ranks if x != fault.rank][0]
    place = (c.group, coll_place(program.calls[fault.rank], fault.index))
    if blocked.get(partner) != place or fault.rank not in blocked:
        return False
    # the rank waits in a call of another group, never having issued one at the place (it would have met its
    # partner's there): the two went no different ways at the place, and a call the group's record never showed that
    # it would have issued next is in no document (the subset seeds 217037532, NCCL model, and 218074156, recorder:
    # rank 3 skipped its pair's all_reduce and waits in the world's broadcast, before its pair's broadcast every
    # seven steps, first run there); the hang's own twins (an ordering deadlock's) are judged by
    # undecidable_at_hang
    return blocked[fault.rank][0] == c.group or not _unseen_next_only(program, fault)


def _unseen_next_only(program, fault):
    """Whether ``undecidable``'s one reason for a skip is the unseen call the rank would issue next on the group
    (``_unseen_at_place``'s, not for the call it skipped; no other pair rule's: ``undecidable`` without the faulty
    calls gives those alone)."""
    c, calls = fault.call, program.calls[fault.rank]
    seen = {_signature(y)[1:] for y in _on_its_stream(calls[:fault.index], c)[-SHOWN:]}
    return _signature(c)[1:] in seen and undecidable(program, fault) is None


def coll_place(calls, index):
    """The seq on its group's collective stream of the collective ``calls[index]`` (a p2p call on the group has a
    stream of its own)."""
    c = calls[index]
    return 1 + sum(1 for x in calls[:index] if x.group == c.group and x.op not in P2P_OPS)


SHOWN = 32  # calls per stream a document shows (rank_docs.HISTORY, simulate.HISTORY)


TWIN_KINDS = ("skip", "swap", "mismatch_op", "mismatch_size", "mismatch_root")  # the faults of the calls a rank
# issues, whose twins the flags (undecidable_at_hang) and the strict test (twins.built_twins) look for


def undecidable_at_hang(program, fault, faulty, started, blocked):
    """Why no verdict can name the culprit, from the faulty run's state at the hang (``started``: {rank: {stream:
    the last seq it started}}, ``blocked``: {rank: (stream, seq) it waits in}), where ``undecidable`` (the program
    and the fault alone) found no reason: a reason, or None.  Seven twins a user's program may be, each leaving
    the documents the case leaves with another rank at fault (tests/unit/test_fuzz_twins.py builds each, for
    seeds of this generator, and holds their documents equal to the case's):

    - a desync, or a skip after which the rank's next call is another, on a group of two ranks whose family has
      other groups (a job of pairs), where no member of those groups shows the place in its document: each
      went past it more than SHOWN calls ago, or has not reached it.  They ran the same slot, but what they
      issued there is out of their records, so they say nothing of it, and the case is the one ``undecidable``
      judges for a pair no group mirrors (its slot's first call, or a call at the place the pair's own record
      never showed: a one-off of the program, issued by every pair, the other rank at fault).

    - a skip of a call on group W after which the rank's next call is on a group S of two ranks (itself and a
      rank p of W) that no other group mirrors, where the rank waits in that S call and p waits in the W call
      it skipped: the program with one more call on S at that step, ahead of the W call (a slot that runs every
      few steps, first run there, as the call the rank issued), which p skipped, leaves the same documents
      (p waits in the W call, the rank in the S call, for each other).  Where the groups that mirror S run its
      calls at other steps (``in_step``: shape "stages", a stage with a call more each step), the extra call may
      be S's alone, and so it may before a step of S is on record (its first step: the groups that run its calls at
      its steps do not show whether S runs one more, ``_stepped_before``, the verdict's ``alike_in_a_step``):
      flagged only where that twin, built, leaves the case's documents (``MIRRORED``).  The
      verdict makes the same argument (``ordering._twin_of_a_sparse_call``).  A swap of the W call and the S
      call after it is the same case: the S call issued first is the twin's extra call (the only twin a swap
      takes here).

    - a skip on a 2-rank job's only group, no group like it, that shifts the rank's calls by one up to a call the
      run did not hold (``_shifted_to_a_first_call``).

    - a swap of a call on a group W of two ranks, no group like it, and the first call of another slot (the
      epilogue's barrier, a slot's first run), where each rank of W waits in the call it issued first
      (``_swapped_first_run``).

    - a desync, or a skip after which the rank's next call is another on the group, on a group of two ranks that
      other groups mirror, whose records show the place, at the program's first step, both ranks waiting there:
      the program whose group runs one more call there, on it alone, the rank's call, its partner skipping it
      (``_extra_at_first_step``; flagged only where that twin, built, leaves the case's documents).

    - a skip of a collective after which the rank waits in its first send or recv with a rank that waits in that
      collective: the program with one more exchange between the two ahead of it, the other rank skipping its
      half (``_sparse_twin_link``; flagged only where that twin, built, leaves the case's documents).

    - a skip on a group of two ranks that other groups mirror, before a step of it is on record, after which the
      rank waits in a call of another group that its partner, waiting at the place, is in too: the program whose
      group runs that call after the other group's, the partner skipping the other group's call
      (``_later_at_first_step``; flagged only where that twin, built, leaves the case's documents).
    """
    if fault.kind not in TWIN_KINDS:
        return None
    c = fault.call
    if c.op in P2P_OPS:
        if fault.kind != "skip":
            return None
        return _sparse_twin_p2p(program, fault, faulty, started, blocked) or _extra_on_a_link(
            program, fault, faulty, blocked) or _later_on_a_link(program, fault, faulty, started, blocked)
    group = program.groups.get(c.group)
    if group is None:
        return None
    rank, own = fault.rank, program.calls[fault.rank]
    place = coll_place(own, fault.index)
    if fault.kind == "swap":  # the S call issued ahead of the W call is the sparse twin's extra call
        return _sparse_twin(program, fault, faulty, place, started, blocked) or _swapped_first_run(
            program, fault, place, blocked)
    if fault.kind == "skip":
        sparse = _sparse_twin(program, fault, faulty, place, started, blocked) or _sparse_twin_link(
            program, fault, faulty, started, blocked)
        if sparse is not None:
            return sparse
    if len(group.ranks) != 2:
        return None
    if fault.kind == "skip":
        shifted = _shifted_to_a_first_call(program, fault, faulty, place, blocked) or _later_at_first_step(
            program, fault, faulty, place, started, blocked)
        if shifted is not None:
            return shifted
    repeat = _repeat_at_place(program, fault, faulty, place, blocked)
    if repeat is not None:
        return repeat
    siblings = mirrors(program, group.gid, place)
    if not siblings:
        return None  # ``undecidable`` judged it
    if not any(blocked.get(x) == (c.group, place) for x in group.ranks):
        return None  # the hang is elsewhere (a skip that shifted the rank's calls on the group by one)
    for gid in siblings:
        for x in program.groups[gid].ranks:
            n = started.get(x, {}).get(gid, 0)  # a collective group's stream is its gid (simulate.coll_stream)
            if place <= n < place + SHOWN:
                # its record shows what the program issues there, but at the first step not whether the pair runs
                # a call more than its group does
                return _extra_at_first_step(program, fault, faulty, place, blocked)
    if fault.kind == "skip":
        nxt = fault.index + (2 if c.op in OBJECT_OPS else 1)
        after = own[nxt] if nxt < len(own) else None
        if after is None or _signature(after) == _signature(c):
            return None
    first = c.step <= 0 or c.step >= program.steps or c.step <= _first_step(program, c)
    unseen = None if first else _unseen_at_place(program, fault, faulty)
    if first or unseen is not None:
        return ("%s on group %s (ranks %s) at %s, where no rank of the other groups of its family shows the "
                "place in its record (the last %d calls): a program with a one-off call there, the other rank at "
                "fault, leaves the same documents" % (
                    fault.kind, c.group, ", ".join(map(str, group.ranks)),
                    "the first call of its slot" if first else "%s, a call the group's record never showed" % unseen,
                    SHOWN))
    return None


EXTRA_PREFIX = "at the first step of group"
REPEAT_PREFIX = "a repeat on group"


def _repeat_at_place(program, fault, faulty, place, blocked):
    """``undecidable_at_hang``'s sixth twin: a reason, or None.  A desync, or a skip after which the rank's next call
    is another on the same group, on a group of two ranks, both waiting at the place, where the call the rank
    issued there is the group's call before the place again (a pair's period of an all_reduce and a barrier,
    whose barrier the rank skipped: it issued the all_reduce twice): the program with that call twice in a row
    there, on that group alone (a slot that runs every few steps, first run at this step, or once in more steps
    than the records span), whose other rank skipped one of the two, leaves the same documents, at any step
    (``_extra_at_first_step``'s twin where the extra call repeats the one before it; ``twins.extra`` builds it,
    and ``simulate.flag_at_hang`` flags the case only where its documents are the case's).  The verdict makes
    the same argument (``verdict.mismatch._unless_a_repeat``)."""
    c, rank = fault.call, fault.rank
    if place < 2:
        return None
    mine = faulty[rank]
    issued = mine[fault.index] if fault.index < len(mine) else None
    if issued is None or issued.group != c.group or c.op in OBJECT_OPS or issued.op in OBJECT_OPS:
        return None
    if fault.kind == "skip" and _signature(issued) == _signature(c):
        return None
    partner = [x for x in program.groups[c.group].ranks if x != rank][0]
    if blocked.get(rank) != (c.group, place) or blocked.get(partner) != (c.group, place):
        return None
    own = program.calls[rank]
    before = own[nth_call(own, c.group, place - 1)]
    if _signature(before) != _signature(issued):
        return None
    return ("%s %s (ranks %s): rank %d issued at #%d the group's call #%d again (%s): a program with that call twice "
            "in a row there, on the group alone, rank %d skipping one of the two, leaves the same documents" % (
                REPEAT_PREFIX, c.group, ", ".join(map(str, program.groups[c.group].ranks)), rank, place, place - 1,
                _words(issued, program), partner))


def _extra_at_first_step(program, fault, faulty, place, blocked):
    """``undecidable_at_hang``'s fifth twin: a reason, or None.  A desync, or a skip after which the rank's next call
    is another on the same group, on a group of two ranks whose family's other groups run its calls (they mirror
    it), at the program's first step, where both ranks wait at the place: the program whose group runs one more
    call there, on it alone (a pipeline's stage's: shape "stages"), the call the rank issued, and whose other rank
    skipped it, leaves the same documents.  Before the group's record holds a step of its program, the groups of
    its family say nothing of whether it runs one call more than they do (the verdict's rule:
    ``analogs.alike_in_a_step``); from the second step on, that extra call would show in the group's record of the
    first.  ``simulate.flag_at_hang`` builds the twin (``twins.extra``) and flags the case only where its documents
    are the case's."""
    c, rank = fault.call, fault.rank
    if c.step != 0:  # (a swap never comes here: undecidable_at_hang judged it)
        return None
    mine = faulty[rank]
    issued = mine[fault.index] if fault.index < len(mine) else None
    if issued is None or issued.group != c.group or c.op in OBJECT_OPS or issued.op in OBJECT_OPS:
        return None  # a skip whose rank's next call is on another group: an ordering cycle, not this twin
    if fault.kind == "skip" and _signature(issued) == _signature(c):
        return None
    partner = [x for x in program.groups[c.group].ranks if x != rank][0]
    if blocked.get(rank) != (c.group, place) or blocked.get(partner) != (c.group, place):
        return None
    return ("%s %s (ranks %s), whose family's other groups run its calls: a program whose group %s runs one more "
            "call at #%d, on it alone (a pipeline stage's: %s, the call rank %d issued), rank %d skipping it, leaves "
            "the same documents (before a step of a group is on record, the groups of its family do not show "
            "whether it runs a call more than they do)" % (
                EXTRA_PREFIX, c.group, ", ".join(map(str, program.groups[c.group].ranks)), c.group, place,
                _words(issued, program), rank, partner))


LATER = " (before a step of the group is on record: flagged where that twin, built, leaves the same documents)"


def _later_at_first_step(program, fault, faulty, place, started, blocked):
    """``undecidable_at_hang``'s seventh twin: a reason, or None.  A skip on a group S of two ranks whose family's
    other groups run its calls (they mirror it), before a step of S is on record, after which the rank waits in
    its next call, on another group W, where its partner waits in S at the place: the program whose S runs that
    call after the W call (a stage's slot, later than its family's: shape "stages"), its partner skipping the W
    call, leaves the same documents.  Before S's record holds a step of its program, the groups of its family say
    nothing of whether S runs their calls where they do (the verdict's ``analogs.alike_in_a_step``).  The
    real 2.15 program 58000147 (pairs, step 0): rank 3 left out its pair's all_gather and waits in the world's
    all_reduce, rank 2 in the all_gather; pair [0, 1] issued its all_gather first, and the verdict says "cannot
    decide".  ``simulate.flag_at_hang`` builds the twin (``twins.later``) and flags the case only where its
    documents are the case's."""
    rank, c = fault.rank, fault.call
    at = blocked.get(rank)
    mine = faulty[rank]
    if at is None or ":p2p:" in str(at[0]) or at[0] == c.group or fault.index >= len(mine):
        return None
    if _stepped_before(program.calls[rank][:fault.index], c.group, c):
        return None  # a step of S on record: the groups of its family show where S's calls go (the verdict's bet)
    nxt = mine[fault.index]
    if nxt.group != at[0] or nxt.op in P2P_OPS or rank not in program.groups[at[0]].ranks:
        return None  # its next call is the one it waits in
    partner = [x for x in program.groups[c.group].ranks if x != rank][0]
    if partner not in program.groups[at[0]].ranks or blocked.get(partner) != (c.group, place):
        return None
    if not mirrors(program, c.group, place):
        return None  # ``undecidable`` judged it (its slot's first call)
    if started.get(partner, {}).get(at[0], 0) != at[1] - 1 or started.get(rank, {}).get(c.group, 0) != place - 1:
        return None
    return ("a skip on group %s of %s #%d, after which rank %d waits in call #%d on group %s, and rank %d in the "
            "skipped call: a program whose group %s runs that call after it (a stage's slot), rank %d skipping the "
            "group %s call, leaves the same documents%s" % (
                c.group, c.op, place, rank, at[1], at[0], partner, c.group, partner, at[0], LATER))


def _shifted_to_a_first_call(program, fault, faulty, place, blocked):
    """``undecidable_at_hang``'s third twin: a reason, or None.  A skip on a group of two ranks that issue no call
    on any other group, and that no other group mirrors (the world of a 2-rank job), after which the rank's calls
    on it shift by one, its partner one behind, until the rank issues a call the run did not hold, at seq m, where
    both wait: if that call is the first of its slot (the epilogue's barrier, a slot's first run) or one the
    group's record never showed, the program with one call fewer in the run (a step fewer), its partner issuing
    the run's call at m in place of that one (a mismatch), leaves the same documents."""
    c, rank = fault.call, fault.rank
    partner = [x for x in program.groups[c.group].ranks if x != rank][0]
    if any(x.group != c.group for q in (rank, partner) for x in program.calls[q]):
        return None  # another group of the two pins the steps: the run's length is no guess
    if mirrors(program, c.group, place):
        return None  # other groups run the same program: their records and counts show the run (the corpus's
        # seed 1009422: pairs of a job of pairs, the others done, their records showing the place)
    at = blocked.get(rank)
    if at is None or at[0] != c.group or at[1] <= place or blocked.get(partner) != at:
        return None
    mine = faulty[rank]
    issued = mine[nth_call(mine, c.group, at[1])]
    theirs = faulty[partner][nth_call(faulty[partner], c.group, at[1])]
    if (shown_op(theirs.op), theirs.size, theirs.root) != (shown_op(c.op), c.size, c.root):
        return None
    first = issued.step <= 0 or issued.step >= program.steps or issued.step <= _first_step(program, issued)
    before = _on_its_stream(mine, c)[max(0, at[1] - 1 - SHOWN):at[1] - 1]
    unseen = _signature(issued)[1:] not in {_signature(x)[1:] for x in before}
    if not (first or unseen):
        return None
    return ("a skip on group %s (ranks %s, their only group), after which rank %d's calls shift by one until it "
            "issues %s at #%d, %s: the program with one call fewer in the run, rank %d issuing the run's call in "
            "place of that one, leaves the same documents" % (
                c.group, ", ".join(map(str, program.groups[c.group].ranks)), rank, _words(issued, program), at[1],
                "the first call of its slot" if first else "a call the group's record never showed", partner))


def _swapped_first_run(program, fault, place, blocked):
    """``undecidable_at_hang``'s fourth twin: a reason, or None.  A swap of call X on a group W of two ranks (the
    rank and p) that no other group mirrors, and the call Y after it, the first call of its slot on group S (the
    epilogue's barrier, or a slot's first run: no earlier step showed where it goes among W's calls), where p's
    call after X is Y too and p waits in X, the rank in Y: the program with Y before X on both ranks (a user may
    put a final barrier before a pair's last call), p issuing them the other way round, is the same run, call for
    call: the same documents, p at fault."""
    c, rank = fault.call, fault.rank
    w = program.groups[c.group]
    if len(w.ranks) != 2 or mirrors(program, c.group, place):
        return None
    own = program.calls[rank]
    y = own[fault.index + 1]
    partner = [x for x in w.ranks if x != rank][0]
    theirs = program.calls[partner]
    i = nth_call(theirs, c.group, place)
    if i + 1 >= len(theirs) or (theirs[i + 1].group, theirs[i + 1].step, theirs[i + 1].slot) != (
            y.group, y.step, y.slot):
        return None
    first = y.step <= 0 or y.step >= program.steps or y.step <= _first_step(program, y)
    y_place = coll_place(own, fault.index + 1)
    if not first or blocked.get(partner) != (c.group, place) or blocked.get(rank) != (y.group, y_place):
        return None
    return ("a swap of %s #%d on group %s (ranks %s), which no other group mirrors, and %s, the first call of its "
            "slot, where each rank of the group waits in the one it issued first: the program with them the other "
            "way round, rank %d swapping them, is the same run" % (
                c.op, place, c.group, ", ".join(map(str, w.ranks)), _words(y, program), partner))


def nth_call(calls, group, seq):
    """The index in ``calls`` of the ``seq``-th collective on ``group`` (its p2p calls have streams of their own)."""
    n = 0
    for i, x in enumerate(calls):
        if x.group == group and x.op not in P2P_OPS:
            n += 1
            if n == seq:
                return i
    raise ValueError("no call #%d on group %s" % (seq, group))


MIRRORED = " (a call on that group alone: the groups of its family that run its calls there show nothing of it)"


def _sparse_twin(program, fault, faulty, place, started, blocked):
    """``undecidable_at_hang``'s second twin: a reason, or None.  The S call the rank waits in is its next call
    after the skipped one (a call between them, on a group with ranks of W, would be in the twin's program ahead
    of the W call, where those ranks have not issued it)."""
    rank, c = fault.rank, fault.call
    at = blocked.get(rank)
    mine = faulty[rank]
    if at is None or fault.index >= len(mine) or mine[fault.index].group != at[0]:
        return None
    if 1 + sum(1 for x in mine[:fault.index] if x.group == at[0]) != at[1]:
        return None
    s_gid = at[0]
    s_group = program.groups.get(s_gid)
    if s_group is None or s_gid == c.group or len(s_group.ranks) != 2 or rank not in s_group.ranks:
        return None
    siblings = mirrors(program, s_gid, at[1])
    # where other groups of its family run its calls there, but at other steps (shape "stages"), a slot on S alone
    # may still be the twin's extra call (a pipeline stage's): flagged only where that twin, built, leaves the
    # case's documents (simulate.flag_at_hang)
    if in_step(program, s_gid, at[1], siblings) and _stepped_before(mine[:fault.index], s_gid, mine[fault.index]):
        return None  # they run them at its steps: their records show where the program puts S's calls (once a
        # step of S is on record: before it, they do not show whether S runs a call more, the verdict's rule
        # analogs.alike_in_a_step; seed 54000000, a pair's all_reduce at step 0 of a job of pairs)
    partner = [x for x in s_group.ranks if x != rank][0]
    if partner not in program.groups[c.group].ranks or blocked.get(partner) != (c.group, place):
        return None
    if started.get(partner, {}).get(s_gid, 0) != at[1] - 1 or started.get(rank, {}).get(c.group, 0) != place - 1:
        return None
    return ("a %s of %s #%d on group %s, after which rank %d waits in call #%d on group %s (ranks %s), which %s, "
            "and rank %d in the call %s: a program with one more call on group %s there (a slot first run at that "
            "step), which rank %d skipped, leaves the same documents%s" % (
                fault.kind, c.op, place, c.group, rank, at[1], s_gid, ", ".join(map(str, s_group.ranks)),
                ("other groups mirror at other steps" if not in_step(program, s_gid, at[1], siblings) else
                 "other groups mirror, no step of it on record yet") if siblings else "no other group mirrors", partner,
                "skipped" if fault.kind == "skip" else "issued later", s_gid, partner, MIRRORED if siblings else ""))


def _stepped_before(calls, gid, call):
    """Whether ``calls`` (a rank's, before ``call``) hold a call on group ``gid`` of a step before ``call``'s: a step
    of the group's program is on record ahead of it."""
    return any(x.group == gid and 0 <= x.step < call.step for x in calls)


P2P_SPARSE = " (the skipped call a send or recv: flagged where that twin, built, leaves the same documents)"
LINK_SPARSE = " (the rank's next call a send or recv: flagged where that twin, built, leaves the same documents)"


def _sparse_twin_link(program, fault, faulty, started, blocked):
    """``_sparse_twin`` where the rank, after the skip of a call on W, waits in a plain send or recv with a rank p of
    W, its next call after its last on W, p waiting in W's next call: a program with one more exchange of that
    tensor between the two there (a slot first run at that step, ahead of the W call), whose half p skipped,
    leaves the same documents (p waits in the W call, the rank in its half, for each other).  The real 2.15
    program 58000113 (shape p2p, step 0): rank 0 left the first of the world's two all_reduces out, issued the
    second as the first, and waits to receive from rank 3, which waits in the second; the verdict says "cannot
    decide" (an ordering cycle), and the program with the exchange ahead of the second all_reduce, rank 3
    skipping its send, is the twin.  Flagged only where that twin, built (``twins.link``), leaves the case's
    documents."""
    rank, w = fault.rank, fault.call.group
    at = blocked.get(rank)
    mine = faulty[rank]
    if at is None or ":p2p:" not in str(at[0]):
        return None
    on_link = [i for i, x in enumerate(mine) if p2p_stream(x, rank) == at[0]]
    if at[1] != 1 or not on_link:
        return None  # a call on the link before shows where the program puts the exchange (the verdict's bet)
    i = on_link[at[1] - 1]  # the send or recv the rank waits in
    nxt = mine[i]
    partner, n = nxt.peer, started.get(rank, {}).get(w, 0)
    if partner not in program.groups[w].ranks or blocked.get(partner) != (w, n + 1):
        return None
    if i == 0 or mine[i - 1].group != w or mine[i - 1].op in P2P_OPS:
        return None  # its call before the send or recv is its last on W
    if started.get(partner, {}).get(at[0], 0) != at[1] - 1:
        return None
    return ("a skip of %s on group %s, after which rank %d waits in its %s #%d on %s, and rank %d in the group's call "
            "#%d: a program with one more exchange between the two there (a slot first run at that step), whose "
            "half rank %d skipped, leaves the same documents%s" % (
                fault.call.op, w, rank, nxt.op, at[1], at[0], partner, n + 1, partner, LINK_SPARSE))


def p2p_stream(call, rank):
    """The stream of a plain send or recv that ``rank`` issues (simulate: ``<group>:p2p:<src>-><dst>``), else None."""
    if call.op == "send":
        return "%s:p2p:%s->%s" % (call.group, rank, call.peer)
    if call.op == "recv":
        return "%s:p2p:%s->%s" % (call.group, call.peer, rank)
    return None


def nth_on_stream(calls, rank, stream, seq):
    """The index in ``calls`` (``rank``'s) of the ``seq``-th call on ``stream``: a group's collective stream, or a
    p2p link's (plain sends and recvs)."""
    if ":p2p:" not in str(stream):
        return nth_call(calls, stream, seq)
    n = 0
    for i, x in enumerate(calls):
        if p2p_stream(x, rank) == stream:
            n += 1
            if n == seq:
                return i
    raise ValueError("no call #%d on stream %s" % (seq, stream))


def _sparse_twin_p2p(program, fault, faulty, started, blocked):
    """``_sparse_twin`` for a skipped send or recv: the rank's next call is the collective on a group S of two
    ranks (itself and the skipped call's peer) that it waits in, and the peer waits in its half of the skipped
    call: a program with one more call on S there (a slot first run at that step, ahead of the p2p call), which the
    peer skipped, leaves the same documents; the verdict makes that argument (``ordering._twin_of_a_sparse_call``).
    The fuzzer's seed 160000952 (recorder): a 2-rank world, rank 1 left a recv out and waits in the world's
    all_reduce, rank 0 in its send.  The extra call may come between an exchange's send and recv: plain ones, two
    slots of a step (a pipeline's forward send, its backward recv) leave the same documents (160012164; seed 7's
    7014099, two chain slots, which the verdict named by the rank's pair of links before ``left_out.batch_culprit``
    weighed the twin).  Flagged only where that twin, built, leaves the case's documents."""
    rank, c = fault.rank, fault.call
    stream = p2p_stream(c, rank)
    at = blocked.get(rank)
    mine = faulty[rank]
    if stream is None or at is None or fault.index >= len(mine):
        return None
    nxt = mine[fault.index]
    if nxt.op in P2P_OPS or nxt.group != at[0]:
        return None
    if 1 + sum(1 for x in mine[:fault.index] if x.group == at[0] and x.op not in P2P_OPS) != at[1]:
        return None
    s_gid, partner = at[0], c.peer
    s_group = program.groups.get(s_gid)
    if s_group is None or len(s_group.ranks) != 2 or set(s_group.ranks) != {rank, partner}:
        return None
    if in_step(program, s_gid, at[1], mirrors(program, s_gid, at[1])):
        return None  # groups of its family run S's calls at its steps: their records show where S's calls go
    place = 1 + sum(1 for x in program.calls[rank][:fault.index] if p2p_stream(x, rank) == stream)
    if blocked.get(partner) != (stream, place):
        return None
    if started.get(partner, {}).get(s_gid, 0) != at[1] - 1 or started.get(rank, {}).get(stream, 0) != place - 1:
        return None
    return ("a skip of %s #%d on %s, after which rank %d waits in call #%d on group %s (ranks %s), and rank %d in "
            "its half of the skipped call: a program with one more call on group %s there (a slot first run at that "
            "step), which rank %d skipped, leaves the same documents%s" % (
                c.op, place, stream, rank, at[1], s_gid, ", ".join(map(str, s_group.ranks)), partner, s_gid, partner,
                P2P_SPARSE))


LINK_EXTRA = " (an op more on the link: flagged where that twin, built, leaves the same documents)"


def _extra_on_a_link(program, fault, faulty, blocked):
    """A skip of a send or recv at the first step its link between the rank and its peer runs, after which the rank
    waits in its next call, a send or recv with that peer, while the peer waits in another op with the rank: the
    program with that next op twice there (one more op of the link at that step, its other half on the peer ahead
    of the op the peer waits in), which the peer skipped, leaves the same documents.  Before a step of the link is
    on record, the links of other pairs that run the same exchange show nothing of an op this link runs more.
    The fuzzer's seed 7000227 (a world of ten, four pairs exchanging at each step): rank 4 skipped its recv from 9
    at step 0 and waits in its next send to 9, rank 9 in its send to 4.  Flagged only where that twin, built
    (``twins.link_extra``), leaves the case's documents."""
    rank, c = fault.rank, fault.call
    mine = faulty[rank]
    if fault.index >= len(mine):
        return None
    nxt = mine[fault.index]
    if nxt.op not in ("send", "recv") or blocked.get(rank) != (p2p_stream(nxt, rank), _nth_on_link(
            mine[:fault.index + 1], rank, nxt)):
        return None  # its next call is not the one it waits in
    peer = nxt.peer
    at = blocked.get(peer)
    if peer != c.peer or at is None or ":p2p:" not in str(at[0]) or at[0] == p2p_stream(nxt, rank) or str(
            rank) not in str(at[0]).split(":p2p:")[1].split("->"):
        return None  # the peer waits in another op with the rank
    if any(x.op in P2P_OPS and x.peer == peer and 0 <= x.step < c.step for x in program.calls[rank][:fault.index]):
        return None  # a step of the link on record: its own record shows its ops (the verdict may bet on it)
    return ("a skip of %s %s %d at the link's first step, after which rank %d waits in its %s with rank %d, which "
            "waits in another op with it: a program with that op twice there, rank %d skipping the second's other "
            "half, leaves the same documents%s" % (c.op, "to" if c.op == "send" else "from", peer, rank, nxt.op,
                                                    peer, peer, LINK_EXTRA))


def _later_on_a_link(program, fault, faulty, started, blocked):
    """A skip of a send or recv at the first step its link between the rank and its peer runs, after which the rank
    waits in its next call, a collective on a group W the peer is in, while the peer waits in its half of the
    skipped op: the program with that op (both halves) after the W call, the peer skipping the W call, leaves the
    same documents (``_later_at_first_step``'s twin on a link: a pipeline's backward recv after a world call).
    The fuzzer's seed 7000994: rank 0 skipped its recv from 2 at step 0 and waits in the world's all_reduce #2,
    rank 2 in its send to 0.  Flagged only where that twin, built (``twins.link_later``), leaves the case's
    documents."""
    rank, c = fault.rank, fault.call
    mine = faulty[rank]
    at = blocked.get(rank)
    if fault.index >= len(mine) or at is None or ":p2p:" in str(at[0]):
        return None
    nxt, peer = mine[fault.index], c.peer
    if nxt.group != at[0] or nxt.op in P2P_OPS or peer not in program.groups[at[0]].ranks:
        return None  # its next call is the collective it waits in, on a group the peer is in
    stream = p2p_stream(c, rank)
    if blocked.get(peer) != (stream, 1 + sum(1 for x in program.calls[rank][:fault.index]
                                             if p2p_stream(x, rank) == stream)):
        return None  # the peer waits in its half of the skipped op
    if started.get(peer, {}).get(at[0], 0) != at[1] - 1:
        return None
    if any(x.op in P2P_OPS and x.peer == peer and 0 <= x.step < c.step for x in program.calls[rank][:fault.index]):
        return None  # a step of the link on record shows where its ops go among W's calls
    return ("a skip of %s %s %d at the link's first step, after which rank %d waits in %s #%d on group %s, and rank "
            "%d in its half of the skipped op: a program with that op after the group's call, rank %d skipping the "
            "group's call, leaves the same documents%s" % (c.op, "to" if c.op == "send" else "from", peer, rank,
                                                            nxt.op, at[1], at[0], peer, peer, LINK_LATER))


LINK_LATER = " (the link's op after the group's call: flagged where that twin, built, leaves the same documents)"


def _nth_on_link(calls, rank, call):
    """The seq of ``call`` (the last of ``calls``, ``rank``'s) on its p2p stream."""
    stream = p2p_stream(call, rank)
    return sum(1 for x in calls if p2p_stream(x, rank) == stream)


def _unseen_at_place(program, fault, faulty):
    """The call (in words) that one of the two ranks issued at the place of a desync or skip on a group of two,
    where the group's calls shown before it (the last SHOWN) never held it, or None (``undecidable``)."""
    c, calls = fault.call, program.calls[fault.rank]
    if fault.kind == "skip":
        after = [x for x in calls[fault.index + 1:] if x.group == c.group]
        if c.op in OBJECT_OPS:
            after = after[1:]
        mine = after[0] if after else None
    else:
        mine = faulty[fault.rank][fault.index]  # the call it issued instead
    for x in (c, mine):
        if x is not None and _signature(x)[1:] not in {
                _signature(y)[1:] for y in _on_its_stream(calls[:fault.index], x)[-SHOWN:]}:
            return _words(x, program)
    return None


def _on_its_stream(calls, x):
    """The calls of a rank's ``calls`` on the stream of its call ``x``, whose last SHOWN its document shows: its
    group's collectives, or its p2p calls with x's peer, the same way (a send's stream is not its recv's).  The
    ring seed 202013165: a world of two whose record of broadcasts showed the one every seven steps, flagged by
    the group's last 32 calls of every kind, a ring's sends and recvs among them, as a call never shown."""
    if x.op not in P2P_OPS:
        return [y for y in calls if y.group == x.group and y.op not in P2P_OPS]
    sends = x.op in ("send", "isend")
    return [y for y in calls if y.group == x.group and y.op in P2P_OPS and y.peer == x.peer
            and (y.op in ("send", "isend")) == sends]


def _signature(call):
    """A call as its document shows it: (group, op, size, root)."""
    return call.group, shown_op(call.op), call.size, call.root


def shown_op(op):
    """The op a document shows for a call of this op: an object collective's two calls show its inner op's (the
    sizes' all_gather, then the bytes': simulate.INNER), so a plain all_gather of the sizes' one int64 is one
    the record showed; an all_reduce issued with async_op=True shows as all_reduce."""
    if op in ASYNC_OPS:
        return "all_reduce"
    base = op.split(".")[0]
    return base.split("_object")[0] if base in OBJECT_OPS else base


def _exchange_twin(program, fault):
    """Why a skipped p2p call has a twin with the other rank at fault (``undecidable``), or None."""
    c = fault.call
    slot = program.template[c.slot] if fault.kind == "skip" and 0 <= c.slot < len(program.template) else None
    if slot is None or slot.kind != "p2p" or slot.pattern != "exchange" or c.step != 0:
        return None
    pair = next((p for p in slot.pairs if set(p) == {fault.rank, c.peer}), None)
    if pair is None or c.op != ("send" if fault.rank == pair[0] else "recv"):
        return None  # not the rank's first op of the exchange
    for i, other in enumerate(program.template):
        if i != c.slot and other.kind == "p2p" and _links(other, pair):
            return None
    return ("a skip of rank %d's first op of its exchange with rank %d at the exchange's first step: either "
            "may have skipped it" % (fault.rank, c.peer))


def _links(slot, pair):
    """Whether a p2p slot moves tensors between the two ranks of ``pair``."""
    want = set(pair)
    if slot.pattern == "exchange":
        return any(set(p) == want for p in slot.pairs)
    if slot.pattern == "ring":
        ring = slot.pairs
        return any({ring[i], ring[i - 1]} == want for i in range(len(ring)))
    chains = slot.pairs if slot.pattern == "chains" else (slot.pairs,)
    return any({ch[i], ch[i + 1]} == want for ch in chains for i in range(len(ch) - 1))


def mirrors(program, gid, place):
    """The other groups of ``gid``'s family whose calls on their group at ``place`` (a seq on ``gid``) and at the
    MIN_SHARED seqs before it are ``gid``'s, call for call (op, size, root by its index in the group): they run its
    program there, and their records show what it issues at the place, as the verdict reads them (analogs.like:
    groups that agree on at least MIN_SHARED seqs both show).  Every group of a family runs the same calls but in
    shape "stages", whose slots some groups of a family run and others not: a group that runs other calls at or
    just before the place shows nothing of what this one's program issues there.  (Over fewer seqs than a record
    shows: a group that parts from this one further back still counts here, so a case the verdict leaves
    undecided for that is counted as its gap, not flagged.)"""
    fam = program.groups[gid].family
    siblings = [g for g in program.families.get(fam, ()) if g != gid]
    if not siblings or all(s.only is None for s in program.template):
        return siblings
    lo = max(0, place - 1 - MIN_SHARED)
    mine = calls_on(program, gid)[lo:place]
    return [g for g in siblings if calls_on(program, g)[lo:place] == mine]


def in_step(program, gid, place, siblings):
    """The groups of ``siblings`` (``mirrors(program, gid, place)``) whose calls before the place are also made at the
    same steps as ``gid``'s: the verdict reads groups of one family as one program where their records agree on the
    calls and on their places among the other groups' calls (analogs.like); a group whose calls come at other steps
    (shape "stages": one stage runs a call more each step) says nothing of a call ``gid`` runs alone."""
    lo = max(0, place - 1 - MIN_SHARED)
    mine = [x.step for x in _colls_on(program, gid)][lo:place]
    return [g for g in siblings if [x.step for x in _colls_on(program, g)][lo:place] == mine]


def _colls_on(program, gid):
    """The healthy program's collective calls on group ``gid``, as its first rank issues them."""
    return [x for x in program.calls[program.groups[gid].ranks[0]] if x.group == gid and x.op not in P2P_OPS]


def calls_on(program, gid):
    """The healthy program's calls on group ``gid``, as (op, size, the root's index in the group)."""
    ranks = program.groups[gid].ranks
    return [(x.op, x.size, ranks.index(x.root) if x.root is not None else None) for x in _colls_on(program, gid)]

def _first_step(program, c):
    """The first step at which the template slot of call ``c`` runs (its ``every``), or -1."""
    if 0 <= c.slot < len(program.template):
        e = program.template[c.slot].every
        return e - 1
    return -1


def making(case, rank):
    """[(gid, ranks), ...]: the groups ``rank`` makes with ``new_group``, in the order it makes them (the world,
    "0", is made by init_process_group and not listed)."""
    if case.making and rank in case.making:
        return list(case.making[rank])
    return _in_order(case.program)


def _in_order(program):
    """The program's groups as every rank makes them: [(gid, ranks), ...] in the order of their names."""
    return [(gid, tuple(program.groups[gid].ranks)) for gid in sorted((g for g in program.groups if g != "0"), key=int)]


def _inject_making(rng, program, kind):
    """A fault of MAKING_KINDS on a random rank, in a group that rank is in (on torch 2.x a rank makes nothing of
    a group it is not in: two such groups the other way round, or one of them with another rank added, change
    nothing): (Fault, {rank: its makings}) or None where the program's groups give it no place (no subgroup; for
    "make_order", no two neighbours in the making of other members).  The Fault's index is the place (0-based)
    of the rank's first making that differs from the others'; its step -1 and its call None: no call of the loop
    is changed."""
    made = _in_order(program)
    if kind == "make_order":
        places = [(r, j) for j in range(len(made) - 1) if set(made[j][1]) != set(made[j + 1][1])
                  for r in sorted(set(made[j][1]) | set(made[j + 1][1]))]
        if not places:
            return None
        r, j = rng.choice(places)
        mine = made[:j] + [made[j + 1], made[j]] + made[j + 2:]
        detail = "new_group of ranks %s, then of ranks %s" % (list(made[j + 1][1]), list(made[j][1]))
    elif kind == "make_skip":
        places = [(r, j) for j in range(len(made)) for r in range(program.world)
                  if r not in made[j][1] and any(r in ranks for _, ranks in made[j + 1:])]
        if not places:
            return None
        r, j = rng.choice(places)
        mine = made[:j] + made[j + 1:]
        detail = "no new_group of ranks %s (a group it is not in), then new_group of ranks %s" % (
            list(made[j][1]), list(mine[j][1]))
    elif kind == "make_own":
        own = {q: [m for m in made if q in m[1]] for q in range(program.world)}
        # the ranks whose guard changed the name of a group they are in (a group left out before it)
        shifted = [(next(i for i, m in enumerate(own[q]) if m != made[i]), q) for q in range(program.world)
                   if own[q] != made[:len(own[q])]]
        if not shifted:
            return None
        j, r = min(shifted)
        return Fault(kind, r, j, None, -1, "every rank makes only the groups it is in: rank %d new_group of ranks "
                     "%s where the others' new_group #%d is of ranks %s" % (r, list(own[r][j][1]), j + 1,
                                                                         list(made[j][1]))), own
    else:
        if not made:
            return None
        j = rng.randrange(len(made))
        gid, ranks = made[j]
        # a member passes one rank more or fewer (itself left out, maybe), or a rank not in it adds itself
        r = rng.randrange(program.world)
        q = rng.randrange(program.world) if r in ranks else r
        other = tuple(sorted(set(ranks) ^ {q}))
        if not other:  # a group of one rank, itself left out: another rank added instead
            other = tuple(sorted(set(ranks) | {(q + 1) % program.world}))
        mine = made[:j] + [(gid, other)] + made[j + 1:]
        detail = "new_group of ranks %s where the others pass ranks %s" % (list(other), list(ranks))
    return Fault(kind, r, j, None, -1, detail), {r: mine}


def make_case(seed, shape=None, kind=None):
    """The case of one seed: a program and one fault in it (or None where the program has no call)."""
    rng = random.Random(seed)
    program = make_program(rng, shape=shape)
    if kind in MAKING_KINDS:
        got = _inject_making(rng, program, kind)
        if got is None:
            return Case(seed, program, None, program.calls, {}, set(), False, None)
        fault, mine = got
        if kind == "make_own":
            why = "every rank made only the groups it is in: no rank's making is the odd one"
            return Case(seed, program, fault, program.calls, {}, set(), True, why, mine)
        why = ("the job has two ranks, each made its groups its own way: either may be the odd one"
               if program.world == 2 else None)
        return Case(seed, program, fault, program.calls, {}, {fault.rank}, why is not None, why, mine)
    got = inject(rng, program, kind=kind)
    if got is None:
        return Case(seed, program, None, program.calls, {}, set(), False, None)
    fault, calls, stop = got
    why = undecidable(program, fault, calls)
    return Case(seed, program, fault, calls, stop, {fault.rank}, why is not None, why)


def make_case2(seed, shape=None, kind=None):
    """Two faults at once (issue 42: "and, separately, two at once"): the first as make_case's, a second on
    another rank at a random call of its list.  ``expected``: both ranks.  A verdict may name one of them (the
    hang the first fault made can hide the second: "partial") or both; a rank outside the two is wrong, except
    that two faults can leave the documents one fault on a third rank would leave (two ranks skip the same
    call: the third, alone in it, looks like the one that issued an extra call), which run.py counts apart.
    ``kind`` of MAKING_KINDS: the first fault is that one, in the making (real ranks only), the second any
    fault of the loop on a rank other than the making's (for ``make_own``, whose making names nobody, that
    rank: expected is the second's rank alone)."""
    if kind in MAKING_KINDS:
        return _making_and_loop(seed, shape, kind)
    rng = random.Random("two-%d" % seed)
    program = make_program(rng, shape=shape)
    got = inject(rng, program)
    if got is None or program.world < 3:
        return Case(seed, program, None, program.calls, {}, set(), False, None)
    fault, calls, stop = got
    for _ in range(50):
        k = rng.choices(FAULT_KINDS, FAULT_WEIGHTS)[0]
        r = rng.randrange(program.world)
        if r == fault.rank or not calls[r]:
            continue
        i = _pick_call(rng, calls[r], k, rng.random() < 0.35)
        if i is None:
            continue
        second, calls, stop = _apply(rng, program, k, r, i, calls, stop)
        o1, o2 = fault.call, second.call
        alike = (fault.kind == second.kind and (o1.group, o1.step, o1.slot) == (o2.group, o2.step, o2.slot)
                 and (fault.kind not in ("mismatch_op", "mismatch_size", "mismatch_root")
                      or calls[fault.rank][fault.index][1:4] == calls[r][i][1:4]))
        two = fault._replace(detail=(fault.detail + "; " if fault.detail else "") + "and %s on rank %d at its call #%d%s"
                             % (second.kind, second.rank, second.index,
                                " (%s)" % second.detail if second.detail else ""))
        why = ("both ranks did the same to the same call: the documents are those of one fault on the call's other "
               "ranks" if alike else None)
        return Case(seed, program, two, calls, stop, {fault.rank, second.rank}, alike, why)
    return Case(seed, program, None, program.calls, {}, set(), False, None)


def _making_and_loop(seed, shape, kind):
    """make_case2's two faults with the first in the making (MAKING_KINDS)."""
    rng = random.Random("two-making-%d" % seed)
    program = make_program(rng, shape=shape)
    got = _inject_making(rng, program, kind)
    if got is None or program.world < 3:
        return Case(seed, program, None, program.calls, {}, set(), False, None)
    fault, mine = got
    for _ in range(50):
        k = rng.choices(FAULT_KINDS, FAULT_WEIGHTS)[0]
        r = rng.randrange(program.world)
        if r == fault.rank or not program.calls[r]:
            continue
        i = _pick_call(rng, program.calls[r], k, rng.random() < 0.35)
        if i is None:
            continue
        second, calls, stop = _apply(rng, program, k, r, i)
        two = fault._replace(detail="%s; and %s on rank %d at its call #%d%s" % (
            fault.detail, second.kind, r, i, " (%s)" % second.detail if second.detail else ""))
        if kind == "make_own":  # no rank of the making is at fault: the second's rank alone
            return Case(seed, program, two, calls, stop, {r}, False, None, mine)
        return Case(seed, program, two, calls, stop, {fault.rank, r}, False, None, mine)
    return Case(seed, program, None, program.calls, {}, set(), False, None)


def describe(case):
    """The case in words (``run.py --replay``)."""
    p = case.program
    lines = ["seed %d: world %d, shape %s, %d steps%s%s" % (
        case.seed, p.world, p.shape, p.steps, ", prologue broadcast" if p.prologue else "",
        ", epilogue barrier" if p.epilogue else "")]
    for gid in sorted(p.groups, key=int):
        g = p.groups[gid]
        if gid != "0":
            lines.append("  group %s (%s): ranks %s" % (gid, g.family, list(g.ranks)))
    for i, s in enumerate(p.template):
        if s.kind == "coll":
            lines.append("  slot %d: %s on %s%s%s%s" % (i, s.op, s.family, " (%s)" % s.size if s.size else "",
                                                      " root index %d" % s.root_index if s.root_index is not None
                                                      else "", " every %d steps" % s.every if s.every > 1 else "")
                         + (" on group%s %s only" % ("s" if len(s.only) > 1 else "", ", ".join(s.only)) if s.only else ""))
        else:
            lines.append("  slot %d: p2p %s %s (%s) on group %s" % (i, s.pattern, list(s.pairs), s.size, s.group))
    f = case.fault
    if f is None:
        lines.append("  no fault (the program has no call)")
    else:
        if f.call is None:  # MAKING_KINDS
            lines.append("  fault: %s on rank %d at its new_group #%d: %s" % (f.kind, f.rank, f.index + 1, f.detail))
        else:
            lines.append("  fault: %s on rank %d at its call #%d (step %d, slot %d): %s%s" % (
                f.kind, f.rank, f.index, f.step, f.call.slot, _words(f.call, p), "; " + f.detail if f.detail else ""))
        lines.append("  expected culprits: %s%s" % (sorted(case.expected),
                                                    "; undecidable: %s" % case.why_undecidable
                                                    if case.undecidable else ""))
    return "\n".join(lines)
