"""The learning-rate frontier: per (variant, size, tokens), which LRs count and whether the best
one is bracketed. Shared contract with scaling's LR refinement (docs/interfaces.md).

Why these rules: an untuned arm manufactures or hides a gain (FACTS: the 124M "gain" vanished
against a tuned baseline). So an LR is *usable* for an arm and size only when every seed run at
it completed: a diverged or failed seed says that LR is unreliable there, and choosing on the
seeds that survived would pick a lucky survivor. A best LR at the edge of the tried grid may not
be the optimum; one whose next step up diverged is bounded by instability and counts as
interior.

A two-stage search (`lr.search` with `follow_neighbours: 0`) runs the other seeds at the scan
winner only. Its neighbours were then run by the scan seeds alone: they can never be chosen (not
every seed ran them), but they can bracket the winner. A *scanned* neighbour (every seed that ran
it completed) brackets the winner when, on the seeds both ran, its loss is higher; one that is
lower there means the winner is not established, and the neighbour is returned in `next_lrs`
for the other seeds to run.

A diverged run is censored evidence (`analysis.stats.lr.optimum`): per cell, `censored_at` is
the lowest diverged LR above the best usable one (the optimum lies below it), `diverged_seeds`
names the seeds that diverged at each diverged LR, and `optimum` / `optimum_interval` place the
optimum, the interval never reaching past `censored_at`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from analysis.stats.lr.optimum import arm_curvature, cell_optimum
from analysis.tables.runs import count_label, is_usable

STATES = ("interior", "bracketed_by_divergence", "edge_low", "edge_high", "no_usable_lr")
BRACKETED = ("interior", "bracketed_by_divergence")
DEFAULT_STEP = 2.0  # a single LR has no grid step of its own; 2x is a common sweep step


@dataclasses.dataclass(frozen=True)
class LRFrontier:
    """One (variant, size, tokens) cell group's LR sweep, judged."""

    variant: str
    size: str
    tokens: float
    lrs: list[float]  # sorted, every LR tried
    usable_lrs: list[float]  # every seed completed
    best_lr: float | None  # lowest mean loss over the usable LRs
    state: str  # one of STATES
    next_lrs: list[float]  # LRs to add (edge states) or to re-run
    diverged_lrs: list[float] = dataclasses.field(default_factory=list)
    mean_loss: dict[float, float] = dataclasses.field(default_factory=dict)  # usable LR -> loss
    scanned_lrs: list[float] = dataclasses.field(default_factory=list)  # run by some seeds only
    # censoring: the lowest diverged LR above the best (the optimum lies below it), or None
    censored_at: float | None = None
    diverged_seeds: list[list] = dataclasses.field(default_factory=list)  # per diverged LR
    optimum: float | None = None  # where the optimum lies (analysis.stats.lr.optimum)
    optimum_interval: list = dataclasses.field(default_factory=lambda: [None, None])


def grid_step(lrs: list[float], step_factor: float | None) -> float:
    """The LR search's step: `step_factor`, else the grid's median geometric step (2: one LR)."""
    if step_factor is not None:
        if step_factor <= 1:
            raise ValueError(f"step_factor must be > 1, got {step_factor}")
        return step_factor
    if len(lrs) < 2:
        return DEFAULT_STEP
    return float(np.exp(np.median(np.diff(np.log(lrs)))))


def selection_column(table: pd.DataFrame) -> str:
    """``select_val_loss`` when every usable run has one, else ``final_val_loss``."""
    usable = table[is_usable(table)]
    if "select_val_loss" in table and len(usable) and usable["select_val_loss"].notna().all():
        return "select_val_loss"
    return "final_val_loss"


def _judge(lrs, usable, diverged, best, step, brackets=None) -> tuple[str, list[float]]:
    """``brackets(lr)``: True/False for a scanned LR that is worse/better than the best on the
    seeds both ran, None for an LR that is neither usable nor scanned."""
    brackets = brackets or (lambda lr: None)
    if best is None:
        return "no_usable_lr", ([lrs[0] / step] if diverged else [])
    if len(lrs) == 1:  # one LR is at both edges of its grid
        return "edge_low", [best / step, best * step]
    i = lrs.index(best)
    if i == 0:
        return "edge_low", [best / step]
    if i == len(lrs) - 1:
        return "edge_high", [best * step]
    below, above = lrs[i - 1], lrs[i + 1]
    below_ok = below in usable or below in diverged or brackets(below) is True
    above_ok = above in usable or above in diverged or brackets(above) is True
    if not below_ok:  # a failed or incomplete neighbour brackets nothing: run it again
        return "edge_low", [below] + ([] if above_ok else [above])
    if not above_ok:
        return "edge_high", [above]
    if above in diverged and above not in usable and brackets(above) is not True:
        return "bracketed_by_divergence", []
    return "interior", []


