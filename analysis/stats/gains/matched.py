"""The gate at matched compute, and what the compute axis rests on.

A gain compares two arms "at one size"; when the arms' FLOPs per token differ (a variant that
spends more compute per token: an extra matmul, a wider MLP), equal size labels are unequal
compute, and a variant can buy its "gain" with FLOPs. So wherever the two arms' compute at a
matched (size, tokens) differs by more than ``TOLERANCE``, the baseline's loss is moved to the
variant's compute along the baseline's own measured curve (a cubic in log C through its
neighbouring measured points, per bootstrap draw) and the gain is read there: the loss the
baseline would have reached with the variant's compute, minus the variant's (or, where that
compute lies past the baseline's measured curve, the variant moved to the baseline's compute
along its own). The paired seeds stay paired: each seed's loss is moved along that seed's own
curve, so the paired-seed test is read at matched compute and carries the move's noise.

The compute axis itself comes from the run table's ``flops`` (the project's accounting, or a
bring-your-own variant's declared FLOPs, ``models.catalog.variants.QueryVariant.flops``). A table
without ``flops`` is analysed with C = 6 N D; a variant that declared no FLOPs counts its
weights only, and its verdict is held back (``analysis.stats.rules.verdict_guards``: inconclusive,
with
what it would be were its weights all its FLOPs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.stats.gains.compare import Comparison
from analysis.stats.variance.cells import Groups

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


@dataclasses.dataclass(frozen=True)
class Move:
    """The change of one arm's loss from its compute C to ``ratio`` x C along its own curve."""

    draws: np.ndarray  # [B+1] from each draw's losses (row 0 = the data)
    per_seed: np.ndarray  # [seeds] from each seed's own losses at the data's LRs; NaN = missing


def _move(groups: Groups, g: int, ratio: float) -> Move | None:
    """``Move`` of group ``g``'s arm to ``ratio`` x its compute, along the cubic in log C
    through four consecutive points of the arm's curve (fewer with fewer points), or None when
    ``ratio`` x C lies outside the arm's measured compute.

    The curve bends, so a secant over a 9x compute step misses a 3% move by ~20%; a parabola
    read past the top point understates how much an arm gains from more compute, always in the
    heavier arm's favour, and even inside its nodes it is off by up to 0.05% of the loss on a
    Chinchilla curve at 1.1x (sizes 3x apart); the cubic, by at most 0.02%. So the move only
    interpolates: the nodes are consecutive points whose range holds both C and ``ratio`` x C,
    centred as near their middle as the curve allows."""
    info = groups.info
    arm = info[(info["variant"] == info.at[g, "variant"]) & info["on_curve"]]
    if len(arm) < 2:
        return None
    order = np.argsort(arm["flops"].to_numpy(float))
    log_c = np.log(arm["flops"].to_numpy(float))[order]
    points = arm.index.to_numpy()[order]
    here = float(np.log(info.at[g, "flops"]))
    there = here + float(np.log(ratio))
    low, high = min(here, there) + 1e-9, max(here, there) - 1e-9  # a node at C counts
    width = min(4, len(order))
    windows = [
        s for s in range(len(order) - width + 1)
        if log_c[s] <= low and high <= log_c[s + width - 1]
    ]  # fmt: skip
    if not windows:
        return None
    mid = 0.5 * (here + there)
    start = min(windows, key=lambda s: abs(log_c[s : s + width].mean() - mid))
    nodes, pick = log_c[start : start + width], points[start : start + width]
    weights = _lagrange(nodes, there) - _lagrange(nodes, here)  # [k]
    return Move(groups.loss[:, pick] @ weights, weights @ groups.seed_loss[pick])


def at_matched_compute(comp: Comparison, groups: Groups) -> tuple[Comparison, list[dict]]:
    """``comp`` with each budget's gain read at matched compute where the arms' FLOPs differ by
    more than ``TOLERANCE``; and one record per moved budget (verdict.json).

    The baseline is moved to the variant's compute where that lies inside the baseline's
    measured curve; else (a heavier variant at the top size, a lighter one at the smallest) the
    variant is moved to the baseline's compute inside its own curve: neither is ever read past
    its measured points. Each seed's loss is moved by that seed's own move (``Move.per_seed``),
    so the paired-seed test is on matched compute too and its spread carries the move's noise."""
    flops = groups.info["flops"].to_numpy(float)
    moved, records = {}, []
    for b in comp.budgets:
        ratio = flops[b.var] / flops[b.base]
        if abs(ratio - 1.0) <= TOLERANCE:
            continue
        base_move, var_move = _move(groups, b.base, ratio), None
        if base_move is None:
            var_move = _move(groups, b.var, 1.0 / ratio)
        nan = np.full(b.base_loss.shape, np.nan)
        base = b.base_loss + (base_move.draws if base_move else 0.0)  # [B+1]
        var = b.var_loss + (var_move.draws if var_move else 0.0)  # [B+1]
        base_seeds = base_move.per_seed if base_move else None
        if base_move is None and var_move is None:  # one point per arm: nothing to move along
            base, base_seeds = nan, np.full(groups.seed_loss.shape[1], np.nan)
        gain = base - var
        moved[id(b)] = dataclasses.replace(
            b,
            gain_loss=gain,
            gain_pct=100.0 * gain / base,
            base_seed_shift=base_seeds,
            var_seed_shift=var_move.per_seed if var_move else None,
        )
        side = "baseline" if base_move else "variant" if var_move else None
        records.append({"size": b.size, "tokens": b.tokens, "flops_ratio": float(ratio),
                        "moved": side})  # fmt: skip
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
        f"{variant} declares no FLOPs per token (models.catalog.variants.QueryVariant.flops): its "
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
