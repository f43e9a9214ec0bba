"""What a sequential seed design (``analysis.stats.looks.sequential.Design``) spends, by simulation
of its binding test: how many seeds the top size ends with on average at a given true gain.

The test simulated is the verdict's binding one (``analysis.stats.planning.power``;
tests/analysis/stats/planning/test_power.py checks that it predicts the verdict's own detection
rate): Student's t on the top size's paired seeds, one variant against the baseline. At look k the
top size is tested at 80% (its weighted-Holm share, ``TOP_WEIGHT``) of the look's nominal level from
``spending_boundaries``; a look stops on a claim (the interval excludes 0), on equivalence (the
interval lies within +-margin) or at ``max``. While the top gain's interval holds 0 only the top
size gets seeds (``analysis.stats.looks.sequential.allocate``), so the other sizes keep ``start``.

Used by ``scaling plan`` (the expected cost of a study's seeds) and by
benchmarks/bench_sequential.py (the sequential design against the fixed one). The full procedure
(``decide_look`` on synthetic studies) is exercised by
tests/analysis/stats/looks/test_sequential.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.stats.gains.levels import TOP_WEIGHT
from analysis.stats.gains.resolution import t_half
from analysis.stats.looks.sequential import Design
from analysis.tables.judgement import DEFAULT_RESAMPLES

__all__ = ["SeedOutcome", "simulate_sequential", "expected_seeds", "NUM_STUDIES"]

NUM_STUDIES = 20_000  # the plan's simulation: the mean top seeds to about +-0.02 seeds


def simulate_sequential(
    design: Design,
    gain: float,
    sd: float,
    num: int,
    rng,
    draws: int | None = None,
    tune_var: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(claimed +, claimed -, seeds at the top when it stopped), one entry per study.

    ``gain`` and ``sd``: the true paired gain and the paired-difference sd, % of the loss.
    ``tune_var``: the LR grid's resolution (%^2), added to the t test's squared standard error
    as the verdict adds it (``analysis.stats.gains.robust``).
    ``draws``: the bootstrap draws of the analysis; when given, equivalence stops a look only
    where they resolve the top size's interval (``draws * level / 2 >= 1``, as ``decide_look``
    does); None: equivalence stops any look (the benchmark's published figures)."""
    diffs = rng.normal(gain, sd, size=(num, design.max))  # [studies, seeds] paired gains, %
    total, squares = np.cumsum(diffs, axis=1), np.cumsum(diffs**2, axis=1)
    running = np.ones(num, dtype=bool)
    plus, minus = np.zeros(num, bool), np.zeros(num, bool)
    n_used = np.full(num, design.max)
    for n, bound in zip(design.planned_seeds(), design.boundaries(), strict=True):
        level = TOP_WEIGHT * bound.level
        mean = total[:, n - 1] / n
        var = (squares[:, n - 1] - n * mean**2) / (n - 1)
        half = t_half(1 - level / 2, np.sqrt(var / n), n - 1, tune_var)
        up, down = mean - half > 0, mean + half < 0
        same = np.abs(mean) + half <= design.margin_pct
        if draws is not None and draws * level / 2 < 1:
            same = np.zeros(num, bool)
        stop = running & (up | down | same | (n == design.max))
        plus |= stop & up
        minus |= stop & down
        n_used[stop] = n
        running &= ~stop
    return plus, minus, n_used


@dataclass(frozen=True)
class SeedOutcome:
    """The simulated design at one true gain."""

    gain_pct: float
    sd_pct: float
    num_studies: int
    mean_top_seeds: float  # E[paired seeds at the top size when the study stops]
    claim_rate: float  # share of studies that claimed a gain (interval above 0)
    stop_share: tuple[float, ...]  # share of studies that stopped at each look


def expected_seeds(
    design: Design,
    gain_pct: float,
    sd_pct: float,
    num: int = NUM_STUDIES,
    seed: int = 0,
    draws: int | None = DEFAULT_RESAMPLES,
    tune_var: float = 0.0,
) -> SeedOutcome:
    """The design's expected seeds at the top size at a true gain, from ``num`` simulated
    studies (``simulate_sequential``; deterministic: ``seed`` seeds the generator). ``draws``:
    the analysis's bootstrap draws (``DEFAULT_RESAMPLES`` by default, as a look's).
    ``tune_var``: the LR grid's term in the test (%^2), e.g. read from a finished study
    (``analysis.stats.analyze.grid_terms``)."""
    if not sd_pct > 0:
        raise ValueError(f"paired sd {sd_pct}: must be positive")
    rng = np.random.default_rng(seed)
    plus, _, n_used = simulate_sequential(design, gain_pct, sd_pct, num, rng, draws, tune_var)
    share = tuple(float((n_used == n).mean()) for n in design.planned_seeds())
    return SeedOutcome(gain_pct, sd_pct, num, float(n_used.mean()), float(plus.mean()), share)
