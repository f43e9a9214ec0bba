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
from analysis.stats.gains.levels import MIN_SEEDS, global_p, holm_levels, size_weights
from analysis.stats.gains.resolution import groups_pair_var, trend_draws, tuning_variances
from analysis.stats.gains.robust import GainTest
from analysis.stats.lr.frontier import LRFrontier, frontier_frame, lr_frontier, selection_column
from analysis.stats.rules import summary
from analysis.stats.rules import verdict as rules
from analysis.stats.rules.evidence import Evidence
from analysis.stats.rules.summary import records
from analysis.stats.rules.verdict_guards import decide_held, lr_guards
from analysis.stats.variance.cells import Groups, build_groups, selected_lrs, usable_cells
from analysis.stats.variance.diagnose import noise_diagnostics
from analysis.stats.variance.excluded import (
    EXCLUDED_COLUMNS,
    SCAN_ONLY,
    excluded_runs,
    unjudged,
    why_unusable,
)
from analysis.stats.variance.noise import NoiseModel
from analysis.tables.digests import judged_digests
from analysis.tables.judgement import Judgement
from analysis.tables.spec import DEFAULT_MARGIN_PCT

__all__ = ["SCAN_ONLY", "Analysis", "analyse", "check_inputs", "grid_terms"]


@dataclasses.dataclass
class Analysis:
    verdict: dict
    groups: Groups
    fits: list[LawFit]
    usable: pd.DataFrame
    excluded: pd.DataFrame
    comparisons: dict[str, Comparison] = dataclasses.field(default_factory=dict)
    tokens: token_axis.TokenAnalysis | None = None  # the token axis, when some arm has >= 2 budgets
    # per variant: what the rule read (``analysis.stats.rules.evidence``), to judge again at
    # another family-wise level without refitting (analysis.stats.looks.sequential.judge_at)
    evidence: dict[str, Evidence] = dataclasses.field(default_factory=dict)
    # the rollout (``analysis.stats.backtest``): the rule refits its top step when a word needs
    # it (rule 9); ``add_backtest`` the rest
    backtest: Backtest | None = None
    # verdict.json's ``code_digests`` (``analysis.tables.digests``), read before anything is fitted
    code_digests: dict[str, dict] = dataclasses.field(default_factory=dict)

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


def check_inputs(table: pd.DataFrame, judgement: Judgement) -> None:
    """User errors, raised before anything is computed or written (once, by ``analyse``)."""
    margin_pct, num_resamples = judgement.margin_pct, judgement.num_resamples
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
    for name in judgement.baselines:
        if name not in variants:
            raise ValueError(
                f"--baseline {name!r} is not a variant of this study; "
                f"variants are {', '.join(variants)}"
            )


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


def analyse(table: pd.DataFrame, judgement: Judgement, seed: int | None = None) -> Analysis:
    """Choose LRs, draw the parametric bootstrap, fit every law, and judge each variant as
    ``judgement`` says (``analysis.judgement``: baselines, margin, level, draws, detect gain).

    The N verdict reads, per size, only the largest budget its baseline measured
    (``analysis.stats.axes.tokens.n_axis_rows``); with several budgets per size the token axis is
    judged too (``analysis.stats.axes.tokens.analyse_tokens``, verdict.json's ``tokens``).
    ``judgement.level``: the N verdict's family-wise level (5%; a sequential look's nominal
    level: ``analysis.stats.looks.sequential``). ``seed``: the bootstrap's (None:
    ``judgement.bootstrap_seed(table)``). The inputs are checked first (``check_inputs``), then
    the code each variant's runs trained with (``Analysis.code_digests``)."""
    j = judgement
    check_inputs(table, j)
    code_digests = judged_digests(table)  # refuses a variant judged on two versions of its code
    seed = j.bootstrap_seed(table) if seed is None else seed
    data = _measure(table, list(j.baselines), j.baseline, j.num_resamples, seed)
    fits = fit_arms(data.groups)
    judged, matched = _compare_variants(data, fits, np.random.default_rng([seed, 52]))
    weights_only = matching.weights_only_arms(data.table)
    refit = functools.partial(_refit, data.baselines, j.baseline, j.num_resamples, seed)
    law = Backtest(refit, data.table, data.groups, judged, data.has_ci, rules.law_level(j.level))
    variants, evidence = _judge(data, judged, j, weights_only, law)
    verdict = _verdict(data, variants, fits, j)
    verdict["unjudged"] = unjudged(data.table, data.usable, data.excluded, data.baselines)
    verdict["compute_axis"] = matching.compute_axis(data.table, matched, weights_only)
    verdict["rule"] = rules.RULE
    verdict["intervals"] = intervals.availability(len(data.groups.seeds), data.num_draws)
    along_d = token_axis.analyse_tokens(data.every_budget, data.baselines, data.num_draws, seed)
    if along_d is not None:
        _add_token_axis(verdict, data, along_d)
    if not verdict["intervals"]["available"]:
        verdict = intervals.strip(verdict)
    comparisons = {v: one.comparison for v, one in judged.items()}
    return Analysis(
        verdict, data.groups, fits, data.usable, data.excluded, comparisons, along_d,
        evidence, law, code_digests,
    )  # fmt: skip


