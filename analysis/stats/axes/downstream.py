"""Downstream tasks: the paired-seed verdict per task on correct-answer bits per byte.

Each task's ``eval/<task>/bpb`` (lower is better, like a loss) goes through the same machinery
as the loss: ``build_groups`` (the parametric bootstrap over seeds), ``compare`` (paired gains
at each size) and ``GainTest`` (the wider of the bootstrap and the paired-seed t interval). The
runs are the loss verdict's usable runs at each arm's chosen LR (``at_chosen_lrs``): the LR is
chosen on the loss once, never on a task.

Family-wise: per (task, variant) the per-size tests are one weighted Holm family
(``analysis.stats.gains.levels``, the top size 80% of the weight) whose weighted-Bonferroni p enters
Holm's step-down over every (task, variant); that sets each one's level. On tasks with no true
difference the chance that any task claims a gain or a loss is then at most ``alpha``
(tests/analysis/stats/axes/test_downstream.py measures it under t(3) seed noise).

Words, from the top size's interval: ``helps`` / ``hurts`` (rejected "no gain", gain > 0 / < 0),
``none`` (the interval within +-margin), ``undetected`` (not resolved), ``inconclusive`` (fewer
than 3 paired seeds at the top size). No trend is judged: a task gain per size is shown, not
extrapolated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.stats.gains import intervals
from analysis.stats.gains.compare import baseline_map, compare
from analysis.stats.gains.levels import (
    MIN_SEEDS,
    global_p,
    holm_levels,
    size_weights,
    weighted_holm,
)
from analysis.stats.gains.robust import GainTest
from analysis.stats.rules import verdict as rules
from analysis.stats.variance.cells import build_groups
from analysis.tables.judgement import Judgement
from analysis.tables.runs import is_eval_column
from foundation import contract

__all__ = ["METRIC", "tasks_in", "at_chosen_lrs", "downstream_verdict"]

METRIC = "bpb"


def tasks_in(table: pd.DataFrame) -> list[str]:
    """Tasks with a ``bpb`` column in the run table, sorted."""
    cols = [c for c in table.columns if is_eval_column(c) and c.endswith(f"/{METRIC}")]
    return sorted(c.split("/")[1] for c in cols)


def at_chosen_lrs(usable: pd.DataFrame, groups) -> pd.DataFrame:
    """The usable runs at each (variant, size, tokens)'s LR chosen on the data's loss."""
    info = groups.info
    chosen = {
        (str(info.at[g, "variant"]), str(info.at[g, "size"]), float(info.at[g, "tokens"])): lr
        for g, lr in enumerate(groups.best_lr[0])
    }
    keys = zip(usable["variant"], usable["size"], usable["tokens"], usable["lr_key"], strict=True)
    keep = []
    for variant, size, tokens, lr_key in keys:
        lr = chosen.get((str(variant), str(size), float(tokens)))
        keep.append(lr_key < 0 if lr is None or not np.isfinite(lr) else np.isclose(lr_key, lr))
    return usable[np.array(keep, dtype=bool)].reset_index(drop=True)


def downstream_verdict(runs: pd.DataFrame, judgement: Judgement, seed: int) -> dict | None:
    """verdict.json's ``downstream`` for runs with one LR per (variant, size, tokens), or None
    when no run logged a task, judged as the loss is (``judgement``: its baselines, draws,
    margin and level; ``seed`` the loss's bootstrap seed). ``tasks: {task: {variant: row}}``; a
    row holds ``verdict``, ``reason``, ``gain_pct_by_size`` (gain = baseline bpb - variant bpb,
    % of the baseline's), ``interval`` (the top size's), ``p`` and ``level``."""
    tasks = tasks_in(runs)
    if not tasks:
        return None
    baselines, num_resamples = list(judgement.baselines), judgement.num_resamples
    margin_pct, alpha = judgement.margin_pct, judgement.level
    measured = {}
    for task in tasks:
        for variant, tests in _task_tests(runs, task, baselines, num_resamples, seed).items():
            measured[(task, variant)] = tests
    p_values = {key: _family_p(curve, tests) for key, (curve, tests) in measured.items()}
    levels = holm_levels(p_values, alpha) if p_values else {}
    out: dict = {}
    for (task, variant), (curve, tests) in measured.items():
        row = _judge(curve, tests, levels.get((task, variant)), margin_pct, alpha)
        out.setdefault(task, {})[variant] = {**row, "p": p_values[(task, variant)]}
    return {
        "metric": METRIC,
        "alpha": float(alpha),
        "adjustment": "holm",
        "family": len(p_values),
        "margin_pct": float(margin_pct),
        "tasks": out,
    }


def _task_tests(
    runs: pd.DataFrame, task: str, baselines: list[str], num_resamples: int, seed: int
) -> dict[str, tuple[list, list[GainTest]]]:
    """Per variant: (its curve of budgets, one GainTest per budget) on the task's bpb."""
    column = contract.eval_metric(task, METRIC)
    scored = runs[np.isfinite(runs[column].to_numpy(float))]
    if not scored["variant"].isin(baselines).any():
        return {}
    scored = scored.assign(final_val_loss=scored[column], lr_key=-1.0)
    num_draws = num_resamples if intervals.enough_seeds(int(scored["seed"].nunique())) else 0
    groups = build_groups(scored, num_draws, seed)
    base_of = baseline_map(groups, baselines)
    out = {}
    for variant in sorted(set(groups.info["variant"]) - set(baselines)):
        comparison = compare(groups, base_of, variant)
        out[variant] = (comparison.curve, [GainTest.of(b, groups) for b in comparison.curve])
    return out


def _family(curve: list) -> list[int]:
    """Sizes in the per-size family: at least 3 paired seeds, and only if the top size has."""
    family = [i for i, b in enumerate(curve) if b.num_paired >= MIN_SEEDS]
    return family if family and family[-1] == len(curve) - 1 else []


def _family_p(curve: list, tests: list[GainTest]) -> float:
    family = _family(curve)
    return global_p([tests[i].p() for i in family], size_weights(len(family)))


def _judge(
    curve: list, tests: list[GainTest], level: float | None, margin_pct: float, alpha: float
) -> dict:
    family = _family(curve)
    weights = size_weights(len(family))
    p = [tests[i].p() for i in family]
    if level is None:  # the step-down stopped before this one: nothing is rejected
        rejected, tested = [False] * len(family), [w * alpha for w in weights]
    else:
        rejected, tested = weighted_holm(p, weights, level)
    by_size = {}
    for i, budget in enumerate(curve):
        j = family.index(i) if i in family else None
        interval = tests[i].interval(tested[j])[0] if j is not None else None
        by_size[budget.size] = {
            "value": _num(tests[i].value),
            "ci": interval,
            "num_paired": budget.num_paired,
            "rejected": bool(rejected[j]) if j is not None else False,
        }
    row = {"level": level, "gain_pct_by_size": by_size, "interval": None}
    if not family:
        reason = f"fewer than {MIN_SEEDS} paired seeds at the top size: no interval"
        return {**row, "verdict": "inconclusive", "reason": reason}
    top = by_size[curve[-1].size]
    row["interval"] = top["ci"]
    if top["ci"] is None:
        return {**row, "verdict": "inconclusive", "reason": "no interval for the top gain"}
    text = rules.clause(f"gain@{curve[-1].size}", top["value"], top["ci"], "%")
    side = rules.sign(top["ci"]) if top["rejected"] else 0
    if side > 0:
        return {**row, "verdict": "helps", "reason": f"{text}: lower bits per byte"}
    if side < 0:
        return {**row, "verdict": "hurts", "reason": f"{text}: higher bits per byte"}
    if -margin_pct <= top["ci"][0] and top["ci"][1] <= margin_pct:
        reason = f"{text}; CI within the +-{margin_pct:.3g}% margin: equivalent"
        return {**row, "verdict": "none", "reason": reason}
    reason = f"{text}; CI reaches past the +-{margin_pct:.3g}% margin: not resolved"
    return {**row, "verdict": "undetected", "reason": reason}


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
