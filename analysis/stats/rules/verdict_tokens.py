"""The verdict along D (tokens), written once: here (code), in every report (``RULE_D``) and in
the README. Same outcomes and the same discipline as the N rule
(``analysis.stats.rules.verdict.RULE``).

What it judges: at a fixed size, does the paired gain survive more training tokens? The
measure is the absolute loss gap (baseline - variant, in loss units) against log2 D, because a
gap that stays constant is what "the gain persists with more tokens" means to a reader; in
percent a constant gap would read as growing, since the baseline's loss falls with D.
"""

from __future__ import annotations

import numpy as np

from analysis.stats.gains.levels import MIN_SEEDS, ci, level_or_default
from analysis.stats.rules import verdict as rules

MIN_BUDGETS = 3  # a trend along D from fewer matched budgets at every size is not judged

RULE_D = """\
Verdict along D (tokens) per variant. gain = baseline loss - variant loss at one (size, tokens),
paired on the seeds both arms completed, each arm at its own best LR for that (size, tokens).
D-axis sizes: sizes with >= 2 budgets both arms measured. top gain = the gain at the largest
D-axis size, at the largest budget both arms measured there. slope = change of the gain (loss
units) per doubling of D, least squares over the D-axis sizes with one intercept per size.
Intervals: the parametric bootstrap of the N rule, drawn per budget rank, at 95% (Holm's level
with several variants).
1. inconclusive: no size with >= 3 budgets both arms measured, fewer than 3 paired seeds at
   the top gain, no interval for the top gain or the slope, or the best LR of either arm at a
   compared (size, tokens) not bracketed; the reason names what is missing.
2. grows: top gain CI > 0 and slope CI > 0.
3. fades: slope CI < 0 and the gain CI > 0 at some budget of a D-axis size.
4. persists: top gain CI > 0 and slope CI contains 0 (no trend in the gap over the budgets).
5. hurts: top gain CI < 0.
6. none: top gain CI contains 0.
Extrapolation never makes a claim: the L(N, D) fits are shown, never judged; a slope describes
the measured budgets only."""


def axis_points(points: list) -> list:
    """Points of the D-axis sizes (>= 2 matched budgets)."""
    counts: dict[str, int] = {}
    for p in points:
        counts[p.budget.size] = counts.get(p.budget.size, 0) + 1
    return [p for p in points if counts[p.budget.size] >= 2]


def top_point(points: list):
    """The largest D-axis size's largest matched budget (points are sorted by N, then D)."""
    axis = axis_points(points)
    return axis[-1] if axis else None


def guards(points: list, top) -> list[str]:
    """Rule 1's sentences, except the LR guard (``analysis.stats.axes.tokens.token_lr_guards``)."""
    counts: dict[str, int] = {}
    for p in points:
        counts[p.budget.size] = counts.get(p.budget.size, 0) + 1
    out = []
    most = max(counts.values(), default=0)
    if most < MIN_BUDGETS:
        out.append(
            f"{most} budget(s) both arms measured at any one size; a trend along D needs "
            f">= {MIN_BUDGETS}"
        )
    if top is not None and top.budget.num_paired < MIN_SEEDS:
        out.append(
            f"{top.budget.num_paired} paired seed(s) at {top.budget.size} "
            f"@{top.budget.tokens:.3g} tokens; >= {MIN_SEEDS} needed"
        )
    return out


def _gain_clause(p, interval: list[float]) -> str:
    b = p.budget
    return rules.clause(f"gain@{b.size}/{b.tokens:.3g}", float(b.gain_loss[0]), interval)


def apply_rule_d(
    points: list, top, slope: np.ndarray, level: float | None, guards: list[str]
) -> dict:
    """Apply RULE_D. ``slope [B+1]`` (``analysis.stats.axes.tokens.slope``); ``level`` the Holm
    level (None = the step-down stopped before this variant); ``guards`` failed guards
    (sentences)."""
    out: dict = {"level": level, "top_gain": None, "slope": None}
    alpha = level_or_default(level)
    if top is not None and top.has_ci:
        interval = ci(top.budget.gain_loss[1:], alpha)
        if interval is not None:
            b = top.budget
            out["top_gain"] = {"size": b.size, "tokens": b.tokens, "ci": interval}
            out["top_gain"].update(value=float(b.gain_loss[0]), pct=float(b.gain_pct[0]))
    if slope.shape[0] > 1 and np.isfinite(slope[0]):
        interval = ci(slope[1:], alpha)
        if interval is not None:
            out["slope"] = {"value": float(slope[0]), "ci": interval}
    if not guards and out["top_gain"] is None:
        guards = ["no interval for the top gain (fewer than 3 seeds, or no noise model)"]
    if not guards and out["slope"] is None:
        guards = ["no interval for the slope"]
    if guards:
        return {**out, "verdict": "inconclusive", "reason": "; ".join(guards)}
    t, s = out["top_gain"], out["slope"]
    t_clause = _gain_clause(top, t["ci"])
    s_clause = rules.clause("slope", s["value"], s["ci"], " per doubling")
    t_sign = 0 if level is None else rules.sign(t["ci"])
    holm = "" if level is not None else " (Holm step-down stopped before this variant)"
    if t_sign > 0 and rules.sign(s["ci"]) > 0:
        return {**out, "verdict": "grows", "reason": f"{t_clause}; {s_clause}"}
    if rules.sign(s["ci"]) < 0 and level is not None:
        for p in axis_points(points):
            interval = ci(p.budget.gain_loss[1:], level) if p.has_ci else None
            if rules.sign(interval) > 0:
                reason = f"{s_clause}; {_gain_clause(p, interval)}"
                return {**out, "verdict": "fades", "reason": reason}
    if t_sign > 0:
        return {**out, "verdict": "persists", "reason": f"{t_clause}; {s_clause}"}
    if t_sign < 0:
        return {**out, "verdict": "hurts", "reason": f"{t_clause}{holm}"}
    return {**out, "verdict": "none", "reason": f"{t_clause}{holm}"}