def _refit(
    baselines: list[str], named: str, num_draws: int, seed: int, sub: pd.DataFrame, step: int
) -> tuple:
    """The backtest's refit of ``sub`` (the fitted sizes' runs) as the verdict fits, with its
    own draws: (groups, the arms' L(C) fits, each variant's ``_Judged``)."""
    data = _measure(sub, baselines, named, num_draws, seed + 7919 * step)
    fits = fit_arms(data.groups, ("L(C)",))
    sub_judged, _ = _compare_variants(data, fits, np.random.default_rng([seed, 53]))
    return data.groups, fits, sub_judged


def grid_terms(table: pd.DataFrame, judgement: Judgement) -> dict[str, float]:
    """Per size: the LR grid's term (%^2, ``gains.resolution.groups_pair_var``) in the gain of
    each arm over the judgement's baselines at the size's largest budget, as ``analyse`` reads
    it from these runs (their curvature, each arm's neighbours and picks, the noise model's run
    sd); with several other arms the largest. For `scaling plan --noise` on a finished study:
    only ``judgement.baselines`` (parsed by its builder) and ``judgement.baseline`` are read."""
    data = _measure(table, list(judgement.baselines), judgement.baseline, 0, 0)
    info, out = data.groups.info, {}
    curve = info[info["on_curve"]].sort_values("num_nonembedding_params", kind="stable")
    for g in curve.index:  # smallest size first
        size = str(info.at[g, "size"])
        b = data.base_of.get((info.at[g, "size"], float(info.at[g, "tokens"])))
        if b is None or info.at[g, "variant"] in data.baselines:  # a baseline is not tested
            continue
        out[size] = max(out.get(size, 0.0), groups_pair_var(data.groups, b, g))
    return out


