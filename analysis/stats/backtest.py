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
model has 5 parameters and needs 3 sizes per arm). A row ``agrees`` when the difference between
predicted and measured holds 0 in an interval that carries both sides' uncertainty (the
prediction's interval and the measured value's own, combined per side in quadrature), each at
the flag's per-row level: the verdict's rule reads a variant's three top-step rows (its
baseline's loss, its own loss, its gain) as one family, Bonferroni over the three
(``analysis.stats.rules.verdict.law_level``). The prediction ``covered`` the measured value when
that value lies in its 95% interval. The skill shown is the farthest compute ratio (held-out
compute over the largest fitted) at which every row agreed: the report prints no extrapolation
interval beyond it.

A step is refitted once, on first use (``Backtest.step``): the verdict's rule asks for the top
step only when a word needs it (persists, grows, fades), and verdict.json's ``backtest``
(``Backtest.as_dict``) reuses that refit.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.stats.gains.levels import ALPHA, ci
from analysis.stats.gains.robust import GainTest
from analysis.stats.rules.verdict import EffectiveCompute

MIN_FITTED = 3  # sizes a step fits on: L(C) has 3 parameters, k(C) 5 over both arms

# refit(table, step) -> (groups, fits, judged) as the verdict computes them (analysis.stats.analyze)
# on the runs of ``table``; ``step`` (1 = the rollout's first) seeds the step's own draws
Refit = Callable[[pd.DataFrame, int], tuple]


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
    """The interval of ``pred - meas`` (each side's half-widths added in quadrature: the held-out
    size's noise is independent of the fitted sizes') and whether it holds 0."""
    d = pred - meas
    if pred_ci is None or meas_ci is None:  # no intervals: nothing shown either way
        return None, None
    low = d - math.hypot(pred - pred_ci[0], meas_ci[1] - meas)
    high = d + math.hypot(pred_ci[1] - pred, meas - meas_ci[0])
    return [low, high], bool(low <= 0.0 <= high)


@dataclasses.dataclass(frozen=True)
class Check:
    """One row of a step: a prediction's draws against what the held-out size measured."""

    variant: str
    kind: str  # "loss" (the arm's, nats) or "gain" (% of the baseline's loss)
    pred: np.ndarray  # [B+1] the data's prediction, then each draw's
    meas: float
    meas_ci: Callable[[float], list[float] | None]  # level -> the measurement's interval
    error_pct: float
    baseline: str | None = None  # a gain's baseline arm

    def row(self, level: float, has_ci: bool) -> dict:
        """verdict.json's row: 95% intervals to show, ``agrees`` at ``level``."""
        value = _num(self.pred[0])
        interval = ci(self.pred[1:], ALPHA) if has_ci else None
        meas_ci = self.meas_ci(ALPHA) if has_ci else None
        out: dict = {"variant": self.variant}
        if self.baseline is not None:
            out["baseline"] = self.baseline
        out.update(predicted=value, ci95=interval, measured=_num(self.meas), measured_ci95=meas_ci)
        out["error_pct"] = _num(self.error_pct)
        if value is None:
            none = dict.fromkeys(("covered", "difference_ci95", "difference_ci", "agrees"))
            return {**out, **none}
        out["covered"] = None if interval is None else bool(interval[0] <= self.meas <= interval[1])
        out["difference_ci95"] = _against(value, interval, self.meas, meas_ci)[0]
        at_level = self.at(level) if has_ci else (None, None)
        return {**out, "difference_ci": at_level[0], "agrees": at_level[1]}

    def at(self, level: float) -> tuple[list[float] | None, bool | None]:
        """(the difference's interval, whether it holds 0) with both sides at ``level``."""
        value = _num(self.pred[0])
        if value is None:
            return None, None
        return _against(value, ci(self.pred[1:], level), self.meas, self.meas_ci(level))


@dataclasses.dataclass(frozen=True)
class Step:
    """Fit ``fitted`` sizes, predict ``held``: the checks (loss rows first), or why not."""

    fitted: list[str]
    held: str
    checks: list[Check]
    compute_ratio: float | None = None  # held-out compute over the largest fitted
    num_runs_fitted: int = 0
    error: str | None = None

    def as_dict(self, level: float, has_ci: bool) -> dict:
        step: dict = {"fitted_sizes": self.fitted, "held_out": self.held}
        rows = {
            kind: [c.row(level, has_ci) for c in self.checks if c.kind == kind]
            for kind in ("loss", "gain")
        }
        if self.error is not None:
            return {**step, "losses": [], "gains": [], "error": self.error}
        step["compute_ratio"] = self.compute_ratio
        step.update(losses=rows["loss"], gains=rows["gain"], num_runs_fitted=self.num_runs_fitted)
        return {**step, "flag_level": level}


def _loss_checks(sub_fits, groups, held: str) -> list[Check]:
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
        meas_ci = functools.partial(ci, groups.loss[1:, g])  # the cell's loss over the draws
        error = 100.0 * (pred[0] - meas) / meas
        out.append(Check(f.variant, "loss", pred, meas, meas_ci, error))
    return out


