"""The gain at matched GPU-hours beside the gain at matched FLOPs (verdict.json's ``time_matched``).

A lab pays for time, not FLOPs. A variant whose step takes ``r`` times the baseline's per token
gets ``1/r`` of the tokens in the same GPU-hours; with ``f`` times the baseline's FLOPs per token
it then spends ``f/r`` of the baseline's compute. So where the FLOP-matched gain compares both arms
at compute C, the time-matched one compares the baseline at C with the variant at ``C f / r``:

    gain_time = L_b(C) - L_v(C f / r) = gain_flops - (L_v(C f / r) - L_v(C))

The first term is the verdict's own FLOP-matched paired gain (``analysis.stats.gains.robust``:
its paired seeds, its pooled bootstrap, its LR grid term, its move to matched compute); the
second moves the variant along its own fitted law ``L_v(C) = E + A C^-alpha`` (the ``L(C)`` fit
of ``analysis.stats.fits.laws``, per bootstrap draw). The move is a few per cent of compute, so it
rests on the law's local slope, not on an extrapolation.

The time ratio is measured, never assumed: each run's median time per token over its logged
steps (``analysis.tables.step_times``; the median shrugs off a step slowed by a checkpoint or a
neighbour's burst), then per arm and size the geometric mean over its runs. Its uncertainty is the
runs' spread: ``log r`` has Welch's standard error and df over the two arms' runs, and each
bootstrap draw takes its own ``log r + se t_df`` (independent of the loss draws: the clock's
noise is not the loss's). The shift then carries that spread into both of the gain's intervals:
into the pooled draws (each with its own ratio), and into the paired-seed t interval as an extra
variance term (``tune_var``, which may only widen it): the shift's slope in ``log r`` times the
ratio's se, inflated by ``t_df / z`` for the ratio's few df, plus the law's own spread. A size
whose arms have fewer than two timed runs each has no spread: its
ratio is shown, its time-matched gain is not stated. A study with no time measurement says so
and states no number (``NOT_MEASURED``); it never assumes equal speed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.gains.levels import ALPHA
from analysis.stats.gains.robust import GainTest

__all__ = ["NOT_MEASURED", "MIN_TIMED_RUNS", "TimeRatio", "time_ratio", "time_matched"]

NOT_MEASURED = "no time measurement: the time-matched gain is not stated"
MIN_TIMED_RUNS = 2  # per arm and size: one run has no spread, so no interval for the ratio
TIME_SEED = 61  # the ratio draws' own stream, apart from the loss bootstrap's


@dataclasses.dataclass(frozen=True)
class TimeRatio:
    """The variant's time per token over the baseline's at one size, with its spread."""

    value: float  # exp(mean log t_v - mean log t_b)
    log_se: float  # Welch standard error of the log ratio (NaN: fewer than 2 runs an arm)
    df: float  # Welch-Satterthwaite df
    num_runs: tuple[int, int]  # (variant, baseline) timed runs
    per_token_s: tuple[float, float]  # each arm's geometric mean time per token (s)

    @property
    def resolved(self) -> bool:
        return math.isfinite(self.log_se) and min(self.num_runs) >= MIN_TIMED_RUNS

    def ci95(self) -> list[float] | None:
        if not self.resolved:
            return None
        if self.log_se == 0:
            return [self.value, self.value]
        half = float(stats.t.ppf(1 - ALPHA / 2, self.df)) * self.log_se
        return [self.value * math.exp(-half), self.value * math.exp(half)]

    def draws(self, num: int, rng: np.random.Generator) -> np.ndarray:
        """``[num + 1]`` ratios: row 0 the estimate, rows 1.. with the measurement's spread."""
        out = np.full(num + 1, self.value)
        if num and self.resolved and self.log_se > 0:
            out[1:] = self.value * np.exp(self.log_se * rng.standard_t(self.df, size=num))
        return out

    def as_dict(self) -> dict:
        return {
            "value": self.value,
            "ci95": self.ci95(),
            "resolved": self.resolved,
            "log_se": self.log_se if math.isfinite(self.log_se) else None,
            "df": self.df if math.isfinite(self.df) else None,
            "num_runs": {"variant": self.num_runs[0], "baseline": self.num_runs[1]},
            "time_per_token_s": {"variant": self.per_token_s[0], "baseline": self.per_token_s[1]},
        }


