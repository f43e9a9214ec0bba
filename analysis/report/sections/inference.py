"""The report's "Inference cost" section: each arm's cost ratio to the baseline beside its gain.

Read from ``verdict["inference"]`` (`analysis.stats.inference`) and the per-size gains of
``verdict["variants"]``; without measured figures the section says how to get them. A timed
ratio shows its spread (the interquartile range of its repeats) beside it; one whose repeats
disagree beyond the bound reads as a bound (``≥ 2.82x``) where its whole spread lies on one side
of 1, and ``unresolved`` with that spread, never as a number, only where it holds 1.
"""

from __future__ import annotations

import math

from analysis.report import fmt

__all__ = ["inference_blocks", "inference_lines", "ratio_text", "bound_text", "HEADER"]
__all__ += ["NOT_MEASURED"]

HEADER = ["variant", "size", "gain", "prefill", "decode b1", "decode b32", "memory", "KV cache"]
COLUMNS = ("prefill", "decode_b1", "decode_b32", "memory", "kv_cache")
UNRESOLVED = "unresolved"
NOT_MEASURED = "Not measured: run `scaling pilot` (it measures each arm and size on the study's "
NOT_MEASURED += "device and writes pilot.json)."


def _gain(verdict: dict, variant: str, size: str) -> str:
    for v in verdict.get("variants", []):
        if v.get("variant") == variant:
            g = (v.get("gain_pct_by_size") or {}).get(size)
            if g:
                return fmt.with_ci(g["gain_pct"]["value"], g["gain_pct"].get("ci95"), "%")
    return "n/a"


def _ratio(x: float) -> str:
    return f"{x:.2f}x"


def bound_text(bound: dict) -> str:
    """``≥ 2.82x`` / ``≤ 0.41x``, rounded away from 1 so the bound never claims more."""
    if bound["side"] == "at_least":
        return f"\u2265 {math.floor(100 * bound['value'] + 1e-9) / 100:.2f}x"
    return f"\u2264 {math.ceil(100 * bound['value'] - 1e-9) / 100:.2f}x"


def ratio_text(entry: dict | None) -> str:
    """``1.18x (1.15-1.21)``; where the repeats disagree, a bound when their spread lies on one
    side of 1 (``≥ 2.82x (2.82-5.68)``), else ``unresolved (0.68-1.88)``; a ratio with no
    repeats at all (an older file) ``unresolved (no repeats)``."""
    if entry is None:
        return "n/a"
    spread = entry.get("spread")
    if entry.get("resolved"):
        value = _ratio(entry["value"])
        return f"{value} ({spread[0]:.2f}-{spread[1]:.2f})" if spread else value
    if entry.get("bound"):
        return f"{bound_text(entry['bound'])} ({spread[0]:.2f}-{spread[1]:.2f})"
    if not entry.get("rounds"):
        return f"{UNRESOLVED} (no repeats)"
    return f"{UNRESOLVED} ({spread[0]:.2f}-{spread[1]:.2f})"


def _source(inf: dict) -> str:
    return f" (from {inf['source']})" if inf.get("source") else ""


def break_even_pct(verdict: dict, baseline: str, n_params: float, ratio: float) -> float | None:
    """The loss gain (% of the baseline's loss at ``n_params``) that a baseline ``ratio`` times
    larger buys on its own fitted L(N) = E + A N^-alpha: what a variant whose decode step costs
    ``ratio`` times the baseline's must beat to repay it (a decode step's time grows about in
    proportion to N). None without that fit."""
    fit = next(
        (f for f in verdict.get("fits", []) if f["law"] == "L(N)" and f["variant"] == baseline),
        None,
    )
    if fit is None:
        return None
    e, a, alpha = (fit["params"][k]["value"] for k in ("E", "A", "alpha"))
    if None in (e, a, alpha):
        return None
    reducible = a * n_params**-alpha
    return 100.0 * reducible * (1.0 - ratio**-alpha) / (e + reducible)


