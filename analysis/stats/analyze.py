"""The analysis itself: run table in, verdict dict (and what the plots need) out. No I/O."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd

from analysis.stats.axes import tokens as token_axis
from analysis.stats.backtest import Backtest
from analysis.stats.fits.laws import LawFit, fit_arms, fit_k
from analysis.stats.gains import intervals
from analysis.stats.gains import matched as matching
from analysis.stats.gains.compare import Comparison, baseline_map, compare
from analysis.stats.gains.levels import ALPHA, MIN_SEEDS, global_p, holm_levels, size_weights
from analysis.stats.gains.resolution import groups_pair_var, trend_draws, tuning_variances
from analysis.stats.gains.robust import GainTest
from analysis.stats.lr.frontier import LRFrontier, frontier_frame, lr_frontier, selection_column
from analysis.stats.rules import summary
from analysis.stats.rules import verdict as rules
from analysis.stats.rules.verdict_guards import decide_held, lr_guards
from analysis.stats.variance.cells import Groups, build_groups, selected_lrs, usable_cells
from analysis.stats.variance.diagnose import noise_diagnostics
from analysis.stats.variance.noise import NoiseModel
from analysis.tables.runs import is_usable
from analysis.tables.spec import DEFAULT_MARGIN_PCT, parse_baselines

EXCLUDED_COLUMNS = ["run_id", "variant", "size", "seed", "lr", "reason"]


@dataclasses.dataclass
class Analysis:
    verdict: dict
    groups: Groups
    fits: list[LawFit]
    usable: pd.DataFrame
    excluded: pd.DataFrame
    comparisons: dict[str, Comparison] = dataclasses.field(default_factory=dict)
    tokens: token_axis.TokenAnalysis | None = None  # the token axis, when some arm has >= 2 budgets
    # per variant: its p and decide_held's arguments but the level, to judge again at another
    # family-wise level without refitting (analysis.stats.looks.sequential.judge_at)
    decide_inputs: dict[str, tuple] = dataclasses.field(default_factory=dict)
    # the rollout (``analysis.stats.backtest``): the rule refits its top step when a word needs
    # it (rule 9); ``add_backtest`` the rest
    backtest: Backtest | None = None

    def add_backtest(self) -> dict:
        """verdict.json's ``backtest``: every rollout step (the top one as the rule read it) and
        each extrapolation marked by whether it lies within the distance the backtest showed
        skill at (``within_backtest_skill``). Separate from ``analyse``: it refits the study
        once per earlier step, and the statistical replays and the looks do not read those."""
        found = self.backtest.as_dict()
        shown = (found.get("skill") or {}).get("shown_up_to_compute_ratio")
        for v in self.verdict["variants"]:
            for e in v.get("extrapolated_gain_pct", {}).values():
                e["within_backtest_skill"] = bool(
                    shown is not None and e["times_largest_measured_compute"] <= shown
                )
        self.verdict["backtest"] = found
        return found


def check_inputs(
    table: pd.DataFrame,
    baseline: str,
    num_resamples: int,
    margin_pct: float = rules.DEFAULT_MARGIN_PCT,
) -> None:
    """User errors, raised before anything is computed or written."""
    if not (np.isfinite(margin_pct) and margin_pct > 0):
        raise ValueError(
            f"verdict margin {margin_pct} must be a positive % of the loss (e.g. "
            f"{DEFAULT_MARGIN_PCT:g}); set "
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


LOST_SEED = "its LR (or cell) lost a seed at this size: not usable, never chosen on survivors"
SCAN_ONLY = "scan-only LR: not every seed ran it at this size (none lost): never chosen"


def _excluded(table: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """Every run not used, with why: its own state; its LR losing a seed at that size (some run
    of that LR there is unusable); or a scan-only LR (every run of it there is usable, but not
    every seed ran it: an LR search's scan, `follow_neighbours: 0`)."""
    out = table[~table["run_id"].isin(set(kept["run_id"]))].copy()
    own = ~is_usable(out)
    reason = np.where(
        out["status"] != "completed", out["status"], "non-finite or non-positive final_val_loss"
    )
    keys = [c for c in ("variant", "size", "tokens", "lr") if c in table.columns]
    lr_ok = table.assign(_ok=is_usable(table)).groupby(keys, dropna=False, as_index=False)["_ok"]
    found = out[keys].merge(lr_ok.all(), on=keys, how="left")["_ok"]
    none_lost = found.astype("boolean").fillna(False).to_numpy(dtype=bool)
    out["reason"] = np.where(own, reason, np.where(none_lost, SCAN_ONLY, LOST_SEED))
    return out.reset_index(drop=True)


def _why_unusable(excluded: pd.DataFrame, variants: list[str]) -> str:
    """``12 diverged, 3 failed``: the reasons the runs of `variants` were left out, counted."""
    reasons = excluded.loc[excluded["variant"].isin(variants), "reason"].value_counts()
    return ", ".join(f"{n} {reason}" for reason, n in reasons.items()) or "no runs"


def unjudged(table: pd.DataFrame, usable: pd.DataFrame, excluded: pd.DataFrame, baseline: str):
    """verdict.json's ``unjudged``: each arm but the baselines with no usable run, and why
    (listed, never silently dropped from the verdict)."""
    baselines = parse_baselines(baseline)
    dead = sorted(set(table["variant"]) - set(usable["variant"]) - set(baselines))
    return [
        {"variant": v, "reason": f"no usable runs ({_why_unusable(excluded, [v])})"} for v in dead
    ]


def _guards(comparison: Comparison, k_ok: bool, has_ci: bool, num_seeds: int) -> list[str]:
    guards = []
    if len(comparison.curve) < rules.MIN_SIZES:
        guards.append(f"{len(comparison.curve)} sizes per arm; a trend needs >= {rules.MIN_SIZES}")
    if not has_ci:
        guards.append(f"no CIs with {num_seeds} seed(s); >= {MIN_SEEDS} needed")
    elif comparison.top is not None and comparison.top.num_paired < MIN_SEEDS:
        top = comparison.top
        guards.append(f"{top.num_paired} paired seed(s) at {top.size}; >= {MIN_SEEDS} needed")
    if not k_ok and len(comparison.curve) >= rules.MIN_SIZES:
        guards.append("k(C) could not be fitted")
    return guards


@dataclasses.dataclass
class _Measured:
    """What every step after the LR choice reads: the N-axis table (each size's largest
    budget), the one with every budget, the chosen runs and their bootstrap groups."""

    table: pd.DataFrame
    every_budget: pd.DataFrame
    baselines: list[str]
    frontiers: list[LRFrontier]
    usable: pd.DataFrame
    excluded: pd.DataFrame
    groups: Groups
    num_draws: int
    has_ci: bool
    base_of: dict


@dataclasses.dataclass
class _Judged:
    """One variant against its baseline: the matched-compute comparison and its k(C) fit."""

    comparison: Comparison
    k_fit: LawFit | None
    c_ref: float
    c_max: float


def analyse(
    table: pd.DataFrame,
    baseline: str,
    num_resamples: int = 1000,
    seed: int = 0,
    detect_gain_pct: float = 0.5,
    margin_pct: float = rules.DEFAULT_MARGIN_PCT,
    alpha: float = ALPHA,
) -> Analysis:
    """Choose LRs, draw the parametric bootstrap, fit every law, and judge each variant.

    The N verdict reads, per size, only the largest budget its baseline measured
    (``analysis.stats.axes.tokens.n_axis_rows``); with several budgets per size the token axis is
    judged too (``analysis.stats.axes.tokens.analyse_tokens``, verdict.json's ``tokens``).
    ``alpha``: the N verdict's family-wise level (5%; a sequential look's nominal level:
    ``analysis.stats.looks.sequential``)."""
    check_inputs(table, baseline, num_resamples, margin_pct)
    data = _measure(table, baseline, num_resamples, seed)
    fits = fit_arms(data.groups)
    judged, matched = _compare_variants(data, fits, np.random.default_rng([seed, 52]))
    weights_only = matching.weights_only_arms(data.table)
    refit = functools.partial(_refit, baseline, num_resamples, seed)
    law = Backtest(refit, data.table, data.groups, judged, data.has_ci, rules.law_level(alpha))
    variants, decide_inputs = _judge(data, judged, baseline, margin_pct, weights_only, alpha, law)
    verdict = _verdict(
        data, variants, fits, baseline, num_resamples, detect_gain_pct, margin_pct, alpha
    )
    verdict["unjudged"] = unjudged(data.table, data.usable, data.excluded, baseline)
    verdict["compute_axis"] = matching.compute_axis(data.table, matched, weights_only)
    verdict["rule"] = rules.RULE
    verdict["intervals"] = intervals.availability(len(data.groups.seeds), data.num_draws)
    along_d = token_axis.analyse_tokens(data.every_budget, data.baselines, data.num_draws, seed)
    if along_d is not None:
        _add_token_axis(verdict, data, along_d)
    if not verdict["intervals"]["available"]:
        verdict = intervals.strip(verdict)
    comparisons = {v: j.comparison for v, j in judged.items()}
    return Analysis(
        verdict, data.groups, fits, data.usable, data.excluded, comparisons, along_d,
        decide_inputs, law,
    )  # fmt: skip


def _refit(baseline: str, num_draws: int, seed: int, sub: pd.DataFrame, step: int) -> tuple:
    """The backtest's refit of ``sub`` (the fitted sizes' runs) as the verdict fits, with its
    own draws: (groups, the arms' L(C) fits, each variant's ``_Judged``)."""
    data = _measure(sub, baseline, num_draws, seed + 7919 * step)
    fits = fit_arms(data.groups, ("L(C)",))
    sub_judged, _ = _compare_variants(data, fits, np.random.default_rng([seed, 53]))
    return data.groups, fits, sub_judged


def grid_terms(table: pd.DataFrame, baseline: str) -> dict[str, float]:
    """Per size: the LR grid's term (%^2, ``gains.resolution.groups_pair_var``) in the gain of
    each arm over ``baseline`` at the size's largest budget, as ``analyse`` reads it from these
    runs (their curvature, each arm's neighbours and picks, the noise model's run sd); with
    several other arms the largest. For `scaling plan --noise` on a finished study."""
    data = _measure(table, baseline, 0, 0)
    info, out = data.groups.info, {}
    curve = info[info["on_curve"]].sort_values("num_nonembedding_params", kind="stable")
    for g in curve.index:  # smallest size first
        size = str(info.at[g, "size"])
        b = data.base_of.get((info.at[g, "size"], float(info.at[g, "tokens"])))
        if b is None or info.at[g, "variant"] in data.baselines:  # a baseline is not tested
            continue
        out[size] = max(out.get(size, 0.0), groups_pair_var(data.groups, b, g))
    return out


def _measure(table: pd.DataFrame, baseline: str, num_resamples: int, seed: int) -> _Measured:
    """The N-axis table, each cell's usable LRs, the excluded runs and the bootstrap groups."""
    baselines = parse_baselines(baseline)
    every_budget = token_axis.snap_budgets(table.reset_index(drop=True))
    table = token_axis.n_axis_rows(every_budget, baselines)  # each size's largest budget
    frontiers = lr_frontier(table)
    usable = usable_cells(table, frontiers)
    excluded = _excluded(table, usable)
    if not usable["variant"].isin(baselines).any():
        raise ValueError(f"no usable runs of the baseline {baseline!r}; see the excluded runs")
    others = sorted(set(table["variant"]) - set(baselines))
    if others and not usable["variant"].isin(others).any():  # nothing left to judge
        raise ValueError(
            f"no usable runs of {', '.join(map(repr, others))} ({_why_unusable(excluded, others)})"
            f": no verdict against the baseline {baseline!r}; see the excluded runs"
        )
    # below the seeds an interval needs, no draws at all: no interval, band or p-value anywhere
    num_draws = num_resamples if intervals.enough_seeds(int(usable["seed"].nunique())) else 0
    groups = build_groups(usable, num_draws, seed, selected_lrs(table, frontiers))
    sd_run = (
        None
        if groups.noise is None
        else dict(zip(groups.noise.sizes, groups.noise.sd_run, strict=True))
    )
    groups.tuning_var = tuning_variances(table, frontiers, sd_run)
    has_ci = groups.noise is not None and len(groups.seeds) >= MIN_SEEDS and num_resamples > 0
    base_of = baseline_map(groups, baselines)
    return _Measured(
        table, every_budget, baselines, frontiers, usable, excluded, groups, num_draws, has_ci,
        base_of,
    )  # fmt: skip


def _compare_variants(
    data: _Measured, fits: list[LawFit], rng: np.random.Generator
) -> tuple[dict[str, _Judged], dict[str, list[dict]]]:
    """Each variant against its baseline at matched compute, and its k(C) fit (appended to
    ``fits``); also what each matched-compute comparison reports for verdict.json. The k(C)
    draws carry the LR grid's term (``gains.resolution.trend_draws``): half the draws with one
    error shared by every size, half with one per size."""
    groups = data.groups
    arm_lc = {f.variant: f.full() for f in fits if f.law == "L(C)"}
    judged, matched = {}, {}
    for variant in sorted(set(groups.info["variant"]) - set(data.baselines)):
        comp, matched[variant] = matching.at_matched_compute(
            compare(groups, data.base_of, variant), groups
        )
        k_fit, c_ref, c_max = None, float("nan"), float("nan")
        if comp.curve:
            compute, is_variant, loss, idx = comp.k_points(groups)
            shared = np.arange(len(loss)) % 2 == 1
            error = trend_draws(groups, comp.curve, len(loss), rng, shared)  # % of base loss
            loss = loss.copy()
            loss[:, is_variant] -= error * loss[:, ~is_variant] / 100.0
            c_ref = float(np.exp(np.log(compute[~is_variant]).mean()))
            c_max = float(compute.max())
            starts = [arm_lc.get(comp.curve[-1].base_arm), arm_lc.get(variant)]
            k_fit = fit_k(compute, is_variant, loss, variant, idx, starts)
            fits.append(k_fit)
        judged[variant] = _Judged(comp, k_fit, c_ref, c_max)
    return judged, matched


def _judge(
    data: _Measured,
    judged: dict[str, _Judged],
    baseline: str,
    margin_pct: float,
    weights_only: list[str],
    alpha: float,
    law: Backtest,
) -> tuple[list[dict], dict[str, tuple]]:
    """verdict.json's row per variant: its gain tests, held to the Holm level over variants, and
    rule 9's backtest; and per variant what ``decide_held`` was given but the level
    (``Analysis.decide_inputs``)."""
    groups, has_ci = data.groups, data.has_ci
    tests = {v: [GainTest.of(b, groups) for b in j.comparison.curve] for v, j in judged.items()}
    p_values = {v: _global_p(j.comparison, tests[v]) if has_ci else 1.0 for v, j in judged.items()}
    levels = holm_levels(p_values, alpha) if p_values else {}
    frontier = {(f.variant, f.size, f.tokens): f for f in data.frontiers}
    rows, decide_inputs = [], {}
    for variant, one in judged.items():
        k_part, k0, gamma, k_ok = _k_row(one, has_ci)
        row = {"variant": variant, "baseline": baseline, "c_ref": one.c_ref, **k_part}
        held = (one.comparison, tests[variant], gamma if has_ci else None, k0)
        guards = (
            _guards(one.comparison, k_ok, has_ci, len(groups.seeds)),
            lr_guards(one.comparison, groups.info, frontier),
            matching.undeclared_guard(variant, weights_only),
        )
        top_check = functools.partial(law.top_check, variant)  # refitted once, if a word asks
        decide_inputs[variant] = (p_values[variant], held, guards, top_check)
        # rules.apply_rule, with the conditional verdict of held guards
        decision = decide_held(*held, levels.get(variant), *guards, margin_pct, alpha, top_check)
        row.update(verdict=decision.pop("verdict"), reason=decision.pop("reason"))
        row.update((k, decision.pop(k)) for k in ("conditional_verdict", "conditional_assumes"))
        row["decision"] = {**decision, "variant_p": p_values[variant] if has_ci else None}
        gains = summary.gains_table(one.comparison, groups, has_ci)
        row["gain_pct_by_size"] = {r["size"]: r for r in gains if r["on_curve"]}
        row["gain_pct_by_budget"] = summary.gains_table(one.comparison, groups, has_ci)
        info = groups.info
        row["measured_compute"] = [float(info["flops"].min()), float(info["flops"].max())]
        rows.append(row)
    return rows, decide_inputs


def _k_row(one: _Judged, has_ci: bool) -> tuple[dict, float | None, float | None, bool]:
    """k0, gamma (with CIs) and the named scales' gains from the variant's k(C) fit; then k0,
    gamma and whether the fit exists (None, None, False without one)."""
    k_ok = one.k_fit is not None and not np.isnan(one.k_fit.params[0]).any()
    row = dict(k0=None, k0_ci95=None, gamma=None, gamma_ci95=None, extrapolated_gain_pct={})
    if not k_ok:
        return row, None, None, False
    model = rules.EffectiveCompute(one.k_fit, one.c_ref)
    k0, gamma = model.k(one.c_ref), model.gamma
    row.update(k0=rules.stat(k0, has_ci)["value"], k0_ci95=rules.stat(k0, has_ci)["ci95"])
    row.update(gamma=rules.stat(gamma, has_ci)["value"])
    row.update(gamma_ci95=rules.stat(gamma, has_ci)["ci95"])
    row["extrapolated_gain_pct"] = summary.extrapolations(model, one.c_max, has_ci)
    return row, k0, gamma, True


def _verdict(
    data: _Measured,
    variants: list[dict],
    fits: list[LawFit],
    baseline: str,
    num_resamples: int,
    detect_gain_pct: float,
    margin_pct: float,
    alpha: float = ALPHA,
) -> dict:
    """verdict.json of the N axis: the study's counts, each variant's row, fits and noise."""
    info, groups, table = data.groups.info, data.groups, data.table
    return {
        "baseline": baseline,
        "baselines": data.baselines,
        "baseline_by_size": {
            f"{s}@{t:.3g}": str(info.at[g, "variant"])
            for (s, t), g in sorted(data.base_of.items(), key=lambda kv: kv[0][1])
        },
        "num_runs": int(len(table)),
        "num_used": int(len(data.usable)),
        "num_seeds": int(len(groups.seeds)),
        "num_resamples": int(num_resamples if data.has_ci else 0),
        "multiple_comparisons": summary.multiple_comparisons(len(variants), alpha),
        "measured_compute": [float(info["flops"].min()), float(info["flops"].max())],
        "named_scales": summary.named_scales(),
        "flops_per_param_token_at_named_scales": {
            name: x["flops_per_param_token"] for name, x in summary.named_scales().items()
        },
        "excluded_runs": _records(data.excluded, EXCLUDED_COLUMNS),
        "variants": variants,
        "fits": summary.fit_summary(fits, data.has_ci),
        "seed_noise": summary.seed_noise(groups, data.base_of, detect_gain_pct),
        "noise_model": _noise(groups.noise),
        "noise_diagnostics": noise_diagnostics(groups),
        "margin_pct": float(margin_pct),
        "lr_selection": _records(frontier_frame(data.frontiers), list(frontier_frame([]).columns)),
        "lr_chosen_on": selection_column(table),
        "flops_estimated": bool(table["flops_estimated"].any()),
    }


def _add_token_axis(verdict: dict, data: _Measured, along_d: token_axis.TokenAnalysis) -> None:
    """With several budgets per size: every budget's runs counted and excluded, and the token
    axis's verdict and fits."""
    every_budget = data.every_budget
    verdict["num_runs"] = int(len(every_budget))
    used = usable_cells(every_budget, lr_frontier(every_budget))
    verdict["excluded_runs"] = _records(_excluded(every_budget, used), EXCLUDED_COLUMNS)
    verdict["tokens"] = along_d.verdict
    verdict["fits"] += summary.fit_summary(along_d.fits, data.has_ci)


def _global_p(comparison: Comparison, tests: list[GainTest]) -> float:
    """The variant's weighted-Bonferroni p of "no gain at any size"
    (``analysis.stats.gains.levels``)."""
    family = [i for i, b in enumerate(comparison.curve) if b.num_paired >= MIN_SEEDS]
    if not family or family[-1] != len(comparison.curve) - 1:
        return 1.0
    return global_p([tests[i].p() for i in family], size_weights(len(family)))


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
            elif isinstance(v, list):  # LRs as floats; None an open end; nested: seeds
                clean[k] = [x if x is None or isinstance(x, list) else float(x) for x in v]
            else:
                clean[k] = v
        rows.append(clean)
    return rows
