"""The report's "Stability" section, from ``verdict["stability"]`` only (present when the study
ran ``lr.search.find_edge``): each arm's largest stable LR per size, the variant's margin over
the baseline, and the word, with the grid's resolution said beside them."""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["stability_blocks"]


def _margin(value: float | None) -> str:
    if value is None:
        return fmt.NA
    return f"{fmt.num(value, places=2)} octaves (×{fmt.num(2.0**value, sig=2)})"


def _bound(x: float | None, open_as: str) -> str:
    return open_as if x is None else fmt.num(x, places=2)


def _interval(bounds: list[float | None]) -> str:
    """``[1.0, 3.0]`` octaves, an open end as -inf / inf (an edge the scan did not find)."""
    return f"[{_bound(bounds[0], '-inf')}, {_bound(bounds[1], 'inf')}]"


def _edge(e: dict) -> str:
    """Where the edge lies: ``[0.1, 3)`` (stable at 0.1, diverged at 3: censored there)."""
    low, high = e["edge_bounds"]
    return f"[{fmt.lr(low) if low else '0'}, {fmt.lr(high) if high is not None else 'not found'})"


def stability_blocks(verdict: dict) -> list[tuple]:
    """The section's blocks; none when the verdict has no ``stability`` part."""
    stability = verdict.get("stability")
    if not stability:
        return []
    b: list[tuple] = [("h", "Stability")]
    rows = [
        [
            e["variant"],
            e["size"],
            fmt.lr(e["max_stable_lr"]) if e["max_stable_lr"] is not None else "none stable",
            fmt.lr(e["first_diverged_lr"]) if e["first_diverged_lr"] is not None else "none",
            _edge(e),
            f"×{fmt.num(e['step'], sig=2)}",
        ]
        for e in stability["edges"]
    ]
    header = ["arm", "size", "largest stable LR", "first diverged LR", "edge in", "LR step"]
    b.append(("table", header, rows))
    for v in stability["variants"]:
        margins = ", ".join(f"{s}: {_margin(m)}" for s, m in v["margin"].items()) or "none"
        bounds = ", ".join(f"{s}: {_interval(x)}" for s, x in v["margin_bounds"].items())
        b.append(
            (
                "p",
                f"{v['variant']} vs {stability['baseline']}: stability margin "
                f"[[{v['verdict']}|{v['verdict']}]] ({v['why']}). Margin per size, log2 of "
                f"the largest stable LRs' ratio: {margins}. The interval the censored edges "
                f"allow (octaves): {bounds or 'none'}.",
            )
        )
    b.append(
        (
            "note",
            "A diverged cell is censored evidence, not a missing point: the true edge lies "
            "between the largest stable LR and the first diverged one ('edge in'), so an "
            "edge is known only to the LR grid's resolution, and one chance divergence near "
            "the edge moves it one step: a margin counts only where its interval lies above "
            "0, i.e. more than one step. The diverged runs stay listed under Excluded runs. "
            "The LRs above an arm's optimum were scanned by the scan seeds only. Rule: "
            f"{stability['rule']}.",
        )
    )
    return b
