"""The sequential replays' arithmetic (``tests.analysis.bounds``): `RateTest`'s exact operating
characteristics against scipy's binomial, summed by hand over every path, and the error rates
the replays' docstrings state."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from tests.analysis.bounds import RateTest, max_count, replay_until_decided


def _by_hand(test: RateTest, p: float) -> tuple[float, float]:
    """(chance to fail, expected studies) over every sequence of batch counts, each weighted by
    scipy's binomial pmf: no recursion shared with `RateTest.operating`."""
    looks = test.looks()
    sizes = np.diff([0, *looks])
    pmfs = [stats.binom.pmf(np.arange(s + 1), s, p) for s in sizes]
    failed = expected = 0.0
    for counts in itertools.product(*(range(s + 1) for s in sizes)):
        weight = float(np.prod([pmf[c] for pmf, c in zip(pmfs, counts, strict=True)]))
        total = 0
        for look, c in zip(looks, counts, strict=True):
            total += c
            word = test.decide(look, total)
            if word is not None:
                failed += weight * (word == "fail")
                expected += weight * look
                break
    return failed, expected


@pytest.mark.parametrize("p", [0.0, 0.05, 0.125, 0.3])
def test_the_operating_characteristics_are_exact(p):
    test = RateTest(0.05, 2.5, batch=7, max_n=20)  # looks at 7, 14, 20
    assert test.operating(p) == pytest.approx(_by_hand(test, p), abs=1e-12)


def test_one_batch_is_the_fixed_binomial_bound():
    test = RateTest(0.05, 2.5, batch=200, max_n=200)
    assert test.looks() == [200]
    failed, expected = test.operating(0.05)
    assert failed == pytest.approx(stats.binom.sf(max_count(200, 0.05), 200, 0.05))
    assert expected == pytest.approx(200)


def test_every_look_is_decided_at_the_last_and_the_bounds_widen_with_n():
    test = RateTest(0.05, 2.5, batch=20, max_n=180)
    bounds = [test.bounds(n) for n in test.looks()]
    assert bounds[-1] == (max_count(180, 0.05), max_count(180, 0.05) + 1)
    for (p1, f1), (p2, f2) in itertools.pairwise(bounds[:-1]):
        assert p2 >= p1 and f2 >= f1
    for n in test.looks():
        passes, fails = test.bounds(n)
        assert test.decide(n, fails) == "fail" and test.decide(n, max(passes, 0)) in ("pass", None)
        assert passes < fails


@pytest.mark.parametrize(
    "rate, times, max_n, fails_at_rate, passes_at_bad",
    [
        (0.05, 2.5, 180, 0.0099, 0.099),  # test_sequential.py's null replay
        (0.05, 2.5, 200, 0.0072, 0.095),  # test_coverage.py, test_backtest.py
        (0.10, 2.5, 200, 0.0056, 0.045),  # test_coverage.py's persists
        (0.05, 2.0, 200, 0.0066, 0.37),  # test_backtest.py's flagged top step
        (0.20, 2.0, 200, 0.0038, 0.035),  # test_law_holds.py's missed changes
    ],
)
def test_the_error_rates_the_replays_state(rate, times, max_n, fails_at_rate, passes_at_bad):
    test = RateTest(rate, times, batch=20, max_n=max_n)
    failed, _ = test.operating(rate)
    assert failed == pytest.approx(fails_at_rate, abs=5e-5)
    failed, _ = test.operating(times * rate)
    assert 1 - failed == pytest.approx(passes_at_bad, abs=5e-3)


def test_a_procedure_well_below_its_rate_stops_after_a_third_of_the_studies():
    test = RateTest(0.05, 2.5, batch=20, max_n=180)
    _, expected = test.operating(0.02)
    assert expected < 180 / 3


def _odd(i: int) -> int:
    return i % 2


def _index(i: int) -> int:
    return i


def test_a_replay_stops_at_its_first_decided_batch_and_runs_studies_in_order(monkeypatch):
    monkeypatch.setattr("tests.analysis.pool.workers", lambda: 1)  # in this process: no spawn
    test = RateTest(0.05, 2.5, batch=20, max_n=180)
    got, decided = replay_until_decided(_index, {"none": (test, lambda r: False)})
    assert got == list(range(40)) and decided == {"none": "pass"}  # 0 of 20 is undecided
    got, decided = replay_until_decided(_odd, {"half": (test, bool)})
    assert len(got) == 20 and decided == {"half": "fail"}
    got, decided = replay_until_decided(
        _index, {"none": (test, lambda r: False)}, until=lambda r: len(r) >= 100
    )
    assert len(got) == 100 and decided == {"none": "pass"}
