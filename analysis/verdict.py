"""The verdict rule, written once: here (code), in every report (``RULE``) and in the README.

Intervals are percentile intervals over the parametric-bootstrap draws of ``analysis.noise``
(seed noise as two fitted components, small-sample t inflation). An interval is given only when
it can mean something: at least three seeds (three *paired* seeds for a per-size gain) and a
fit on at least half of the draws; otherwise it is ``None`` and the report says "not
available", never a made-up interval.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.compare import Comparison
from analysis.laws import LawFit

MIN_SIZES = 4  # a trend (gamma) from fewer sizes per arm is not judged
MIN_SEEDS = 3  # fewer seeds cannot estimate a spread worth an interval
ALPHA = 0.05
FAR_EXTRAPOLATION = 100.0  # beyond this many times the largest measured compute: say so

RULE = """\
Verdict per variant. gain = baseline loss - variant loss (positive = the variant is better),
paired on the seeds both arms completed, at one (size, tokens) only. top gain = the gain at the
largest size both arms measured (their largest common token budget). Intervals: parametric
bootstrap over the fitted seed-noise components with small-sample t inflation, at 95%; with
several variants at the level Holm's step-down procedure assigns each (top-gain test).
1. inconclusive: fewer than 4 sizes per arm, fewer than 3 paired seeds at the top size, k(C)
   not fitted, or the best LR of either arm at a compared (size, tokens) not bracketed (at the
   edge of its grid, or no LR with every seed completed); the reason names the cells and the
   LRs to add. An LR whose next step up diverged counts as bracketed.
2. grows: top gain CI > 0 and gamma CI > 0.
3. fades: gamma CI < 0 and the gain CI > 0 at some measured size.
4. persists: top gain CI > 0 and k0 CI > 1 (gamma CI contains 0: a constant compute
   multiplier over the measured range).
5. inconclusive: top gain CI > 0 but k0 CI reaches 1: the gain measured at the top size is
   significant, the fitted compute multiplier over the range is not (the reason says both).
6. hurts: top gain CI < 0 (the variant is significantly worse where measured largest).
7. none: top gain CI contains 0.
Extrapolation never makes a claim: k(C) = k0 (C/c_ref)^gamma only judges the trend; gains at
named scales are shown with how far they lie beyond the measured compute. gamma = 0 is a
constant compute multiplier, which still means an absolute loss gap that shrinks as the loss
approaches its floor E."""


def ci(samples: np.ndarray, alpha: float = ALPHA) -> list[float] | None:
    """Central ``1 - alpha`` percentile interval of the finite draws, or None with too few."""
    s = samples[np.isfinite(samples)]
    if samples.size == 0 or s.size < max(10, 0.5 * samples.size):
        return None
    lo, hi = np.percentile(s, [50 * alpha, 100 - 50 * alpha])
    return [float(lo), float(hi)]


def p_two_sided(samples: np.ndarray) -> float:
    """Bootstrap p-value of "= 0": twice the share of draws on the far side of 0 (at least
    1/(B+1)); ``ci(samples, a)`` excludes 0 exactly when this is below ``a``."""
    s = samples[np.isfinite(samples)]
    if s.size == 0:
        return 1.0
    side = min(np.mean(s <= 0), np.mean(s >= 0))
    return float(min(1.0, max(2 * side, 1.0 / (s.size + 1))))


def holm_levels(p_values: dict[str, float], alpha: float = ALPHA) -> dict[str, float | None]:
    """Holm (1979) step-down: the i-th smallest p is tested at ``alpha / (m - i)``; once one
    is not rejected, every later one is not (level None = not significant whatever its CI)."""
    order = sorted(p_values, key=p_values.get)
    levels: dict[str, float | None] = {}
    stopped = False
    for i, name in enumerate(order):
        level = alpha / (len(order) - i)
        levels[name] = None if stopped else level
        if not stopped and p_values[name] >= level:
            stopped = True
    return levels


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def stat(samples: np.ndarray, has_ci: bool) -> dict:
    """Data value (row 0) and the 95% CI over the draws (rows 1..)."""
    return {"value": _num(samples[0]), "ci95": ci(samples[1:]) if has_ci else None}


def natural_params(fit: LawFit) -> dict[str, np.ndarray]:
    """LSE parameters -> the law's own: E = e^e, A = e^a, B = e^b; exponents unchanged."""
    p = dict(zip(fit.names, fit.params.T, strict=True))  # each [B+1]
    out = {"E": np.exp(p["e"]), "A": np.exp(p["a"]), "alpha": p["alpha"]}
    if "b" in p:
        out.update(B=np.exp(p["b"]), beta=p["beta"])
    if "a_v" in p:
        out.update(A_variant=np.exp(p["a_v"]), alpha_variant=p["alpha_v"])
    return out


class EffectiveCompute:
    """``L_v(C) = L_b(k(C) C)``, ``k(C) = k0 (C / c_ref)^gamma``, from a shared-floor fit."""

    def __init__(self, fit: LawFit, c_ref: float):
        self.a, self.alpha, self.a_v, self.alpha_v, self.e = fit.params.T  # each [B+1]
        self.c_ref = c_ref
        with np.errstate(divide="ignore", invalid="ignore"):
            self.gamma = self.alpha_v / self.alpha - 1.0
            self.log_k_unit = (self.a - self.a_v) / self.alpha  # log k at C = 1

    def k(self, compute: float) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # a wild draw's k is inf: not a CI
            return np.exp(self.log_k_unit + self.gamma * math.log(compute))

    def losses(self, compute: float) -> tuple[np.ndarray, np.ndarray]:
        lc = math.log(compute)
        base = np.exp(self.e) + np.exp(self.a - self.alpha * lc)
        return base, np.exp(self.e) + np.exp(self.a_v - self.alpha_v * lc)


