"""From runs to the points a law is fitted on, for the full data and every bootstrap resample.

A *cell* is one (variant, size, tokens, lr); a *group* is one (variant, size, tokens) whose cells
differ only in LR. Losses sit in a matrix ``[n_cells, n_seeds]``; a bootstrap resample is a row
of seed counts ``w [n_seeds]`` (seeds drawn with replacement, the same draw for every arm, so the
comparison stays paired: same seed = same data order). Cell means for all resamples at once are
two matrix products, and each group keeps its best LR per resample, so the LR choice's own
noise is part of every interval.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

GROUP_KEYS = ["variant", "size", "tokens"]


@dataclasses.dataclass
class Groups:
    """One row per (variant, size, tokens) plus, per resample, its best-LR mean loss."""

    info: pd.DataFrame  # variant, size, tokens, n_params, flops, num_lrs, lr_grid, on_curve
    loss: np.ndarray  # [n_resamples + 1, n_groups]; row 0 = full data; NaN = no data
    best_lr: np.ndarray  # [n_resamples + 1, n_groups]
    seeds: np.ndarray  # [n_seeds] seed values
    weights: np.ndarray  # [n_resamples + 1, n_seeds] seed counts
    seed_loss: np.ndarray  # [n_groups, n_seeds] loss at the full-data best LR, NaN = missing


def seed_weights(num_seeds: int, num_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Row 0 all ones (the data), then ``num_resamples`` multinomial redraws of the seeds."""
    draws = rng.multinomial(num_seeds, np.full(num_seeds, 1.0 / num_seeds), size=num_resamples)
    return np.vstack([np.ones((1, num_seeds)), draws]).astype(float)


def build_groups(runs: pd.DataFrame, num_resamples: int, seed: int = 0) -> Groups:
    """Aggregate usable runs into groups with best-LR losses per bootstrap resample."""
    runs = runs.assign(lr_key=runs["lr"].fillna(-1.0))
    seeds = np.sort(runs["seed"].unique())
    seed_index = {s: i for i, s in enumerate(seeds)}
    cell_keys = [*GROUP_KEYS, "lr_key"]
    cells = runs.groupby(cell_keys, sort=True)
    cell_frame = cells.agg(n_params=("n_params", "mean"), flops=("flops", "mean")).reset_index()
    total = np.zeros((len(cell_frame), len(seeds)))  # [cells, seeds] sum of losses
    count = np.zeros_like(total)
    for c, (_, frame) in enumerate(cells):
        for s, loss in zip(frame["seed"], frame["final_val_loss"], strict=True):
            total[c, seed_index[s]] += loss
            count[c, seed_index[s]] += 1
    per_seed = np.where(count > 0, total / np.maximum(count, 1), 0.0)  # repeated seeds averaged
    present = (count > 0).astype(float)

    weights = seed_weights(len(seeds), num_resamples, np.random.default_rng(seed))
    # Each distinct seed draw once, then expanded: repeated draws get bit-identical rows, which
    # lets laws.fit_across_resamples fit each distinct resample only once.
    unique_w, inverse = np.unique(weights, axis=0, return_inverse=True)  # [U, seeds]
    with np.errstate(invalid="ignore", divide="ignore"):
        unique_loss = (unique_w @ (per_seed * present).T) / (unique_w @ present.T)  # [U, cells]
    cell_loss = unique_loss[inverse.reshape(-1)]  # [B+1, cells]

    group_ids = cell_frame.groupby(GROUP_KEYS, sort=True).ngroup().to_numpy()
    num_groups = group_ids.max() + 1
    loss = np.full((weights.shape[0], num_groups), np.nan)
    best_lr = np.full_like(loss, np.nan)
    seed_loss = np.full((num_groups, len(seeds)), np.nan)
    rows = []
    for g in range(num_groups):
        members = np.flatnonzero(group_ids == g)
        block = cell_loss[:, members]  # [B+1, lrs]
        finite = np.isfinite(block)
        masked = np.where(finite, block, np.inf)
        pick = masked.argmin(axis=1)
        has = finite.any(axis=1)
        loss[has, g] = block[has, pick[has]]
        lrs = cell_frame["lr_key"].to_numpy()[members]
        best_lr[has, g] = lrs[pick[has]]
        chosen = members[pick[0]]
        seed_loss[g] = np.where(present[chosen] > 0, per_seed[chosen], np.nan)
        first = cell_frame.iloc[members[0]]
        rows.append(
            {
                "variant": first["variant"],
                "size": first["size"],
                "tokens": first["tokens"],
                "n_params": float(cell_frame["n_params"].to_numpy()[members].mean()),
                "flops": float(cell_frame["flops"].to_numpy()[members].mean()),
                "lr_grid": sorted(x for x in lrs if x >= 0),
                "num_seeds": int(present[members].any(axis=0).sum()),
            }
        )
    info = pd.DataFrame(rows)
    # One point per (variant, size) for L(N), L(C) and the persistence test: its largest budget.
    largest = info.groupby(["variant", "size"])["tokens"].transform("max")
    info["on_curve"] = info["tokens"] == largest
    best_lr[best_lr < 0] = np.nan
    return Groups(info, loss, best_lr, seeds, weights, seed_loss)


def lr_edge_flags(groups: Groups) -> pd.DataFrame:
    """Per group swept over >= 2 LRs: the best LR and whether it sits at the grid's edge.

    An optimum at the edge means the sweep did not bracket the best LR, so that arm may be
    under-tuned at that size and any "gain" there is suspect (FACTS: untuned baselines
    manufacture gains).
    """
    rows = []
    for g, row in groups.info.sort_values(["variant", "n_params", "tokens"]).iterrows():
        grid = row["lr_grid"]
        if len(grid) < 2:
            continue
        best = groups.best_lr[0, g]
        resampled = groups.best_lr[1:, g]
        resampled = resampled[np.isfinite(resampled)]
        # how often a resample picks the same LR: the LR choice's own uncertainty
        share = float(np.mean(np.isclose(resampled, best))) if resampled.size else float("nan")
        rows.append(
            {
                "variant": row["variant"],
                "size": row["size"],
                "tokens": row["tokens"],
                "best_lr": best,
                "lr_grid": grid,
                "at_edge": bool(np.isclose(best, grid[0]) or np.isclose(best, grid[-1])),
                "best_lr_share": share,
            }
        )
    return pd.DataFrame(rows)
