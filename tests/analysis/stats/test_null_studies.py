"""Identical arms under the model's own noise and the three kinds it does not assume: the
chance of any claim stays at or below 5%, and the top gain's 95% interval covers 0.

200 studies per noise (5 sizes 1.2M-100M, 3 seeds, LRs 0.5x/1x/2x; ``analysis.synthetic.scenarios``'
``NOISES``: the misspecification is a parameter of one generator). Thresholds, from the
binomial: a method whose true false-claim rate is 5% exceeds 18/200 with probability 1%
(``binom.ppf(0.99, 200, 0.05)``), so "at most 18" is the test of "at most 5%" that a right method
passes 99 times in 100; coverage must reach 93% (186/200), which a method with 96% coverage
misses with probability about 2%. The measured figures are printed (docs/statistics.md).
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import NOISES, noisy_study
from tests.analysis.pool import map_studies

NUM_STUDIES = 200
NUM_DRAWS = 200
CLAIMS = ("persists", "grows", "fades", "helps", "hurts")
MAX_CLAIMS = int(stats.binom.ppf(0.99, NUM_STUDIES, 0.05))  # 18
MIN_COVERED = int(0.93 * NUM_STUDIES)  # 186


def null_study(args: tuple[str, int]) -> tuple[str, bool, str]:
    """Study `i` under `noise`: (its word, its top-size 95% interval covers 0, decided by)."""
    noise, i = args
    table = noisy_study(1.0, NOISES[noise], rng_seed=9000 + i)
    (v,) = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=i)).verdict[
        "variants"
    ]
    top = list(v["gain_pct_by_size"].values())[-1]["gain_pct"]
    return v["verdict"], top["ci95"][0] <= 0.0 <= top["ci95"][1], top["decided_by"]


@functools.cache
def null_run(noise: str) -> tuple[Counter, int, Counter]:
    """(outcomes, studies whose top-size 95% interval covers 0, which test decided it)."""
    outcomes, decided, covered = Counter(), Counter(), 0
    for word, covers, by in map_studies(null_study, [(noise, i) for i in range(NUM_STUDIES)]):
        outcomes[word] += 1
        covered += covers
        decided[by] += 1
    return outcomes, covered, decided


@pytest.mark.slow
@pytest.mark.parametrize("noise", list(NOISES))
def test_identical_arms_rarely_claim_and_the_top_interval_covers(noise):
    outcomes, covered, decided = null_run(noise)
    claims = sum(outcomes[c] for c in CLAIMS)
    print(
        f"\n{noise}: claims {claims}/{NUM_STUDIES}, top-gain 95% interval covered "
        f"{covered}/{NUM_STUDIES}; outcomes {dict(outcomes)}; decided by {dict(decided)}"
    )
    assert sum(outcomes.values()) == NUM_STUDIES
    assert claims <= MAX_CLAIMS, outcomes
    assert covered >= MIN_COVERED, covered
