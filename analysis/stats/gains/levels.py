"""The error levels every claim of the verdict is made at, and the bootstrap interval (``ci``)
and p-value (``p_two_sided``) tested at them, in one place (the gain tests, the verdict, the
planner and the report read them here; they sit below all of them).

A variant's claims (persists, grows, fades, helps, hurts) all rest on rejecting "no gain" at
some measured size. Those per-size tests form one family, tested by a weighted Holm procedure
(Holm 1979, weighted form; Benjamini & Hochberg 1997): the top size carries ``TOP_WEIGHT`` of
the variant's level, the other sizes share the rest, and a rejected test passes its weight on.
On identical arms the chance of any claim is then at most the variant's level; across variants
Holm's step-down on each variant's weighted-Bonferroni p-value (``holm_levels``) keeps it at
``ALPHA`` in all. Below ``MIN_SEEDS`` seeds no interval is given.
"""

from __future__ import annotations

import numpy as np

ALPHA = 0.05
TOP_WEIGHT = 0.8  # the top size's share: the question is asked there
TOP_ALPHA = ALPHA * TOP_WEIGHT  # the level the top-size test starts at (the planner's level)
MIN_SEEDS = 3  # fewer seeds cannot estimate a spread worth an interval


def level_or_default(alpha: float | None) -> float:
    """A family-wise level as given, or ``ALPHA`` where none was (a study without
    `verdict.alpha`, a looks.json from before the field, a run table, a step-down that stopped
    before a variant): the one fallback (`tests/test_one_default.py` keeps it one)."""
    return ALPHA if alpha is None else float(alpha)


def size_weights(num_sizes: int) -> list[float]:
    """Weights of the per-size tests, smallest size first, the top size last; they sum to 1."""
    if num_sizes <= 1:
        return [1.0] * num_sizes
    rest = (1.0 - TOP_WEIGHT) / (num_sizes - 1)
    return [rest] * (num_sizes - 1) + [TOP_WEIGHT]


def global_p(p_values: list[float], weights: list[float]) -> float:
    """Weighted-Bonferroni p of "no gain at any size": ``min p_i / w_i`` (at most 1)."""
    if not p_values:
        return 1.0
    return float(min(1.0, min(p / w for p, w in zip(p_values, weights, strict=True))))


def weighted_holm(
    p_values: list[float], weights: list[float], level: float
) -> tuple[list[bool], list[float]]:
    """(rejected, the level each test was last tested at). At each step the remaining test with
    the smallest ``p / w`` is tested at ``w * level / (sum of the remaining weights)``; the
    first that fails stops the procedure (every remaining test keeps that step's level)."""
    remaining = list(range(len(p_values)))
    rejected = [False] * len(p_values)
    tested = [level * w for w in weights]
    while remaining:
        total = sum(weights[j] for j in remaining)
        for j in remaining:
            tested[j] = weights[j] * level / total
        i = min(remaining, key=lambda j: p_values[j] / weights[j])
        if p_values[i] > tested[i]:
            break
        rejected[i] = True
        remaining.remove(i)
    return rejected, tested


def ci(samples: np.ndarray, alpha: float) -> list[float] | None:
    """Central ``1 - alpha`` percentile interval of the finite draws, or None with too few."""
    s = samples[np.isfinite(samples)]
    if samples.size == 0 or s.size < max(10, 0.5 * samples.size):
        return None
    lo, hi = np.percentile(s, [50 * alpha, 100 - 50 * alpha])
    return [float(lo), float(hi)]


def p_two_sided(samples: np.ndarray) -> float:
    """Bootstrap p-value of "= 0": twice the share of draws on the far side of 0 (at least
    1/(B+1)); ``ci(samples, a)`` excludes 0 exactly when this is below ``a``."""
    s = samples[np.isfinite(samples)]
    if s.size == 0:
        return 1.0
    side = min(np.mean(s <= 0), np.mean(s >= 0))
    return float(min(1.0, max(2 * side, 1.0 / (s.size + 1))))


def holm_levels(p_values: dict[str, float], alpha: float) -> dict[str, float | None]:
    """Holm (1979) step-down: the i-th smallest p is tested at ``alpha / (m - i)``; once one
    is not rejected, every later one is not (level None = not significant whatever its CI)."""
    order = sorted(p_values, key=p_values.get)
    levels: dict[str, float | None] = {}
    stopped = False
    for i, name in enumerate(order):
        level = alpha / (len(order) - i)
        levels[name] = None if stopped else level
        if not stopped and p_values[name] >= level:
            stopped = True
    return levels