def time_ratio(times: pd.DataFrame, variant: str, baseline: str, size: str) -> TimeRatio | None:
    """``TimeRatio`` of ``variant`` over ``baseline`` at ``size`` from per-run times per token
    (columns ``variant``, ``size``, ``time_per_token_s``), or None where an arm has none."""
    here = times[(times["size"] == size) & np.isfinite(times["time_per_token_s"])]
    lv = np.log(here.loc[here["variant"] == variant, "time_per_token_s"].to_numpy(float))
    lb = np.log(here.loc[here["variant"] == baseline, "time_per_token_s"].to_numpy(float))
    if lv.size == 0 or lb.size == 0:
        return None
    se, df = float("nan"), float("nan")
    if min(lv.size, lb.size) >= MIN_TIMED_RUNS:
        v_v, v_b = lv.var(ddof=1) / lv.size, lb.var(ddof=1) / lb.size
        se = math.sqrt(v_v + v_b)
        denom = v_v**2 / (lv.size - 1) + v_b**2 / (lb.size - 1)
        df = (v_v + v_b) ** 2 / denom if denom > 0 else float(lv.size + lb.size - 2)
    return TimeRatio(
        float(np.exp(lv.mean() - lb.mean())),
        se,
        df,
        (int(lv.size), int(lb.size)),
        (float(np.exp(lv.mean())), float(np.exp(lb.mean()))),
    )


def _law_loss(params: np.ndarray, compute: np.ndarray) -> np.ndarray:
    """``E + A C^-alpha`` per draw from the L(C) fit's ``(a, alpha, e)`` rows ``[B+1, 3]``."""
    a, alpha, e = params.T
    return np.exp(a - alpha * np.log(compute)) + np.exp(e)


def _sign(ci: list[float] | None) -> int | None:
    """+1 / -1 where the interval excludes 0 on that side, 0 where it holds 0, None: none."""
    if ci is None:
        return None
    return 1 if ci[0] > 0 else -1 if ci[1] < 0 else 0


def _shift_pct(fit, budget, c_star: float, f: float, r: np.ndarray) -> np.ndarray:
    """``[B+1]`` % of the baseline's loss the variant loses going from ``c_star`` to
    ``c_star f / r`` along its own fitted L(C), per draw (row 0: the data's)."""
    base = _law_loss(fit.params, np.full(r.size, c_star))
    return 100.0 * (_law_loss(fit.params, c_star * f / r) - base) / budget.base_loss


def _ratio_var(fit, budget, c_star: float, f: float, ratio: TimeRatio) -> float:
    """The ratio's variance term of the paired t interval, %^2: the shift's slope in log r
    times the ratio's se, inflated by ``t_df / z`` (its df are few: 2 runs an arm give 1-2; the
    t draws of the pooled side have no finite variance at df <= 2, so it is not their variance)."""
    if not ratio.resolved or ratio.log_se == 0:
        return 0.0
    h = 1e-3
    ends = ratio.value * np.exp([h, -h])
    up, down = (float(_shift_pct(fit, budget, c_star, f, np.array([x]))[0]) for x in ends)
    slope = (up - down) / (2 * h)  # % per unit of log r
    inflate = float(stats.t.ppf(1 - ALPHA / 2, ratio.df) / stats.norm.ppf(1 - ALPHA / 2))
    return (slope * ratio.log_se * inflate) ** 2


