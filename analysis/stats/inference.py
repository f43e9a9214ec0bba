"""Inference cost per arm and size as a ratio to the baseline's (`verdict["inference"]`), with
how far its repeats agree.

Input: ``{"device": str, "rows": [{"variant", "size", "prefill_tok_s", "decode_ms_b1",
"decode_ms_b32", "peak_mem_mb", ["kv_cache_mb"], ["rounds": {figure: [per round]}],
["session"]}, ...]}`` (`scaling.inference_cost.inference`, from ``pilot.json`` or
``inference.json``).
Every ratio is a cost ratio, arm / baseline, so above 1 is costlier: prefill is baseline
tokens/s over the arm's (time per prompt token), decode the arm's ms per step over the
baseline's, memory and KV cache the arm's over the baseline's.

A timed ratio (prefill, decode) is a claim about a clock on a machine whose load the study does
not control, so it carries its repeats. Rows of one ``session`` were measured side by side,
round r of each in the same pass: their ratio is per round (arm round r / baseline round r),
the value the median of those, the spread their interquartile range. Rows measured apart (each
pilot probe on its own) pair every round with every round. The ratio is **resolved** when at
least `MIN_ROUNDS` rounds agree: the upper quartile of the ratios is at most `RATIO_BOUND`
times the lower one (the middle half of the repeats within a factor of 1.2). Repeats that
disagree beyond the bound still say which side of 1 the ratio lies on when their whole middle
half does: from at least `MIN_ROUNDS` rounds, a spread above 1 is a lower **bound** (the arm
costs at least the lower quartile's ratio), one below 1 an upper bound; only a spread that holds
1, or too few rounds, reads ``unresolved``, with its spread, never as a number. Memory and the
KV cache are not timed: one figure each, exact on CPU (the buffers' sizes), no spread.
"""

from __future__ import annotations

import math
import statistics

__all__ = [
    "FIGURES",
    "RATIOS",
    "RATIO_BOUND",
    "MIN_ROUNDS",
    "inference_summary",
    "ratio_entry",
    "ratio_bound",
]

FIGURES = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32", "peak_mem_mb")
OPTIONAL = ("kv_cache_mb",)  # files from before it was measured lack it: no ratio then
TIMED = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32")
# ratio name -> (figure, True when larger is cheaper)
RATIOS = {
    "prefill": ("prefill_tok_s", True),
    "decode_b1": ("decode_ms_b1", False),
    "decode_b32": ("decode_ms_b32", False),
    "memory": ("peak_mem_mb", False),
    "kv_cache": ("kv_cache_mb", False),
}
RATIO_BOUND = 1.2  # resolved: upper quartile / lower quartile of the per-round ratios <= this
MIN_ROUNDS = 3  # fewer rounds resolve nothing: a quartile of two values is no agreement


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _check(inference: dict) -> list[dict]:
    if not isinstance(inference, dict) or not isinstance(inference.get("rows"), list):
        raise ValueError(
            'inference: expected {"device": ..., "rows": [...]} (inference.json / pilot.json); '
            "measure again with `scaling pilot`"
        )
    for i, row in enumerate(inference["rows"]):
        missing = [k for k in ("variant", "size", *FIGURES) if k not in row]
        if missing:
            raise ValueError(
                f"inference.rows[{i}]: missing {', '.join(missing)}; measure again with "
                "`scaling pilot`"
            )
        for k in (*FIGURES, *(f for f in OPTIONAL if f in row)):
            if not _positive(row[k]):
                raise ValueError(f"inference.rows[{i}].{k}: {row[k]!r} is not a positive number")
        rounds = row.get("rounds", {})
        for k, values in rounds.items() if isinstance(rounds, dict) else [("", None)]:
            if not (isinstance(values, list) and values and all(map(_positive, values))):
                raise ValueError(
                    f"inference.rows[{i}].rounds{'.' + k if k else ''}: expected a list of "
                    "positive numbers per timed figure; measure again"
                )
    return inference["rows"]


def _cost(arm: float, base: float, cheaper_when_larger: bool) -> float:
    return base / arm if cheaper_when_larger else arm / base


