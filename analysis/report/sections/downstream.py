"""The report's "Downstream" section: per task, the gain in correct-answer bits per byte at each
size and the task's word, from verdict.json's ``downstream`` only
(``analysis.stats.axes.downstream``). Absent when no run logged a task."""

from __future__ import annotations

from analysis.report import fmt
from foundation.contract import size_key


def _badge(outcome: str) -> str:
    return f"[[{outcome}|{outcome}]]"


def downstream_blocks(verdict: dict) -> list[tuple]:
    """Heading, what is measured and how it is judged, and one table row per (task, variant)."""
    part = verdict.get("downstream")
    if not part:
        return []
    sizes = sorted(
        {s for by_variant in part["tasks"].values() for row in by_variant.values()
         for s in row["gain_pct_by_size"]},
        key=size_key,
    )  # fmt: skip
    rows = []
    for task, by_variant in part["tasks"].items():
        for variant, row in by_variant.items():
            gains = row["gain_pct_by_size"]
            cells = [
                fmt.with_ci(gains[s]["value"], gains[s]["ci"], "%") if s in gains else fmt.NA
                for s in sizes
            ]
            rows.append([task, variant, _badge(row["verdict"]), *cells, fmt.words(row["reason"])])
    header = ["task", "variant", "verdict", *(f"gain at {s}" for s in sizes), "why"]
    text = (
        "Each finished cell was scored on the study's downstream tasks (lm-evaluation-harness). "
        "gain = baseline - variant correct-answer bits per byte (bpb, lower is better), in % of "
        "the baseline's, paired on seeds at each arm's LR chosen on the loss; intervals as for "
        "the loss (the wider of the parametric bootstrap and the paired-seed t). Family-wise "
        f"{100 * part['alpha']:.3g}%: Holm's step-down over the {part['family']} "
        "(task, variant) pairs, each pair's sizes a weighted Holm family (top size 80%). "
        "helps / hurts: the top size's gain rejected 0; none: its interval within "
        f"+-{part['margin_pct']:.3g}%; undetected: not resolved. Accuracy is logged per run "
        "(eval/<task>/acc) but not judged: near chance at small sizes."
    )
    return [("h", "Downstream"), ("p", text), ("table", header, rows)]
