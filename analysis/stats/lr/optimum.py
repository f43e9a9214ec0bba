"""Where a cell's optimum LR lies, with a diverged LR read as censoring, not as a gap.

A diverged run at LR η says the arm's loss at η is worse than any finite loss: the optimum lies
below η. It is neither a missing point (the fit would not know the optimum is bounded there)
nor a loss value (it has none). Dropping it turns a best LR whose next step up diverged into a
best LR at the high edge of its grid, and the optimum estimated there, extrapolated upwards
from the two highest usable LRs, can land past η: an LR the arm cannot train at.

**The estimate** (`cell_optimum`), per (variant, size, tokens):
- a best LR with a usable neighbour on each side: the vertex of the parabola in ln LR through
  the three (`lr_law.estimate_optimum`), inside the bracket; its interval is the bracket (the
  two neighbours: the grid's resolution, no level claimed);
- a best LR with a usable neighbour on one side only (the other diverged, or the grid ends):
  the vertex of a parabola of the arm's curvature ``c`` through the two
  (`lr_law.two_point_optimum`), and a ``LEVEL`` interval: the seeds' paired difference between
  the two LRs at 95% (Student's t) and the curvature at 95% (the t interval of the arm's
  sweeps' curvatures, `arm_curvature`), every corner of the two (Bonferroni: >= 90% jointly);
  without a curvature or with one seed, the bracket;
- **censoring**: with a diverged LR above the best (`censored_at`, the lowest one), the
  interval ends there, and an estimate at or past it becomes the middle (geometric) of
  [best, censored_at): the data say the loss still falls at the best LR and that the arm
  cannot train at ``censored_at``, no more.

Proven on synthetic arms whose optimum sits just below a divergence
(tests/analysis/stats/lr/test_censoring.py): the interval covers the true optimum at >= 90%
and never reaches past the diverged LR; with the diverged runs dropped the same estimator's
optimum lands past it in a share of studies and its interval in most.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
from scipy import stats

from analysis.stats.lr.lr_law import censor, curvature, estimate_optimum, two_point_optimum

__all__ = ["LEVEL", "Curvature", "arm_curvature", "censor", "cell_optimum"]

LEVEL = 0.9  # joint: the seeds' difference at 95% and the curvature at 95% (Bonferroni)
_EACH = 0.95

PerSeed = Mapping[float, Mapping[object, float]]  # usable LR -> seed -> loss


@dataclasses.dataclass(frozen=True)
class Curvature:
    """An arm's loss curvature in ln LR (loss per ln(LR)^2) and its 95% interval."""

    value: float
    low: float
    high: float


def arm_curvature(mean_losses: list[Mapping[float, float]]) -> Curvature | None:
    """From the arm's sweeps (usable LR -> mean loss) whose best LR has a neighbour on each side:
    the median curvature and the t interval of their mean at 95%; None with fewer than two."""
    found = [c for loss in mean_losses if len(loss) >= 3 and (c := curvature(loss)) is not None]
    if len(found) < 2:
        return None
    mean, sd, n = float(np.mean(found)), float(np.std(found, ddof=1)), len(found)
    half = stats.t.ppf((1 + _EACH) / 2, n - 1) * sd / math.sqrt(n)
    return Curvature(float(np.median(found)), mean - half, mean + half)


def _two_point_interval(
    per_seed: PerSeed, best: float, other: float, c: Curvature
) -> tuple[float, float] | None:
    """The ln-LR interval of the two-point vertex over the seeds' paired difference and the
    curvature's interval (every corner); None with fewer than two common seeds."""
    mine, theirs = per_seed[best], per_seed[other]
    common = [s for s in mine if s in theirs]
    if len(common) < 2:
        return None
    diff = np.array([theirs[s] - mine[s] for s in common])
    half = stats.t.ppf((1 + _EACH) / 2, diff.size - 1) * diff.std(ddof=1) / math.sqrt(diff.size)
    x_best, x_other = math.log(best), math.log(other)
    mid, gap = (x_best + x_other) / 2, x_other - x_best
    corners = [
        mid - d / (2 * k * gap)
        for d in (diff.mean() - half, diff.mean() + half)
        for k in (max(c.low, 1e-300), max(c.high, 1e-300))
    ]
    return min(corners), max(corners)


def _exp(x: float) -> float | None:
    """An LR from ln LR; None past what a float holds (an interval open on that side)."""
    return math.exp(x) if abs(x) < 700 else None


def cell_optimum(
    per_seed: PerSeed,
    best: float | None,
    lrs: list[float],
    ceiling: float | None,
    c: Curvature | None,
) -> tuple[float | None, list[float | None]]:
    """(optimum LR, [low, high]) of one cell; ``None`` for an end the data leave open.

    ``per_seed``: every usable LR's loss per seed; ``best``: the best usable LR; ``lrs``: every
    LR tried; ``ceiling``: the lowest diverged LR above ``best`` (the censoring), or None."""
    if best is None:
        return None, [None, ceiling]
    usable = sorted(per_seed)
    i = lrs.index(best)
    below = lrs[i - 1] if i > 0 and lrs[i - 1] in per_seed else None
    above = lrs[i + 1] if i + 1 < len(lrs) and lrs[i + 1] in per_seed else None
    means = {lr: float(np.mean(list(per_seed[lr].values()))) for lr in usable}
    if below is not None and above is not None:  # interior: the vertex, inside the bracket
        near = {lr: means[lr] for lr in (below, best, above)}
        vertex = estimate_optimum(near, None)
        return min(max(vertex, below), above), [below, above]
    bracket: list[float | None] = [below, above if above is not None else ceiling]
    other = below if below is not None else above
    if other is None or c is None or not c.value > 0:
        return best, bracket
    point = two_point_optimum(best, means[best], other, means[other], c.value)
    interval = _two_point_interval(per_seed, best, other, c)
    if interval is None:
        return censor(point, best, ceiling), bracket
    low, high = (_exp(x) for x in interval)
    if ceiling is not None:  # censored: the optimum lies below the lowest diverged LR
        high = ceiling if high is None else min(high, ceiling)
        if low is not None and low >= ceiling:  # all past it: above the best, below it
            low = best
    return censor(point, best, ceiling), [low, high]
