"""Fit every law on the full data (from the Approach-3 grid) and on each bootstrap resample.

A resample's fit starts from the full-data optimum only (warm start): a resample is a small
perturbation of the data, so its optimum lies near the full-data one, and one L-BFGS run per
resample instead of a whole grid is what keeps 1,000 resamples within seconds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analysis import fit as F
from analysis.cells import Groups


@dataclasses.dataclass
class LawFit:
    """One law for one arm (or one arm pair) across resamples."""

    law: str  # "L(N)", "L(C)", "L(N,D)" or "k(C)"
    variant: str
    names: tuple[str, ...]
    params: np.ndarray  # [n_resamples + 1, n_params]; row 0 = full data; NaN = not fitted
    points: np.ndarray  # indices into Groups.info of the points the law was fitted on

    def full(self) -> dict[str, float] | None:
        row = self.params[0]
        return None if np.isnan(row).any() else dict(zip(self.names, row.tolist(), strict=True))


def fit_across_resamples(
    model: F.LSEModel, loss: np.ndarray, starts: np.ndarray, min_points: int
) -> np.ndarray:
    """``loss [B+1, P]`` (NaN = missing) -> params ``[B+1, n_params]``; row 0 from ``starts``."""
    num_rows, num_params = loss.shape[0], len(model.names)
    params = np.full((num_rows, num_params), np.nan)
    finite = np.isfinite(loss)
    log_loss = np.log(np.where(finite, loss, 1.0))
    if finite[0].sum() < min_points:
        return params
    params[0] = F.fit(model, log_loss[0], starts, finite[0].astype(float)).params
    for b in range(1, num_rows):
        if finite[b].sum() >= min_points:
            params[b] = F.fit(model, log_loss[b], params[0], finite[b].astype(float)).params
    return params


def _curve_points(groups: Groups, variant: str) -> np.ndarray:
    info = groups.info
    mask = (info["variant"] == variant) & info["on_curve"]
    return np.flatnonzero(mask.to_numpy())


def fit_all(groups: Groups, baseline: str) -> list[LawFit]:
    """L(N) and L(C) per arm, L(N, D) where an arm has >= 2 budgets at a size, k(C) per variant.

    L(N), L(C) and k(C) use one point per (arm, size): its largest token budget.
    """
    info = groups.info
    fits: list[LawFit] = []
    n, c, d = (info[k].to_numpy(float) for k in ("n_params", "flops", "tokens"))
    for variant in sorted(info["variant"].unique()):
        pts = _curve_points(groups, variant)
        for law, x in (("L(N)", n), ("L(C)", c)):
            model = F.power_law_model(x[pts])
            params = fit_across_resamples(model, groups.loss[:, pts], F.grid_starts(model), 3)
            fits.append(LawFit(law, variant, model.names, params, pts))
        all_pts = np.flatnonzero((info["variant"] == variant).to_numpy())
        budgets = info.iloc[all_pts].groupby("size")["tokens"].nunique()
        if (budgets >= 2).any():
            model = F.chinchilla_model(n[all_pts], d[all_pts])
            params = fit_across_resamples(model, groups.loss[:, all_pts], F.grid_starts(model), 5)
            fits.append(LawFit("L(N,D)", variant, model.names, params, all_pts))
    base_pts = _curve_points(groups, baseline)
    for variant in sorted(set(info["variant"]) - {baseline}):
        pts = np.concatenate([base_pts, _curve_points(groups, variant)])
        is_variant = np.arange(len(pts)) >= len(base_pts)
        model = F.shared_floor_model(c[pts], is_variant)
        starts = _shared_starts(model, fits, baseline, variant)
        # both arms need >= 2 sizes for their own slope; 5 parameters need >= 5 points
        params = fit_across_resamples(model, groups.loss[:, pts], starts, 5)
        params[_too_few_per_arm(groups.loss[:, pts], is_variant)] = np.nan
        fits.append(LawFit("k(C)", variant, model.names, params, pts))
    return fits


def _too_few_per_arm(loss: np.ndarray, is_variant: np.ndarray) -> np.ndarray:
    finite = np.isfinite(loss)
    return (finite[:, ~is_variant].sum(axis=1) < 2) | (finite[:, is_variant].sum(axis=1) < 2)


def _shared_starts(model: F.LSEModel, fits: list[LawFit], baseline: str, variant: str):
    """The tied grid (variant = baseline) plus the two arms' separate L(C) optima."""
    starts = [F.tied_grid_starts(model)]
    sep = {f.variant: f.full() for f in fits if f.law == "L(C)" and f.full() is not None}
    if baseline in sep and variant in sep:
        b, v = sep[baseline], sep[variant]
        for e in (b["e"], v["e"]):
            starts.append(np.array([[b["a"], b["alpha"], v["a"], v["alpha"], e]]))
    return np.vstack(starts)
