"""Studies whose law changes at the top size, and the same studies where it holds: the truths
the backtest's flag (rule 9 of ``analysis.stats.rules.verdict``) is measured on.

The law is ``compute_law_study``'s (``L_b(C) = 2 + 79 C^-0.1`` at D = 20 N, one LR per cell: the
cheapest analysis, no LR to choose), on 4 sizes 3.6M-100M, so the backtest has one step: fit
3.6M-33M, predict 100M. The variant is the baseline at a constant compute multiplier
``k_fitted`` at every size but the top and ``k_top`` there: ``k_top == k_fitted`` is a law that
holds, ``k_top = 1`` a gain that vanishes at the top. The seed noise is the analysis's own model:
a part shared by every run of one (size, seed), sd 0.006, and one per run, sd 0.004.
"""

from __future__ import annotations

import pandas as pd

from analysis.synthetic.scenarios import SIZES, law_study

FOUR_SIZES = SIZES[1:]  # 3.6M-100M: three to fit, the top held out


def law_change_study(
    k_fitted: float,
    k_top: float,
    rng_seed: int,
    num_seeds: int = 3,
    sizes: tuple[float, ...] = FOUR_SIZES,
) -> pd.DataFrame:
    """linear against the same at compute multiplier ``k_fitted`` below the top size and
    ``k_top`` at it (see the module docstring)."""
    top = max(sizes)
    k_of = lambda n, c: k_top if n == top else k_fitted  # noqa: E731 - the variant's k per size
    return law_study(k_of, rng_seed, num_seeds, sizes, what="law-change study")


def true_top_gain_pct(k_top: float, n: float = FOUR_SIZES[-1]) -> float:
    """The true gain (%) of ``law_change_study`` at size ``n`` with multiplier ``k_top``."""
    c = 120.0 * n * n
    base = 2.0 + 79.0 * c**-0.1
    return 100.0 * (base - (2.0 + 79.0 * (k_top * c) ** -0.1)) / base
