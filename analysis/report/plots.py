"""Figures for the report (matplotlib, Agg): each saved as PNG and SVG; returns the PNG names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report import figures
from analysis.report import fmt as formatting
from analysis.report.sections.tokens import gain_vs_tokens
from analysis.report.training_curves import training_curves
from analysis.stats.analyze import Analysis
from analysis.stats.rules import verdict

EXTRAPOLATED = "#8250df"  # one colour marks every extrapolation, in every figure


def _with(an: Analysis, text: str) -> str:
    """``text`` (an interval's words) only when the study has intervals at all."""
    return text if (an.verdict.get("intervals") or {}).get("available", True) else ""


def _band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``values [B, X]`` over resamples -> 2.5/97.5 percentiles, or None without resamples."""
    ok = np.isfinite(values).all(axis=1)
    if ok.sum() < 10:
        return None
    return tuple(np.percentile(values[ok], [2.5, 97.5], axis=0))


def loss_vs_n(an: Analysis, out_dir: Path) -> str:
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    info = an.groups.info
    for fit in (f for f in an.fits if f.law == "L(N)"):
        color = figures.color(an, fit.variant)
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
    figures.log_axis(ax, "x", "count")
    ax.set(xlabel="non-embedding parameters N", ylabel="final validation loss")
    ax.set_title("L(N) = E + A·N^−α per arm" + _with(an, ", 95% band"), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figures.save(fig, out_dir, "loss_vs_n")


def _k_model(an: Analysis, variant: str, c_ref: float) -> verdict.EffectiveCompute | None:
    fit = next((f for f in an.fits if f.law == "k(C)" and f.variant == variant), None)
    if fit is None or np.isnan(fit.params[0]).any():
        return None
    return verdict.EffectiveCompute(fit, c_ref)


def _mark_extrapolation(ax, start: float) -> None:
    """Shade everything right of ``start`` (the largest measured x) and say what it is."""
    lo, hi = ax.get_xlim()
    ax.axvspan(start, hi, color=EXTRAPOLATED, alpha=0.08, lw=0)
    ax.axvline(start, color=EXTRAPOLATED, lw=0.8, ls=":")
    ax.text(
        start,
        0.97,
        "extrapolated → ",  # ends at the line: inside the axes however narrow the shade
        transform=ax.get_xaxis_transform(),
        color=EXTRAPOLATED,
        fontsize=8,
        va="top",
        ha="right",
    )
    ax.set_xlim(lo, hi)


def _near(ext: dict) -> bool:
    """A named scale is drawn only within ``FAR_EXTRAPOLATION`` times the measured compute."""
    return ext["times_largest_measured_compute"] <= verdict.FAR_EXTRAPOLATION


def _say_far(ax, an: Analysis) -> None:
    """Named scales too far to draw, listed in words on the figure."""
    far = {
        name: e["times_largest_measured_compute"]
        for v in an.verdict["variants"]
        for name, e in v["extrapolated_gain_pct"].items()
        if not _near(e)
    }
    if far:
        listed = "\n".join(f"{name} ({formatting.times(x)} the compute)" for name, x in far.items())
        limit = formatting.times(verdict.FAR_EXTRAPOLATION)
        # in the right margin under the legend (``_legend_outside``): off the data and the legend
        ax.text(1.02, 0.0, f"not drawn, beyond\n{limit} the data:\n{listed}", fontsize=7,
                ha="left", va="bottom", transform=ax.transAxes, color=EXTRAPOLATED)  # fmt: skip


def _legend_outside(ax, fontsize: int) -> None:
    """The legend in the right margin, top: never over the data or the notes on the axes."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def gain_vs_n(an: Analysis, out_dir: Path) -> str:
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    info = an.groups.info
    base = info[info["on_curve"] & info["variant"].isin(an.verdict["baselines"])]
    # N -> C along the baseline's measured points (log-linear), to draw the k(C) model over N;
    # a line through one size is not defined (numpy's RankWarning): no k(C) curve then
    log_n, log_c = np.log(base["num_nonembedding_params"]), np.log(base["flops"])
    fits_a_line = log_n.nunique() >= 2
    slope, icpt = np.polyfit(log_n, log_c, 1) if fits_a_line else (np.nan, np.nan)
    n_max = float(base["num_nonembedding_params"].max())
    for var in an.verdict["variants"]:
        color = figures.color(an, var["variant"])
        sizes = var["gain_pct_by_size"].values()
        n = np.array([s["n_params"] for s in sizes])
        pct = np.array([s["gain_pct"]["value"] for s in sizes], dtype=float)
        err = np.array([s["gain_pct"]["ci95"] or [np.nan, np.nan] for s in sizes], dtype=float)
        yerr = np.abs(err.T - pct) if len(n) else None
        ax.errorbar(
            n,
            pct,
            yerr=yerr,
            fmt="o",
            color=color,
            capsize=3,
            label=f"{var['variant']}: measured" + _with(an, ", 95% CI"),
            zorder=3,
        )
        model = _k_model(an, var["variant"], var["c_ref"])
        if model is None or not len(n) or not fits_a_line:
            continue
        near = [e["n_params"] for e in var["extrapolated_gain_pct"].values() if _near(e)]
        top = min(max([n_max * 1.5, *(x * 1.5 for x in near)]), n_max * verdict.FAR_EXTRAPOLATION)
        grid = np.geomspace(n.min() / 1.5, top, 80)
        columns = []
        for compute in np.exp(icpt + slope * np.log(grid)):
            base_loss, var_loss = model.losses(compute)  # each [B+1]
            columns.append(100.0 * (base_loss - var_loss) / base_loss)
        curves = np.stack(columns, axis=1)  # [B+1, grid]
        inside = grid <= n_max
        ax.plot(grid[inside], curves[0][inside], color=color, label=f"{var['variant']}: k(C) fit")
        ax.plot(grid[~inside], curves[0][~inside], color=EXTRAPOLATED, ls="--")
        band = _band(curves[1:])
        if band is not None:
            ax.fill_between(grid, *band, color=color, alpha=0.12, lw=0)
        for name, ext in var["extrapolated_gain_pct"].items():
            if not _near(ext):
                continue
            g = ext["gain_pct"]
            beyond = formatting.times(ext["times_largest_measured_compute"])
            if not ext.get("within_backtest_skill", True):  # no point without an interval
                ax.axvline(ext["n_params"], color=EXTRAPOLATED, lw=0.8, ls=":")
                ax.text(ext["n_params"], 0.5, f" {name}: not predicted ({beyond}, past the "
                        "backtest's reach)", rotation=90, fontsize=7, va="center",
                        transform=ax.get_xaxis_transform(), color=EXTRAPOLATED)  # fmt: skip
                continue
            ci = g["ci95"]
            yerr = None if ci is None else [[g["value"] - ci[0]], [ci[1] - g["value"]]]
            ax.errorbar(
                [ext["n_params"]],
                [g["value"]],
                yerr=yerr,
                fmt="s",
                mfc="white",
                color=EXTRAPOLATED,
                capsize=3,
            )
            ax.annotate(
                f"{name}: extrapolated,\n{beyond} beyond the data",
                (ext["n_params"], g["value"]),
                xytext=(-8, -24),
                textcoords="offset points",
                ha="right",
                bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1},
                fontsize=7,
                color=EXTRAPOLATED,
            )
    ax.axhline(0, color="k", lw=0.8)
    figures.log_axis(ax, "x", "count")
    _mark_extrapolation(ax, n_max * 1.05)
    _say_far(ax, an)
    ax.set(xlabel="non-embedding parameters N", ylabel="gain over the baseline (% of loss)")
    ax.set_title("Paired gain per size; the fitted model and its extrapolation", fontsize=10)
    ax.grid(alpha=0.3)
    _legend_outside(ax, 7)
    return figures.save(fig, out_dir, "gain_vs_n")


