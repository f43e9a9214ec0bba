"""Figures for the report (matplotlib, Agg): each saved as PNG and SVG; returns the PNG names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis import summary as S
from analysis import verdict as V
from analysis.core import Analysis


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out_dir: Path, name: str) -> str:
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"{name}.{ext}", dpi=110)
    _plt().close(fig)
    return f"{name}.png"


def _color(an: Analysis, variant: str) -> str:
    """One colour per arm across every figure."""
    return f"C{sorted(an.groups.info['variant'].unique()).index(variant)}"


def _band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``values [B, X]`` over resamples -> 2.5/97.5 percentiles, or None without resamples."""
    ok = np.isfinite(values).all(axis=1)
    if ok.sum() < 10:
        return None
    return tuple(np.percentile(values[ok], [2.5, 97.5], axis=0))


def loss_vs_n(an: Analysis, out_dir: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    info = an.groups.info
    for fit in (f for f in an.fits if f.law == "L(N)"):
        color = _color(an, fit.variant)
        pts = fit.points
        n = info["num_nonembedding_params"].to_numpy()[pts]
        ax.scatter(n, an.groups.loss[0, pts], color=color, label=fit.variant, zorder=3)
        for j, g in enumerate(pts):
            seeds = an.groups.seed_loss[g]
            ax.scatter(np.full(seeds.shape, n[j]), seeds, color=color, s=6, alpha=0.35)
        if np.isnan(fit.params[0]).any():
            continue
        grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 60)
        a, alpha, e = fit.params.T  # each [B+1]
        curves = np.exp(e)[:, None] + np.exp(a[:, None] - alpha[:, None] * np.log(grid))
        ax.plot(grid, curves[0], color=color)
        band = _band(curves[1:])
        if band is not None:
            ax.fill_between(grid, *band, color=color, alpha=0.2, lw=0)
    ax.set(xscale="log", yscale="log", xlabel="non-embedding parameters N")
    ax.set(ylabel="final validation loss", title="L(N) = E + A N^-alpha, 95% bootstrap band")
    ax.legend()
    return _save(fig, out_dir, "loss_vs_n")


def gain_vs_n(an: Analysis, out_dir: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    info = an.groups.info
    base = info[info["on_curve"] & info["variant"].isin(an.verdict["baselines"])]
    # N -> C along the baseline's measured points (log-linear), to draw the k(C) model over N
    slope, icpt = np.polyfit(np.log(base["num_nonembedding_params"]), np.log(base["flops"]), 1)
    for var in an.verdict["variants"]:
        color = _color(an, var["variant"])
        sizes = var["gain_pct_by_size"].values()
        n = np.array([s["n_params"] for s in sizes])
        pct = np.array([s["gain_pct"]["value"] for s in sizes], dtype=float)
        err = np.array([s["gain_pct"]["ci95"] or [np.nan, np.nan] for s in sizes], dtype=float)
        yerr = np.abs(err.T - pct) if len(n) else None
        ax.errorbar(n, pct, yerr=yerr, fmt="o", color=color, label=f"{var['variant']} measured")
        k_fit = next((f for f in an.fits if f.law == "k(C)" and f.variant == var["variant"]), None)
        if k_fit is None or np.isnan(k_fit.params[0]).any():
            continue
        model = V.EffectiveCompute(k_fit, var["c_ref"])
        grid = np.geomspace(n.min() / 1.5, max(S.NAMED_SCALES.values()) * 1.5, 80)
        columns = []
        for compute in np.exp(icpt + slope * np.log(grid)):
            base_loss, var_loss = model.losses(compute)  # each [B+1]
            columns.append(100.0 * (base_loss - var_loss) / base_loss)
        curves = np.stack(columns, axis=1)  # [B+1, grid]
        ax.plot(grid, curves[0], color=color, ls="--", label=f"{var['variant']} k(C) model")
        band = _band(curves[1:])
        if band is not None:
            ax.fill_between(grid, *band, color=color, alpha=0.15, lw=0)
        for name, ext in var["extrapolated_gain_pct"].items():
            g = ext["gain_pct"]
            ci = g["ci95"]
            yerr = None if ci is None else [[g["value"] - ci[0]], [ci[1] - g["value"]]]
            ax.errorbar([ext["n_params"]], [g["value"]], yerr=yerr, fmt="s", color=color)
            ax.annotate(f"{name} @20 tok/param", (ext["n_params"], g["value"]), fontsize=7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xscale="log", xlabel="non-embedding parameters N", ylabel="gain over baseline (%)")
    ax.set(title="Paired gain with 95% CI; model extrapolation")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "gain_vs_n")


