"""The verdict rule, written once: here (code), in every report (``RULE``) and in the README.

k0 and gamma intervals are percentile intervals over the parametric-bootstrap draws of
``analysis.stats.variance.noise`` (seed noise as two fitted components, small-sample t inflation); a
gain's interval is the wider of that and the paired seeds' t interval
(``analysis.stats.gains.robust``), and every claim needs a rejection in the variant's weighted Holm
family (``analysis.stats.gains.levels``). An interval is given only when it can mean something: at
least three seeds (three *paired* seeds for a per-size gain) and a fit on at least half of the
draws; otherwise it is ``None`` and the report says "not available", never a made-up interval.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.stats.fits.laws import LawFit
from analysis.stats.gains.levels import ALPHA, MIN_SEEDS, ci, size_weights, weighted_holm
from analysis.stats.planning.power import mde, resolvable, seeds_to_resolve
from analysis.stats.rules.evidence import Evidence
from analysis.tables.judgement import Judgement

MIN_SIZES = 4  # a trend (gamma) from fewer sizes per arm is not judged
FAR_EXTRAPOLATION = 100.0  # beyond this many times the largest measured compute: say so

GAMMA_PIN = math.log10(1.25)  # |gamma| <= this: k changes by at most 1.25x per decade of C
LAW_CHECKED = ("persists", "grows", "fades")  # the words that say how the gain goes on with C
LAW_ROWS = 3  # the backtest's top-step rows a variant's flag reads: its gain, its loss, the base's

RULE = """\
Verdict per variant. gain = baseline loss - variant loss (positive = the variant is better),
paired on the seeds both arms completed, at one (size, tokens) only. top gain = the gain at the
largest size both arms measured (their largest common token budget). A gain's interval is the
wider of two: the parametric bootstrap over the fitted seed-noise components (small-sample t
inflation, the LR re-chosen in every draw) and Student's t on that size's paired seeds; its
test rejects "no gain" only when both do. Family-wise: a variant's per-size tests are one
weighted Holm family at 5% (the top size 80% of the weight, the other sizes share 20%); with
several variants, Holm's step-down over the variants sets each one's level. gamma and k0
intervals are at the level the top size was tested at. margin = verdict.margin_pct (default
0.5% of the loss).
1. inconclusive: fewer than 4 sizes per arm, fewer than 3 paired seeds at the top size, k(C)
   not fitted, or the best LR of either arm at a compared (size, tokens) not bracketed (at the
   edge of its grid, or no LR with every seed completed); the reason names the cells and the
   LRs to add. An LR whose next step up diverged counts as bracketed.
2. grows: the top gain rejected "no gain" (CI > 0) and gamma CI > 0.
3. fades: gamma CI < 0 and the gain rejected "no gain" (CI > 0) at some measured size, in the
   family-wise procedure.
4. persists: top gain CI > 0, k0 CI > 1, and the whole gamma CI within +-log10(1.25) = 0.0969:
   k(C) = k0 (C/c_ref)^gamma changes by at most 1.25x per decade of compute anywhere in it.
5. helps: top gain CI > 0, but the trend is not pinned (gamma CI reaches past +-0.0969) or the
   compute multiplier k0's interval reaches 1; the reason says which.
6. hurts: top gain CI < 0 (the variant is significantly worse where measured largest).
7. none: the whole top gain CI lies within +-margin: equivalence shown.
8. undetected: the top gain CI contains 0 and reaches past the margin: not resolved; the reason
   names the smallest gain this study detects (80% power) and the seeds that would resolve the
   margin.
