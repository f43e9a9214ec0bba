"""The training-curve figure: per size, the training loss at every logged step (EMA-smoothed,
raw faint) with the validation points over it, for the runs at each arm's chosen LR.

The trainer logs ``train/loss`` every ``train.log_interval`` steps and ``val/loss`` every
``train.eval_interval``; both histories are read from MLflow (``mlflow_io.load_curves``), only
for the runs drawn (``chosen_runs``). The EMA (``ema``) is debiased, with a time constant of
1/25 of the logged points, so a curve of any length is smoothed alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report import figures
from analysis.stats.analyze import Analysis


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


def chosen_runs(an: Analysis, run_ids: list[str] | None = None) -> pd.DataFrame:
    """The usable runs at each arm's chosen LR (of ``run_ids``, if given): what the figure
    draws, so only their histories need reading."""
    runs = an.usable if run_ids is None else an.usable[an.usable["run_id"].isin(run_ids)]
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
    return runs[np.array(keep, dtype=bool)] if len(runs) else runs


def curve_series(an: Analysis, curves: dict) -> dict[str, list[dict]]:
    """What the figure draws, per size (ascending N): one entry per run at its arm's chosen LR
    with ``variant, run_id`` and, where logged, ``train_steps, train_loss`` (every logged step),
    ``train_ema`` (``ema`` of it) and ``val_steps, val_loss``. ``curves``: run_id ->
    {"train/loss": (steps, values), "val/loss": (steps, values)} (``mlflow_io.load_curves``)."""
    curves = {k: v if isinstance(v, dict) else {"val/loss": v} for k, v in curves.items()}
    runs = chosen_runs(an, list(curves))
    out: dict[str, list[dict]] = {}
    for _, run in runs.sort_values("num_nonembedding_params", kind="stable").iterrows():
        got, entry = curves[run["run_id"]], {"variant": run["variant"], "run_id": run["run_id"]}
        if "train/loss" in got:
            steps, values = (np.asarray(x, float) for x in got["train/loss"])
            entry.update(train_steps=steps, train_loss=values, train_ema=ema(values))
        if "val/loss" in got:
            steps, values = (np.asarray(x, float) for x in got["val/loss"])
            entry.update(val_steps=steps, val_loss=values)
        out.setdefault(run["size"], []).append(entry)
    return out


def training_curves(an: Analysis, curves: dict, out_dir: Path) -> str | None:
    """Per size, the runs at each arm's chosen LR (``curve_series``): the training loss at
    every logged step, EMA-smoothed over the raw curve (faint), and the validation points
    over it."""
    series = curve_series(an, curves)
    if not series:
        return None
    plt = figures.pyplot()
    fig, axes = figures.grid(plt, len(series))
    for ax, (size, entries) in zip(axes, series.items(), strict=True):
        tails = []  # what is drawn after the first 10% of steps: sets the y range
        for e in entries:
            color = figures.color(an, e["variant"])
            for kind in ("train", "val"):
                if f"{kind}_steps" in e:
                    steps, values = e[f"{kind}_steps"], e[f"{kind}_loss"]
                    tails.append(values[steps >= 0.1 * steps.max()])
            if "train_steps" in e:
                ax.plot(e["train_steps"], e["train_loss"], color=color, alpha=0.12, lw=0.6)
                ax.plot(e["train_steps"], e["train_ema"], color=color, lw=1.2, alpha=0.8)
            if "val_steps" in e:
                ax.plot(
                    e["val_steps"], e["val_loss"], "o", color=color, ms=3.5, mec="white", mew=0.5
                )
        tail = np.concatenate(tails) if tails else np.array([])
        tail = tail[np.isfinite(tail)]
        if tail.size:  # the warm-up's first losses are off the chart: the end is what matters
            pad = 0.08 * max(np.ptp(tail), 1e-3 * abs(tail.mean()))
            ax.set_ylim(tail.min() - pad, tail.max() + pad)
        ax.set_title(f"{size} (at each arm's chosen LR)", fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loss")
    variants = sorted({e["variant"] for entries in series.values() for e in entries})
    handles = [plt.Line2D([], [], color=figures.color(an, v), label=v) for v in variants]
    handles += [
        plt.Line2D([], [], color="0.3", lw=1.2, label="train loss, EMA"),
        plt.Line2D([], [], color="0.3", marker="o", ls="", label="validation"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return figures.save(fig, out_dir, "training_curves", tight=False)
