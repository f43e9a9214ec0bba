"""A look's outcome beside its word: each variant's top-size gain and interval as its decision
read them (``Look.top_gains``), and the cells its added seeds run (``Look.added``: at each size,
the next seed numbers, each arm at its chosen LR). ``decide_look``
(``analysis.stats.looks.sequential``) fills both in."""

from __future__ import annotations

import math

import pandas as pd

from analysis.stats.lr.frontier import lr_frontier


def top_gains(decisions: dict[str, dict]) -> dict[str, dict]:
    """Each variant's top-size gain (%) and its interval, as its decision read them."""
    out = {}
    for variant, decision in decisions.items():
        top = decision.get("top_gain_pct") or {}
        ci = top.get("ci")
        out[variant] = {
            "size": top.get("size"),
            "estimate": _finite(top.get("value")),
            "lo": _finite(ci[0]) if ci else None,
            "hi": _finite(ci[1]) if ci else None,
        }
    return out


def _finite(x) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def added_cells(table: pd.DataFrame, add_seeds: dict[str, int]) -> list[dict]:
    """The cells of a look's seeds: at each size it names, the next ``k`` seed numbers above
    every seed run there, for each arm at its chosen LR (the largest budget's frontier)."""
    if not add_seeds:
        return []
    frontiers = lr_frontier(table)
    out = []
    for size, k in add_seeds.items():
        first = int(table[table["size"] == size]["seed"].max()) + 1
        seeds = list(range(first, first + int(k)))
        best: dict[str, tuple[float, float]] = {}  # variant -> (tokens, lr)
        for f in frontiers:
            if f.size == size and f.best_lr is not None:
                if f.variant not in best or f.tokens > best[f.variant][0]:
                    best[f.variant] = (f.tokens, f.best_lr)
        for variant, (tokens, lr) in sorted(best.items()):
            out.append(
                {"variant": variant, "size": size, "tokens": tokens, "lr": lr, "seeds": seeds}
            )
    return out
