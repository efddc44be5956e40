"""sources/groups.py's SameGroup: whether a rank's new_group at each place is the group the other ranks made
there, asked of a real store (torch's HashStore) shared by stand-ins of several ranks' default groups (a rank
and a world size: the real ranks' runs are tests/integration/test_verdict.py's made-apart tests)."""
import pytest

dist = pytest.importorskip("torch.distributed")
if not hasattr(dist, "HashStore") or not hasattr(dist.HashStore, "compare_set"):
    pytest.skip("torch's HashStore with compare_set (2.x)", allow_module_level=True)

from c10d_observer.sources.groups import SameGroup  # noqa: E402
from c10d_observer.streams import GUARD_ADVICE  # noqa: E402


class World(object):
    """What SameGroup reads of the default group: its rank and size."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


class AddOnly(object):
    """A store of torch 1.x's calls (add, no compare_set) over a real one."""

    def __init__(self, store):
        self.store = store

    def add(self, key, n):
        return self.store.add(key, n)


def _ranks(n, store):
    said = {r: [] for r in range(n)}
    ranks = [SameGroup(say=said[r].append, where=lambda w=World(r, n): (w, store)) for r in range(n)]
    return ranks, said


def test_ranks_that_make_one_group_at_each_place_say_nothing():
    ranks, said = _ranks(3, dist.HashStore())
    for members in ([0, 1], [1, 2], [0, 1, 2]):
        for r in ranks:
            r.made(members)
    assert said == {0: [], 1: [], 2: []}


def test_a_rank_whose_group_differs_says_what_the_first_rank_made_there_once():
    ranks, said = _ranks(4, dist.HashStore())
    for r in ranks:  # new_group #1 alike
        r.made([0, 1, 2, 3])
    for q, members in ((0, [0, 1]), (1, [0, 1]), (2, [2, 3]), (3, [2, 3])):  # #2: each its own pair
        ranks[q].made(members)
    for r in ranks[2:]:  # #3: again apart; said once a rank
        r.made([0, 2])
    assert said[0] == said[1] == []
    assert said[2] == ["rank 2: new_group #2 is not the same group on every rank: this rank made ranks 2, 3 where "
                       "rank 0 made ranks 0, 1; groups made apart may share a name, and their collectives hang or "
                       "complete across the wrong ranks (wrong results, no error): " + GUARD_ADVICE], said
    assert len(said[3]) == 1 and said[3][0].startswith("rank 3: new_group #2 ") and "rank 0 made ranks 0, 1;" in said[3][0]


def test_without_compare_set_a_rank_counts_its_group_once_the_barrier_passed():
    store = AddOnly(dist.HashStore())
    ranks, said = _ranks(4, store)
    for q in range(4):  # every rank's factory call, then torch's barrier after it (1.x)
        ranks[q].made([0, 2] if q == 3 else [0, 1])
    for r in ranks:
        r.passed()
    assert said[0][0].startswith("rank 0: new_group #1 is not the same group on every rank: this rank made ranks "
                                 "0, 1; 3 of the world's 4 ranks made that group there; "), said
    assert "this rank made ranks 0, 2; 1 of the world's 4 ranks made that group there;" in said[3][0], said
    ranks2, said2 = _ranks(2, AddOnly(dist.HashStore()))
    for r in ranks2:
        r.made([0, 1])
    for r in ranks2:
        r.passed()
    assert said2 == {0: [], 1: []}


def test_a_store_that_fails_neither_raises_nor_says():
    class Broken(object):
        def compare_set(self, *a):
            raise RuntimeError("store gone")

    said = []
    same = SameGroup(say=said.append, where=lambda: (World(0, 2), Broken()))
    same.made([0, 1])
    same.passed()
    nowhere = SameGroup(say=said.append, where=lambda: (None, None))  # before init_process_group
    nowhere.made([0, 1])
    assert said == []


def test_a_new_world_counts_its_groups_from_the_first_again():
    """After destroy_process_group and init_process_group (a new default group on each rank) the count starts
    again, under keys of its own, and a rank that said its line in the first world says one in the second."""
    store = dist.HashStore()
    said = {0: [], 1: []}
    worlds = [[World(0, 2), World(1, 2)]]
    ranks = [SameGroup(say=said[r].append, where=lambda r=r: (worlds[-1][r], store)) for r in range(2)]
    ranks[0].made([0, 1])
    ranks[1].made([1])  # world 1, #1: apart
    worlds.append([World(0, 2), World(1, 2)])
    ranks[0].made([0])
    ranks[1].made([0])  # world 2, #1: alike (under world 1's key of #1 it would differ)
    ranks[0].made([0, 1])
    ranks[1].made([1])  # world 2, #2: apart again
    assert [l.split(" is not")[0] for l in said[1]] == ["rank 1: new_group #1", "rank 1: new_group #2"], said
    assert said[0] == [], said
