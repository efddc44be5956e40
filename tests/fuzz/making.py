"""The fuzzer's faults in the making of the groups (programs.MAKING_KINDS), simulated (issue 42, item 3): which
ranks torch's ``new_group`` lets through and which it holds, and the documents the watchdogs would write, with
each rank's making stream (``new_group:world``, one call a ``new_group`` on torch 2.x, two on 1.x) as the patch
wrapper writes it (sources/groups.py), beside the loop's streams as the source model writes them
(simulate.documents).  The real verdict engine judges them.

The model of a making (torch names a group by its place k in each rank's sequence of ``new_group`` calls):
- torch 2.x (``line="2.x"``): a rank not in the group it passes returns at once; a member waits in gloo's
  rendezvous under the name k until every member of its group is at its own making k with the same members, and
  then they all pass; else it waits forever.  Where groups of other members take one name, real gloo races (its
  store's keys of that name are written by both: they pass wired across, pass right, or hang:
  benchmarks/made_apart.py): here each such group passes right or is held, by a draw of the case's seed
  (``_races``).  Every rank that passed every making runs the program (simulate.Sim) up to the call that waits
  for a rank still in a making.  A case where no rank is held in a making (the groups pass wired under
  names that differ, and what the loop then does is gloo's race) is not judged: "no hang in the making".
- torch 1.x (``line="1.x"``): the same factory, then torch's store-based barrier of the whole world under the
  count k: every rank waits there until every rank passed its factory k.  So a rank held in a factory holds the
  world at a barrier, and no rank runs the loop.
Not modelled: gloo wiring two groups of one name across (the documents then show a hang of the loop on groups
whose members differ by rank); gloo raising in a rendezvous (1.8.1's "Connection refused"); NCCL.  Pure Python,
no torch.
"""
import random

from c10d_observer import callword as _cw
from c10d_observer import documents as _documents
from c10d_observer.streams import MAKING

from . import programs, simulate

LINES = ("2.x", "1.x")
MAKING_T0 = simulate.T0 - 3.0  # the first making's start: before the loop's first step (simulate.STEP_S_BEFORE)
MAKING_GAP_S = 0.01  # between two makings of a rank
NEW_GROUP_FRAMES = [(simulate.TORCH_C10D, 4800, "new_group"), ("/job/train.py", 20, "<module>")]


def run_making(case, line="2.x"):
    """({rank: [(seq, members, done)]}: each rank's calls on the making stream, in order, the last not done where
    it is held there; the ranks held in a making, a set: empty where every rank passed every making)."""
    world = case.program.world
    lists = [programs.making(case, r) for r in range(world)]
    calls = {r: [] for r in range(world)}
    lucky, across = _races(case, lists)

    def meets(r, k, at):  # rank r's making k passes its factory, each rank m at its making at[m]: r not in it, or
        # its members all at k, alike (and, where groups of other members are made under that name, its group's
        # draw let it through), or gloo's race wired r to ranks of the other group and let it through alone
        members = frozenset(lists[r][k][1])
        if r not in members or r in across.get((k, members), ()):
            return True
        return lucky.get((k, members), True) and all(
            m < world and len(lists[m]) > k and at[m] == k and set(lists[m][k][1]) == members for m in members)

    if line == "2.x":
        at = [0] * world  # the making each rank is at (an index); len(lists[r]): past them all
        moved = True
        while moved:
            moved = False
            for r in range(world):
                k = at[r]
                if k < len(lists[r]) and meets(r, k, at):
                    members = frozenset(lists[r][k][1])
                    alone = r not in members or r in across.get((k, members), ())
                    for m in [r] if alone else members:
                        at[m] += 1
                    moved = True
        for r in range(world):
            for k in range(min(at[r] + 1, len(lists[r]))):
                calls[r].append((k + 1, tuple(lists[r][k][1]), k < at[r]))
        return calls, {r for r in range(world) if at[r] < len(lists[r])}
    k = 0
    while True:  # 1.x: the ranks go from making to making together, a barrier of the world after each
        making = [r for r in range(world) if len(lists[r]) > k]
        if not making:
            return calls, set()
        passed = {r for r in making if meets(r, k, [k] * world)}  # (every rank at its k-th: the barriers)
        barrier = len(making) == world and len(passed) == world
        for r in making:
            calls[r].append((2 * k + 1, tuple(lists[r][k][1]), r in passed))
            if r in passed:
                calls[r].append((2 * k + 2, tuple(lists[r][k][1]), barrier))
        if not barrier:  # held there; a rank past its makings runs the loop
            return calls, set(making)
        k += 1


def _races(case, lists):
    """({(k, members): passes}, {(k, members): the members that pass alone}): where the ranks' k-th makings are of
    groups of other members (each made by a member of it), gloo's rendezvous under the name k is a race (store keys
    of one name, written by both groups): each such group's members pass or are held by a draw of the case's seed
    (both, one, or neither: the verdict must be right whichever; a group whose members do not agree is held
    whatever its draw), and of a group held, a draw lets some members through alone, wired to ranks of the other
    (real ranks, 2.13: tests/data/made-own-real-82000019.json, rank 0 of [0, 1, 2] through, 1 and 2 held)."""
    made = {}
    for r, mine in enumerate(lists):
        for k, (_, members) in enumerate(mine):
            if r in members:
                made.setdefault(k, set()).add(frozenset(members))
    rng = random.Random("making-race-%d" % case.seed)
    lucky, across = {}, {}
    for k in sorted(made):
        if len(made[k]) > 1:
            for g in sorted(made[k], key=sorted):
                lucky[(k, g)] = rng.random() < 0.5
                if not lucky[(k, g)] and rng.random() < 0.5:
                    across[(k, g)] = {m for m in sorted(g) if rng.random() < 0.3}
    return lucky, across


