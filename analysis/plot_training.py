"""The training-curve figure: per size, the training loss at every logged step (EMA-smoothed,
raw faint) with the validation points over it, for the runs at each arm's chosen LR."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.core import Analysis
from analysis.plots import _color, _grid, _plt, _save


def ema(values: np.ndarray, points: float = 25.0) -> np.ndarray:
    """Debiased exponential moving average with a time constant of ``len / points`` logged
    points (at least 1): smooth enough to read, short enough to keep the curve's shape."""
    tau = max(1.0, len(values) / points)
    a = 1.0 - np.exp(-1.0 / tau)
    out, acc, weight = np.empty(len(values)), 0.0, 0.0
    for i, v in enumerate(values):
        acc = (1 - a) * acc + a * v
        weight = (1 - a) * weight + a
        out[i] = acc / weight
    return out


def training_curves(an: Analysis, curves: dict, out_dir: Path) -> str | None:
    """``curves``: run_id -> {"train/loss": (steps, values), "val/loss": (steps, values)}
    (``mlflow_io.load_curves``). Per size, the runs at each arm's chosen LR: the training loss
    at every logged step, EMA-smoothed, and the validation points over it."""
    curves = {k: v if isinstance(v, dict) else {"val/loss": v} for k, v in curves.items()}
    runs = an.usable[an.usable["run_id"].isin(list(curves))]
    info = an.groups.info
    chosen = {
        (info.at[g, "variant"], info.at[g, "size"], info.at[g, "tokens"]): an.groups.best_lr[0, g]
        for g in info.index
    }
    keep = [
        not np.isfinite(chosen.get((r.variant, r.size, r.tokens), np.nan))
        or np.isclose(r.lr, chosen[(r.variant, r.size, r.tokens)])
        for r in runs.itertuples()
    ]
    runs = runs[np.array(keep, dtype=bool)] if len(runs) else runs
    if runs.empty:
        return None
    plt = _plt()
    sizes = list(dict.fromkeys(runs.sort_values("num_nonembedding_params")["size"]))
    fig, axes = _grid(plt, len(sizes))
    for ax, size in zip(axes, sizes, strict=True):
        tails = []  # what is drawn after the first 10% of steps: sets the y range
        for _, run in runs[runs["size"] == size].iterrows():
            color = _color(an, run["variant"])
            got = curves[run["run_id"]]
            for steps, values in got.values():
                steps, values = np.asarray(steps, float), np.asarray(values, float)
                tails.append(values[steps >= 0.1 * steps.max()])
            if "train/loss" in got:
                steps, values = got["train/loss"]
                ax.plot(steps, values, color=color, alpha=0.12, lw=0.6)
                ax.plot(steps, ema(np.asarray(values, float)), color=color, lw=1.2, alpha=0.8)
            if "val/loss" in got:
                steps, values = got["val/loss"]
                ax.plot(steps, values, "o", color=color, ms=3.5, mec="white", mew=0.5)
        tail = np.concatenate(tails) if tails else np.array([])
        tail = tail[np.isfinite(tail)]
        if tail.size:  # the warm-up's first losses are off the chart: the end is what matters
            pad = 0.08 * max(np.ptp(tail), 1e-3 * abs(tail.mean()))
            ax.set_ylim(tail.min() - pad, tail.max() + pad)
        ax.set_title(f"{size} (at each arm's chosen LR)", fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loss")
    variants = sorted(runs["variant"].unique())
    handles = [plt.Line2D([], [], color=_color(an, v), label=v) for v in variants]
    handles += [
        plt.Line2D([], [], color="0.3", lw=1.2, label="train loss, EMA"),
        plt.Line2D([], [], color="0.3", marker="o", ls="", label="validation"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return _save(fig, out_dir, "training_curves", tight=False)