def clause(name: str, value: float, interval: list[float], unit: str = "", ref: int = 0) -> str:
    """``"gamma 0.012 CI [-0.03, 0.05] contains 0"``: a number, its interval and the relation
    that interval has to ``ref``, all from the same numbers (tests parse these back)."""
    rel = {1: f"> {ref}", -1: f"< {ref}", 0: f"contains {ref}"}[sign(interval, ref)]
    return f"{name} {value:.4g}{unit} CI [{interval[0]:.4g}, {interval[1]:.4g}] {rel}"


def sign(interval: list[float] | None, ref: float = 0.0) -> int:
    """+1 / -1 when the interval lies above / below ``ref``, else 0."""
    if interval is None:
        return 0
    return 1 if interval[0] > ref else -1 if interval[1] < ref else 0


def decide(
    comparison: Comparison,
    gamma: np.ndarray | None,
    k0: np.ndarray | None,
    level: float | None,
    guards: list[str],
) -> dict:
    """Apply RULE. ``gamma, k0 [B+1]`` from the k(C) fit; ``level`` the variant's Holm level
    (None = the step-down stopped before it); ``guards`` the failed guards (each a sentence)."""
    out: dict = {"level": level, "top_gain_pct": None, "gamma": None, "k0": None}
    top = comparison.top
    if top is not None:
        interval = ci(top.gain_pct[1:], level or ALPHA)
        if interval is not None:
            out["top_gain_pct"] = {"size": top.size, "tokens": top.tokens}
            out["top_gain_pct"].update(value=_num(top.gain_pct[0]), ci=interval)
    if gamma is not None and np.isfinite(gamma[0]):
        interval = ci(gamma[1:], level or ALPHA)
        if interval is not None:
            out["gamma"] = {"value": float(gamma[0]), "ci": interval}
            out["k0"] = {"value": float(k0[0]), "ci": ci(k0[1:], level or ALPHA)}
    if out["top_gain_pct"] is None and not guards:
        guards = ["no interval for the top gain"]
    if out["gamma"] is None and not guards:
        guards = ["no interval for gamma (k(C) fitted on too few draws)"]
    if guards:
        return {**out, "verdict": "inconclusive", "reason": "; ".join(guards)}
    result = _rule(comparison, out, level)
    if level is not None and level < ALPHA:
        result["reason"] += f" ({100 * (1 - level):.3g}% intervals: Holm)"
    return result


def _rule(comparison: Comparison, out: dict, level: float | None) -> dict:
    """Steps 2-7 of RULE on intervals that exist (the guards passed)."""
    t, g = out["top_gain_pct"], out["gamma"]
    t_clause = clause(f"gain@{t['size']}", t["value"], t["ci"], "%")
    g_clause = clause("gamma", g["value"], g["ci"])
    t_sign = 0 if level is None else sign(t["ci"])
    holm = "" if level is not None else " (Holm step-down stopped before this variant)"
    if t_sign > 0 and sign(g["ci"]) > 0:
        return {**out, "verdict": "grows", "reason": f"{t_clause}; {g_clause}"}
    if sign(g["ci"]) < 0 and level is not None:
        for b in comparison.curve:
            interval = ci(b.gain_pct[1:], level)
            if sign(interval) > 0 and b.num_paired >= MIN_SEEDS:
                earlier = clause(f"gain@{b.size}", float(b.gain_pct[0]), interval, "%")
                return {**out, "verdict": "fades", "reason": f"{g_clause}; {earlier}"}
    k = out["k0"]
    k_clause = "k0 not available" if k["ci"] is None else clause("k0", k["value"], k["ci"], ref=1)
    if t_sign > 0 and sign(k["ci"], 1.0) > 0:
        return {**out, "verdict": "persists", "reason": f"{t_clause}; {g_clause}; {k_clause}"}
    if t_sign > 0:  # a real gain where measured largest, no multiplier over the range
        return {**out, "verdict": "inconclusive", "reason": _split_reason(t, t_clause, k)}
    if t_sign < 0:
        return {**out, "verdict": "hurts", "reason": f"{t_clause}{holm}"}
    return {**out, "verdict": "none", "reason": f"{t_clause}{holm}"}


def _split_reason(top: dict, t_clause: str, k: dict) -> str:
    """Rule 5: both facts, each true of its numbers. ``k["ci"]`` may be None, contain 1, or lie
    below 1 (the fit disagrees with the top size); the words follow the interval."""
    said = f"measured gain at {top['size']} significant: {t_clause}"
    if k["ci"] is None:
        return f"{said}; but the compute multiplier k0 has no interval (k0 not available)"
    k_clause = clause("k0", k["value"], k["ci"], ref=1)
    if sign(k["ci"], 1.0) < 0:
        why = "the fitted compute multiplier's interval lies below 1"
    else:
        why = "the fitted compute multiplier's interval includes 1"
    return f"{said}; but {why}: {k_clause}"
