"""The numbers beside the verdict: seed noise and power, extrapolation, fitted-law tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.stats.fits.laws import LawFit
from analysis.stats.gains.compare import Comparison
from analysis.stats.gains.levels import ALPHA, MIN_SEEDS
from analysis.stats.gains.resolution import groups_pair_var
from analysis.stats.gains.robust import GainTest
from analysis.stats.planning.power import paired_sd_pct, power_table, sd_upper
from analysis.stats.rules import verdict as rules
from analysis.stats.variance.cells import Groups
from foundation.shapes import NAMED_SHAPES

TOKENS_PER_PARAM = 20.0  # Chinchilla-optimal budget (Hoffmann et al. 2022)


def named_scales() -> dict[str, dict]:
    """Each named scale's N, D = 20 N and C from the standard shape of that size
    (``foundation.shapes``): never from a fit over the measured models."""
    out = {}
    for name, shape in NAMED_SHAPES.items():
        n = float(shape.num_nonembedding_params())
        per_token = float(shape.flops_per_token())
        out[name] = {
            "shape": shape.source,
            "num_layers": shape.num_layers,
            "hidden_size": shape.hidden_size,
            "n_params": n,
            "tokens": TOKENS_PER_PARAM * n,
            "flops_per_token": per_token,
            "flops_per_param_token": per_token / n,
            "flops": per_token * TOKENS_PER_PARAM * n,
        }
    return out


def extrapolations(model: rules.EffectiveCompute, c_max: float, has_ci: bool) -> dict:
    """Gain at each named scale (D = 20 N), with how far its compute lies beyond ``c_max``."""
    out = {}
    for name, scale in named_scales().items():
        compute = scale["flops"]
        base, var = model.losses(compute)
        factor = compute / c_max
        out[name] = {
            "n_params": scale["n_params"],
            "tokens": scale["tokens"],
            "flops": compute,
            "times_largest_measured_compute": factor,
            "far_extrapolation": bool(factor > rules.FAR_EXTRAPOLATION),
            "gain_pct": rules.stat(100.0 * (base - var) / base, has_ci),
            "gain_loss": rules.stat(base - var, has_ci),
            "k": rules.stat(model.k(compute), has_ci),
        }
    return out


def gains_table(comparison: Comparison, groups: Groups, has_ci: bool) -> list[dict]:
    """Every matched (size, tokens): paired gain with its 95% CI."""
    info = groups.info
    rows = []
    for b in comparison.budgets:
        ok = has_ci and b.num_paired >= MIN_SEEDS
        rows.append(
            {
                "size": b.size,
                "tokens": b.tokens,
                "baseline_arm": b.base_arm,
                "n_params": float(info.at[b.base, "num_nonembedding_params"]),
                "variant_n_params": float(info.at[b.var, "num_nonembedding_params"]),
                "on_curve": any(b is c for c in comparison.curve),
                "gain_loss": rules.stat(b.gain_loss, ok),
                "gain_pct": _robust_pct(b, groups, ok),
                "num_paired_seeds": b.num_paired,
            }
        )
    return rows


def _robust_pct(budget, groups: Groups, ok: bool) -> dict:
    """The gain in % with its 95% interval: the union of the pooled bootstrap and the paired
    seeds' t interval (``analysis.stats.gains.robust``), and which of them decided."""
    out = rules.stat(budget.gain_pct, False)
    if ok:
        out["ci95"], out["decided_by"] = GainTest.of(budget, groups).interval(ALPHA)
    return out


