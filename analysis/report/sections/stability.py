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
            f"×{fmt.num(e['step'], sig=2)}",
        ]
        for e in stability["edges"]
    ]
    header = ["arm", "size", "largest stable LR", "first diverged LR", "LR step"]
    b.append(("table", header, rows))
    for v in stability["variants"]:
        margins = ", ".join(f"{s}: {_margin(m)}" for s, m in v["margin"].items()) or "none"
        b.append(
            (
                "p",
                f"{v['variant']} vs {stability['baseline']}: stability margin "
                f"[[{v['verdict']}|{v['verdict']}]] ({v['why']}). Margin per size, log2 of "
                f"the largest stable LRs' ratio: {margins}.",
            )
        )
    b.append(
        (
            "note",
            "The edge is known only to the LR grid's resolution: the true edge lies between the "
            "largest stable LR and the first diverged one, and one chance divergence near the "
            "edge moves it one step, so a margin of one step or less counts as none. The LRs "
            "above an arm's optimum were scanned by the scan seeds only. Rule: "
            f"{stability['rule']}.",
        )
    )
    return b
