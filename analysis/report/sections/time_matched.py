"""The report's "Gain at matched GPU-hours" section, beside the matched-FLOPs gains; the headline's
one extra sentence when the two disagree; the terminal's line.

Read from ``verdict["time_matched"]`` only (``analysis.stats.gains.time_matched``). A study without
a time measurement says so and shows no number; a size whose ratio has no spread shows the ratio
and ``not stated`` for the gain. The verdict's word is decided at matched FLOPs, always.
"""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["time_blocks", "time_sentence", "time_lines", "ratio_text", "HEADER"]

HEADER = [
    "variant",
    "size",
    "time per token vs baseline (95% CI)",
    "timed runs (variant/baseline)",
    "compute at matched GPU-hours",
    "gain at matched FLOPs [95% CI]",
    "gain at matched GPU-hours [95% CI]",
]
NOT_STATED = "not stated (ratio without spread)"


def ratio_text(ratio: dict) -> str:
    """``1.06× [1.02×, 1.10×]``, or ``1.06× (no spread: one timed run)``."""
    if ratio.get("ci95"):
        return fmt.with_ci(ratio["value"], ratio["ci95"], "\u00d7")
    return f"{fmt.num(ratio['value'])}\u00d7 (no spread: fewer than 2 timed runs an arm)"


def _gain(g: dict) -> str:
    return fmt.with_ci(g["value"], g.get("ci95"), "%")


def _rows(block: dict) -> list[list[str]]:
    rows = []
    for v in block["variants"]:
        for size, r in v["by_size"].items():
            runs = r["time_ratio"]["num_runs"]
            rows.append(
                [
                    v["variant"],
                    size,
                    ratio_text(r["time_ratio"]),
                    f"{runs['variant']}/{runs['baseline']}",
                    f"{fmt.num(r['compute_at_matched_time'])}\u00d7",
                    _gain(r["flop_gain_pct"]),
                    _gain(r["gain_pct"]) if r["stated"] else NOT_STATED,
                ]
            )
    return rows


def _where(block: dict) -> str:
    return f"{block['source']}, on {block['device']}"


def time_blocks(verdict: dict) -> list[tuple]:
    block = verdict.get("time_matched")
    if block is None:  # a verdict from before the time-matched gain: nothing to say
        return []
    out: list[tuple] = [("h", "Gain at matched GPU-hours")]
    if not block["measured"]:
        out.append(("p", f"No time measurement: {block['note'].split(': ', 1)[-1]}. The gain "
                    "is stated at matched FLOPs only; equal speed is never assumed. A run is "
                    "timed by its logged `tokens_per_s` (MLflow), or in a run CSV by a "
                    "`tokens_per_s` column."))  # fmt: skip
        return out
    out.append(("table", HEADER, _rows(block)))
    other = block.get("other_devices") or 0
    dropped = f" ({other} run(s) timed on other devices left out)" if other else ""
    out.append(
        (
            "p",
            f"Measured from {_where(block)}{dropped}: {block['basis']}. A variant r\u00d7 slower "
            "per token at f\u00d7 the FLOPs per token gets f/r of the baseline's compute in the "
            "same GPU-hours; its gain there is the matched-FLOPs gain less the loss its own law "
            "loses over that step. The interval carries the time ratio's spread (its runs' "
            "Welch t interval) with the gain's own. The verdict's word is decided at matched "
            "FLOPs.",
        )
    )
    if block.get("untimed_variants"):
        out.append(("note", f"No timed runs for: {', '.join(block['untimed_variants'])}."))
    return out


def time_sentence(verdict: dict, variant: str) -> str | None:
    """The headline's one extra sentence for ``variant``: only where its top size's
    time-matched interval reads otherwise than the matched-FLOPs one."""
    block = verdict.get("time_matched") or {}
    v = next((x for x in block.get("variants", []) if x["variant"] == variant), None)
    if v is None or not v.get("disagrees"):
        return None
    top = v["top"]
    return (
        f"At matched GPU-hours the gain reads otherwise: {variant} takes "
        f"{ratio_text(top['time_ratio'])} {top['baseline_arm']}'s time per token "
        f"({_where(block)}), so at {top['size']} its gain is {_gain(top['gain_pct'])}: "
        f"{v['disagrees']}."
    )


def time_lines(verdict: dict) -> list[str]:
    """The terminal's lines: the top size's time-matched gain per variant, or why there is none."""
    block = verdict.get("time_matched")
    if block is None:
        return []
    if not block["measured"]:
        return [f"GPU-hours: {block['note']}"]
    lines = []
    for v in block["variants"]:
        top = v["top"]
        gain = _gain(top["gain_pct"]) if top["stated"] else NOT_STATED
        lines.append(
            f"{v['variant']} at matched GPU-hours: gain at {top['size']} {gain} (time per token "
            f"{ratio_text(top['time_ratio'])}; {_where(block)})"
        )
    return lines
