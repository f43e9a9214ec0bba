"""The report's token-axis section and its figure: gain vs tokens per size.

Kept apart from ``analysis.report.document`` and ``analysis.report.plots`` so that the token axis is
one block added to each: the section appears only when verdict.json has a ``tokens`` part (some arm
has two or more budgets at some size).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.report import figures
from analysis.report import fmt as formatting


def gain_vs_tokens(verdict: dict, out_dir: Path) -> str | None:
    """One panel per variant: the paired gain (loss units) vs D, one line per size, 95% CIs."""
    along_d = verdict.get("tokens")
    if not along_d or not along_d["variants"]:
        return None
    plt = figures.pyplot()
    fig, axes = figures.grid(plt, len(along_d["variants"]), width=5.2, height=3.8)
    for ax, var in zip(axes, along_d["variants"], strict=True):
        sizes: dict[str, list[dict]] = {}
        for row in var["gain_by_budget"]:
            sizes.setdefault(row["size"], []).append(row)
        for i, (size, rows) in enumerate(sizes.items()):
            d = np.array([r["tokens"] for r in rows])
            g = np.array([r["gain_loss"]["value"] for r in rows], dtype=float)
            err = np.array([r["gain_loss"]["ci95"] or [np.nan, np.nan] for r in rows], float)
            ax.errorbar(
                d, g, yerr=np.abs(err.T - g), fmt="o-", capsize=3, color=f"C{i}", label=size, ms=4
            )
        ax.axhline(0, color="k", lw=0.8)
        if any(len(r) for r in sizes.values()):
            figures.log_axis(ax, "x", "count")
        ax.set(xlabel="training tokens D", ylabel="gain (baseline − variant loss)")
        ax.set_title(f"{var['variant']}: {var['verdict']} along D", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title="size", title_fontsize=7)
    return figures.save(fig, out_dir, "gain_vs_tokens")


def _badge(outcome: str) -> str:
    return f"[[{outcome}|{outcome}]]"


def token_blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    """The section "Along D": verdict table, per-budget gains, L(N, D) fits, figure, rule."""
    along_d = verdict.get("tokens")
    if not along_d:
        return []
    b: list[tuple] = [("h", "Along D: does the gain persist with more tokens?")]
    rows = []
    for v in along_d["variants"]:
        top = v["decision"].get("top_gain")
        s = v["decision"].get("slope") or {}
        top_text = formatting.NA
        if top:
            top_text = f"{formatting.with_ci(top['value'], top['ci'])} at {top['size']}"
            top_text += f" @{formatting.count(top['tokens'])}"
        rows.append(
            [
                v["variant"],
                _badge(v["verdict"]),
                top_text,
                formatting.with_ci(s.get("value"), s.get("ci")),
                v["reason"],
            ]
        )
    header = ["variant", "verdict along D", "top gain (loss)", "slope per doubling of D", "why"]
    b.append(("table", header, rows))
    budgets = "; ".join(
        f"{s}: {', '.join(formatting.count(t) for t in ts)}"
        for s, ts in along_d["budgets_by_size"].items()
    )
    b.append(
        (
            "p",
            f"Budgets per size: {budgets}. The N verdict above reads only each size's largest "
            f"budget; this section uses {along_d['num_used']} runs over every budget.",
        )
    )
    b.append(
        (
            "table",
            formatting.GAIN_HEADER,
            formatting.gain_rows(along_d["variants"], "gain_by_budget"),
        )
    )
    if "gain_vs_tokens" in figures:
        b.append(("img", figures["gain_vs_tokens"], "Paired gain vs tokens per size (95% CI)"))
    nd = [f for f in verdict["fits"] if f["law"] == "L(N,D)"]
    if nd:
        rows = [
            [f["variant"], name, formatting.param(name, p["value"], p["ci95"]), f["num_points"]]
            for f in nd
            for name, p in f["params"].items()
        ]
        b.append(("table", ["variant", "L(N, D) parameter", "value [95% CI]", "points"], rows))
        b.append(
            (
                "p",
                "L(N, D) = E + A/N^α + B/D^β per arm (Chinchilla Approach 3) on every (size, "
                "tokens) of the arm at its best LR; shown, never judged.",
            )
        )
    b.append(("pre", along_d["rule"]))
    return b
