"""Who arrives last (arrivals.py): the join of every rank's starts and the straggler rule, from recorded
call streams (each rank's starts on its own wall clock, as its watchdog writes them)."""
import random

from c10d_observer import arrivals


def _docs(n, calls, late=None, slower=0.0, jitter=0.004, seed=0):
    """n ranks issue ``calls`` calls of one group; each rank's step takes 10 ms +- jitter; rank ``late``
    takes ``slower`` (a fraction) longer every step, so it arrives last, by that much."""
    rng = random.Random(seed)
    docs = [{"rank": r, "streams": {"0": []}} for r in range(n)]
    t = 1000.0
    for seq in range(1, calls + 1):
        arrive = {}
        for r in range(n):
            step = 0.010 * (1 + (slower if r == late else 0)) + rng.uniform(-jitter, jitter)
            arrive[r] = t + step
        for r in range(n):
            docs[r]["streams"]["0"].append([seq, arrive[r]])
        t = max(arrive.values())  # the collective completes when the last one arrives
    return docs


def test_the_last_arriver_of_each_call_and_by_how_much():
    docs = [{"rank": 0, "streams": {"0": [[1, 10.0], [2, 20.05]]}}, {"rank": 1, "streams": {"0": [[1, 10.2], [2, 20.0]]}},
            {"rank": 2, "streams": {"0": [[1, 10.1]]}}]  # rank 2's start of #2 is not known: #2 is not joined
    calls = arrivals.join(docs)["0"]
    out = arrivals.last_arrivals(calls, [0, 1, 2])
    assert [(seq, last) for seq, last, _, _ in out] == [(1, 1)]
    assert abs(out[0][2] - 0.2) < 1e-9


def test_a_rank_40_percent_slower_every_step_is_named_within_100_steps():
    for n in (2, 4, 8):
        s = arrivals.Stragglers()
        doc = s.update(_docs(n, 100, late=n - 1, slower=0.4), {"0": list(range(n))}, 5000.0)
        found = doc["groups"][0]["straggler"]
        assert found and found["rank"] == n - 1 and found["share"] >= 0.5, (n, doc)
        assert 0.002 <= found["median_lag_s"] <= 0.010
        assert arrivals.lines(doc)[0].startswith("rank %d arrived last at" % (n - 1))


def test_a_balanced_job_names_nobody():
    for n in (2, 3, 4, 8):
        for seed in range(5):
            s = arrivals.Stragglers()
            doc = s.update(_docs(n, 1000, seed=seed), {"0": list(range(n))}, 5000.0)
            assert doc["groups"][0]["straggler"] is None, (n, seed, doc["groups"][0]["last_share"])


def test_a_rank_always_last_by_microseconds_is_not_worth_naming():
    s = arrivals.Stragglers()
    doc = s.update(_docs(4, 200, late=3, slower=0.0001, jitter=0.0), {"0": [0, 1, 2, 3]}, 5000.0)
    assert doc["groups"][0]["straggler"] is None


def test_since_when_a_straggler_has_been_named_is_kept_across_periods():
    s = arrivals.Stragglers()
    docs = _docs(4, 400, late=2, slower=0.4)
    first = [{"rank": d["rank"], "streams": {"0": d["streams"]["0"][:200]}} for d in docs]
    rest = [{"rank": d["rank"], "streams": {"0": d["streams"]["0"][200:]}} for d in docs]
    s.update(first, {"0": [0, 1, 2, 3]}, 5000.0)
    doc = s.update(rest, {"0": [0, 1, 2, 3]}, 5000.0 + 720)
    assert doc["groups"][0]["straggler"]["since"] == 5000.0 and doc["groups"][0]["calls"] == 400
    assert "it has been the last to arrive for 12 min" in arrivals.lines(doc, now=5000.0 + 720)[0]
