"""Fit every law on the full data (from the Approach-3 grid) and on each bootstrap draw.

The full data are fitted from the Approach-3 grid with L-BFGS. A draw's fit starts from that
optimum only (warm start): a draw is a small perturbation of the data, so its optimum lies near
the full-data one, and all draws are fitted together by a vectorised damped Gauss-Newton
(``analysis.stats.fits.batchfit``) on the same objective, which keeps 1,000 draws within seconds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analysis.stats.fits import fit
from analysis.stats.fits.batchfit import fit_batch as batch_fit
from analysis.stats.fits.batchfit import objective_batch
from analysis.stats.variance.cells import Groups


@dataclasses.dataclass
class FitCounts:
    """What fitting one law across resamples cost, and how many resamples failed."""

    distinct: int = 0  # draws fitted
    lbfgs_iterations: int = 0  # full-data grid (L-BFGS) plus the batched fit's iterations
    failed: int = 0  # draws whose fit did not converge: NaN, left out of every interval


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


SCREEN_ITER = 100
FIRST_ITER = 10  # every grid start, then only the SCREEN_KEEP best go on to SCREEN_ITER
SCREEN_KEEP = 64


def full_fit(model: fit.LSEModel, log_loss: np.ndarray, starts: np.ndarray, weight: np.ndarray):
    """Approach 3 on the data: every grid start, the best kept, polished by L-BFGS.

    The grid is screened by the batched fit instead of one loose L-BFGS run per start, which
    cost ~1 s per law: every start for ``FIRST_ITER`` iterations, then the ``SCREEN_KEEP`` lowest
    of them on to ``SCREEN_ITER`` (L(N, D)'s 4,500 starts for 100 iterations cost ~0.9 s; the two
    stages ~0.3 s, the same optimum to the polish's tolerance on 60 token-axis and 100 null
    studies); the best ``fit.NUM_POLISHED`` screened points are then polished by ``fit.fit`` to
    the tight tolerance.
    """
    if len(starts) <= fit.NUM_POLISHED:
        return fit.fit(model, log_loss, starts, weight)
    num = len(starts)
    y = np.broadcast_to(log_loss, (num, log_loss.size))
    w = np.broadcast_to(weight, (num, weight.size))
    theta, _, iterations = batch_fit(model, y, w, starts, FIRST_ITER)
    if num > SCREEN_KEEP:  # only the most promising starts go on
        score = objective_batch(model, theta, y, w)
        keep = np.argsort(np.where(np.isfinite(score), score, np.inf))[:SCREEN_KEEP]
        theta, y, w = theta[keep], y[keep], w[keep]
    theta, _, more = batch_fit(model, y, w, theta, SCREEN_ITER - FIRST_ITER)
    iterations += more
    score = objective_batch(model, theta, y, w)
    score = np.where(np.isfinite(score), score, np.inf)
    best = theta[np.argsort(score)[: fit.NUM_POLISHED]]
    got = fit.fit(model, log_loss, best, weight)
    return dataclasses.replace(got, iterations=got.iterations + iterations)


def fit_across_resamples(
    model: fit.LSEModel, loss: np.ndarray, starts: np.ndarray, min_points: int
) -> tuple[np.ndarray, FitCounts]:
    """``loss [B+1, P]`` (NaN = missing) -> params ``[B+1, n_params]``; row 0 from ``starts``.

    Rows 1.. are fitted together (``analysis.stats.fits.batchfit``), warm-started from row 0's
    optimum; a draw that does not converge is left NaN (counted in ``FitCounts.failed``).
    """
    num_rows, num_params = loss.shape[0], len(model.names)
    params = np.full((num_rows, num_params), np.nan)
    counts = FitCounts()
    finite = np.isfinite(loss)
    log_loss = np.log(np.where(finite, loss, 1.0))
    if finite[0].sum() < min_points:
        return params, counts
    full = full_fit(model, log_loss[0], starts, finite[0].astype(float))
    params[0] = full.params
    counts.lbfgs_iterations += full.iterations
    enough = finite[1:].sum(axis=1) >= min_points  # [B]
    rows = np.flatnonzero(enough)
    if rows.size:
        got, converged, iterations = batch_fit(
            model, log_loss[1:][rows], finite[1:][rows].astype(float), params[0]
        )
        counts.distinct += int(rows.size)
        counts.lbfgs_iterations += iterations
        params[1 + rows[converged]] = got[converged]
    counts.failed = int((enough & np.isnan(params[1:, 0])).sum())
    return params, counts


def _curve_points(groups: Groups, variant: str) -> np.ndarray:
    info = groups.info
    mask = (info["variant"] == variant) & info["on_curve"]
    return np.flatnonzero(mask.to_numpy())


def fit_arms(groups: Groups, laws: tuple[str, ...] = ("L(N)", "L(C)")) -> list[LawFit]:
    """L(N) and L(C) per arm on its largest budget per size (L(N, D), on every budget, is
    ``analysis.stats.axes.tokens.fit_nd``: the N analysis sees one budget per size); ``laws``
    picks (the backtest predicts from L(C) alone)."""
    info = groups.info
    fits: list[LawFit] = []
    n, c = (info[k].to_numpy(float) for k in ("num_nonembedding_params", "flops"))
    for variant in sorted(info["variant"].unique()):
        pts = _curve_points(groups, variant)
        for law, x in (("L(N)", n), ("L(C)", c)):
            if law not in laws:
                continue
            model = fit.power_law_model(x[pts])
            starts = fit.grid_starts(model)
            params, counts = fit_across_resamples(model, groups.loss[:, pts], starts, 3)
            fits.append(LawFit(law, variant, model.names, params, pts, counts))
    return fits


def fit_k(
    compute: np.ndarray,
    is_variant: np.ndarray,
    loss: np.ndarray,
    variant: str,
    points: np.ndarray,
    arm_starts: list[dict] | None = None,
) -> LawFit:
    """The shared-floor k(C) fit on matched points: ``loss [B+1, P]`` (both arms, paired seeds).

    ``arm_starts``: the two arms' separate L(C) optima (baseline, variant), extra grid starts.
    """
    model = fit.shared_floor_model(compute, is_variant)
    starts = [fit.tied_grid_starts(model)]
    if arm_starts and all(s is not None for s in arm_starts):
        b, v = arm_starts
        for e in (b["e"], v["e"]):
            starts.append(np.array([[b["a"], b["alpha"], v["a"], v["alpha"], e]]))
    # both arms need >= 2 sizes for their own slope; 5 parameters need >= 5 points
    params, counts = fit_across_resamples(model, loss, np.vstack(starts), 5)
    params[_too_few_per_arm(loss, is_variant)] = np.nan
    return LawFit("k(C)", variant, model.names, params, points, counts)


def _too_few_per_arm(loss: np.ndarray, is_variant: np.ndarray) -> np.ndarray:
    finite = np.isfinite(loss)
    return (finite[:, ~is_variant].sum(axis=1) < 2) | (finite[:, is_variant].sum(axis=1) < 2)