def run_case(case, line="2.x", source="exact", mode=None, made=None):
    """(the loop's Sim, the documents as the verdict reads them) of a making case, or (None, None) where no rank
    is held in a making; ``made``: run_making's result for the case, where the caller has it."""
    made, held = made or run_making(case, line)
    if not held:
        return None, None
    world = case.program.world
    stop = {r: (0, "stall") for r in held}  # a rank held in a making issues no call of the loop
    sim = simulate.Sim(case.program, case.program.calls, stop).run()
    mode = mode or simulate.mode_of(case.seed)
    docs = simulate.documents(sim, mode, source=source, period=simulate.period_of(case.seed))
    out = {}
    for r, doc in docs.items():
        _add_making(doc, made[r], world, r in held)
        out[r] = _documents.RankDoc.from_json(doc)
    return sim, out


def _add_making(doc, calls, world, stuck):
    """The making stream's position in a rank's document (JSON), as the patch wrapper writes it: every call
    ``new_group`` with its members as its size, the last in flight where the rank is held there (overdue once
    past the timeout at the document's writing, its stacks in ``new_group``)."""
    hist = []
    for i, (seq, members, done) in enumerate(calls):
        size = _cw.decode_sig(_cw.encode_op("new_group") | _cw.encode_members(members, world))
        hist.append((seq, "new_group", size, MAKING_T0 + i * MAKING_GAP_S))
    started = hist[-1][0] if hist else 0
    completed = calls[-1][0] if calls and calls[-1][2] else started - 1 if hist else 0
    fly = None
    if started > completed:
        seq, op, size, t = hist[-1]
        fly = (seq, op, size, t, "")
        detected = t + simulate.TIMEOUT_S + simulate.POLL_S
        if doc["alive"] and detected <= doc["written_at"]:
            doc["overdue"].append(simulate._overdue(False, MAKING, MAKING, seq, op, size, range(world),
                                                    "collective", None, "gloo", t, detected))
        if doc["alive"] and stuck and "stacks_text" in doc:
            doc["stacks_text"] = simulate._stacks(NEW_GROUP_FRAMES, simulate.MAIN_THREAD)
    doc["groups"].append(simulate._position(False, MAKING, MAKING, "collective", list(range(world)), "gloo", None,
                                            None, None, started, completed, hist[-simulate.HISTORY:], fly))


def flag_at_hang(case, line="2.x", made=None):
    """The case flagged undecidable where the hang's makings are those of every rank making only the groups it is
    in: each rank's making calls, as shown, all of groups it is in (``make_members``: a rank that added itself to
    a group of every other rank, every rank held at the first making: the program with both groups, each rank
    making its own, leaves the same documents where gloo's race under the first name holds the others' group too;
    mismatch._guarded's OWN_ONLY, which names nobody); or where the faulty rank's first making that differs is
    older than the calls its document keeps (a job of many groups: its record shows nothing odd).  ``made``:
    run_making's calls of the case, where the caller has them."""
    if case.undecidable:
        return case
    if made is None:
        made, _ = run_making(case, line)
    if all(r in members for r, calls in made.items() for _, members, _ in calls):
        return case._replace(undecidable=True, why_undecidable="every making shown is of a group its rank is in: "
                             "the documents of every rank making only its own groups")
    f = case.fault
    mine = made[f.rank]
    first = f.index * (1 if line == "2.x" else 2) + 1  # the seq of its first making that differs
    if case.expected == {f.rank} and mine and mine[-1][0] - first >= simulate.HISTORY:
        # its record keeps its last HISTORY calls (rank_docs.HISTORY): it passed every making, and the one that
        # differs is no longer in its document (233000658: rank 10 of 64, new_group #3 and #4 the other way round,
        # #17-#48 shown, the same as the others')
        return case._replace(undecidable=True, why_undecidable="the faulty rank's making that differs, #%d, is "
                             "older than the %d calls its document keeps" % (first, simulate.HISTORY))
    return case


def judge(seed, kind, line="2.x", source="exact", shape=None):
    """(case, outcome, named, summary) of one making case: outcome as simulate.classify, "nohang" where no rank is
    held in a making, None where the program has no place for the fault."""
    from c10d_observer import verdict as _verdict
    case = programs.make_case(seed, kind=kind, shape=shape)
    if case.fault is None:
        return case, None, [], ""
    made, held = run_making(case, line)
    if not held:
        return case, "nohang", [], "no rank held in a making"
    sim, docs = run_case(case, line, source, made=(made, held))
    case = flag_at_hang(case, line, made)
    v = _verdict.analyze(docs)
    return case, simulate.classify(case, v.culprit_ranks), list(v.culprit_ranks), v.summary