def _budget_row(result, budget, ratio: TimeRatio, fit, rng) -> dict:
    """One size: the ratio, the compute the variant gets at the baseline's time, both gains."""
    groups = result.groups
    info = groups.info
    per_token = info["flops"].to_numpy(float) / info["tokens"].to_numpy(float)
    f = float(per_token[budget.var] / per_token[budget.base])  # FLOPs per token, v / b
    moved_var = budget.var_seed_shift is not None  # read at the baseline's compute instead
    c_star = float(info.at[budget.base if moved_var else budget.var, "flops"])
    num = groups.loss.shape[0] - 1  # as many draws as the loss bootstrap
    shift = _shift_pct(fit, budget, c_star, f, ratio.draws(num, rng))  # [B+1]
    at_estimate = _shift_pct(fit, budget, c_star, f, np.full(num + 1, ratio.value))
    fit_var = float(np.nanvar(at_estimate[1:], ddof=1)) if num > 1 else 0.0  # the law's own
    extra = (fit_var if math.isfinite(fit_var) else 0.0) + _ratio_var(fit, budget, c_star, f, ratio)
    flop = GainTest.of(budget, groups)
    timed = dataclasses.replace(
        flop,
        value=flop.value - float(shift[0]),
        draws=flop.draws - shift[1:],
        mean=flop.mean - float(shift[0]),
        tune_var=flop.tune_var + extra,
    )
    flop_ci, _ = flop.interval(ALPHA)
    time_ci, decided = timed.interval(ALPHA) if ratio.resolved else (None, None)
    stated = ratio.resolved and math.isfinite(timed.value)
    return {
        "size": budget.size,
        "baseline_arm": budget.base_arm,
        "time_ratio": ratio.as_dict(),
        "flops_per_token_ratio": f,
        "compute_at_matched_time": f / ratio.value,  # the variant's C over the baseline's
        "flop_gain_pct": {"value": flop.value, "ci95": flop_ci},
        "gain_pct": {
            "value": timed.value if stated else None,
            "ci95": time_ci if stated else None,
            "decided_by": decided if stated else None,
        },
        "stated": stated,
    }


def _disagreement(row: dict) -> str | None:
    """Why the time-matched gain reads otherwise than the FLOP-matched one, or None."""
    flop, timed = _sign(row["flop_gain_pct"]["ci95"]), _sign(row["gain_pct"]["ci95"])
    if flop is None or timed is None or flop == timed:
        return None
    words = {1: "is resolved positive", -1: "is resolved negative", 0: "holds 0"}
    return f"at matched FLOPs the gain {words[flop]}, at matched GPU-hours it {words[timed]}"


def time_matched(result, times: dict | None, seed: int) -> dict:
    """verdict.json's ``time_matched`` for ``result`` (``analysis.stats.analyze.Analysis``).

    ``times``: ``{"source", "device", "rows": [{"run_id", "variant", "size",
    "time_per_token_s"}]}`` (``analysis.tables.step_times``), or None: then ``measured`` is False
    and ``note`` says the time-matched gain is not stated. Per variant: every size's row
    (``_budget_row``), the top size's as ``top``, and ``disagrees`` (a sentence, or None) when
    the top size's time-matched interval reads otherwise than the FLOP-matched one."""
    rows = (times or {}).get("rows") or []
    if not rows:
        return {"measured": False, "note": NOT_MEASURED, "variants": []}
    frame = pd.DataFrame(rows)
    frame["size"] = frame["size"].astype(str)
    rng = np.random.default_rng([seed, TIME_SEED])
    law = {f.variant: f for f in result.fits if f.law == "L(C)"}
    out = []
    for variant, comp in result.comparisons.items():
        by_size = {}
        for budget in comp.curve:
            ratio = time_ratio(frame, variant, budget.base_arm, str(budget.size))
            if ratio is None or variant not in law:
                continue
            by_size[budget.size] = _budget_row(result, budget, ratio, law[variant], rng)
        if not by_size:
            continue
        top = list(by_size.values())[-1]
        out.append(
            {
                "variant": variant,
                "by_size": by_size,
                "top": top,
                "disagrees": _disagreement(top) if top["stated"] else None,
            }
        )
    untimed = sorted(set(result.comparisons) - {v["variant"] for v in out})
    note = None if out else "the timed runs do not cover both arms at any size: " + NOT_MEASURED
    return {
        "measured": bool(out),
        "source": str(times.get("source", "")),
        "device": str(times.get("device", "unknown")),
        "other_devices": int(times.get("other_devices") or 0),  # timed elsewhere: left out
        "basis": (
            "each run's median time per token over its logged steps; per arm and size the "
            "geometric mean over its runs; the variant read on its own fitted L(C) at the "
            "compute the baseline's GPU-hours buy it"
        ),
        "untimed_variants": untimed,
        "note": note,
        "variants": out,
    }