def ratio_entry(per_round: list[float]) -> dict:
    """``{"value", "spread", "range", "rounds", "resolved", "bound"}`` of one timed ratio from
    its per-round (or all-pairs) ratios: the median, the interquartile range, min-max, how many,
    whether they agree within `RATIO_BOUND` over at least `MIN_ROUNDS`, and (``bound``) what an
    unresolved one still says."""
    ratios = sorted(per_round)
    if len(ratios) >= 2:
        low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
    else:
        low = high = ratios[0]
    resolved = len(ratios) >= MIN_ROUNDS and high <= RATIO_BOUND * low
    return {
        "value": statistics.median(ratios),
        "spread": [low, high],
        "range": [ratios[0], ratios[-1]],
        "rounds": len(ratios),
        "resolved": resolved,
        "bound": None if resolved else ratio_bound([low, high], len(ratios)),
    }


def ratio_bound(spread: list[float], rounds: int) -> dict | None:
    """``{"side": "at_least" | "at_most", "value"}`` where repeats that disagree still lie wholly
    on one side of 1 (the arm costs at least the lower quartile's ratio, or at most the upper
    one's); None where the spread holds 1 or fewer than `MIN_ROUNDS` rounds were measured."""
    low, high = spread
    if rounds < MIN_ROUNDS:
        return None
    if low > 1.0:
        return {"side": "at_least", "value": low}
    if high < 1.0:
        return {"side": "at_most", "value": high}
    return None


def _timed(row: dict, base: dict, figure: str, cheaper_when_larger: bool) -> dict:
    arm_rounds = (row.get("rounds") or {}).get(figure)
    base_rounds = (base.get("rounds") or {}).get(figure)
    if not arm_rounds or not base_rounds:  # a file without repeats: nothing says they agree
        entry = ratio_entry([_cost(row[figure], base[figure], cheaper_when_larger)])
        return {**entry, "rounds": 0, "resolved": False, "bound": None, "paired": False}
    paired = (
        row.get("session") is not None
        and row.get("session") == base.get("session")
        and len(arm_rounds) == len(base_rounds)
    )
    if paired:
        ratios = [
            _cost(a, b, cheaper_when_larger) for a, b in zip(arm_rounds, base_rounds, strict=True)
        ]
        return {**ratio_entry(ratios), "paired": True}
    ratios = [_cost(a, b, cheaper_when_larger) for a in arm_rounds for b in base_rounds]
    entry = ratio_entry(ratios)
    rounds = min(len(arm_rounds), len(base_rounds))  # all pairs are no more repeats than this
    resolved = entry["resolved"] and rounds >= MIN_ROUNDS
    bound = None if resolved else ratio_bound(entry["spread"], rounds)
    return {**entry, "rounds": rounds, "resolved": resolved, "bound": bound, "paired": False}


def _ratios(row: dict, base: dict) -> dict[str, dict]:
    out = {}
    for name, (figure, cheaper_when_larger) in RATIOS.items():
        if figure in TIMED:
            out[name] = _timed(row, base, figure, cheaper_when_larger)
        elif figure in row and figure in base:
            value = _cost(row[figure], base[figure], cheaper_when_larger)
            out[name] = {"value": value, "spread": None, "range": None, "rounds": None}
            out[name]["resolved"] = True  # not timed: one figure, no repeats to disagree
            out[name]["bound"] = None
    return out


def inference_summary(inference: dict, base_name: str) -> dict:
    """``{"device", "memory_kind", "source", "baseline", "bound", "min_rounds", "figures": rows,
    "ratios": {variant: {size: {ratio: entry}}}, "missing_baseline": [sizes]}``; an entry is
    `ratio_entry`'s dict (plus ``paired``: per round, or all pairs) for a timed ratio, and
    ``{"value", "spread": None, "range": None, "rounds": None, "resolved": True, "bound": None}``
    for memory and the KV cache; `base_name`: one arm (of a baseline ``A,B``, arm A:
    ``Judgement.primary``)."""
    rows = _check(inference)
    base = {r["size"]: r for r in rows if r["variant"] == base_name}
    ratios: dict[str, dict[str, dict[str, dict]]] = {}
    missing = sorted({r["size"] for r in rows if r["size"] not in base})
    for row in rows:
        b = base.get(row["size"])
        if row["variant"] == base_name or b is None:
            continue
        ratios.setdefault(row["variant"], {})[row["size"]] = _ratios(row, b)
    return {
        "device": str(inference.get("device", "unknown")),
        "memory_kind": str(inference.get("memory_kind", "")),
        "source": str(inference.get("source", "")),
        "baseline": base_name,
        "bound": RATIO_BOUND,
        "min_rounds": MIN_ROUNDS,
        "figures": [{k: v for k, v in r.items() if k != "rounds"} for r in rows],
        "ratios": ratios,
        "missing_baseline": missing,
    }