def _measure(
    table: pd.DataFrame, baselines: list[str], named: str, num_resamples: int, seed: int
) -> _Measured:
    """The N-axis table, each cell's usable LRs, the excluded runs and the bootstrap groups;
    ``named``: the baseline as the user wrote it, for the errors."""
    every_budget = token_axis.snap_budgets(table.reset_index(drop=True))
    table = token_axis.n_axis_rows(every_budget, baselines)  # each size's largest budget
    frontiers = lr_frontier(table)
    usable = usable_cells(table, frontiers)
    excluded = excluded_runs(table, usable)
    if not usable["variant"].isin(baselines).any():
        raise ValueError(f"no usable runs of the baseline {named!r}; see the excluded runs")
    others = sorted(set(table["variant"]) - set(baselines))
    if others and not usable["variant"].isin(others).any():  # nothing left to judge
        raise ValueError(
            f"no usable runs of {', '.join(map(repr, others))} ({why_unusable(excluded, others)})"
            f": no verdict against the baseline {named!r}; see the excluded runs"
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
    j: Judgement,
    weights_only: list[str],
    law: Backtest,
) -> tuple[list[dict], dict[str, Evidence]]:
    """verdict.json's row per variant: its gain tests, held to the Holm level over variants, and
    rule 9's backtest; and per variant the evidence the rule read (``Analysis.evidence``)."""
    groups, has_ci = data.groups, data.has_ci
    tests = {v: [GainTest.of(b, groups) for b in one.comparison.curve] for v, one in judged.items()}
    p_values = {v: _global_p(o.comparison, tests[v]) if has_ci else 1.0 for v, o in judged.items()}
    levels = holm_levels(p_values, j.level) if p_values else {}
    frontier = {(f.variant, f.size, f.tokens): f for f in data.frontiers}
    rows, evidence = [], {}
    for variant, one in judged.items():
        k_part, k0, gamma, k_ok = _k_row(one, has_ci)
        row = {"variant": variant, "baseline": j.baseline, "c_ref": one.c_ref, **k_part}
        evidence[variant] = ev = Evidence(
            one.comparison,
            tuple(tests[variant]),
            gamma if has_ci else None,
            k0,
            guards=tuple(_guards(one.comparison, k_ok, has_ci, len(groups.seeds))),
            lr_guard=tuple(lr_guards(one.comparison, groups.info, frontier)),
            flops_guard=tuple(matching.undeclared_guard(variant, weights_only)),
            p=p_values[variant],
            law=functools.partial(law.top_check, variant),  # refitted once, if a word asks
        )
        # rules.apply_rule, with the conditional verdict of held guards
        decision = decide_held(ev, levels.get(variant), j)
        row.update(verdict=decision.pop("verdict"), reason=decision.pop("reason"))
        row.update((k, decision.pop(k)) for k in ("conditional_verdict", "conditional_assumes"))
        row["decision"] = {**decision, "variant_p": p_values[variant] if has_ci else None}
        gains = summary.gains_table(one.comparison, groups, has_ci)
        row["gain_pct_by_size"] = {r["size"]: r for r in gains if r["on_curve"]}
        row["gain_pct_by_budget"] = summary.gains_table(one.comparison, groups, has_ci)
        info = groups.info
        row["measured_compute"] = [float(info["flops"].min()), float(info["flops"].max())]
        rows.append(row)
    return rows, evidence


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


def _verdict(data: _Measured, variants: list[dict], fits: list[LawFit], j: Judgement) -> dict:
    """verdict.json of the N axis: the study's counts, each variant's row, fits and noise."""
    info, groups, table = data.groups.info, data.groups, data.table
    return {
        "baseline": j.baseline,
        "baselines": data.baselines,
        "baseline_by_size": {
            f"{s}@{t:.3g}": str(info.at[g, "variant"])
            for (s, t), g in sorted(data.base_of.items(), key=lambda kv: kv[0][1])
        },
        "num_runs": int(len(table)),
        "num_used": int(len(data.usable)),
        "num_seeds": int(len(groups.seeds)),
        "num_resamples": int(j.num_resamples if data.has_ci else 0),
        "multiple_comparisons": summary.multiple_comparisons(len(variants), j.level),
        "measured_compute": [float(info["flops"].min()), float(info["flops"].max())],
        "named_scales": summary.named_scales(),
        "flops_per_param_token_at_named_scales": {
            name: x["flops_per_param_token"] for name, x in summary.named_scales().items()
        },
        "excluded_runs": records(data.excluded, EXCLUDED_COLUMNS),
        "variants": variants,
        "fits": summary.fit_summary(fits, data.has_ci),
        "seed_noise": summary.seed_noise(groups, data.base_of, j.detect_gain_pct),
        "noise_model": _noise(groups.noise),
        "noise_diagnostics": noise_diagnostics(groups),
        "margin_pct": float(j.margin_pct),
        "lr_selection": records(frontier_frame(data.frontiers), list(frontier_frame([]).columns)),
        "lr_chosen_on": selection_column(table),
        "flops_estimated": bool(table["flops_estimated"].any()),
    }


def _add_token_axis(verdict: dict, data: _Measured, along_d: token_axis.TokenAnalysis) -> None:
    """With several budgets per size: every budget's runs counted and excluded, and the token
    axis's verdict and fits."""
    every_budget = data.every_budget
    verdict["num_runs"] = int(len(every_budget))
    used = usable_cells(every_budget, lr_frontier(every_budget))
    verdict["excluded_runs"] = records(excluded_runs(every_budget, used), EXCLUDED_COLUMNS)
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