9. the law holds at the top: persists, grows and fades also need the backtest's top step to
   agree. The laws refitted on every size but the top predict the top; each of its three rows
   (the gain, the variant's loss, its baseline's loss) agrees when its predicted-minus-measured
   interval (both sides' intervals, in quadrature) holds 0, each row at the level / 3
   (Bonferroni: the flag's false alarms stay at the level over the three). A row that disagrees
   (the law changed past the fitted sizes), or a top step that could not be checked, turns the
   word into helps (top gain CI > 0), hurts (< 0) or inconclusive (its sign not resolved); the
   reason names the rows: "the law changed past 33.1M: gain predicted 1.19% [0.85, 1.47],
   measured 0.36% [0.15, 0.56]".
Extrapolation never makes a claim: k(C) = k0 (C/c_ref)^gamma only judges the trend; gains at
named scales are shown with how far they lie beyond the measured compute. gamma = 0 is a
constant compute multiplier, which still means an absolute loss gap that shrinks as the loss
approaches its floor E."""


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def stat(samples: np.ndarray, has_ci: bool) -> dict:
    """Data value (row 0) and the 95% CI over the draws (rows 1..)."""
    return {"value": _num(samples[0]), "ci95": ci(samples[1:], ALPHA) if has_ci else None}


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


def apply_rule(evidence: Evidence, level: float | None, judgement: Judgement) -> dict:
    """Apply RULE to one variant's ``evidence`` (``analysis.stats.rules.evidence``: its
    comparison, a ``GainTest`` per ``comparison.curve`` point, ``gamma, k0 [B+1]`` from the k(C)
    fit, every guard it failed, and the backtest's top step for rule 9, called only when a word
    needs it). ``level`` the variant's level from Holm across variants (None = the step-down
    stopped before it); ``judgement.level`` the study's family-wise level (a sequential look's
    nominal level), ``judgement.margin_pct`` the equivalence margin."""
    comparison, tests, gamma, k0 = evidence.comparison, evidence.tests, evidence.gamma, evidence.k0
    guards, law = list(evidence.all_guards), evidence.law
    alpha, margin_pct = judgement.level, judgement.margin_pct
    out: dict = {"level": level, "margin_pct": margin_pct, "top_gain_pct": None}
    out.update(gamma=None, k0=None, sizes=[])
    family = [i for i, b in enumerate(comparison.curve) if b.num_paired >= MIN_SEEDS]
    top_i = len(comparison.curve) - 1
    if top_i not in family:
        family = []
    weights = size_weights(len(family))
    p = [tests[i].p() for i in family]
    if level is None:
        rejected, tested = [False] * len(family), [w * alpha for w in weights]
    else:
        rejected, tested = weighted_holm(p, weights, level)
    for j, i in enumerate(family):
        b = comparison.curve[i]
        interval, source = tests[i].interval(tested[j])
        out["sizes"].append({"size": b.size, "tokens": b.tokens, "p": p[j], "weight": weights[j]})
        out["sizes"][-1].update(level=tested[j], rejected=rejected[j], ci=interval)
        out["sizes"][-1].update(value=_num(tests[i].value), decided_by=source)
    top_level = tested[-1] if family else alpha
    if family and out["sizes"][-1]["ci"] is not None:
        out["top_gain_pct"] = dict(out["sizes"][-1])
        out["top_gain_pct"].update(paired_ci=tests[top_i].t_interval(top_level))
        out["top_gain_pct"].update(pooled_ci=ci(tests[top_i].draws, top_level))
        # the paired t's two parts: the seeds' standard error and the LR grid's resolution
        top_test = tests[top_i]
        out["top_gain_pct"].update(seeds_se=_num(top_test.se), grid_sd=_num(top_test.tune_var**0.5))
    if gamma is not None and np.isfinite(gamma[0]):
        interval = ci(gamma[1:], top_level)
        if interval is not None:
            out["gamma"] = {"value": float(gamma[0]), "ci": interval}
            out["k0"] = {"value": float(k0[0]), "ci": ci(k0[1:], top_level)}
    if out["top_gain_pct"] is None and not guards:
        guards = ["no interval for the top gain"]
    if out["gamma"] is None and not guards:
        guards = ["no interval for gamma (k(C) fitted on too few draws)"]
    if guards:
        return {**out, "verdict": "inconclusive", "reason": "; ".join(guards)}
    result = _rule(out, level, tests[top_i])
    if law is not None and result["verdict"] in LAW_CHECKED:
        result = law_holds(result, law(law_level(alpha)))
    if level is not None and level < alpha:
        result["reason"] += f" (variant level {100 * level:.3g}%: Holm across variants)"
    return result


def _rule(out: dict, level: float | None, top_test) -> dict:
    """Steps 2-8 of RULE on intervals that exist (the guards passed)."""
    t, g, k = out["top_gain_pct"], out["gamma"], out["k0"]
    t_clause = clause(f"gain@{t['size']}", t["value"], t["ci"], "%")
    g_clause = clause("gamma", g["value"], g["ci"])
    t_sign = sign(t["ci"]) if t["rejected"] else 0
    if t_sign > 0 and sign(g["ci"]) > 0:
        return {**out, "verdict": "grows", "reason": f"{t_clause}; {g_clause}"}
    if sign(g["ci"]) < 0:
        for s in out["sizes"]:
            if s["rejected"] and sign(s["ci"]) > 0:
                earlier = clause(f"gain@{s['size']}", s["value"], s["ci"], "%")
                return {**out, "verdict": "fades", "reason": f"{g_clause}; {earlier}"}
    pinned = -GAMMA_PIN <= g["ci"][0] and g["ci"][1] <= GAMMA_PIN
    k_clause = "k0 not available" if k["ci"] is None else clause("k0", k["value"], k["ci"], ref=1)
    if t_sign > 0 and pinned and sign(k["ci"], 1.0) > 0:
        pin = f"gamma CI within +-{GAMMA_PIN:.4g}: k changes by at most 1.25x per decade"
        reason = f"{t_clause}; {g_clause}; {pin}; {k_clause}"
        return {**out, "verdict": "persists", "reason": reason}
    if t_sign > 0:
        return {**out, "verdict": "helps", "reason": _helps_reason(t_clause, g_clause, k, pinned)}
    if t_sign < 0:
        return {**out, "verdict": "hurts", "reason": t_clause}
    holm = "" if level is not None else " (Holm step-down stopped before this variant)"
    margin = out["margin_pct"]
    if -margin <= t["ci"][0] and t["ci"][1] <= margin:
        reason = f"{t_clause}; CI within the +-{margin:.3g}% margin: equivalent{holm}"
        return {**out, "verdict": "none", "reason": reason}
    detect, seeds = resolution(top_test, t["level"], margin)
    grid_bound = seeds is None and grid_limits(top_test, t["level"], margin)
    out.update(detectable_gain_pct=detect, seeds_to_resolve_margin=seeds, grid_limits=grid_bound)
    seeds_text = f"about {seeds} paired seeds" if seeds else "more seeds than can be planned"
    need = f"{seeds_text} would resolve +-{margin:.3g}%"
    if grid_bound:  # the grid's own term caps the power: seeds cannot shrink it
        need = (
            f"more seeds alone cannot resolve +-{margin:.3g}% at this LR grid's resolution; a "
            "finer LR grid near the best LRs could"
        )
    reason = (
        f"{t_clause}; CI reaches past the +-{margin:.3g}% margin: not resolved{holm}; this study "
        f"detects a gain of {detect:.3g}% (80% power); {need}"
    )
    return {**out, "verdict": "undetected", "reason": reason}


def law_level(alpha: float) -> float:
    """Rule 9's level for each of the top step's rows: Bonferroni over the ``LAW_ROWS``, so a
    law that holds is flagged with probability at most ``alpha``."""
    return alpha / LAW_ROWS


def law_holds(result: dict, check: dict) -> dict:
    """Rule 9 on a decision of steps 2-8: ``check`` is the backtest's top step for the variant
    (``agrees`` True / False / None, its ``rows``); a persists, grows or fades it does not
    confirm becomes helps, hurts or inconclusive by the top gain's resolved sign."""
    out = {**result, "backtest_top": check}
    if check["agrees"] is True:
        return out
    t = result["top_gain_pct"]
    t_sign = sign(t["ci"]) if t["rejected"] else 0
    word = "helps" if t_sign > 0 else "hurts" if t_sign < 0 else "inconclusive"
    if check["agrees"] is False:
        rows = "; ".join(_row_clause(r) for r in check["rows"] if r["agrees"] is False)
        why = f"the law changed past {check['fitted_sizes'][-1]}: {rows}"
    else:
        why = f"the backtest could not check the top size: {check['error']}"
    level = f"each of the top step's {LAW_ROWS} rows at {100 * check.get('level', 0):.3g}%"
    t_clause = clause(f"gain@{t['size']}", t["value"], t["ci"], "%")
    reason = f"{t_clause}; {why} ({level}); {result['verdict']} needs the backtest to agree"
    return {**out, "verdict": word, "reason": reason}


