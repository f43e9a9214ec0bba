"""The analysis itself: run table in, verdict dict (and what the plots need) out. No I/O."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis import verdict as V
from analysis.cells import Groups, build_groups, lr_edge_flags
from analysis.laws import LawFit, fit_all
from analysis.table import split_usable


@dataclasses.dataclass
class Analysis:
    verdict: dict
    groups: Groups
    fits: list[LawFit]
    usable: pd.DataFrame
    excluded: pd.DataFrame


def check_inputs(table: pd.DataFrame, baseline: str, num_resamples: int) -> None:
    """User errors, raised before anything is computed or written."""
    if num_resamples < 0:
        raise ValueError(f"--resamples must be >= 0, got {num_resamples}")
    if table.empty:
        raise ValueError("the run table is empty; nothing to analyse")
    variants = sorted(table["variant"].unique())
    if baseline not in variants:
        raise ValueError(
            f"--baseline {baseline!r} is not a variant of this study; "
            f"variants are {', '.join(variants)}"
        )


def analyse(
    table: pd.DataFrame,
    baseline: str = "linear",
    num_resamples: int = 1000,
    seed: int = 0,
    detect_gain_pct: float = 0.5,
) -> Analysis:
    """Select LRs, fit every law with a seed-paired bootstrap, and judge each variant."""
    check_inputs(table, baseline, num_resamples)
    usable, excluded = split_usable(table)
    if not (usable["variant"] == baseline).any():
        raise ValueError(f"no completed runs of the baseline {baseline!r}; see the excluded runs")
    groups = build_groups(usable, num_resamples, seed)
    fits = fit_all(groups, baseline)
    ci_seeds = len(groups.seeds) if num_resamples > 0 else 0  # 0 = no intervals
    info = groups.info
    on_base = info["on_curve"] & (info["variant"] == baseline)
    c_ref = float(np.exp(np.log(info.loc[on_base, "flops"]).mean()))
    variants = []
    for variant in sorted(set(info["variant"]) - {baseline}):
        gains, matrix = V.paired_gains(groups, baseline, variant)
        with np.errstate(invalid="ignore"), np.testing.suppress_warnings() as sup:
            sup.filter(RuntimeWarning)
            pooled = np.nanmean(matrix, axis=1) if matrix.shape[1] else np.full(len(matrix), np.nan)
        k_fit = next((f for f in fits if f.law == "k(C)" and f.variant == variant), None)
        min_sizes = min(
            int((info["on_curve"] & (info["variant"] == v)).sum()) for v in (baseline, variant)
        )
        judged = V.judge(k_fit, c_ref, pooled, ci_seeds, min_sizes)
        variants.append(
            {"variant": variant, "baseline": baseline, **judged, "gain_pct_by_size": gains}
        )
    lr = lr_edge_flags(groups)
    verdict = {
        "baseline": baseline,
        "num_runs": int(len(table)),
        "num_used": int(len(usable)),
        "num_seeds": int(len(groups.seeds)),
        "num_resamples": int(num_resamples),
        "excluded_runs": _records(excluded, ["run_id", "variant", "size", "seed", "lr", "reason"]),
        "variants": variants,
        "fits": _fit_summary(fits, ci_seeds),
        "seed_noise": V.seed_noise(groups, baseline, detect_gain_pct),
        "lr_selection": _records(lr, list(lr.columns)),
        "flops_estimated": bool(usable["flops_estimated"].any()),
        "rule": V.RULE,
    }
    return Analysis(verdict, groups, fits, usable, excluded)


def _fit_summary(fits: list[LawFit], ci_seeds: int) -> list[dict]:
    out = []
    for fit in fits:
        params = V.natural_params(fit)
        out.append(
            {
                "law": fit.law,
                "variant": fit.variant,
                "num_points": int(len(fit.points)),
                "params": {k: V._stat(v, ci_seeds) for k, v in params.items()},
                "resamples_fitted": int(np.isfinite(fit.params[1:, 0]).sum()),
                # fits that reached the iteration cap: not converged, left out of the CIs
                "resamples_failed": fit.counts.failed if fit.counts else 0,
                "distinct_resamples": fit.counts.distinct if fit.counts else 0,
            }
        )
    return out


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """JSON-safe rows (NaN -> None, numpy scalars -> Python)."""
    rows = []
    for rec in frame[columns].to_dict("records") if len(frame) else []:
        clean = {}
        for k, v in rec.items():
            if isinstance(v, float | np.floating):
                clean[k] = None if not np.isfinite(v) else float(v)
            elif isinstance(v, np.integer | np.bool_):
                clean[k] = v.item()
            elif isinstance(v, list):
                clean[k] = [float(x) for x in v]
            else:
                clean[k] = v
        rows.append(clean)
    return rows
