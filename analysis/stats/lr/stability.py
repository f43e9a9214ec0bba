"""Training stability as a measured margin: each arm's largest stable LR per size, and whether
the variant's margin over the baseline persists with size (the study's `lr.search.find_edge`).

Per (arm, size), over every token budget and seed that ran an LR:
- an LR is *stable* when at least one of its runs completed and every completed run has a
  finite loss and none diverged; it is *diverged* when any run diverged (or completed with a
  non-finite loss). Failed or cancelled runs say nothing about stability and are skipped.
- `first_diverged_lr`: the lowest diverged LR; `max_stable_lr`: the highest stable LR below it.
  The edge lies between the two: it is known only to the grid's resolution, one LR step.
- margin per size: log2(variant's max stable LR / baseline's), in octaves of LR.

A diverged cell is evidence, not a gap: it right-censors its arm's edge (the edge lies below
it), and a stable one left-censors it. So each arm's edge is an interval,
`[max_stable_lr, first_diverged_lr)` (`edge_bounds`; 0 below when no LR was stable, inf above
when none diverged), and the margin at a size is the interval those two allow:
`margin_bounds = [log2(variant's stable / baseline's diverged), log2(variant's diverged /
baseline's stable)]`. A margin is *shown* at a size when its lower bound exceeds 0: the variant
was stable at an LR where the baseline diverged, or above it.

Why that counts only more than one grid step: divergence near the edge is chancy (a cell just
below the true edge can diverge on one seed), and one such chance divergence moves an arm's
measured edge down by one step; the lower bound sits one step below the point margin
(`log2` of the largest stable LRs' ratio, `margin`) when both grids share a step, so "lower
bound > 0" is "margin above one step", and it stays right where the grids differ or a cell
between the two bounds never ran. Words, per variant:
- `unresolved`: at some size the margin is not shown and its interval is open towards a
  margin (an arm that never diverged within the scan, or diverged at its lowest LR): the
  edge was not found where it matters, so no claim is made.
- `persists`: shown at every size (also when the variant never diverged: stable above the
  baseline's first divergence is a margin's lower bound).
- `fades`: shown at the smallest size and not at the largest.
- `none`: shown at no size.
- `mixed`: any other pattern (e.g. a margin only at the larger sizes).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.stats.lr.frontier import grid_step
from foundation.contract import size_key

__all__ = ["WORDS", "arm_edges", "margin_bounds", "stability_verdict"]

WORDS = ("persists", "fades", "none", "mixed", "unresolved")
RULE = (
    "each arm's edge lies in [largest stable LR, first diverged LR): a diverged cell bounds it "
    "from above (censored there), a stable one from below; margin = log2(variant / baseline) "
    "of the largest stable LRs, and its interval [variant stable / baseline diverged, variant "
    "diverged / baseline stable]; a margin is shown where that interval's lower bound is above "
    "0 (one LR grid step below the margin: one chance divergence near the edge moves an arm's "
    "edge by one step); persists: shown at every size; fades: at the smallest, not at the "
    "largest; none: at no size; unresolved: not shown at a size whose interval is open above "
    "(an arm's edge not found within the scan)"
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
    `edge_bounds` (the two as the interval the edge lies in, None for an open end), the LRs
    tried and the grid's step (the edge's resolution)."""
    out = []
    for (variant, size), outcomes in _lr_outcomes(table).items():
        tried = sorted(outcomes)
        diverged = [lr for lr in tried if outcomes[lr]]
        first = diverged[0] if diverged else None
        below = [lr for lr in tried if not outcomes[lr] and (first is None or lr < first)]
        stable = below[-1] if below else None
        out.append(
            {
                "variant": variant,
                "size": size,
                "max_stable_lr": stable,
                "first_diverged_lr": first,
                "edge_bounds": [stable, first],
                "lrs": tried,
                "step": grid_step(tried, None),
            }
        )
    return sorted(out, key=lambda e: (e["variant"], size_key(e["size"])))


def margin_bounds(base: dict, var: dict) -> tuple[float, float]:
    """The interval (log2) the variant's margin over the baseline lies in, from both censored
    edges: -inf / inf where an edge is open on the side that bounds it."""
    lo = (
        math.log2(var["max_stable_lr"] / base["first_diverged_lr"])
        if var["max_stable_lr"] and base["first_diverged_lr"]
        else -math.inf
    )
    hi = (
        math.log2(var["first_diverged_lr"] / base["max_stable_lr"])
        if var["first_diverged_lr"] and base["max_stable_lr"]
        else math.inf
    )
    return lo, hi


def _word(shown: list[bool]) -> str:
    if all(shown):
        return "persists"
    if not any(shown):
        return "none"
    if shown[0] and not shown[-1]:
        return "fades"
    return "mixed"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _why_open(e: dict) -> str:
    if e["first_diverged_lr"] is None:
        return f"{e['variant']} never diverged"
    return f"{e['variant']} diverged at its lowest LR {e['first_diverged_lr']:.3g}"


def _variant_verdict(edges: dict, variant: str, baseline: str, sizes: list[str]) -> dict:
    margins: dict[str, float] = {}
    bounds: dict[str, list[float | None]] = {}
    shown: dict[str, bool] = {}
    open_edges = []
    steps = []
    for size in sizes:
        pair = [edges.get((arm, size)) for arm in (baseline, variant)]
        if any(e is None for e in pair):
            continue  # a size one arm did not run: nothing to compare there
        base, var = pair
        steps += [math.log2(base["step"]), math.log2(var["step"])]
        lo, hi = margin_bounds(base, var)
        bounds[size] = [_finite(lo), _finite(hi)]
        shown[size] = lo > 0
        if not shown[size] and math.isinf(hi):  # the margin could be anything above: not found
            opened = [e for e in pair if e["first_diverged_lr"] is None or not e["max_stable_lr"]]
            open_edges.append(f"{size}: " + ", ".join(_why_open(e) for e in opened))
        if base["max_stable_lr"] and var["max_stable_lr"]:
            margins[size] = math.log2(var["max_stable_lr"] / base["max_stable_lr"])
    resolution = max(steps) if steps else None
    if open_edges or not shown:
        word = "unresolved"
        why = "edge not found: " + "; ".join(open_edges) if open_edges else "no size in common"
    else:
        word = _word([shown[s] for s in sizes if s in shown])
        why = (
            f"margin shown (its interval above 0: more than one LR step, {resolution:.2g} "
            f"octaves) at {sum(shown.values())} of {len(shown)} size(s)"
        )
    return {
        "variant": variant,
        "margin": margins,
        "margin_bounds": bounds,
        "shown": shown,
        "resolution_log2": resolution,
        "verdict": word,
        "why": why,
    }


def stability_verdict(table: pd.DataFrame, baseline: str) -> dict:
    """`verdict["stability"]`: every arm's edge per size, and per variant its margin over
    `baseline` per size (log2), the interval the censored edges allow, and the word. The
    top-level `margin` and `verdict` are the first variant's (the only one in most studies);
    `variants` holds each."""
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