def _row_clause(row: dict) -> str:
    """``gain predicted 1.19% [0.85, 1.47], measured 0.36% [0.15, 0.56]``."""
    unit = row["unit"]

    def at(value, interval) -> str:
        text = f"{value:.3g}{unit}" if unit else f"{value:.4g}"
        if interval is None:
            return text
        digits = ".3g" if unit else ".4g"
        return f"{text} [{interval[0]:{digits}}, {interval[1]:{digits}}]"

    predicted, measured = at(row["predicted"], row["ci"]), at(row["measured"], row["measured_ci"])
    return f"{row['quantity']} predicted {predicted}, measured {measured}"


def _helps_reason(t_clause: str, g_clause: str, k: dict, pinned: bool) -> str:
    """Rule 5: the significant top gain, and which part of the trend is not pinned."""
    if not pinned:
        return (
            f"{t_clause}; trend not pinned: {g_clause} reaches past +-{GAMMA_PIN:.4g} "
            "(k could change by more than 1.25x per decade of compute)"
        )
    if k["ci"] is None:
        return f"{t_clause}; {g_clause}; the compute multiplier k0 has no interval"
    k_clause = clause("k0", k["value"], k["ci"], ref=1)
    if sign(k["ci"], 1.0) < 0:
        why = "the fitted compute multiplier's interval lies below 1"
    else:
        why = "the fitted compute multiplier's interval includes 1"
    return f"{t_clause}; {g_clause}; but {why}: {k_clause}"


def resolution(test, alpha: float, margin_pct: float) -> tuple[float, int | None]:
    """(the gain the deciding test detects with 80% power at ``alpha``, the paired seeds that
    would show equivalence within +-``margin_pct`` with 80% power when the truth is 0)."""
    se, df = test.half_width_se()
    n = df + 1 if np.isfinite(df) else test.df + 1
    sd = se * math.sqrt(n)  # per-seed sd of the paired gain
    tune = test.tune_var
    return mde(sd, int(n), alpha, tune_var=tune), seeds_to_resolve(sd, margin_pct, alpha, tune)


def grid_limits(test, alpha: float, margin_pct: float) -> bool:
    """True when the LR grid's resolution alone (``test.tune_var``) keeps the interval from
    fitting within +-``margin_pct``, whatever the seeds."""
    return not resolvable(margin_pct, alpha, test.tune_var)
