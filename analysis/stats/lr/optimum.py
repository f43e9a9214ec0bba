"""Each arm's loss at its LR optimum, not at its best grid LR: a parabola in log LR through the
best LR and its two neighbours.

Why: a grid of LRs (2x steps) leaves each arm's best LR up to half a step from its optimum, and
the loss there above the optimum by up to ``c ln(2)^2 / 4`` (``c`` the loss's curvature in
ln LR). The two arms of a comparison sit at different distances from their optima, so the
grid alone moves the measured gain. On identical arms whose optima fall off the grid, a
well-powered study then claims a gain that is the grid's (benchmarks/bench_ladder_cost.py: 13%
of the ladder's studies at 0.3% seed noise, more with more seeds). The fix is the one LR sweeps
use (Porian et al. 2024 fit a parabola in log LR near the minimum): compare each arm's minimum
of the parabola through its best LR and the two neighbours.

The parabola is fitted on the seeds all three LRs ran (in a two-stage search, the scan seeds:
the seed effect shared by one seed's runs cancels). Its drop below the best LR's loss,
``shift``, is subtracted from every seed of the best LR. When the three points do not bracket a
minimum (no positive curvature, or the vertex outside the neighbours), or a neighbour has no
loss (it diverged, failed or was never run), the shift is 0: the grid value stands.

The shift's own noise (from the neighbours' run noise) enters every interval: in each bootstrap
draw the three losses are drawn again from the noise model's per-run sd, and the shift is
recomputed (``shift_draws``); the paired-seed t interval adds its variance.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.stats.lr.frontier import LRFrontier
from analysis.tables.runs import is_usable

__all__ = ["Bracket", "brackets", "vertex_drop", "shift_draws"]


@dataclasses.dataclass(frozen=True)
class Bracket:
    """One group's best LR and its neighbours, on the seeds all three completed."""

    log_lr: tuple[float, float, float]  # ln LR: below, best, above
    loss: tuple[float, float, float]  # mean final_val_loss over the common seeds
    num_seeds: int  # common seeds

    @property
    def shift(self) -> float:
        return float(vertex_drop(np.asarray(self.log_lr), np.asarray(self.loss)[None])[0])


def vertex_drop(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``y [k, 3]`` losses at ``x [3]`` (ln LR, increasing) -> ``[k]`` how far the parabola
    through each row's points dips below its middle point; 0 where it has no minimum between
    the outer points."""
    h0, h1 = x[1] - x[0], x[2] - x[1]
    s0 = (y[:, 1] - y[:, 0]) / h0  # slopes of the two chords
    s1 = (y[:, 2] - y[:, 1]) / h1
    a = (s1 - s0) / (h0 + h1)  # y = a (x - v)^2 + m
    with np.errstate(divide="ignore", invalid="ignore"):
        slope_mid = s0 + a * h0  # dy/dx at x[1]
        offset = -slope_mid / (2 * a)  # vertex - x[1]
        drop = a * offset**2
    ok = (a > 0) & (x[1] + offset > x[0]) & (x[1] + offset < x[2]) & np.isfinite(drop)
    return np.where(ok, drop, 0.0)


def brackets(table: pd.DataFrame, frontiers: list[LRFrontier]) -> dict[tuple, Bracket]:
    """``{(variant, size, tokens): Bracket}`` for every group whose best LR has a neighbour on
    each side with completed runs on common seeds (``table``: the run table, all states)."""
    usable = table[is_usable(table) & table["lr"].notna()]
    columns = ("variant", "size", "tokens", "lr", "seed", "final_val_loss")
    seeds_at: dict[tuple, dict] = {}  # (variant, size, tokens, lr) -> seed -> its losses
    for variant, size, tokens, lr, seed, loss in zip(
        *(usable[c].to_numpy() for c in columns), strict=True
    ):  # a plain loop: a groupby costs more than the whole table's rows
        key = (str(variant), str(size), float(tokens), float(lr))
        seeds_at.setdefault(key, {}).setdefault(seed, []).append(float(loss))
    out = {}
    for f in frontiers:
        if f.best_lr is None or f.best_lr not in f.lrs:
            continue
        i = f.lrs.index(f.best_lr)
        if i == 0 or i == len(f.lrs) - 1:
            continue
        lrs = (f.lrs[i - 1], f.best_lr, f.lrs[i + 1])
        runs = [seeds_at.get((f.variant, f.size, float(f.tokens), float(lr)), {}) for lr in lrs]
        common = set(runs[0]) & set(runs[1]) & set(runs[2])
        if not common:
            continue
        loss = tuple(float(np.mean([np.mean(r[seed]) for seed in common])) for r in runs)
        out[f.variant, f.size, f.tokens] = Bracket(
            tuple(float(np.log(lr)) for lr in lrs), loss, len(common)
        )
    return out


def shift_draws(bracket: Bracket, sd_run: float, num_draws: int, rng) -> np.ndarray:
    """``[num_draws + 1]``: the data's shift, then the shift of each bootstrap draw, whose
    three losses are drawn around the data's with the per-run sd (a mean of ``num_seeds``)."""
    y = np.asarray(bracket.loss)[None]  # [1, 3]
    if num_draws > 0 and sd_run > 0:
        noise = rng.standard_normal((num_draws, 3)) * sd_run / np.sqrt(bracket.num_seeds)
        y = np.concatenate([y, y + noise])
    else:
        y = np.repeat(y, num_draws + 1, axis=0)
    return vertex_drop(np.asarray(bracket.log_lr), y)
