"""The gate at matched compute, and what the compute axis rests on.

A gain compares two arms "at one size"; when the arms' FLOPs per token differ (a variant that
spends more compute per token: an extra matmul, a wider MLP), equal size labels are unequal
compute, and a variant can buy its "gain" with FLOPs. So wherever the two arms' compute at a
matched (size, tokens) differs by more than ``TOLERANCE``, the baseline's loss is moved to the
variant's compute along the baseline's own measured curve (its secant in log C through the
nearest measured neighbour, per bootstrap draw) and the gain is read there: the loss the
baseline would have reached with the variant's compute, minus the variant's. The paired seeds
stay paired (the move is a shift of the baseline's loss, the same for every seed).

The compute axis itself comes from the run table's ``flops`` (the project's accounting, or a
bring-your-own variant's declared FLOPs, ``models.variants.QueryVariant.flops``). A table
without ``flops`` is analysed with C = 6 N D; a variant that declared no FLOPs counts its
weights only, and its verdict is held back (``analysis.stats.held``: inconclusive, with
what it would be were its weights all its FLOPs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.stats.cells import Groups
from analysis.stats.compare import Comparison

TOLERANCE = 0.01  # FLOPs per token may differ by 1% (norm gains, rounding) before it matters
WEIGHTS_ONLY = "weights_only"  # `flops_counted` of a variant that declared no FLOPs


def _lagrange(nodes: np.ndarray, x: float) -> np.ndarray:
    """``[k]`` weights of the polynomial through ``nodes`` evaluated at ``x``."""
    w = np.ones(len(nodes))
    for k in range(len(nodes)):
        for m in range(len(nodes)):
            if m != k:
                w[k] *= (x - nodes[m]) / (nodes[k] - nodes[m])
    return w


def _shift(groups: Groups, base: int, ratio: float) -> np.ndarray:
    """``[B+1]`` change of the baseline's loss from its compute C to ``ratio`` x C, along the
    parabola in log C through the three measured points of its curve nearest C (a line with
    two): the curve bends, and a secant over a 9x compute step misses a 3% move by ~20%."""
    info = groups.info
    arm = info[(info["variant"] == info.at[base, "variant"]) & info["on_curve"]]
    if len(arm) < 2:
        return np.full(groups.loss.shape[0], np.nan)
    log_c = np.log(arm["flops"].to_numpy(float))
    order = np.argsort(log_c)
    here = float(np.log(info.at[base, "flops"]))
    nearest = int(np.argmin(np.abs(log_c[order] - here)))
    width = min(3, len(order))
    start = min(max(nearest - 1, 0), len(order) - width)
    pick = order[start : start + width]
    nodes, points = log_c[pick], arm.index.to_numpy()[pick]
    weights = _lagrange(nodes, here + np.log(ratio)) - _lagrange(nodes, here)  # [k]
    return groups.loss[:, points] @ weights  # [B+1]


def at_matched_compute(comp: Comparison, groups: Groups) -> tuple[Comparison, list[dict]]:
    """``comp`` with each budget's gain read at the variant's compute where the arms' FLOPs
    differ by more than ``TOLERANCE``; and one record per moved budget (verdict.json)."""
    flops = groups.info["flops"].to_numpy(float)
    moved, records = {}, []
    for b in comp.budgets:
        ratio = flops[b.var] / flops[b.base]
        if abs(ratio - 1.0) <= TOLERANCE:
            continue
        base = b.base_loss + _shift(groups, b.base, ratio)  # [B+1] at the variant's compute
        gain = base - b.var_loss
        moved[id(b)] = dataclasses.replace(b, gain_loss=gain, gain_pct=100.0 * gain / base)
        records.append({"size": b.size, "tokens": b.tokens, "flops_ratio": float(ratio)})
    if not moved:
        return comp, []
    budgets = [moved.get(id(b), b) for b in comp.budgets]
    curve = [moved.get(id(b), b) for b in comp.curve]
    return dataclasses.replace(comp, budgets=budgets, curve=curve), records


def weights_only_arms(table: pd.DataFrame) -> list[str]:
    """Arms whose runs say their FLOPs count weights only (no declared FLOPs)."""
    if "flops_counted" not in table:
        return []
    marked = table[table["flops_counted"] == WEIGHTS_ONLY]
    return sorted(set(marked["variant"]))


def undeclared_guard(variant: str, arms: list[str]) -> list[str]:
    if variant not in arms:
        return []
    return [
        f"{variant} declares no FLOPs per token (models.variants.QueryVariant.flops): its "
        "compute counts its weights only, so a per-FLOP comparison cannot be trusted"
    ]


def compute_axis(table: pd.DataFrame, matched: dict[str, list[dict]], arms: list[str]) -> dict:
    """verdict.json's ``compute_axis``: where C came from, the budgets compared at matched
    compute, the arms without declared FLOPs, and one note for the report and terminal."""
    estimated = table["flops_estimated"]
    source = "6ND" if estimated.all() else "mixed" if estimated.any() else "flops"
    notes = []
    if source == "6ND":
        notes.append("the run table has no `flops`: C = 6 N D (attention and logits not counted)")
    elif source == "mixed":
        notes.append(f"{int(estimated.sum())} run(s) had no `flops`: C = 6 N D for them")
    for variant, rows in matched.items():
        if rows:
            ratios = ", ".join(f"{r['size']} {r['flops_ratio']:.3g}\u00d7" for r in rows)
            notes.append(f"{variant} compared at matched compute (its FLOPs vs the baseline's: "
                         f"{ratios})")  # fmt: skip
    if arms:
        notes.append(f"no declared FLOPs per token: {', '.join(arms)} (verdict held back)")
    return {
        "flops_from": source,
        "matched_compute": {v: rows for v, rows in matched.items() if rows},
        "flops_undeclared": arms,
        "note": "; ".join(notes) or None,
    }
