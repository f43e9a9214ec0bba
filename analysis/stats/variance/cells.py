"""From runs to cell losses, for the data and every parametric-bootstrap draw.

A *cell* is one (variant, size, tokens, lr); a *group* is one (variant, size, tokens) whose
cells differ only in LR. Only usable cells enter (``analysis.stats.lr.frontier``: every seed of that
LR completed). Losses sit in ``draws [B+1, cells, seeds]`` (row 0 = the data, rows 1.. drawn by
``analysis.stats.variance.noise``); each group keeps its best usable LR *per draw*, so the LR
choice's own noise is part of every interval. Comparisons average only the seeds both arms have
(``paired_loss``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.stats.lr.frontier import LRFrontier, selection_column
from analysis.stats.variance import noise
from analysis.tables.runs import is_usable

GROUP_KEYS = ["variant", "size", "tokens"]


@dataclasses.dataclass
class Groups:
    """Groups (rows of ``info``) with their per-draw best-LR losses."""

    info: pd.DataFrame  # variant, size, tokens, num_nonembedding_params, flops, lr_grid, ...
    loss: np.ndarray  # [B+1, groups] mean over the group's seeds at its best LR per draw
    best_lr: np.ndarray  # [B+1, groups]; NaN = no LR recorded
    seeds: np.ndarray  # [seeds] seed values
    seed_loss: np.ndarray  # [groups, seeds] data at the data's best LR, NaN = missing
    draws: np.ndarray  # [B+1, cells, seeds]
    chosen: np.ndarray  # [B+1, groups] cell index of the best LR per draw
    seed_sets: np.ndarray  # [groups, seeds] bool: seeds the group has
    noise: noise.NoiseModel | None  # None = too few seeds for any interval
    cells: pd.DataFrame | None = None  # per cell (rows of draws' axis 1): variant, size, lr_key
    # (variant, size, tokens) -> (mean %, variance %^2) of the arm's loss above its optimum at its
    # best grid LR (analysis.stats.gains.resolution); empty: the grid's resolution not counted
    tuning_var: dict = dataclasses.field(default_factory=dict)

    def paired_loss(self, g: int, seeds: np.ndarray) -> np.ndarray:
        """``[B+1]`` mean loss of group ``g`` over the seeds in mask ``seeds [n_seeds]``."""
        rows = np.arange(self.draws.shape[0])
        picked = self.draws[rows, self.chosen[:, g]]  # [B+1, seeds]
        return picked[:, seeds].mean(axis=1)


def usable_cells(runs: pd.DataFrame, frontiers: list[LRFrontier]) -> pd.DataFrame:
    """Runs of usable cells only, with ``lr_key`` (-1 = no LR recorded).

    With an LR: the frontier's usable LRs. Without one the group is a single cell, usable on the
    same terms: every seed of it completed.
    """
    usable_lr = {(f.variant, f.size, f.tokens): set(f.usable_lrs) for f in frontiers}
    runs = runs.reset_index(drop=True)
    runs = runs.assign(lr_key=runs["lr"].fillna(-1.0), ok=is_usable(runs))
    keep = np.zeros(len(runs), dtype=bool)
    for key, frame in runs.groupby([*GROUP_KEYS, "lr_key"], sort=False):
        group_key = (str(key[0]), str(key[1]), float(key[2]))
        if key[3] >= 0:
            keep[frame.index] = key[3] in usable_lr.get(group_key, set())
        else:
            keep[frame.index] = bool(frame["ok"].all())
    return runs[keep].drop(columns="ok").reset_index(drop=True)


def selected_lrs(table: pd.DataFrame, frontiers: list[LRFrontier]) -> dict | None:
    """``{(variant, size, tokens): lr}`` chosen on the held-out ``select_val_loss``,
    or None when the table has none (then each draw chooses on ``final_val_loss``)."""
    if selection_column(table) != "select_val_loss":
        return None
    return {(f.variant, f.size, f.tokens): f.best_lr for f in frontiers if f.best_lr is not None}


def build_groups(
    runs: pd.DataFrame, num_draws: int, seed: int = 0, chosen_lr: dict | None = None
) -> Groups:
    """Cells, the noise model and ``num_draws`` parametric draws; the best LR per group.

    ``runs`` holds usable cells only (``usable_cells``). ``chosen_lr`` (``selected_lrs``) fixes
    each group's LR, in the data and in every draw, at the one the selection windows chose: the
    reported ``final_val_loss`` then never takes part in choosing it. Without it each draw
    chooses the LR with the lowest ``final_val_loss`` of that draw.
    """
    seeds = np.sort(runs["seed"].unique())
    seed_index = {s: i for i, s in enumerate(seeds)}
    cells = runs.groupby([*GROUP_KEYS, "lr_key"], sort=True)
    cell_frame = cells.agg(
        num_nonembedding_params=("num_nonembedding_params", "mean"), flops=("flops", "mean")
    ).reset_index()
    # [cells, seeds]: repeats of a seed averaged; one pass (a groupby per cell cost ~25 ms a
    # study, and the statistical replays analyse thousands)
    at = (cells.ngroup().to_numpy(), runs["seed"].map(seed_index).to_numpy())
    total = np.zeros((len(cell_frame), len(seeds)))
    count = np.zeros_like(total)
    np.add.at(total, at, runs["final_val_loss"].to_numpy(float))
    np.add.at(count, at, 1.0)
    with np.errstate(invalid="ignore"):
        y = np.where(count > 0, total / count, np.nan)
    present = np.isfinite(y)

    size_n = cell_frame.groupby("size")["num_nonembedding_params"].min()
    sizes = list(size_n.sort_values().index)
    cell_size = cell_frame["size"].map({s: i for i, s in enumerate(sizes)}).to_numpy()
    model = noise.estimate(y, cell_size, np.log(size_n[sizes].to_numpy(float)), sizes)
    draws = y[None]
    if model is not None and num_draws > 0 and len(seeds) >= 2:
        centre = np.nanmean(y, axis=1)
        rng = np.random.default_rng(seed)
        simulated = noise.simulate(centre, present, cell_size, model, num_draws, rng)
        draws = np.concatenate([draws, simulated])
    means = np.nanmean(draws, axis=2)  # [B+1, cells]; every seed of a usable cell is there

    group_ids = cell_frame.groupby(GROUP_KEYS, sort=True).ngroup().to_numpy()
    num_groups = group_ids.max() + 1
    rows_b = draws.shape[0]
    chosen = np.zeros((rows_b, num_groups), dtype=int)
    loss = np.full((rows_b, num_groups), np.nan)
    best_lr = np.full_like(loss, np.nan)
    seed_loss = np.full((num_groups, len(seeds)), np.nan)
    seed_sets = np.zeros((num_groups, len(seeds)), dtype=bool)
    lr_keys = cell_frame["lr_key"].to_numpy()
    rows = []
    for g in range(num_groups):
        members = np.flatnonzero(group_ids == g)
        block = means[:, members]  # [B+1, lrs]
        pick = block.argmin(axis=1)
        first = cell_frame.iloc[members[0]]
        key = (str(first["variant"]), str(first["size"]), float(first["tokens"]))
        if chosen_lr is not None and key in chosen_lr:
            pick[:] = np.flatnonzero(np.isclose(lr_keys[members], chosen_lr[key]))[0]
        chosen[:, g] = members[pick]
        loss[:, g] = block[np.arange(rows_b), pick]
        best_lr[:, g] = lr_keys[members][pick]
        seed_loss[g] = y[members[pick[0]]]
        seed_sets[g] = present[members[0]]
        rows.append(
            {
                "variant": first["variant"],
                "size": first["size"],
                "tokens": float(first["tokens"]),
                "num_nonembedding_params": float(
                    cell_frame["num_nonembedding_params"].to_numpy()[members].mean()
                ),
                "flops": float(cell_frame["flops"].to_numpy()[members].mean()),
                "lr_grid": sorted(float(x) for x in lr_keys[members] if x >= 0),
                "num_seeds": int(present[members[0]].sum()),
            }
        )
    info = pd.DataFrame(rows)
    # each arm's own curve (L(N), L(C)): its largest budget per size
    largest = info.groupby(["variant", "size"])["tokens"].transform("max")
    info["on_curve"] = info["tokens"] == largest
    best_lr[best_lr < 0] = np.nan
    cells_info = cell_frame[["variant", "size", "lr_key"]].reset_index(drop=True)
    return Groups(
        info, loss, best_lr, seeds, seed_loss, draws, chosen, seed_sets, model, cells_info
    )
