"""Synthetic downstream tasks with known gains: a run table with ``eval/<task>/bpb`` columns.

Per size the baseline's correct-answer bits per byte falls slowly with N; a variant's is the
baseline's times ``1 - gain_pct / 100`` at every size. Seed noise has a part both arms share at
a seed (same data order) and a part of each run, each drawn from Student's t with 3 degrees of
freedom, scaled to the given sd: heavy tails that the parametric bootstrap's normal model does
not assume.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.synthetic.studies import run_row
from analysis.tables.runs import normalise
from foundation import contract

SIZES = (2e6, 8e6, 3e7)
T_DF = 3


def _t_noise(rng: np.random.Generator, sd: float, size: int) -> np.ndarray:
    """Student's t(3) draws with standard deviation ``sd`` (its variance is df / (df - 2))."""
    return rng.standard_t(T_DF, size=size) * sd / np.sqrt(T_DF / (T_DF - 2))


def task_study(
    gains_pct: dict[str, float],
    sizes: tuple[float, ...] = SIZES,
    num_seeds: int = 5,
    seed_sd_pct: float = 1.0,
    rng_seed: int = 0,
    variant: str = "nonlinear",
    baseline: str = "linear",
) -> pd.DataFrame:
    """One row per (arm, size, seed), completed, with each task's bpb column.

    ``gains_pct``: task -> the variant's true gain (% lower bpb than the baseline; 0: a null
    task). ``seed_sd_pct``: the seed noise of one run's bpb, in % of the task's mean (split
    evenly, in variance, between the shared and the per-run part).
    """
    rng = np.random.default_rng(rng_seed)
    part = seed_sd_pct / 100.0 / np.sqrt(2.0)
    rows = []
    for n in sizes:
        tokens = 20.0 * n
        loss = 4.0 * (n / 1e6) ** -0.05
        runs = {
            (arm, s): run_row(arm, n, tokens, 6.0 * n * tokens, s, np.nan, loss)
            for s in range(num_seeds)
            for arm in (baseline, variant)
        }
        rows.extend(runs.values())
        for task, gain in gains_pct.items():
            mean = 2.5 * (n / 1e6) ** -0.03  # bits per byte of the correct answer
            shared = _t_noise(rng, part * mean, num_seeds)
            for arm, factor in ((baseline, 1.0), (variant, 1.0 - gain / 100.0)):
                own = _t_noise(rng, part * mean, num_seeds)
                values = mean * factor + shared + own
                for s in range(num_seeds):
                    runs[arm, s][contract.eval_metric(task, "bpb")] = float(values[s])
                    runs[arm, s][contract.eval_metric(task, "acc")] = 0.25
    return normalise(pd.DataFrame(rows), "synthetic downstream study")
