"""Fit every law on the full data (from the Approach-3 grid) and on each bootstrap resample.

A resample's fit starts from the full-data optimum only (warm start): a resample is a small
perturbation of the data, so its optimum lies near the full-data one, and one L-BFGS run per
resample instead of a whole grid is what keeps 1,000 resamples within seconds.

Resamples of n seeds take only C(2n-1, n) distinct values (10 for 3 seeds, 126 for 5), so a
1,000-resample bootstrap of a small study repeats the same data hundreds of times. Each
distinct resample is fitted once and its fit is reused for its repeats: the fit is a
deterministic function of the data and the start, so this changes no number, only the cost
(on the 3-seed demo study, 1,000 L-BFGS runs per law became 10).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analysis import fit as F
from analysis.cells import Groups


@dataclasses.dataclass
class FitCounts:
    """What fitting one law across resamples cost, and how many resamples failed."""

    distinct: int = 0  # distinct resamples fitted (repeats reuse their fit)
    lbfgs_iterations: int = 0  # over the full-data grid and every distinct resample
    failed: int = 0  # resamples (repeats included) whose fit hit the iteration cap: NaN


@dataclasses.dataclass
class LawFit:
    """One law for one arm (or one arm pair) across resamples."""

    law: str  # "L(N)", "L(C)", "L(N,D)" or "k(C)"
    variant: str
    names: tuple[str, ...]
    params: np.ndarray  # [n_resamples + 1, n_params]; row 0 = full data; NaN = not fitted
    points: np.ndarray  # indices into Groups.info of the points the law was fitted on
    counts: FitCounts | None = None

    def full(self) -> dict[str, float] | None:
        row = self.params[0]
        return None if np.isnan(row).any() else dict(zip(self.names, row.tolist(), strict=True))


def fit_across_resamples(
    model: F.LSEModel, loss: np.ndarray, starts: np.ndarray, min_points: int
) -> tuple[np.ndarray, FitCounts]:
    """``loss [B+1, P]`` (NaN = missing) -> params ``[B+1, n_params]``; row 0 from ``starts``.

    Rows 1.. are warm-started from row 0's optimum with an iteration cap; a resample whose fit
    reaches the cap is not at an optimum and is left NaN (counted in ``FitCounts.failed``).
    """
    num_rows, num_params = loss.shape[0], len(model.names)
    params = np.full((num_rows, num_params), np.nan)
    counts = FitCounts()
    finite = np.isfinite(loss)
    log_loss = np.log(np.where(finite, loss, 1.0))
    if finite[0].sum() < min_points:
        return params, counts
    full = F.fit(model, log_loss[0], starts, finite[0].astype(float))
    params[0] = full.params
    counts.lbfgs_iterations += full.iterations
    enough = finite[1:].sum(axis=1) >= min_points  # [B]
    # identical resamples have bit-identical rows (cells.build_groups computes each once)
    rows = np.where(finite[1:], loss[1:], -1.0)  # [B, P]; -1 marks a missing point
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    distinct = np.full((len(first), num_params), np.nan)
    for u, b in enumerate(first):
        if not enough[b]:
            continue
        got = F.fit(
            model, log_loss[b + 1], params[0], finite[b + 1].astype(float), F.RESAMPLE_OPTIONS
        )
        counts.distinct += 1
        counts.lbfgs_iterations += got.iterations
        if not got.hit_cap:
            distinct[u] = got.params
    params[1:] = distinct[inverse.reshape(-1)]
    counts.failed = int((enough & np.isnan(params[1:, 0])).sum())
    return params, counts


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
            starts = F.grid_starts(model)
            params, counts = fit_across_resamples(model, groups.loss[:, pts], starts, 3)
            fits.append(LawFit(law, variant, model.names, params, pts, counts))
        all_pts = np.flatnonzero((info["variant"] == variant).to_numpy())
        budgets = info.iloc[all_pts].groupby("size")["tokens"].nunique()
        if (budgets >= 2).any():
            model = F.chinchilla_model(n[all_pts], d[all_pts])
            starts = F.grid_starts(model)
            params, counts = fit_across_resamples(model, groups.loss[:, all_pts], starts, 5)
            fits.append(LawFit("L(N,D)", variant, model.names, params, all_pts, counts))
    base_pts = _curve_points(groups, baseline)
    for variant in sorted(set(info["variant"]) - {baseline}):
        pts = np.concatenate([base_pts, _curve_points(groups, variant)])
        is_variant = np.arange(len(pts)) >= len(base_pts)
        model = F.shared_floor_model(c[pts], is_variant)
        starts = _shared_starts(model, fits, baseline, variant)
        # both arms need >= 2 sizes for their own slope; 5 parameters need >= 5 points
        params, counts = fit_across_resamples(model, groups.loss[:, pts], starts, 5)
        params[_too_few_per_arm(groups.loss[:, pts], is_variant)] = np.nan
        fits.append(LawFit("k(C)", variant, model.names, params, pts, counts))
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
