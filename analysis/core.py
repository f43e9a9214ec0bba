"""The analysis itself: run table in, verdict dict (and what the plots need) out. No I/O."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis import intervals as I
from analysis import levels as LV
from analysis import matched as M
from analysis import summary as S
from analysis import tokens as T
from analysis import verdict as V
from analysis.cells import Groups, build_groups, selected_lrs, usable_cells
from analysis.compare import Comparison, baseline_map, compare
from analysis.diagnose import noise_diagnostics
from analysis.frontier import frontier_frame, lr_frontier, selection_column
from analysis.held import decide_held, lr_guards
from analysis.laws import LawFit, fit_arms, fit_k
from analysis.noise import NoiseModel
from analysis.robust import GainTest
from analysis.table import is_usable


@dataclasses.dataclass
class Analysis:
    verdict: dict
    groups: Groups
    fits: list[LawFit]
    usable: pd.DataFrame
    excluded: pd.DataFrame
    comparisons: dict[str, Comparison] = dataclasses.field(default_factory=dict)
    tokens: T.TokenAnalysis | None = None  # the token axis, when some arm has >= 2 budgets
    # per variant: its p and decide_held's arguments but the level, to judge again at another
    # family-wise level without refitting (analysis.sequential.judge_at)
    decide_inputs: dict[str, tuple] = dataclasses.field(default_factory=dict)


def parse_baselines(baseline: str) -> list[str]:
    """``"linear"`` or ``"linear,linear_qknorm"`` (per size, the strongest of them)."""
    names = [b.strip() for b in baseline.split(",") if b.strip()]
    if not names:
        raise ValueError("--baseline is empty; name the arm the others are judged by")
    return names


def check_inputs(
    table: pd.DataFrame, baseline: str, num_resamples: int, margin_pct: float = 0.5
) -> None:
    """User errors, raised before anything is computed or written."""
    if not (np.isfinite(margin_pct) and margin_pct > 0):
        raise ValueError(
            f"verdict margin {margin_pct} must be a positive % of the loss (e.g. 0.5); set "
            "verdict.margin_pct in the study spec or --margin"
        )
    if num_resamples < 0:
        raise ValueError(f"--resamples must be >= 0, got {num_resamples}")
    if table.empty:
        raise ValueError("the run table is empty; nothing to analyse")
    variants = sorted(table["variant"].unique())
    for name in parse_baselines(baseline):
        if name not in variants:
            raise ValueError(
                f"--baseline {name!r} is not a variant of this study; "
                f"variants are {', '.join(variants)}"
            )


def _excluded(table: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """Every run not used, with why: its own state, or its LR losing a seed at that size."""
    out = table[~table["run_id"].isin(set(kept["run_id"]))].copy()
    own = ~is_usable(out)
    reason = np.where(
        out["status"] != "completed", out["status"], "non-finite or non-positive final_val_loss"
    )
    lost = "its LR (or cell) lost a seed at this size: not usable, never chosen on survivors"
    out["reason"] = np.where(own, reason, lost)
    return out.reset_index(drop=True)


def _guards(comparison: Comparison, k_ok: bool, has_ci: bool, num_seeds: int) -> list[str]:
    guards = []
    if len(comparison.curve) < V.MIN_SIZES:
        guards.append(f"{len(comparison.curve)} sizes per arm; a trend needs >= {V.MIN_SIZES}")
    if not has_ci:
        guards.append(f"no CIs with {num_seeds} seed(s); >= {V.MIN_SEEDS} needed")
    elif comparison.top is not None and comparison.top.num_paired < V.MIN_SEEDS:
        top = comparison.top
        guards.append(f"{top.num_paired} paired seed(s) at {top.size}; >= {V.MIN_SEEDS} needed")
    if not k_ok and len(comparison.curve) >= V.MIN_SIZES:
        guards.append("k(C) could not be fitted")
    return guards


def analyse(
    table: pd.DataFrame,
    baseline: str = "linear",
    num_resamples: int = 1000,
    seed: int = 0,
    detect_gain_pct: float = 0.5,
    margin_pct: float = V.DEFAULT_MARGIN_PCT,
    alpha: float = LV.ALPHA,
) -> Analysis:
    """Choose LRs, draw the parametric bootstrap, fit every law, and judge each variant.

    The N verdict reads, per size, only the largest budget its baseline measured
    (``analysis.tokens.n_axis_rows``); with several budgets per size the token axis is judged
    too (``analysis.tokens.analyse_tokens``, verdict.json's ``tokens``). ``alpha``: the N
    verdict's family-wise level (5%; a sequential look's nominal level: analysis.sequential)."""
    check_inputs(table, baseline, num_resamples, margin_pct)
    baselines = parse_baselines(baseline)
    every_budget = T.snap_budgets(table.reset_index(drop=True))
    table = T.n_axis_rows(every_budget, baselines)  # the N verdict: each size's largest budget
    frontiers = lr_frontier(table)
    usable = usable_cells(table, frontiers)
    excluded = _excluded(table, usable)
    if not usable["variant"].isin(baselines).any():
        raise ValueError(f"no usable runs of the baseline {baseline!r}; see the excluded runs")
    # below the seeds an interval needs, no draws at all: no interval, band or p-value anywhere
    num_draws = num_resamples if I.enough_seeds(int(usable["seed"].nunique())) else 0
    groups = build_groups(usable, num_draws, seed, selected_lrs(table, frontiers))
    has_ci = groups.noise is not None and len(groups.seeds) >= V.MIN_SEEDS and num_resamples > 0
    info = groups.info
    base_of = baseline_map(groups, baselines)
    fits = fit_arms(groups)
    arm_lc = {f.variant: f.full() for f in fits if f.law == "L(C)"}
    frontier = {(f.variant, f.size, f.tokens): f for f in frontiers}
    comparisons, judged, matched = {}, {}, {}
    weights_only = M.weights_only_arms(table)
    for variant in sorted(set(info["variant"]) - set(baselines)):
        comp, matched[variant] = M.at_matched_compute(compare(groups, base_of, variant), groups)
        comparisons[variant] = comp
        k_fit, c_ref, c_max = None, float("nan"), float("nan")
        if comp.curve:
            compute, is_variant, loss, idx = comp.k_points(groups)
            c_ref = float(np.exp(np.log(compute[~is_variant]).mean()))
            c_max = float(compute.max())
            starts = [arm_lc.get(comp.curve[-1].base_arm), arm_lc.get(variant)]
            k_fit = fit_k(compute, is_variant, loss, variant, idx, starts)
            fits.append(k_fit)
        judged[variant] = (comp, k_fit, c_ref, c_max)

    tests = {v: [GainTest.of(b, groups) for b in c.curve] for v, (c, *_r) in judged.items()}
    p_values = {v: _global_p(judged[v][0], tests[v]) if has_ci else 1.0 for v in judged}
    levels = V.holm_levels(p_values, alpha) if p_values else {}
    variants, decide_inputs = [], {}
    for variant, (comp, k_fit, c_ref, c_max) in judged.items():
        k_ok = k_fit is not None and not np.isnan(k_fit.params[0]).any()
        guards = _guards(comp, k_ok, has_ci, len(groups.seeds))
        lr_guard = lr_guards(comp, info, frontier)
        flops_guard = M.undeclared_guard(variant, weights_only)
        row = {"variant": variant, "baseline": baseline, "c_ref": c_ref}
        row.update(k0=None, k0_ci95=None, gamma=None, gamma_ci95=None, extrapolated_gain_pct={})
        gamma = k0 = None
        if k_ok:
            model = V.EffectiveCompute(k_fit, c_ref)
            k0, gamma = model.k(c_ref), model.gamma
            row.update(k0=V.stat(k0, has_ci)["value"], k0_ci95=V.stat(k0, has_ci)["ci95"])
            row.update(gamma=V.stat(gamma, has_ci)["value"])
            row.update(gamma_ci95=V.stat(gamma, has_ci)["ci95"])
            row["extrapolated_gain_pct"] = S.extrapolations(model, c_max, has_ci)
        held = (comp, tests[variant], gamma if has_ci else None, k0)
        decide_inputs[variant] = (p_values[variant], held, (guards, lr_guard, flops_guard))
        decision = decide_held(  # V.decide, with the conditional verdict of held guards
            comp,
            tests[variant],
            gamma if has_ci else None,
            k0,
            levels.get(variant),
            guards,
            lr_guard,
            flops_guard,
            margin_pct,
            alpha,
        )
        row.update(verdict=decision.pop("verdict"), reason=decision.pop("reason"))
        row.update((k, decision.pop(k)) for k in ("conditional_verdict", "conditional_assumes"))
        row["decision"] = {**decision, "variant_p": p_values[variant] if has_ci else None}
        row["gain_pct_by_size"] = {
            r["size"]: r for r in S.gains_table(comp, groups, has_ci) if r["on_curve"]
        }
        row["gain_pct_by_budget"] = S.gains_table(comp, groups, has_ci)
        row["measured_compute"] = [float(info["flops"].min()), float(info["flops"].max())]
        variants.append(row)

    verdict = {
        "baseline": baseline,
        "baselines": baselines,
        "baseline_by_size": {
            f"{s}@{t:.3g}": str(info.at[g, "variant"])
            for (s, t), g in sorted(base_of.items(), key=lambda kv: kv[0][1])
        },
        "num_runs": int(len(table)),
        "num_used": int(len(usable)),
        "num_seeds": int(len(groups.seeds)),
        "num_resamples": int(num_resamples if has_ci else 0),
        "multiple_comparisons": _multiple(len(variants)),
        "measured_compute": [float(info["flops"].min()), float(info["flops"].max())],
        "named_scales": S.named_scales(),
        "flops_per_param_token_at_named_scales": {
            name: x["flops_per_param_token"] for name, x in S.named_scales().items()
        },
        "excluded_runs": _records(excluded, ["run_id", "variant", "size", "seed", "lr", "reason"]),
        "variants": variants,
        "fits": S.fit_summary(fits, has_ci),
        "seed_noise": S.seed_noise(groups, base_of, detect_gain_pct),
        "noise_model": _noise(groups.noise),
        "noise_diagnostics": noise_diagnostics(groups),
        "margin_pct": float(margin_pct),
        "lr_selection": _records(frontier_frame(frontiers), list(frontier_frame([]).columns)),
        "lr_chosen_on": selection_column(table),
        "flops_estimated": bool(table["flops_estimated"].any()),
        "compute_axis": M.compute_axis(table, matched, weights_only),
        "rule": V.RULE,
    }
    verdict["intervals"] = I.availability(len(groups.seeds), num_draws)
    along_d = T.analyse_tokens(every_budget, baselines, num_draws, seed)
    if along_d is not None:
        verdict["num_runs"] = int(len(every_budget))
        used = usable_cells(every_budget, lr_frontier(every_budget))
        columns = ["run_id", "variant", "size", "seed", "lr", "reason"]
        verdict["excluded_runs"] = _records(_excluded(every_budget, used), columns)
        verdict["tokens"] = along_d.verdict
        verdict["fits"] += S.fit_summary(along_d.fits, has_ci)
    if not verdict["intervals"]["available"]:
        verdict = I.strip(verdict)
    return Analysis(verdict, groups, fits, usable, excluded, comparisons, along_d, decide_inputs)


def _global_p(comparison: Comparison, tests: list[GainTest]) -> float:
    """The variant's weighted-Bonferroni p of "no gain at any size" (``analysis.levels``)."""
    family = [i for i, b in enumerate(comparison.curve) if b.num_paired >= V.MIN_SEEDS]
    if not family or family[-1] != len(comparison.curve) - 1:
        return 1.0
    return LV.global_p([tests[i].p() for i in family], LV.size_weights(len(family)))


def _multiple(num_variants: int) -> str:
    within = (
        "per variant, its per-size gain tests are one weighted Holm family (top size 80% of "
        "the level); every claim needs a rejection in it"
    )
    if num_variants <= 1:
        return f"family-wise 5%: {within}"
    return (
        f"family-wise 5%: Holm step-down over {num_variants} variants' weighted-Bonferroni "
        f"p-values sets each variant's level; {within}"
    )


def _noise(model: NoiseModel | None) -> dict | None:
    return None if model is None else model.as_dict()


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