def k_vs_c(an: Analysis, out_dir: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    info = an.groups.info
    lo = info["flops"].min() / 2
    named = [
        e["flops"] for v in an.verdict["variants"] for e in v["extrapolated_gain_pct"].values()
    ]
    hi = max([info["flops"].max(), *named]) * 2
    grid = np.geomspace(lo, hi, 80)
    for var in an.verdict["variants"]:
        color = _color(an, var["variant"])
        k_fit = next((f for f in an.fits if f.law == "k(C)" and f.variant == var["variant"]), None)
        if k_fit is None or np.isnan(k_fit.params[0]).any():
            continue
        model = V.EffectiveCompute(k_fit, var["c_ref"])
        ks = np.stack([model.k(c) for c in grid], axis=1)  # [B+1, grid]
        ax.plot(grid, ks[0], color=color, label=var["variant"])
        band = _band(ks[1:])
        if band is not None:
            ax.fill_between(grid, *band, color=color, alpha=0.2, lw=0)
    ax.axvspan(info["flops"].min(), info["flops"].max(), color="0.9", label="measured range")
    ax.axhline(1, color="k", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="training compute C (FLOPs)")
    ax.set(ylabel="effective-compute multiplier k(C)", title="k(C) = k0 (C/c_ref)^gamma, 95% band")
    ax.legend()
    return _save(fig, out_dir, "k_vs_c")


def lr_sweeps(an: Analysis, out_dir: Path) -> str | None:
    runs = an.usable[an.usable["lr"].notna()]
    if runs.empty or runs.groupby(["variant", "size"])["lr"].nunique().max() < 2:
        return None
    plt = _plt()
    sizes = list(dict.fromkeys(an.groups.info.sort_values("num_nonembedding_params")["size"]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 3.4), squeeze=False)
    variants = sorted(runs["variant"].unique())
    for ax, size in zip(axes[0], sizes, strict=True):
        for variant in variants:
            sel = runs[(runs["size"] == size) & (runs["variant"] == variant)]
            if sel.empty:
                continue
            mean = sel.groupby("lr")["final_val_loss"].mean()
            color = _color(an, variant)
            ax.plot(mean.index, mean.to_numpy(), "o-", color=color, label=variant)
            ax.scatter(sel["lr"], sel["final_val_loss"], color=color, s=6, alpha=0.35)
            best = mean.idxmin()
            ax.scatter([best], [mean.min()], marker="*", s=120, color=color, zorder=4)
        ax.set(xscale="log", xlabel="learning rate", title=size)
    axes[0][0].set_ylabel("final validation loss")
    axes[0][0].legend(fontsize=7)
    return _save(fig, out_dir, "lr_sweeps")


def training_curves(an: Analysis, curves: dict, out_dir: Path) -> str | None:
    """``curves``: run_id -> (steps, val losses), e.g. from ``mlflow_io.load_curves``."""
    runs = an.usable[an.usable["run_id"].isin(list(curves))]
    if runs.empty:
        return None
    plt = _plt()
    sizes = list(dict.fromkeys(runs.sort_values("num_nonembedding_params")["size"]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 3.4), squeeze=False)
    variants = sorted(an.usable["variant"].unique())
    for ax, size in zip(axes[0], sizes, strict=True):
        for _, run in runs[runs["size"] == size].iterrows():
            steps, values = curves[run["run_id"]]
            color = _color(an, run["variant"])
            ax.plot(steps, values, color=color, alpha=0.6, lw=1)
        ax.set(yscale="log", xlabel="step", title=size)
    axes[0][0].set_ylabel("validation loss")
    handles = [plt.Line2D([], [], color=_color(an, v), label=v) for v in variants]
    axes[0][0].legend(handles=handles, fontsize=7)
    return _save(fig, out_dir, "training_curves")


def all_plots(an: Analysis, out_dir: Path, curves: dict | None = None) -> dict[str, str]:
    """Draw every figure the data supports; name -> PNG file name."""
    out = {"loss_vs_n": loss_vs_n(an, out_dir)}
    if an.verdict["variants"]:
        out["gain_vs_n"] = gain_vs_n(an, out_dir)
        out["k_vs_c"] = k_vs_c(an, out_dir)
    lr = lr_sweeps(an, out_dir)
    if lr:
        out["lr_sweeps"] = lr
    tc = training_curves(an, curves or {}, out_dir)
    if tc:
        out["training_curves"] = tc
    return out
