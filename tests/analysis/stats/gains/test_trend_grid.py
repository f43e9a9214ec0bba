"""The k(C) trend carries the LR grid's term (``analysis.stats.gains.resolution.trend_draws``).

The truth: the variant is the baseline at a constant 1.2x compute (gamma = 0, `persists`), each
arm's 2x LR grid off its optimum by up to half a step (``off_grid_study``). With many seeds the
seed noise no longer hides where each grid sits, and gamma's interval, narrow on the seeds alone,
read the grid's offsets as a trend: at 50 seeds `grows` or `fades` in 70 of 100 studies before
the term, 3 of 100 with it (benchmarks/bench_trend_grid.py; docs/statistics.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.gains.compare import baseline_map, compare
from analysis.stats.gains.resolution import groups_pair_var, trend_draws
from analysis.synthetic.scenarios import NOISES, off_grid_study
from tests.analysis.bounds import RateTest, replay_until_decided, studies_to_catch

NOISE_NAMES = list(NOISES)
# a false trend at 6x the 5% the docs promise (the term removed: 70/100 at 50 seeds)
NUM_STUDIES = studies_to_catch(0.05, 6)  # 25, at most
# ... looked at every 5 studies (25 is too few for batches of 20), truncated at the fixed 25
TRENDS = RateTest(0.05, 6.0, batch=5, max_n=NUM_STUDIES)


def _word(i: int) -> str:
    """Study ``i``'s word: 50 seeds, the noise and the kind of offsets cycling with the index (the
    model's own noise and the three it does not assume; one offset per arm or per (arm, size))."""
    noise = NOISES[NOISE_NAMES[i % len(NOISE_NAMES)]]
    table = off_grid_study(1.2, rng_seed=9500 + i, num_seeds=50, lr_penalty=0.08, noise=noise,
                           per_size=bool(i // len(NOISE_NAMES) % 2))  # fmt: skip
    (v,) = analyse(table, table_judgement("linear", num_resamples=100, seed=i)).verdict["variants"]
    return v["verdict"]


@pytest.mark.slow
def test_a_constant_gain_on_grids_off_its_optimum_reads_no_trend():
    """`grows` or `fades` as a sequential rate test (``tests.analysis.bounds.RateTest``) of 5%
    (p0, what the docs promise) against 30% (p1, 6x), looked at every 5 studies at 50 seeds and
    truncated at the fixed design's ``studies_to_catch(0.05, 6)`` = 25 (at most
    ``max_count(25, 0.05)`` = 4 there). Exactly (``RateTest.operating``): a method reading a
    trend in 5% fails with probability 0.77% (13.5 studies expected), one at 30% passes with
    11% (the fixed 25 passed it with 9.0%). Slow: full analyses of 1,500 runs each at 100
    draws; with the term removed (``trend_draws`` returning zeros) it fails: 10 of 25 read a
    trend (with it: 1 of 25, and 23 `persists`). On the studies run, `persists` is the word of
    at least half."""
    words, decided = replay_until_decided(
        _word, {"trends": (TRENDS, lambda w: w in ("grows", "fades"))}
    )
    trends = sum(w in ("grows", "fades") for w in words)
    print(f"\n50 seeds: {trends}/{len(words)} grows or fades; {sorted(words)}; {decided}")
    assert decided == {"trends": "pass"}, words
    assert words.count("persists") >= len(words) // 2  # the term keeps the right word


def test_each_draw_carries_the_pairs_grid_variance_shared_or_per_size():
    """The draws' errors have the grid term's variance at every size (``groups_pair_var``, the
    paired test's), row 0 (the data) none; a shared draw moves every size by one normal."""
    table = off_grid_study(1.2, rng_seed=3, num_seeds=3, lr_penalty=0.08)
    result = analyse(table, table_judgement("linear", num_resamples=0, seed=0))
    groups = result.groups
    curve = compare(groups, baseline_map(groups, ["linear"]), "nonlinear").curve
    rows = 40_001
    shared = np.arange(rows) % 2 == 1
    error = trend_draws(groups, curve, rows, np.random.default_rng(0), shared)
    want = np.array([groups_pair_var(groups, b.base, b.var) for b in curve])
    assert (want > 0).all() and (error[0] == 0).all()
    assert error[1:].var(axis=0) == pytest.approx(want, rel=0.05)
    z = error[shared] / np.sqrt(want)
    assert np.allclose(z, z[:, :1])  # one normal for every size
    own = error[~shared][1:] / np.sqrt(want)
    assert abs(np.corrcoef(own[:, 0], own[:, -1])[0, 1]) < 0.05  # independent per size