def _gain_checks(sub_judged, judged, groups, held: str) -> list[Check]:
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

        def meas_ci(level: float, test=test) -> list[float] | None:
            return test.interval(level)[0]  # the verdict's own union interval

        meas = float(test.value)
        out.append(Check(variant, "gain", pred, meas, meas_ci, pred[0] - meas, budget.base_arm))
    return out


class Backtest:
    """One study's rollout, each step refitted once, on first use. ``table``: the N axis's runs
    (each size's largest budget); ``groups``, ``judged``: the full analysis's, whose held-out
    measurements the predictions meet; ``level``: the per-row level verdict.json's ``agrees``
    is read at (the rule's, ``law_level`` of the analysis's level)."""

    def __init__(
        self, refit: Refit, table: pd.DataFrame, groups, judged: dict, has_ci: bool, level: float
    ):
        self.refit, self.table, self.groups, self.judged = refit, table, groups, judged
        self.has_ci, self.level = has_ci, level
        self.sizes = _sizes(groups)
        self._steps: dict[int, Step] = {}

    @property
    def available(self) -> bool:
        return len(self.sizes) >= MIN_FITTED + 1

    def step(self, k: int) -> Step:
        """Fit ``sizes[:k]``, predict ``sizes[k]`` (refitted the first time only)."""
        if k not in self._steps:
            self._steps[k] = self._fit_step(k)
        return self._steps[k]

    def _fit_step(self, k: int) -> Step:
        fitted, held = self.sizes[:k], self.sizes[k]
        sub_table = self.table[self.table["size"].isin(fitted)]
        try:
            _, sub_fits, sub_judged = self.refit(sub_table, k - MIN_FITTED + 1)  # its own draws
        except ValueError as err:  # e.g. no usable baseline run among the fitted sizes
            return Step(fitted, held, [], error=str(err))
        info = self.groups.info
        c_fit = float(info[info["size"].isin(fitted)]["flops"].max())
        c_held = float(info[info["size"] == held]["flops"].max())
        checks = _loss_checks(sub_fits, self.groups, held)
        checks += _gain_checks(sub_judged, self.judged, self.groups, held)
        return Step(fitted, held, checks, c_held / c_fit, int(len(sub_table)))

    def top_check(self, variant: str, level: float) -> dict:
        """What the rule reads for ``variant``: the top step's three rows (the gain, the
        variant's loss, its baseline's loss at the top), each at ``level``, and ``agrees``:
        True when every one of them agrees, False when one disagrees, None when a row is missing
        (with ``error`` saying which)."""
        if not self.available:
            return {"agrees": None, "error": f"{len(self.sizes)} sizes; a backtest needs >= 4"}
        step = self.step(len(self.sizes) - 1)
        out: dict = {"held_out": step.held, "fitted_sizes": step.fitted, "level": level}
        if step.error is not None:
            return {**out, "agrees": None, "rows": [], "error": f"the refit failed ({step.error})"}
        gain = next((c for c in step.checks if c.kind == "gain" and c.variant == variant), None)
        arms = [] if gain is None else [gain.baseline, variant]
        losses = {c.variant: c for c in step.checks if c.kind == "loss"}
        checks = [gain, *(losses.get(a) for a in arms)]
        rows = [_check_row(c, level) for c in checks if c is not None]
        missing = gain is None or any(losses.get(a) is None for a in arms)
        agrees = [r["agrees"] for r in rows]
        out["rows"] = rows
        if False in agrees:
            return {**out, "agrees": False, "error": None}
        if missing or None in agrees:
            return {**out, "agrees": None, "error": f"no prediction of every row at {step.held}"}
        return {**out, "agrees": True, "error": None}

    def as_dict(self) -> dict:
        """verdict.json's ``backtest``: the rollout's steps (the last holds the top size out)
        and the skill they show."""
        if not self.available:
            why = f"{len(self.sizes)} sizes; a backtest fits >= {MIN_FITTED} and holds one out"
            return {"available": False, "reason": why, "steps": []}
        steps = [
            self.step(k).as_dict(self.level, self.has_ci)
            for k in range(MIN_FITTED, len(self.sizes))
        ]
        return {"available": True, "intervals": self.has_ci, "steps": steps, "skill": _skill(steps)}


def _check_row(c: Check, level: float) -> dict:
    """A row as the rule states it: the quantity, prediction and measurement at ``level``."""
    interval, agrees = c.at(level)
    return {
        "quantity": "gain" if c.kind == "gain" else f"{c.variant}'s loss",
        "unit": "%" if c.kind == "gain" else "",
        "predicted": _num(c.pred[0]),
        "ci": ci(c.pred[1:], level),
        "measured": _num(c.meas),
        "measured_ci": c.meas_ci(level),
        "difference_ci": interval,
        "agrees": agrees,
    }


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