def k_vs_c(an: Analysis, out_dir: Path) -> str:
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    info = an.groups.info
    lo, c_max = info["flops"].min(), info["flops"].max()
    named = {
        name: e["flops"]
        for v in an.verdict["variants"]
        for name, e in v["extrapolated_gain_pct"].items()
        if _near(e)
    }
    top = min(max([c_max, *named.values()]) * 2, c_max * verdict.FAR_EXTRAPOLATION)
    grid = np.geomspace(lo / 2, top, 80)
    for var in an.verdict["variants"]:
        color = figures.color(an, var["variant"])
        model = _k_model(an, var["variant"], var["c_ref"])
        if model is None:
            continue
        ks = np.stack([model.k(c) for c in grid], axis=1)  # [B+1, grid]
        inside = grid <= c_max
        ax.plot(grid[inside], ks[0][inside], color=color, label=var["variant"])
        ax.plot(grid[~inside], ks[0][~inside], color=EXTRAPOLATED, ls="--")
        band = _band(ks[1:])
        if band is not None:
            ax.fill_between(grid, *band, color=color, alpha=0.2, lw=0)
    ax.axvspan(lo, c_max, color="0.9", label="measured compute", lw=0, zorder=0)
    ax.axhline(1, color="k", lw=0.8)
    figures.log_axis(ax, "x", "flops")
    figures.log_axis(ax, "y", "times")
    for name, c in named.items():
        ax.axvline(c, color=EXTRAPOLATED, lw=0.8, ls=":")
        ax.text(
            c,
            0.02,
            f" {name} (extrapolated)",
            rotation=90,
            fontsize=7,
            transform=ax.get_xaxis_transform(),
            color=EXTRAPOLATED,
        )
    _mark_extrapolation(ax, c_max)
    _say_far(ax, an)
    ax.set(xlabel="training compute C (FLOPs)", ylabel="compute multiplier k(C)")
    ax.set_title("k(C) = k0·(C/c_ref)^γ" + _with(an, " with its 95% band"), fontsize=10)
    ax.grid(alpha=0.3)
    _legend_outside(ax, 8)
    return figures.save(fig, out_dir, "k_vs_c")


