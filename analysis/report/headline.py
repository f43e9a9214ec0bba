"""The report's first sentence per variant: what was found, in words, from the verdict's numbers.

Every word is decided by a number beside it: "better"/"worse" by the sign of the top gain,
"significant" by its interval (at the level the decision used), the closing clause by the
outcome and the intervals that decided it. tests/analysis/report/test_headline.py parses the
sentences back against the verdict for every outcome.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from analysis.report import fmt
from analysis.report.sections.time_matched import time_sentence
from analysis.stats.gains.levels import level_or_default
from analysis.tables.spec import DEFAULT_MARGIN_PCT

_CELLS = re.compile(r"LR not bracketed at (?P<n>\d+) cell")

OUTCOME_WORDS = {
    "persists": "the gain persists",
    "grows": "the gain grows with scale",
    "fades": "the gain fades with scale",
    "helps": "the variant helps where measured",
    "hurts": "the variant hurts",
    "none": "no gain beyond the margin",
    "undetected": "not resolved",
    "inconclusive": "inconclusive",
}


def _sign(ci: list[float] | None, ref: float = 0.0) -> int:
    if ci is None:
        return 0
    return 1 if ci[0] > ref else -1 if ci[1] < ref else 0


def _baseline_name(baselines: Sequence[str]) -> str:
    """The baseline in words, from verdict.json's ``baselines`` (the judgement's, parsed once by
    its builder, ``analysis.judgement.table_judgement``)."""
    names = list(baselines)
    return names[0] if len(names) == 1 else f"the stronger of {' and '.join(names)}"


def top_gain(v: dict) -> tuple[str, float, list[float] | None, float] | None:
    """(size, gain %, interval at the level its test used or None, confidence) at the top."""
    top = v["decision"].get("top_gain_pct")
    if top is not None:
        return top["size"], top["value"], top["ci"], 1 - judged_level(v)
    sizes = list(v["gain_pct_by_size"].values())
    if not sizes or sizes[-1]["gain_pct"]["value"] is None:
        return None
    last = sizes[-1]
    return last["size"], last["gain_pct"]["value"], None, 1 - judged_level(v)


def judged_level(v: dict) -> float:
    """The level a variant's top-size interval was drawn at: its top test's, else its verdict's
    (the judgement's level after Holm), else (a step-down that stopped before it) ``ALPHA``,
    the level intervals are drawn at when no test set one: the report's one fallback."""
    top = v["decision"].get("top_gain_pct") or {}
    level = top.get("level")
    return level_or_default(v["decision"].get("level") if level is None else level)


def measured(v: dict, baselines: Sequence[str]) -> str:
    """ "At 100M, nonlinear is 1.9% better than linear (gain 1.9%, 95% CI 1.6% to 2.2%)"."""
    top = top_gain(v)
    base = _baseline_name(baselines)
    if top is None:
        return f"{v['variant']} has no size measured together with {base}"
    size, value, ci, conf = top
    places = fmt.decimals(ci)
    size_text = fmt.num(abs(value), places)
    if float(size_text.replace(fmt.MINUS, "-")) == 0:
        how = f"is no different from {base}"
    else:
        how = f"{size_text}% {'better' if value > 0 else 'worse'} than {base}"
    gain = fmt.num(value, places) + "%"
    if ci is None:
        return f"At {size}, {v['variant']} measured {how} (gain {gain}, no interval: fewer seeds)"
    lo, hi = (fmt.num(x, places) + "%" for x in ci)
    gain += f", {fmt.level_pct(conf)} CI {lo} to {hi}"
    if _sign(ci) == 0:
        return f"At {size}, {v['variant']} measured {how} (gain {gain}: not significant)"
    return f"At {size}, {v['variant']} is {how} (gain {gain})"


def _k0(v: dict, conf: float, words: bool | str = True) -> str:
    k = v["decision"].get("k0") or {}
    return fmt.with_ci(k.get("value"), k.get("ci"), "\u00d7", conf, words=words)


def _gamma(v: dict, conf: float) -> str:
    g = v["decision"].get("gamma") or {}
    return "\u03b3 " + fmt.with_ci(g.get("value"), g.get("ci"), "", conf, words="inline")


def significant_sizes(v: dict) -> list[str]:
    """Sizes whose gain the family-wise procedure found above 0 (``decision["sizes"]``); for
    a verdict without them, those whose 95% interval lies above 0."""
    sizes = v["decision"].get("sizes")
    if sizes is not None:
        return [s["size"] for s in sizes if s["rejected"] and _sign(s["ci"]) > 0]
    return [s for s, g in v["gain_pct_by_size"].items() if _sign(g["gain_pct"]["ci95"]) > 0]


def loss_gain_trend(v: dict) -> str | None:
    """How the loss gain itself moves across the measured sizes (``gain_pct_by_size``):
    "constant" when every size's interval holds one common value, "grows" / "shrinks" when the
    top size's interval lies above / below the smallest's, else "varies"; None without two
    sizes with intervals. A constant loss gain can still mean a rising compute multiplier (the
    loss curve flattens, so the same gain costs the baseline more compute at larger sizes)."""
    rows = [g["gain_pct"] for g in v.get("gain_pct_by_size", {}).values()]
    rows = [g for g in rows if g.get("value") is not None and g.get("ci95") is not None]
    if len(rows) < 2:
        return None
    if max(g["ci95"][0] for g in rows) <= min(g["ci95"][1] for g in rows):
        return "constant"
    first, top = rows[0]["ci95"], rows[-1]["ci95"]
    return "grows" if top[0] > first[1] else "shrinks" if top[1] < first[0] else "varies"


def _grows(v: dict, conf: float) -> str:
    """Rule 2 in words; a growing compute multiplier is not a growing loss gain, so the
    sentence says what the loss gain itself did (the reading hazard of `grows`)."""
    sizes = list(v.get("gain_pct_by_size", {}).items())
    trend = loss_gain_trend(v)
    if trend is None:
        return (
            f"its compute multiplier grows with compute ({_gamma(v, conf)}): "
            "the gain grows with scale"
        )
    (s0, g0), (s1, g1) = sizes[0], sizes[-1]
    first, top = fmt.num(g0["gain_pct"]["value"]), fmt.num(g1["gain_pct"]["value"])
    span = f"{first}% at {s0}, {top}% at {s1}"
    worth = f"it is worth more compute at larger sizes ({_gamma(v, conf)})"
    if trend == "constant":
        lead = f"the loss gain is constant ({span}; one value lies in every size's interval)"
    elif trend == "grows":
        lead = f"the loss gain grows too ({span})"
    elif trend == "shrinks":
        lead = f"the loss gain shrinks ({span}), but"
    else:
        lead = f"the loss gain varies between sizes ({span})"
    joint = " " if trend == "shrinks" else ", and "
    return f"{lead}{joint}{worth}: the gain grows with scale, in compute"


def _margin(v: dict) -> str:
    return f"{v['decision'].get('margin_pct', DEFAULT_MARGIN_PCT):g}%"


def _unresolved(v: dict) -> str:
    """Rule 8: what the study could detect, and what would resolve the margin."""
    d = v["decision"]
    seeds = d.get("seeds_to_resolve_margin")
    margin = f"\u00b1{_margin(v)}"
    need = f"about {seeds} paired seeds would" if seeds else "more seeds than can be planned would"
    need = f"{need} resolve {margin}"
    if d.get("grid_limits"):  # the grid's own term caps the power: seeds cannot shrink it
        need = (
            f"more seeds alone cannot resolve {margin} at this LR grid's resolution; a finer LR "
            "grid near the best LRs could"
        )
    return (
        f"the interval reaches past {margin}, so the study cannot tell a gain that "
        f"small from none: not resolved (it detects gains of "
        f"{fmt.num(d.get('detectable_gain_pct'))}% with 80% power; {need})"
    )


def _helps(v: dict, conf: float) -> str:
    if "trend not pinned" in v["reason"]:
        return (
            f"its compute multiplier's trend is not pinned ({_gamma(v, conf)}: k could change "
            "by more than 1.25\u00d7 per decade): the variant helps where measured"
        )
    return (
        f"but the fitted compute multiplier's interval does not lie above 1 "
        f"(k0 {_k0(v, conf, 'inline')}): the variant helps where measured"
    )


def _inconclusive(v: dict, conf: float) -> str:
    reason = v["reason"]
    if reason.startswith("LR not bracketed"):
        counted = _CELLS.match(reason)
        cells = int(counted["n"]) if counted else reason.count("(add LR")
        cond = v.get("conditional_verdict")
        if_best = f"; if {v.get('conditional_assumes')}: {cond}" if cond else ""
        return (
            f"inconclusive: the best learning rate of {cells} cell(s) is not bracketed by the "
            f"grid (the LRs to add are in the learning-rate table){if_best}"
        )
    cond = v.get("conditional_verdict")
    if_so = f"; if {v.get('conditional_assumes')}: {cond}" if cond else ""
    return f"inconclusive: {fmt.words(reason.split('; ')[0])}{if_so}"


def sentence(v: dict, baselines: Sequence[str]) -> str:
    """One sentence for one variant of ``verdict["variants"]``, judged against ``baselines``
    (``verdict["baselines"]``)."""
    top = top_gain(v)
    conf = top[3] if top else 0.95
    head = measured(v, baselines)
    outcome = v["verdict"]
    if outcome == "persists":
        tail = (
            f"over the measured range it is worth {_k0(v, conf)} compute, changing by at most "
            "1.25\u00d7 per decade: the gain persists"
        )
    elif outcome == "helps":
        tail = _helps(v, conf)
    elif outcome == "undetected":
        tail = _unresolved(v)
    elif outcome == "grows":
        tail = _grows(v, conf)
    elif outcome == "fades":
        where = ", ".join(significant_sizes(v)) or "a smaller size"
        tail = (
            f"significant at {where}, its compute multiplier shrinks with compute "
            f"({_gamma(v, conf)}): the gain fades with scale"
        )
    elif outcome == "hurts":
        tail = "significantly worse at the largest measured size: the variant hurts"
    elif outcome == "none":
        sig = significant_sizes(v)
        where = f"a significant gain only at {', '.join(sig)}; " if sig else ""
        tail = (
            f"{where}the whole interval at the largest size lies within \u00b1{_margin(v)}: "
            "no gain beyond the margin"
        )
    else:
        tail = _inconclusive(v, conf)
    return f"{head}; {tail}."


def headline(verdict: dict) -> list[str]:
    """One sentence per variant; one saying so when only a baseline was measured."""
    if not verdict["variants"]:
        return [f"Only the baseline {verdict['baseline']} has usable runs: nothing to compare."]
    out = []
    for v in verdict["variants"]:  # one more sentence where GPU-hours read otherwise than FLOPs
        timed = time_sentence(verdict, v["variant"])
        out.append(sentence(v, verdict["baselines"]) + (f" {timed}" if timed else ""))
    return out
