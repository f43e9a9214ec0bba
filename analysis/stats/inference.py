"""Inference cost per arm and size as a ratio to the baseline's (`verdict["inference"]`).

Input: ``{"device": str, "rows": [{"variant", "size", "prefill_tok_s", "decode_ms_b1",
"decode_ms_b32", "peak_mem_mb"}, ...]}`` (`scaling.serving.inference`, from ``pilot.json`` or
``inference.json``). Every ratio is a cost ratio, arm / baseline, so above 1 is costlier:
prefill is baseline tokens/s over the arm's (time per prompt token), decode the arm's ms per
step over the baseline's, memory the arm's peak over the baseline's.
"""

from __future__ import annotations

import math

__all__ = ["FIGURES", "RATIOS", "inference_summary"]

FIGURES = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32", "peak_mem_mb")
# ratio name -> (figure, True when larger is cheaper)
RATIOS = {
    "prefill": ("prefill_tok_s", True),
    "decode_b1": ("decode_ms_b1", False),
    "decode_b32": ("decode_ms_b32", False),
    "memory": ("peak_mem_mb", False),
}


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
        for k in FIGURES:
            value = row[k]
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"inference.rows[{i}].{k}: {value!r} is not a positive number")
    return inference["rows"]


def inference_summary(inference: dict, base_name: str) -> dict:
    """``{"device", "memory_kind", "baseline", "figures": rows, "ratios": {variant: {size:
    {ratio: value}}}, "missing_baseline": [sizes]}``; `base_name`: one arm (of a baseline
    ``A,B``, arm A: ``Judgement.primary``)."""
    rows = _check(inference)
    base = {r["size"]: r for r in rows if r["variant"] == base_name}
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    missing = sorted({r["size"] for r in rows if r["size"] not in base})
    for row in rows:
        b = base.get(row["size"])
        if row["variant"] == base_name or b is None:
            continue
        ratios.setdefault(row["variant"], {})[row["size"]] = {
            name: (b[f] / row[f]) if cheaper_when_larger else (row[f] / b[f])
            for name, (f, cheaper_when_larger) in RATIOS.items()
        }
    return {
        "device": str(inference.get("device", "unknown")),
        "memory_kind": str(inference.get("memory_kind", "")),
        "source": str(inference.get("source", "")),
        "baseline": base_name,
        "figures": [dict(r) for r in rows],
        "ratios": ratios,
        "missing_baseline": missing,
    }
