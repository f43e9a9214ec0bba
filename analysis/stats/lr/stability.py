"""Training stability as a measured margin: each arm's largest stable LR per size, and whether
the variant's margin over the baseline persists with size (the study's `lr.search.find_edge`).

Per (arm, size), over every token budget and seed that ran an LR:
- an LR is *stable* when at least one of its runs completed and every completed run has a
  finite loss and none diverged; it is *diverged* when any run diverged (or completed with a
  non-finite loss). Failed or cancelled runs say nothing about stability and are skipped.
- `first_diverged_lr`: the lowest diverged LR; `max_stable_lr`: the highest stable LR below it.
  The edge lies between the two: it is known only to the grid's resolution, one LR step.
- margin per size: log2(variant's max stable LR / baseline's), in octaves of LR.

Why a margin must exceed one grid step to count: divergence near the edge is chancy (a cell
just below the true edge can diverge on one seed), and one such chance divergence moves an
arm's measured edge down by one step. A margin of one step or less is therefore within what
the grid and one chance event can produce, and is read as no margin. Words, per variant:
- `unresolved`: at some size an arm never diverged within the scan (or diverged at its lowest
  LR): the edge was not found, so no claim is made.
- `persists`: the margin exceeds one step at every size.
- `fades`: it exceeds one step at the smallest size and not at the largest.
- `none`: it exceeds one step at no size.
- `mixed`: any other pattern (e.g. a margin only at the larger sizes).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.stats.lr.frontier import grid_step
from foundation.contract import size_key

__all__ = ["WORDS", "arm_edges", "stability_verdict"]

WORDS = ("persists", "fades", "none", "mixed", "unresolved")
RULE = (
    "largest stable LR = highest LR below the first diverged one where no seed diverged; "
    "margin = log2(variant / baseline) at each size, counted only above one LR grid step "
    "(one chance divergence near the edge moves an arm's edge by one step); persists: above "
    "at every size; fades: above at the smallest, not at the largest; none: at no size; "
    "unresolved: an arm's edge not found within the scan"
)


def _lr_outcomes(table: pd.DataFrame) -> dict[tuple[str, str], dict[float, bool]]:
    """Per (variant, size): each LR that ran -> whether it diverged (one pass over the table)."""
    ran = table[table["status"].isin(["completed", "diverged"]) & table["lr"].notna()]
    loss = ran["final_val_loss"].astype(float).to_numpy()
    lost = (ran["status"] == "diverged").to_numpy() | ~np.isfinite(loss)
    out: dict[tuple[str, str], dict[float, bool]] = {}
    variant, size = ran["variant"].astype(str), ran["size"].astype(str)
    keys = zip(variant, size, ran["lr"].astype(float), strict=True)
    for (variant, size, lr), bad in zip(keys, lost, strict=True):
        lrs = out.setdefault((variant, size), {})
        lrs[lr] = lrs.get(lr, False) or bool(bad)
    return out


def arm_edges(table: pd.DataFrame) -> list[dict]:
    """One edge per (variant, size): `max_stable_lr`, `first_diverged_lr` (None when absent),
    the LRs tried and the grid's step (the edge's resolution)."""
    out = []
    for (variant, size), outcomes in _lr_outcomes(table).items():
        tried = sorted(outcomes)
        diverged = [lr for lr in tried if outcomes[lr]]
        first = diverged[0] if diverged else None
        below = [lr for lr in tried if not outcomes[lr] and (first is None or lr < first)]
        out.append(
            {
                "variant": variant,
                "size": size,
                "max_stable_lr": below[-1] if below else None,
                "first_diverged_lr": first,
                "lrs": tried,
                "step": grid_step(tried, None),
            }
        )
    return sorted(out, key=lambda e: (e["variant"], size_key(e["size"])))


def _word(margins: list[float], threshold: float) -> str:
    above = [m > threshold for m in margins]
    if all(above):
        return "persists"
    if not any(above):
        return "none"
    if above[0] and not above[-1]:
        return "fades"
    return "mixed"


def _variant_verdict(edges: dict, variant: str, baseline: str, sizes: list[str]) -> dict:
    margins: dict[str, float] = {}
    open_edges = []
    steps = []
    for size in sizes:
        pair = [edges.get((arm, size)) for arm in (baseline, variant)]
        if any(e is None for e in pair):
            continue  # a size one arm did not run: nothing to compare there
        for e in pair:
            if e["first_diverged_lr"] is None or e["max_stable_lr"] is None:
                why = "never diverged" if e["first_diverged_lr"] is None else "no stable LR"
                open_edges.append(f"{e['variant']} {size}: {why}")
        base, var = pair
        steps += [math.log2(base["step"]), math.log2(var["step"])]
        if base["max_stable_lr"] and var["max_stable_lr"]:
            margins[size] = math.log2(var["max_stable_lr"] / base["max_stable_lr"])
    resolution = max(steps) if steps else None
    if open_edges or not margins:
        word = "unresolved"
        why = "edge not found: " + "; ".join(open_edges) if open_edges else "no size in common"
    else:
        word = _word([margins[s] for s in sizes if s in margins], resolution)
        why = (
            f"margin above one LR step ({resolution:.2g} octaves) at "
            f"{sum(m > resolution for m in margins.values())} of {len(margins)} size(s)"
        )
    return {
        "variant": variant,
        "margin": margins,
        "resolution_log2": resolution,
        "verdict": word,
        "why": why,
    }


def stability_verdict(table: pd.DataFrame, baseline: str) -> dict:
    """`verdict["stability"]`: every arm's edge per size, and per variant its margin over
    `baseline` per size (log2) and the word. The top-level `margin` and `verdict` are the first
    variant's (the only one in most studies); `variants` holds each."""
    edges = arm_edges(table)
    by_key = {(e["variant"], e["size"]): e for e in edges}
    sizes = sorted({e["size"] for e in edges}, key=size_key)
    variants = sorted({e["variant"] for e in edges} - {baseline})
    per_variant = [_variant_verdict(by_key, v, baseline, sizes) for v in variants]
    first = per_variant[0] if per_variant else {"margin": {}, "verdict": "unresolved"}
    return {
        "baseline": baseline,
        "edges": edges,
        "margin": first["margin"],
        "verdict": first["verdict"],
        "variants": per_variant,
        "rule": RULE,
    }