def seed_noise(groups: Groups, baseline_of: dict, detect_gain_pct: float) -> list[dict]:
    """Per size: the seed sd of each arm and, against its baseline, the sd of the paired
    difference (in loss; in % of the baseline's loss at its upper 80% bound), the gain the
    study's paired seeds detect (``mde_pct``: 80% power, the verdict's top-size test) and the
    seeds needed for
    ``detect_gain_pct``, with the LR grid's term the pair's gain carries in the verdict's test
    (``grid_sd_pct``, ``analysis.stats.gains.resolution.groups_pair_var``); all from
    ``analysis.stats.planning.power``, which `scaling plan` uses too."""
    info, rows = groups.info, []
    curve = info[info["on_curve"]].sort_values("num_nonembedding_params", kind="stable")
    for (size, tokens), frame in curve.groupby(["size", "tokens"], sort=False):
        base = baseline_of.get((size, float(tokens)))
        for g in frame.index:
            losses = groups.seed_loss[g]
            sd = _sd(losses)
            row = {
                "size": size,
                "variant": info.at[g, "variant"],
                "num_seeds": int(np.isfinite(losses).sum()),
                "seed_sd": sd,
                # the noise yardstick: seed-to-seed sd in % of this arm's mean loss
                "seed_sd_pct": None if sd is None else 100.0 * sd / float(np.nanmean(losses)),
            }
            if base is not None and g != base and info.at[g, "variant"] != info.at[base, "variant"]:
                base_loss = groups.seed_loss[base]
                paired = int((np.isfinite(base_loss) & np.isfinite(losses)).sum())
                sd_pct = paired_sd_pct(base_loss, losses)
                if sd_pct is not None:  # planned on its upper bound, as `scaling plan` does
                    sd_pct = sd_upper(sd_pct, paired - 1)
                row.update(
                    paired_diff_sd=_sd(base_loss - losses),
                    paired_diff_sd_pct=sd_pct,
                    num_paired_seeds=paired,
                    mde_pct=None,
                    detect_gain_pct=detect_gain_pct,
                    seeds_needed=None,
                )
                # the LR grid's term this pair's gain carries in the verdict's test
                tune = groups_pair_var(groups, base, g)
                row["grid_sd_pct"] = math.sqrt(tune)
                if sd_pct is not None:  # the planner's own function (`scaling plan --noise`)
                    (power,) = power_table(
                        {size: sd_pct}, paired, detect_gain_pct, tune_by_size={size: tune}
                    )
                    row.update(
                        mde_pct=power["mde_pct"],
                        seeds_needed=power["seeds_needed"],
                        grid_caps=power["grid_caps"],
                    )
            rows.append(row)
    return rows


def _sd(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.std(x, ddof=1)) if x.size >= 2 else None


def fit_summary(fits: list[LawFit], has_ci: bool) -> list[dict]:
    out = []
    for fit in fits:
        params = rules.natural_params(fit)
        out.append(
            {
                "law": fit.law,
                "variant": fit.variant,
                "num_points": int(len(fit.points)),
                "params": {k: rules.stat(v, has_ci) for k, v in params.items()},
                "resamples_fitted": int(np.isfinite(fit.params[1:, 0]).sum()),
                # fits that reached the iteration cap: not converged, left out of the CIs
                "resamples_failed": fit.counts.failed if fit.counts else 0,
                "distinct_resamples": fit.counts.distinct if fit.counts else 0,
            }
        )
    return out


def multiple_comparisons(num_variants: int, alpha: float) -> str:
    """The multiple-comparisons sentence: its family-wise level first, then how it is split."""
    level = f"family-wise {100 * alpha:.3g}%"
    within = (
        "per variant, its per-size gain tests are one weighted Holm family (top size 80% of "
        "the level); every claim needs a rejection in it"
    )
    if num_variants <= 1:
        return f"{level}: {within}"
    return (
        f"{level}: Holm step-down over {num_variants} variants' weighted-Bonferroni "
        f"p-values sets each variant's level; {within}"
    )


def records(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """JSON-safe rows (NaN -> None, numpy scalars -> Python)."""
    rows = []
    for rec in frame[columns].to_dict("records") if len(frame) else []:
        clean = {}
        for k, v in rec.items():
            if isinstance(v, float | np.floating):
                clean[k] = None if not np.isfinite(v) else float(v)
            elif isinstance(v, np.integer | np.bool_):
                clean[k] = v.item()
            elif isinstance(v, list):  # LRs as floats; None an open end; nested: seeds
                clean[k] = [x if x is None or isinstance(x, list) else float(x) for x in v]
            else:
                clean[k] = v
        rows.append(clean)
    return rows