def lr_frontier(table: pd.DataFrame, *, step_factor: float | None = None) -> list[LRFrontier]:
    """One ``LRFrontier`` per (variant, size, tokens) with a recorded LR.

    ``table`` is a run table (``analysis.tables.runs.normalise``), all states included: the diverged
    and failed runs are what the rules need. The best LR is chosen on ``select_val_loss`` when
    every usable run has one, else on ``final_val_loss``; ``step_factor`` (default: the grid's
    own median geometric step, 2 for a single LR) sets ``next_lrs``. A single LR tried is at
    both edges: state ``edge_low`` with one step either side in ``next_lrs``.
    """
    column = selection_column(table)
    swept = table[table["lr"].notna()]
    out, per_seeds = [], []
    for (variant, size, tokens), group in swept.groupby(["variant", "size", "tokens"], sort=True):
        # one pass over plain arrays: a pandas filter per LR cost ~50 ms a study (the statistical
        # replays analyse thousands)
        lr_of, seed_of = group["lr"].to_numpy(float), group["seed"].to_numpy()
        diverged_run = (group["status"] == "diverged").to_numpy()
        value, ok = group[column].to_numpy(float), is_usable(group).to_numpy()
        seeds = set(seed_of.tolist())
        lrs = sorted(set(lr_of.tolist()))
        usable, diverged, scanned, means = [], [], [], {}
        who, per_seed = [], {}
        for lr in lrs:
            at = lr_of == lr
            if diverged_run[at].any():
                diverged.append(lr)
                who.append(sorted(set(seed_of[at & diverged_run].tolist())))
            if ok[at].all() and set(seed_of[at].tolist()) == seeds:
                usable.append(lr)
                means[lr] = float(np.nanmean(value[at]))  # as pandas' mean: NaN left out
                per_seed[lr] = _seed_means(seed_of[at], value[at])
            elif ok[at].all():
                scanned.append(lr)
        best = min(means, key=means.get) if means else None
        ceiling = next((lr for lr in diverged if best is None or lr > best), None)
        brackets = _scan_brackets(group, column, best, scanned)
        state, next_lrs = _judge(lrs, usable, diverged, best, grid_step(lrs, step_factor), brackets)
        out.append(
            LRFrontier(
                str(variant),
                str(size),
                float(tokens),
                lrs,
                usable,
                best,
                state,
                [float(x) for x in next_lrs],
                diverged,
                means,
                scanned,
                ceiling,
                who,
            )
        )
        per_seeds.append(per_seed)
    return _place_optima(out, per_seeds)


def _seed_means(seeds: np.ndarray, values: np.ndarray) -> dict:
    """seed -> its mean loss at one LR (a seed's repeats averaged)."""
    out: dict = {}
    for seed, value in zip(seeds.tolist(), values.tolist(), strict=True):
        out.setdefault(seed, []).append(value)
    return {seed: float(np.mean(v)) for seed, v in out.items()}


def _place_optima(frontiers: list[LRFrontier], per_seeds: list[dict]) -> list[LRFrontier]:
    """Each cell's optimum and interval (`analysis.stats.lr.optimum.cell_optimum`), with its
    arm's curvature from every sweep of that arm (all sizes and budgets)."""
    curves = {
        v: arm_curvature([f.mean_loss for f in frontiers if f.variant == v])
        for v in {f.variant for f in frontiers}
    }
    out = []
    for f, per_seed in zip(frontiers, per_seeds, strict=True):
        point, interval = cell_optimum(per_seed, f.best_lr, f.lrs, f.censored_at, curves[f.variant])
        out.append(dataclasses.replace(f, optimum=point, optimum_interval=interval))
    return out


