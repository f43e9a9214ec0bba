"""The report's "Backtest" section, from ``verdict["backtest"]`` only (``analysis.stats.backtest``):
each step of the rollout (fit the smaller sizes, predict the next), predicted against measured
for every arm's loss and every variant's gain, the error in % of the loss, and whether each
interval covered; and the one sentence that states the study's skill one size-step ahead."""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["backtest_blocks", "skill_sentence"]


def _yes(flag) -> str:
    return fmt.NA if flag is None else "yes" if flag else "no"


def _agrees(flag) -> str:
    return fmt.NA if flag is None else "yes" if flag else "**no: flagged**"


def _rows(step: dict) -> list[list[str]]:
    where = f"{', '.join(step['fitted_sizes'])} → {step['held_out']}"
    rows = []
    for r in step.get("losses", []):
        rows.append(
            [
                where,
                f"loss of {r['variant']}",
                fmt.with_ci(r["predicted"], r["ci95"]),
                fmt.with_ci(r["measured"], r["measured_ci95"]),
                f"{fmt.num(r['error_pct'], sig=2)}% of the loss",
                _yes(r["covered"]),
                _agrees(r["agrees"]),
            ]
        )
    for r in step.get("gains", []):
        rows.append(
            [
                where,
                f"gain of {r['variant']} over {r['baseline']}",
                fmt.with_ci(r["predicted"], r["ci95"], "%"),
                fmt.with_ci(r["measured"], r["measured_ci95"], "%"),
                f"{fmt.num(r['error_pct'], sig=2)} points of % of the loss",
                _yes(r["covered"]),
                _agrees(r["agrees"]),
            ]
        )
    return rows


def skill_sentence(verdict: dict) -> str | None:
    """One sentence: how well the study's own laws predicted its largest size from the smaller
    ones (None without a backtest part, e.g. an analysis that did not run one)."""
    found = verdict.get("backtest")
    if not found:
        return None
    if not found["available"]:
        return (
            f"Backtest: none ({found['reason']}), so the study has shown no extrapolation skill "
            "and no extrapolation is predicted."
        )
    skill = found["skill"]
    top = found["steps"][-1]
    if top.get("error"):
        return (
            f"Backtest: the refit without {top['held_out']} failed ({top['error']}), so no "
            "extrapolation is predicted."
        )
    gains = [g for g in top["gains"] if g["predicted"] is not None]
    gain_text = "; ".join(
        f"{g['variant']}'s gain {fmt.with_ci(g['predicted'], g['ci95'], '%')} predicted, "
        f"{fmt.num(g['measured'], sig=2)}% measured"
        for g in gains
    )
    loss_err = skill["max_abs_loss_error_pct"]
    head = (
        f"Backtest, one size-step ahead: fitted on {', '.join(top['fitted_sizes'])} only, the "
        f"laws predicted {top['held_out']} ({fmt.times(top['compute_ratio'])} the largest "
        f"fitted compute) within {fmt.num(loss_err, sig=2)}% of each arm's loss"
    )
    head += f" ({gain_text})" if gain_text else ""
    if skill["flagged"]:
        return (
            f"{head}; the prediction disagrees with the measurement beyond both intervals for "
            f"{', '.join(skill['flagged'])}: the fitted laws did not extrapolate even one step, "
            "and no extrapolation is predicted."
        )
    if skill["shown_up_to_compute_ratio"] is None:
        return f"{head}; without intervals the backtest shows no skill: nothing is predicted."
    return (
        f"{head}; every prediction agreed with its measurement within both intervals, so the "
        "extrapolations below are predicted, with their intervals, up to "
        f"{fmt.times(skill['shown_up_to_compute_ratio'])} the fitted compute; beyond it they "
        'read "not predicted": a number there would have no interval any check supports.'
    )


def backtest_blocks(verdict: dict) -> list[tuple]:
    """The section's blocks; none when the verdict has no ``backtest`` part."""
    found = verdict.get("backtest")
    if not found:
        return []
    b: list[tuple] = [("h", "Backtest: the study predicts its own largest size")]
    if not found["available"]:
        b.append(("p", f"No backtest: {found['reason']}."))
        return b
    b.append(
        (
            "p",
            "Each step refits everything the verdict fits (the LR rules, the noise model and its "
            "parametric bootstrap, each arm's L(C), the k(C) gain model with the LR grid's term) "
            "on the runs of the smaller sizes only, and predicts the next size: each arm's loss "
            "from its L(C), the paired gain from k(C), with 95% intervals over the draws. "
            "Measured: the held-out size's own loss and paired gain (95%). Covered: the measured "
            "value lies in the prediction's interval. Agrees: the difference holds 0 once both "
            "sides' uncertainty is counted; a step that does not is flagged (the law changed "
            "past the fitted sizes, or the fit cannot carry one step).",
        )
    )
    rows = [row for step in found["steps"] for row in _rows(step)]
    header = [
        "fitted → held out",
        "quantity",
        "predicted",
        "measured",
        "error",
        "covered",
        "agrees",
    ]
    b.append(("table", header, rows))
    for step in found["steps"]:
        if step.get("error"):
            b.append(
                ("note", f"Refit on {', '.join(step['fitted_sizes'])} failed: {step['error']}")
            )
    return b