def _break_even_text(verdict: dict, inf: dict) -> str | None:
    """One sentence per variant at its largest size with a decode ratio."""
    out = []
    for variant, by_size in inf["ratios"].items():
        size, r = list(by_size.items())[-1]
        row = next((v for v in verdict.get("variants", []) if v["variant"] == variant), None)
        g = ((row or {}).get("gain_pct_by_size") or {}).get(size)
        if g is None:
            continue
        entry = r.get("decode_b1") or {}
        measured = fmt.with_ci(g["gain_pct"]["value"], g["gain_pct"].get("ci95"), "%")
        bound = entry.get("bound")
        if not entry.get("resolved") and not bound:  # no ratio, not even a side of 1, to price
            out.append(
                f"{variant} at {size}: its decode ratio is {ratio_text(entry)}, so no "
                f"break-even gain is stated (measured {measured})."
            )
            continue
        # a bound prices the arm at its bound: at least that slow, so at least that gain
        ratio = float(bound["value"] if bound else entry["value"])
        shown = bound_text(bound) if bound else _ratio(ratio)
        if ratio <= 1.0:
            out.append(
                f"{variant} at {size} decodes no slower than `{inf['baseline']}` "
                f"({shown}): any loss gain repays it (measured {measured})."
            )
            continue
        need = break_even_pct(verdict, inf["baseline"], float(g["n_params"]), ratio)
        if need is None:
            continue
        least = "at least " if bound else ""
        out.append(
            f"{variant} at {size} decodes at {least}{_ratio(ratio)} the baseline's time per step "
            f"(batch 1): a baseline {_ratio(ratio)} larger, about as costly to serve, would be "
            f"{fmt.num(need, sig=2)}% of the loss better on the baseline's fitted L(N), so the "
            f"variant repays its decode cost only with a loss gain above {least}"
            f"{fmt.num(need, sig=2)}% (measured {measured})."
        )
    return " ".join(out) if out else None


def inference_blocks(verdict: dict) -> list[tuple]:
    inf = verdict.get("inference")
    b: list[tuple] = [("h", "Inference cost")]
    if not inf:
        b.append(("p", NOT_MEASURED))
        return b
    device = inf["device"]
    label = f"{device} (CPU figures: not what a GPU would show)" if device == "cpu" else device
    rows = [
        [variant, size, _gain(verdict, variant, size)] + [ratio_text(r.get(k)) for k in COLUMNS]
        for variant, by_size in inf["ratios"].items()
        for size, r in by_size.items()
    ]
    b.append(("table", HEADER, rows))
    b.append(
        (
            "p",
            f"Measured on {label}{_source(inf)}. Cost ratio of each arm to "
            f"`{inf['baseline']}` at the same size (above 1: costlier): prefill = time per "
            "prompt token, decode = ms per step "
            "with the KV cache at batch 1 and 32, memory = peak "
            f"({inf.get('memory_kind') or 'as measured'}), KV cache = its buffers at batch 32. "
            "A timed ratio is the median over repeated rounds (the arms of a size measured side "
            "by side pair round by round; figures measured apart, as the pilot's probes, pair "
            "every round with every round); in parentheses the middle half of those ratios "
            "(interquartile range). Where its upper quartile exceeds "
            f"{inf.get('bound', 1.2):g} times the lower, or fewer than "
            f"{inf.get('min_rounds', 3)} rounds were measured, the "
            "repeats disagree and give no number: where their middle half lies wholly above "
            "(below) 1, the ratio reads as a bound, at least its lower (at most its upper) "
            "quartile; where it holds 1, or too few rounds were measured, unresolved. gain = "
            "the paired loss gain (positive: the variant is better).",
        )
    )
    figures = [
        [
            r["variant"],
            r["size"],
            f"{r['prefill_tok_s']:.0f}",
            f"{r['decode_ms_b1']:.2f}",
            f"{r['decode_ms_b32']:.2f}",
            f"{r['peak_mem_mb']:.2f}",
            f"{r['kv_cache_mb']:.3f}" if "kv_cache_mb" in r else "n/a",
        ]
        for r in inf["figures"]
    ]
    header = ["variant", "size", "prefill tok/s", "decode ms b1", "decode ms b32", "peak MiB"]
    header.append("KV cache MiB")
    b.append(("table", header, figures))
    even = _break_even_text(verdict, inf)
    if even:
        b.append(("p", f"Break-even: {even}"))
    if inf.get("missing_baseline"):
        sizes = ", ".join(inf["missing_baseline"])
        b.append(("note", f"No baseline figures at {sizes}: no ratio there."))
    return b


def inference_lines(verdict: dict) -> list[str]:
    """One terminal line per arm: its cost ratios at the largest size measured."""
    inf = verdict.get("inference")
    if not inf:
        return []
    device = "cpu, CPU figures" if inf["device"] == "cpu" else inf["device"]
    lines = []
    for variant, by_size in inf["ratios"].items():
        size, r = list(by_size.items())[-1]
        kv = f", KV cache {ratio_text(r['kv_cache'])}" if "kv_cache" in r else ""
        lines.append(
            f"inference cost ({device}) of {variant} vs {inf['baseline']} at {size}: prefill "
            f"{ratio_text(r['prefill'])}, decode b1 {ratio_text(r['decode_b1'])}, decode b32 "
            f"{ratio_text(r['decode_b32'])}, memory {ratio_text(r['memory'])}{kv}"
        )
    return lines