def _scan_brackets(group: pd.DataFrame, column: str, best: float | None, scanned: list[float]):
    """For a scanned LR: is it worse than ``best`` on the seeds both ran (True), better (False)?"""

    def brackets(lr: float) -> bool | None:
        if best is None or lr not in scanned:
            return None
        mine = group[group["lr"] == lr].set_index("seed")[column]
        theirs = group[group["lr"] == best].set_index("seed")[column]
        common = mine.index.intersection(theirs.index)
        if common.empty:
            return None
        return bool(mine[common].mean() > theirs[common].mean())

    return brackets


def frontier_frame(frontiers: list[LRFrontier]) -> pd.DataFrame:
    """The frontiers as a table (for the verdict and report)."""
    rows = [dataclasses.asdict(f) for f in frontiers]
    for row in rows:
        row.pop("mean_loss")
        row["bracketed"] = row["state"] in BRACKETED
    cols = [f.name for f in dataclasses.fields(LRFrontier) if f.name != "mean_loss"]
    return pd.DataFrame(rows, columns=[*cols, "bracketed"])


def fmt_lr(lr: float) -> str:
    """``0.0030000001 -> "0.003"``: LRs in reasons and reports, 3 significant digits."""
    return f"{lr:.3g}" if math.isfinite(lr) else str(lr)


_STATE_WORDS = {
    "edge_low": "best at the low edge of its grid",
    "edge_high": "best at the high edge of its grid",
    "no_usable_lr": "no LR with every seed completed",
}


def _state_words(f: LRFrontier) -> str:
    return "one LR tried" if len(f.lrs) == 1 else _STATE_WORDS[f.state]


def _ratio_words(ratio: float) -> str:
    return f"1/{fmt_lr(1 / ratio)}" if ratio < 1 else fmt_lr(ratio)


def _to_add(group: list[LRFrontier]) -> str:
    """The LRs to add: once when every cell needs the same ones, as multiples of each cell's
    best when those agree, else per cell."""
    absolute = {tuple(fmt_lr(x) for x in f.next_lrs) for f in group}
    if len(absolute) == 1:
        return "add LR " + (", ".join(next(iter(absolute))) or "seeds that completed")
    if all(f.best_lr for f in group):
        ratios = {tuple(round(x / f.best_lr, 3) for x in f.next_lrs) for f in group}
        if len(ratios) == 1:
            times = " and ".join(f"{_ratio_words(r)}×" for r in next(iter(ratios)))
            return f"add LR {times} each cell's best; the learning-rate table lists them"
    return "add LR " + "; ".join(
        f"{f.variant} {f.size}: {', '.join(fmt_lr(x) for x in f.next_lrs) or 'seeds'}"
        for f in group
    )


def _cell_names(budgets: dict[str, list[float]]) -> tuple[str, ...]:
    """``("2M", "10M")``, or with several budgets at a size ``("2M (625K, 1.25M tokens)",)``."""
    if all(len(t) == 1 for t in budgets.values()):
        return tuple(budgets)
    return tuple(f"{s} ({', '.join(count_label(x) for x in t)} tokens)" for s, t in budgets.items())


def unbracketed_summary(frontiers: list[LRFrontier]) -> str | None:
    """The guard's one sentence for every unbracketed cell, each named once: cells grouped by
    why (one LR tried, best at an edge, none usable), arms with the same sizes named together,
    the LRs to add given once where they agree (``_to_add``). None when all are bracketed."""
    unique = {(f.variant, f.size, f.tokens): f for f in frontiers if f.state not in BRACKETED}
    cells = list(unique.values())
    if not cells:
        return None
    clauses = []
    for why in dict.fromkeys(_state_words(f) for f in cells):
        group = [f for f in cells if _state_words(f) == why]
        sizes: dict[str, dict[str, list[float]]] = {}
        for f in group:
            sizes.setdefault(f.variant, {}).setdefault(f.size, []).append(f.tokens)
        arms_by_sizes: dict[tuple, list[str]] = {}
        for arm, budgets in sizes.items():
            arms_by_sizes.setdefault(_cell_names(budgets), []).append(arm)
        where = "; ".join(
            f"{' and '.join(arms)} at {', '.join(at)}" for at, arms in arms_by_sizes.items()
        )
        clauses.append(f"{where}: {why} ({_to_add(group)})")
    return f"LR not bracketed at {len(cells)} cell(s): {'; '.join(clauses)}"
