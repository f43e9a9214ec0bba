"""The LR grid's resolution as a noise term of each gain.

An arm is compared at its best grid LR, which sits up to half a step from its true optimum; its
loss there is above the optimum's by the curve's rise over that distance. Two arms sit at
different distances, so the grid alone moves their measured gain, and no number of seeds
averages that away: it is one draw per (arm, size). Modelled here as a random term: the optimum
lies anywhere between the midpoints to the best LR's scanned neighbours (uniformly, in ln LR),
and the loss rises as ``c u^2`` at ``u`` from it. ``c`` is in nats per ln(LR)^2, the same at
every size and arm: the median over every bracketed sweep of the study (per size it would rest
on the few arms there), taken relative to each arm's own loss. Each arm's penalty then has a
variance; the sum of both arms' is added to the paired test's squared standard error
(``analysis.stats.gains.robust``), with Welch-Satterthwaite df (``effective_df``); the term only
ever widens the seeds' own interval (``t_half``).

Why not correct each arm to its fitted optimum (a parabola through the best LR and its
neighbours): three points cannot tell a parabola's dip from a steep side, and on LR curves
steeper above the optimum that claimed more than the grid itself (docs/statistics.md, "The LR
grid's resolution"). A variance term does not move the estimate; it only admits the grid's
uncertainty.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.lr.frontier import BRACKETED, LRFrontier

__all__ = ["curvature", "effective_df", "penalty_var_pct", "t_half", "t_p", "tuning_variances"]

Key = tuple[str, str, float]


def _sweep_curvature(group: pd.DataFrame, lrs: list[float]) -> float | None:
    """The second divided difference of the mean loss in ln LR through three LRs, on the seeds
    all three completed; None without a common seed."""
    done = group[group["status"] == "completed"]
    seeds = None
    for lr in lrs:
        at = set(done.loc[np.isclose(done["lr"], lr), "seed"])
        seeds = at if seeds is None else seeds & at
    if not seeds:
        return None
    picked = done[done["seed"].isin(seeds)]
    y = [float(picked.loc[np.isclose(picked["lr"], lr), "final_val_loss"].mean()) for lr in lrs]
    x = [math.log(lr) for lr in lrs]
    slope_low, slope_high = (y[1] - y[0]) / (x[1] - x[0]), (y[2] - y[1]) / (x[2] - x[1])
    return (slope_high - slope_low) / (x[2] - x[0])


def curvature(table: pd.DataFrame, frontiers: list[LRFrontier]) -> float:
    """The loss's curvature in ln LR (nats per ln(LR)^2), the median over every sweep whose best
    LR has a completed neighbour on each side; 0 when none has (nothing to scale by)."""
    rows = table[table["lr"].notna()]
    by_group = {key: g for key, g in rows.groupby(["variant", "size", "tokens"], sort=False)}
    found = []
    for f in frontiers:
        if f.best_lr is None or f.state not in BRACKETED:
            continue
        i = f.lrs.index(f.best_lr)
        if i == 0 or i == len(f.lrs) - 1:
            continue
        value = _sweep_curvature(by_group[(f.variant, f.size, f.tokens)], f.lrs[i - 1 : i + 2])
        if value is not None and math.isfinite(value):
            found.append(value)
    return max(0.0, float(np.median(found))) if found else 0.0


def penalty_var_pct(c: float, below: float, above: float) -> float:
    """Variance (in %^2 of the loss) of ``100 c u^2`` for ``u`` uniform in (-below/2, above/2):
    the loss above the optimum at the best LR, its neighbours ``below`` and ``above`` away in
    ln LR."""
    lo, hi = below / 2.0, above / 2.0
    if lo + hi <= 0:
        return 0.0
    m2 = (hi**3 + lo**3) / (3.0 * (lo + hi))  # E[u^2]
    m4 = (hi**5 + lo**5) / (5.0 * (lo + hi))  # E[u^4]
    return (100.0 * c) ** 2 * max(0.0, m4 - m2**2)


def effective_df(se2, df, tune_var: float):
    """Welch-Satterthwaite df of ``se2 + tune_var``: ``se2`` (a squared standard error, scalar or
    array) estimated on ``df`` df, ``tune_var`` taken as known; ``df`` itself when it is 0."""
    if not tune_var > 0:
        return df
    return df * (1.0 + tune_var / np.maximum(se2, 1e-300)) ** 2


def t_half(q: float, se, df, tune_var: float = 0.0):
    """The paired t interval's half-width at quantile ``q`` (e.g. ``1 - alpha/2``): the wider of
    the seeds' own (``t_q(df) se``) and the one with the grid's term (``t_q(df_eff)
    sqrt(se^2 + tune_var)``, Welch-Satterthwaite df). With 2-3 seeds the seeds' sd is itself
    uncertain, and the Satterthwaite df (large once the known term dominates) would then
    shrink the interval below the seeds' own: the term may only widen it."""
    se = np.asarray(se, dtype=float)
    own = stats.t.ppf(q, df) * se
    if not tune_var > 0:
        return own
    both = stats.t.ppf(q, effective_df(se**2, df, tune_var)) * np.sqrt(se**2 + tune_var)
    return np.maximum(own, both)


def t_p(mean: float, se: float, df: int, tune_var: float = 0.0) -> float:
    """Two-sided p of "no gain" for ``t_half``'s interval: the larger of the two tests' p."""
    own = 2 * stats.t.sf(abs(mean) / se, df)
    if not tune_var > 0:
        return float(own)
    both = 2 * stats.t.sf(
        abs(mean) / math.sqrt(se**2 + tune_var), effective_df(se**2, df, tune_var)
    )
    return float(max(own, both))


def _gaps(f: LRFrontier) -> tuple[float, float]:
    """ln-LR distances from the best LR to its tried neighbours; a missing side mirrors the
    other (a sweep of one LR: none)."""
    i = f.lrs.index(f.best_lr)
    below = math.log(f.best_lr / f.lrs[i - 1]) if i > 0 else None
    above = math.log(f.lrs[i + 1] / f.best_lr) if i < len(f.lrs) - 1 else None
    below = above if below is None else below
    above = below if above is None else above
    return (below or 0.0), (above or 0.0)


def tuning_variances(table: pd.DataFrame, frontiers: list[LRFrontier]) -> dict[Key, float]:
    """``{(variant, size, tokens): variance of the arm's grid penalty, %^2}`` for every sweep with
    a best LR."""
    c = curvature(table, frontiers)
    out: dict[Key, float] = {}
    for f in frontiers:
        if f.best_lr is not None:
            loss = f.mean_loss.get(f.best_lr)
            relative = c / loss if loss and math.isfinite(loss) and loss > 0 else 0.0
            out[(f.variant, f.size, float(f.tokens))] = penalty_var_pct(relative, *_gaps(f))
    return out
