"""The verdict as the terminal prints it: one function for `scaling run` and `scaling analyze`.

Words and numbers rounded like the report's tables (``analysis.report.fmt``); a number that does not
exist is left out with a word saying why, never printed as ``None``.
"""

from __future__ import annotations

from analysis.report import fmt
from analysis.report.headline import judged_level, top_gain
from analysis.report.sections.inference import inference_lines
from analysis.report.sections.looks import look_clause
from analysis.report.sections.resolve import resolve_lines
from analysis.report.sections.time_matched import time_lines


def _numbers(v: dict, intervals: bool) -> str:
    parts = []
    top = top_gain(v)
    if top is not None:
        size, value, ci, conf = top
        ci = ci if intervals else None
        text = fmt.with_ci(value, ci, "%", conf, words=True) if ci else fmt.num(value, sig=2) + "%"
        parts.append(f"gain at {size} {text}")
    if v.get("k0") is None and v.get("gamma") is None:
        parts.append("k(C) not fitted")
    else:
        for name, key, unit in (("k0", "k0", "\u00d7"), ("\u03b3", "gamma", "")):
            value, ci, level = _judged(v, key)
            ci = ci if intervals else None
            if value is not None:
                text = (
                    fmt.with_ci(value, ci, unit, level, words=True) if ci else fmt.num(value) + unit
                )
                parts.append(f"{name} {text}")
    return "; ".join(parts)


def _judged(v: dict, key: str) -> tuple[float | None, list[float] | None, float]:
    """k0's or gamma's (value, interval, confidence) at the level the verdict judged them, the
    top size's (docs/statistics.md, "Claims are family-wise"; the report's verdict table shows
    the same); the 95% one only where the decision has none."""
    decided = v["decision"].get(key) or {}
    if decided.get("value") is not None:
        return decided["value"], decided.get("ci"), 1 - judged_level(v)
    return v.get(key), v.get(f"{key}_ci95"), 0.95


def verdict_lines(verdict: dict) -> list[str]:
    """The lines both commands print after an analysis, in order."""
    base = verdict["baseline"]
    intervals = (verdict.get("intervals") or {}).get("available", True)
    lines = []
    at = look_clause(verdict)  # a sequential look's verdict: which look, at what level
    look = f" ({at})" if at else ""
    for v in verdict["variants"]:
        lines.append(f"{v['variant']} vs {base}: {v['verdict']}{look}: {fmt.words(v['reason'])}")
        lines.append(f"  {_numbers(v, intervals)}")
    for v in verdict.get("unjudged") or []:  # an arm whose every run was left out
        lines.append(f"{v['variant']} vs {base}: no verdict: {v['reason']}")
    for v in (verdict.get("tokens") or {}).get("variants", []):  # the token axis
        lines.append(f"{v['variant']} vs {base} along D: {v['verdict']}: {fmt.words(v['reason'])}")
    compute = verdict.get("compute_axis")
    if compute and compute.get("note"):
        lines.append(f"compute: {compute['note']}")
    if len(verdict["variants"]) > 1:
        lines.append(f"multiple comparisons: {verdict['multiple_comparisons']}")
    lines.extend(time_lines(verdict))  # the gain at matched GPU-hours, or why none
    lines.extend(inference_lines(verdict))  # measured inference cost ratios, when present
    lines.extend(resolve_lines(verdict))  # an unresolved verdict: its best option
    return lines
