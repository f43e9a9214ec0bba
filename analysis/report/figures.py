"""What every figure shares: matplotlib on the Agg backend, saving as PNG and SVG, log axes
with plain tick labels, a grid of panels and one colour per arm.

``plots``, ``tokens`` and ``training_curves`` draw with these; matplotlib is imported on the
first figure, not on import, so reading the analysis never pays for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.report import fmt as formatting
from analysis.stats.analyze import Analysis


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    # matplotlib is imported on the first figure only: importing the analysis stays cheap
    import matplotlib

    matplotlib.use("Agg")
    # pyplot only once the backend is chosen
    import matplotlib.pyplot

    return matplotlib.pyplot


def save(fig, out_dir: Path, name: str, tight: bool = True) -> str:
    """Saves ``fig`` as ``name``.png and .svg in ``out_dir``; returns the PNG's name."""
    if tight:
        fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"{name}.{ext}", dpi=110)
    pyplot().close(fig)
    return f"{name}.png"


def log_axis(ax, axis: str = "x", kind: str = "count") -> None:
    """Log scale with plain tick labels: 50K, 100K, 1.2M (counts), 10¹² (FLOPs), 0.003 (LRs);
    ticks at 1, 2, 5 per decade over a short range, 1 per decade over a long one."""
    # matplotlib is imported on the first figure only, as in ``pyplot``
    from matplotlib import ticker

    getattr(ax, f"set_{axis}scale")("log")
    lo, hi = getattr(ax, f"get_{axis}lim")()
    decades = np.log10(hi / lo) if lo > 0 else 10
    subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
    formatter = {
        "count": formatting.si_tick,
        "flops": formatting.flops_tick,
        "plain": formatting.plain_tick,
    }.get(kind)
    formatter = formatter or (lambda x, _p=None: f"{x:.3g}×")  # kind "times"
    target = getattr(ax, f"{axis}axis")
    if decades < 1:  # under a decade, 1-2-5 may leave one tick: evenly spaced ones instead
        target.set_major_locator(ticker.MaxNLocator(6))
    else:
        target.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    target.set_major_formatter(ticker.FuncFormatter(formatter))
    target.set_minor_formatter(ticker.NullFormatter())


def grid(plt, num: int, width: float = 3.6, height: float = 3.0):
    """``num`` panels, at most 3 a row: a figure that stays readable at a page's width."""
    cols = min(3, max(1, num))
    rows = -(-num // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[num:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:num])


def color(an: Analysis, variant: str) -> str:
    """One colour per arm across every figure."""
    return f"C{sorted(an.groups.info['variant'].unique()).index(variant)}"
