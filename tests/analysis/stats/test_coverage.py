"""Calibration: 95% intervals hold their coverage with 3 seeds.

200 replicate studies of one truth (FACTS' setup: 5 sizes, 3 seeds, noise shared per size and
seed sd 0.006, per run sd 0.004; a constant compute multiplier k0 = 1.3, gamma = 0), 200 draws
each. The seed-resampling bootstrap this replaced covered k0 in 25/30 and gamma in 23/30, and
7/30 verdicts claimed a trend. Thresholds from the binomial, not one lucky seed set: a method
with 95% coverage covers fewer than 182/200 with probability 1% (``binom.ppf(0.01, 200,
0.95)``); one whose false-trend rate is 5% claims more than 18/200 with probability 1%.
Measured (seeds 1000-1199): k0 190/200, gamma 193/200, a trend claimed in 6/200.
"""

from __future__ import annotations

import time

import pytest
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import compute_law_study
from tests.analysis.pool import map_studies

K0, GAMMA = 1.3, 0.0
NUM_STUDIES = 200
NUM_DRAWS = 200
MIN_COVERED = int(stats.binom.ppf(0.01, NUM_STUDIES, 0.95))  # 182
MAX_TRENDS = int(stats.binom.ppf(0.99, NUM_STUDIES, 0.05))  # 18


def one_study(i: int) -> dict:
    """Study `i`'s verdict for the one variant."""
    table = compute_law_study(K0, GAMMA, rng_seed=1000 + i, num_seeds=3)
    (v,) = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=i)).verdict[
        "variants"
    ]
    return v


@pytest.mark.slow
def test_intervals_cover_the_truth_with_three_seeds():
    covered_k0 = covered_gamma = trends = 0
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()
    for v in map_studies(one_study, range(NUM_STUDIES)):
        covered_k0 += v["k0_ci95"][0] <= K0 <= v["k0_ci95"][1]
        covered_gamma += v["gamma_ci95"][0] <= GAMMA <= v["gamma_ci95"][1]
        trends += v["verdict"] in ("grows", "fades")
        outcomes[v["verdict"]] = outcomes.get(v["verdict"], 0) + 1
    print(
        f"\n{NUM_STUDIES} studies, {time.perf_counter() - t0:.0f} s: k0 covered "
        f"{covered_k0}/{NUM_STUDIES}, gamma covered {covered_gamma}/{NUM_STUDIES}, "
        f"trend claimed {trends}/{NUM_STUDIES}; outcomes {outcomes}"
    )
    assert covered_k0 >= MIN_COVERED
    assert covered_gamma >= MIN_COVERED
    assert trends <= MAX_TRENDS
    assert outcomes.get("persists", 0) >= 0.9 * NUM_STUDIES  # the truth, said


def test_noise_components_are_recovered_and_inflated_by_t_over_z():
    import numpy as np
    from scipy import stats

    from analysis.stats.variance import noise

    rng = np.random.default_rng(0)
    sizes, cells, seeds = 5, 3, 40
    shared = rng.normal(0, 0.006, (sizes, 1, seeds))
    y = 3.0 + shared + rng.normal(0, 0.004, (sizes, cells, seeds))  # [sizes, cells, seeds]
    model = noise.estimate(
        y.reshape(sizes * cells, seeds),
        np.repeat(np.arange(sizes), cells),
        np.log(np.geomspace(1e6, 1e8, sizes)),
        [f"s{i}" for i in range(sizes)],
    )
    assert model.sd_run == pytest.approx(np.full(sizes, 0.004), rel=0.15)
    assert model.sd_seed == pytest.approx(np.full(sizes, 0.006), rel=0.25)
    assert model.df_run == sizes * (cells - 1) * (seeds - 1) - 1  # one df for the N-trend
    expected = stats.t.ppf(0.975, model.df_run) / stats.norm.ppf(0.975)
    assert model.inflate_run == pytest.approx(expected)
    expected = stats.t.ppf(0.975, model.df_seed) / stats.norm.ppf(0.975)
    assert model.inflate_seed == pytest.approx(expected)  # the shared part's own df