def lr_sweeps(an: Analysis, out_dir: Path) -> str | None:
    """Loss vs LR per size, one line per arm; best LR starred, an edge best ringed in red,
    unusable LRs (a seed diverged or failed) crossed at the bottom of the panel."""
    runs = pd.concat([an.usable, an.excluded], ignore_index=True)
    runs = runs[runs["lr"].notna()]
    if runs.empty or runs.groupby(["variant", "size"])["lr"].nunique().max() < 2:
        return None
    plt = figures.pyplot()
    sizes = list(dict.fromkeys(an.groups.info.sort_values("num_nonembedding_params")["size"]))
    fig, axes = figures.grid(plt, len(sizes))
    state = {(r["variant"], r["size"]): r for r in an.verdict["lr_selection"]}
    for ax, size in zip(axes, sizes, strict=True):
        for variant in sorted(runs["variant"].unique()):
            sel = an.usable[(an.usable["size"] == size) & (an.usable["variant"] == variant)]
            sel = sel[sel["lr"].notna()]
            row = state.get((variant, size))
            color = figures.color(an, variant)
            if not sel.empty:
                mean = sel.groupby("lr")["final_val_loss"].mean()
                ax.plot(mean.index, mean.to_numpy(), "o-", color=color, label=variant, ms=4)
                ax.scatter(sel["lr"], sel["final_val_loss"], color=color, s=6, alpha=0.35)
                best = mean.idxmin()
                ax.scatter([best], [mean.min()], marker="*", s=140, color=color, zorder=4)
                if row and not row["bracketed"]:
                    ax.scatter(
                        [best],
                        [mean.min()],
                        s=260,
                        facecolors="none",
                        edgecolors="red",
                        lw=1.5,
                        zorder=5,
                    )
                    ax.annotate(
                        "best at the grid edge",
                        (best, mean.min()),
                        xytext=(0, 12),
                        textcoords="offset points",
                        ha="center",
                        fontsize=7,
                        color="red",
                    )
            if row:
                bad = sorted(set(row["lrs"]) - set(row["usable_lrs"]))
                ax.scatter(
                    bad,
                    [0.02] * len(bad),
                    marker="x",
                    color=color,
                    s=40,
                    transform=ax.get_xaxis_transform(),
                    clip_on=False,
                )
        figures.log_axis(ax, "x", "plain")
        ax.set_title(size, fontsize=10)
        ax.set_xlabel("learning rate")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("final validation loss")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [
        plt.Line2D([], [], marker="*", ls="", color="0.3", ms=10),
        plt.Line2D([], [], marker="x", ls="", color="0.3"),
    ]
    labels += ["best usable LR", "unusable LR (a seed diverged/failed)"]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return figures.save(fig, out_dir, "lr_sweeps", tight=False)


def all_plots(an: Analysis, out_dir: Path, curves: dict | None = None) -> dict[str, str]:
    """Draw every figure the data supports; name -> PNG file name."""
    out = {"loss_vs_n": loss_vs_n(an, out_dir)}
    if an.verdict["variants"]:
        out["gain_vs_n"] = gain_vs_n(an, out_dir)
        out["k_vs_c"] = k_vs_c(an, out_dir)
    along_d = gain_vs_tokens(an.verdict, out_dir)  # only with >= 2 token budgets at some size
    if along_d:
        out["gain_vs_tokens"] = along_d
    lr = lr_sweeps(an, out_dir)
    if lr:
        out["lr_sweeps"] = lr
    tc = training_curves(an, curves or {}, out_dir)
    if tc:
        out["training_curves"] = tc
    return out
