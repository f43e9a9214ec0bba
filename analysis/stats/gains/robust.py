"""The gain test at one (size, tokens): the wider of two intervals, each right under a different
failure of the other.

- **pooled**: the parametric bootstrap of ``analysis.stats.variance.noise`` (two noise components
  pooled over sizes as ``c * N^slope``, the LR re-chosen in every draw). Many df, and it carries the
  noise of choosing the LR; but it is only as right as the noise model.
- **paired seeds**: Student's t on this size's per-seed paired gains at the data's chosen LRs
  (``n - 1`` df). It assumes nothing about other sizes or about how an arm's LR cells share a
  seed's luck: an arm x seed effect, a size noisier than the trend, an effect shared across
  sizes all sit inside the per-seed differences it is computed from. It ignores the LR choice.
  Where the arms' FLOPs differ, each seed's losses are first moved to matched compute along that
  seed's own curve (``analysis.stats.gains.matched``), so both tests judge the same gain.

The interval is their union (lower bound = the lower of the two, upper = the higher), its
p-value the larger of the two: it excludes 0 only when both do. Under the model's own noise it
costs little power (the t interval is usually the wider: 2 df at 3 seeds); under the noise the
model does not assume it keeps the paired test's calibration (docs/statistics.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from analysis.stats.gains.compare import Budget
from analysis.stats.gains.levels import ci, p_two_sided
from analysis.stats.gains.resolution import groups_pair_var, t_half, t_p
from analysis.stats.variance.cells import Groups

POOLED, PAIRED = "pooled bootstrap", "paired-seed t"


@dataclasses.dataclass(frozen=True)
class GainTest:
    """Both tests of one budget's gain (% of the baseline's loss)."""

    value: float  # the data's paired gain
    draws: np.ndarray  # [B] bootstrap gains (pooled noise model)
    mean: float  # mean per-seed paired gain (= value on complete pairs)
    se: float  # its standard error, from this size's seeds only
    df: int  # paired seeds - 1
    tune_var: float = 0.0  # both arms' grid-resolution variance, %^2 (gains.resolution)

    @property
    def t_se(self) -> float:
        """The t test's standard error: the seeds' and the LR grid's resolution's."""
        return math.sqrt(self.se**2 + self.tune_var)

    @classmethod
    def of(cls, budget: Budget, groups: Groups) -> GainTest:
        base = groups.seed_loss[budget.base]  # [seeds] at the data's LR
        var = groups.seed_loss[budget.var]
        if budget.base_seed_shift is not None:  # at matched compute: each seed moved by its own
            base = base + budget.base_seed_shift  # curve's move (analysis.stats.gains.matched)
        if budget.var_seed_shift is not None:
            var = var + budget.var_seed_shift
        base, var = base[budget.seeds], var[budget.seeds]  # [paired seeds]
        both = np.isfinite(base) & np.isfinite(var)  # a seed the chosen LR lacks drops out
        base, var = base[both], var[both]
        diff = 100.0 * (base - var) / base.mean() if both.any() else base  # [paired seeds]
        n = diff.size
        se = float(diff.std(ddof=1) / np.sqrt(n)) if n >= 2 else float("nan")
        value = float(budget.gain_pct[0])
        tune = groups_pair_var(groups, budget.base, budget.var)
        return cls(value, budget.gain_pct[1:], float(diff.mean()), se, n - 1, tune)

    def t_interval(self, alpha: float) -> list[float] | None:
        if self.df < 1 or not np.isfinite(self.se):
            return None
        half = float(t_half(1 - alpha / 2, self.se, self.df, self.tune_var))
        return [self.mean - half, self.mean + half]

    def t_p(self) -> float:
        if self.df < 1 or not np.isfinite(self.se):
            return 1.0
        if self.t_se == 0:
            return 1.0 if self.mean == 0 else 0.0
        return t_p(self.mean, self.se, self.df, self.tune_var)

    def interval(self, alpha: float) -> tuple[list[float] | None, str | None]:
        """(the union of both intervals at ``1 - alpha``, the one that decided it): the source
        named is the one whose interval lies nearer 0 on the side the estimate lies on (the
        one that would keep 0 in, i.e. the larger p-value)."""
        pooled, paired = ci(self.draws, alpha), self.t_interval(alpha)
        if pooled is None or paired is None:
            return None, None
        union = [min(pooled[0], paired[0]), max(pooled[1], paired[1])]
        return union, self.decided_by()

    def p(self) -> float:
        """Two-sided p of "no gain": the larger of the two tests' (union-interval duality)."""
        return max(p_two_sided(self.draws), self.t_p())

    def decided_by(self) -> str:
        return PAIRED if self.t_p() >= p_two_sided(self.draws) else POOLED

    def half_width_se(self) -> tuple[float, float]:
        """(standard error, df) of the test that decided: the scale a planner needs."""
        if self.decided_by() == PAIRED:
            return self.se, float(self.df)
        s = self.draws[np.isfinite(self.draws)]
        return float(s.std(ddof=1)), float("inf")
