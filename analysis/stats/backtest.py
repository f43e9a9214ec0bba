"""The study tests its own extrapolation: refit without the top size(s), predict the held-out size.

Why: the report's extrapolations (k(C) carried to 1B, 7B) rest on a law fitted over the measured
sizes, and nothing says how well that law predicts even one size past its data. Each study can
check it on itself (OLMo's ladder does this by rollout): fit the sizes below a measured one,
predict it, compare. Here every step refits exactly as the verdict does (``refit``: the same LR
rules, noise model, parametric bootstrap, L(C) per arm and the k(C) gain model with the LR grid's
term), on the runs of the fitted sizes only, and predicts the held-out size's loss per arm (its
L(C) at that arm's compute there) and its paired gain (k(C) at the variant's compute there,
``L_b - L_v`` in % of ``L_b``), each with the 95% percentile interval over the draws.

Steps: with 3 sizes or more, fit all sizes but the top and predict the top (the backtest); with 4
or more also every earlier step of the rollout, fit sizes 1..k and predict k+1 (k >= 3: the k(C)
model has 5 parameters and needs 3 sizes per arm). A step ``agrees`` when the difference between
predicted and measured holds 0 in an interval that carries both sides' uncertainty (the
prediction's 95% interval and the measured value's own, combined per side in quadrature); the
prediction ``covered`` the measured value when that value lies in the prediction's interval.
The skill shown is the farthest compute ratio (held-out compute over the largest fitted) at which
every step agreed: the report prints no extrapolation interval beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.stats.gains.levels import ALPHA, ci
from analysis.stats.gains.robust import GainTest
from analysis.stats.rules.verdict import EffectiveCompute

MIN_FITTED = 3  # sizes a step fits on: L(C) has 3 parameters, k(C) 5 over both arms

# refit(table) -> (groups, fits, judged) as the verdict computes them (analysis.stats.analyze)
Refit = Callable[[pd.DataFrame], tuple]


def _num(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _sizes(groups) -> list[str]:
    """The measured sizes, smallest first (by each size's smallest N)."""
    info = groups.info[groups.info["on_curve"]]
    return list(info.groupby("size")["num_nonembedding_params"].min().sort_values().index)


def _group(groups, variant: str, size: str) -> int | None:
    info = groups.info
    rows = np.flatnonzero(
        ((info["variant"] == variant) & (info["size"] == size) & info["on_curve"]).to_numpy()
    )
    return int(rows[0]) if rows.size else None


def _against(pred: float, pred_ci, meas: float, meas_ci) -> tuple[list[float] | None, bool | None]:
    """The interval of ``pred - meas`` (each side's 95% half-widths added in quadrature: the held-
    out size's noise is independent of the fitted sizes') and whether it holds 0."""
    d = pred - meas
    if pred_ci is None or meas_ci is None:  # no intervals: nothing shown either way
        return None, None
    low = d - math.hypot(pred - pred_ci[0], meas_ci[1] - meas)
    high = d + math.hypot(pred_ci[1] - pred, meas - meas_ci[0])
    return [low, high], low <= 0.0 <= high


def _row(pred: np.ndarray, meas: float, meas_ci, has_ci: bool, error_pct: float) -> dict:
    value = _num(pred[0])
    interval = ci(pred[1:]) if has_ci else None
    out = {"predicted": value, "ci95": interval, "measured": _num(meas), "measured_ci95": meas_ci}
    out["error_pct"] = _num(error_pct)
    if value is None:
        return {**out, "covered": None, "agrees": None, "difference_ci95": None}
    covered = None if interval is None else bool(interval[0] <= meas <= interval[1])
    diff, agrees = _against(value, interval, meas, meas_ci)
    agrees = None if agrees is None else bool(agrees)
    return {**out, "covered": covered, "difference_ci95": diff, "agrees": agrees}


def _loss_rows(sub_fits, groups, held: str, has_ci: bool) -> list[dict]:
    """Per arm: its L(C) fitted on the smaller sizes, at its compute at the held-out size."""
    out = []
    for f in sub_fits:
        if f.law != "L(C)":
            continue
        g = _group(groups, f.variant, held)
        if g is None:
            continue
        compute = float(groups.info.at[g, "flops"])
        a, alpha, e = f.params.T
        pred = np.exp(e) + np.exp(a - alpha * math.log(compute))  # [B+1]
        meas = float(groups.loss[0, g])
        meas_ci = ci(groups.loss[1:, g]) if has_ci else None
        error = 100.0 * (pred[0] - meas) / meas
        out.append({"variant": f.variant, **_row(pred, meas, meas_ci, has_ci, error)})
    return out


def _gain_rows(sub_judged, judged, groups, held: str, has_ci: bool) -> list[dict]:
    """Per variant: k(C) fitted on the smaller sizes, its gain at the held-out size's compute."""
    out = []
    for variant, one in judged.items():
        budget = next((b for b in one.comparison.curve if b.size == held), None)
        sub = sub_judged.get(variant)
        if budget is None or sub is None or sub.k_fit is None:
            continue
        compute = float(groups.info.at[budget.var, "flops"])
        base, var = EffectiveCompute(sub.k_fit, sub.c_ref).losses(compute)
        with np.errstate(invalid="ignore", divide="ignore"):
            pred = 100.0 * (base - var) / base
        test = GainTest.of(budget, groups)
        meas_ci = test.interval(ALPHA)[0] if has_ci else None
        meas = float(test.value)
        row = _row(pred, meas, meas_ci, has_ci, pred[0] - meas)
        out.append({"variant": variant, "baseline": budget.base_arm, **row})
    return out


def _step(refit: Refit, table: pd.DataFrame, sizes: list[str], k: int, full) -> dict:
    """Fit sizes[:k], predict sizes[k]."""
    groups, judged, has_ci = full
    fitted, held = sizes[:k], sizes[k]
    step = {"fitted_sizes": fitted, "held_out": held}
    sub_table = table[table["size"].isin(fitted)]
    try:
        sub_groups, sub_fits, sub_judged = refit(sub_table)
    except ValueError as err:  # e.g. no usable baseline run among the fitted sizes
        return {**step, "losses": [], "gains": [], "error": str(err)}
    info = groups.info
    c_fit = float(info[info["size"].isin(fitted)]["flops"].max())
    c_held = float(info[info["size"] == held]["flops"].max())
    step["compute_ratio"] = c_held / c_fit
    step["losses"] = _loss_rows(sub_fits, groups, held, has_ci)
    step["gains"] = _gain_rows(sub_judged, judged, groups, held, has_ci)
    step["num_runs_fitted"] = int(len(sub_table))
    del sub_groups
    return step


def _skill(steps: list[dict]) -> dict:
    """The farthest compute ratio (held-out over largest fitted compute) the rollout checked, if
    every prediction of every step agreed with its measurement (None otherwise: no skill shown),
    and the backtest's own step (the last: the top size held out) in brief."""
    rows = [r for s in steps for r in s.get("losses", []) + s.get("gains", [])]
    ok = bool(rows) and all(r["agrees"] is True for r in rows)
    ratios = [s["compute_ratio"] for s in steps if "compute_ratio" in s]
    top = steps[-1]
    gains = [r for r in top.get("gains", []) if r["predicted"] is not None]
    losses = [r for r in top.get("losses", []) if r["predicted"] is not None]
    return {
        "shown_up_to_compute_ratio": max(ratios) if ok and ratios else None,
        "held_out": top["held_out"],
        "compute_ratio": top.get("compute_ratio"),
        "max_abs_loss_error_pct": max((abs(r["error_pct"]) for r in losses), default=None),
        "max_abs_gain_error_pct": max((abs(r["error_pct"]) for r in gains), default=None),
        "flagged": sorted({r["variant"] for r in losses + gains if r["agrees"] is False}),
    }


def backtest(refit: Refit, table: pd.DataFrame, groups, judged: dict, has_ci: bool) -> dict:
    """verdict.json's ``backtest``: the rollout's steps (the last holds the top size out) and the
    skill they show. ``table``: the N axis's runs (each size's largest budget); ``groups``,
    ``judged``: the full analysis's, whose held-out measurements the predictions meet."""
    sizes = _sizes(groups)
    if len(sizes) < MIN_FITTED + 1:
        return {
            "available": False,
            "reason": f"{len(sizes)} sizes; a backtest fits >= {MIN_FITTED} and holds one out",
            "steps": [],
        }
    full = (groups, judged, has_ci)
    steps = [_step(refit, table, sizes, k, full) for k in range(MIN_FITTED, len(sizes))]
    return {
        "available": True,
        "intervals": has_ci,
        "steps": steps,
        "skill": _skill(steps),
    }
