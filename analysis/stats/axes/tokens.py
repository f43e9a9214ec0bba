"""The token axis: per-budget paired gains, L(N, D) per arm, and the verdict along D.

A branched (WSD) study measures several token budgets D per (variant, size). The analysis
cuts the run table into *slices*: slice ``j`` holds, at every size, the runs at that size's
``j``-th largest budget (ranked over every arm's budgets after ``snap_budgets``). Each slice is
a study with one budget per size, so it goes through exactly the N machinery
(``analysis.lr_frontier`` -> ``usable_cells`` -> ``build_groups`` -> ``compare``): each arm at
its own best usable LR per (size, tokens), chosen again in every bootstrap draw, gains paired
on the seeds both arms completed.

Why slices and not one noise model over all budgets: the branches of one stable run share its
trunk (init, data order, the stable phase), so their losses are correlated within an arm and
seed. A cells x seeds ANOVA over all budgets would count that shared part as signal and
under-estimate the per-run noise of any one budget. Within a slice every run has its own trunk,
so the fitted noise is the noise of that budget's gain. Draws of different slices are
independent; the true noise of a difference between budgets is smaller (the trunk cancels), so
the trend's interval is conservative.

The N verdict (``analysis.stats.analyze``) reads ``n_axis_rows``: at each size, the largest budget
its
baseline measured, and only that. Smaller budgets never change it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.stats.fits import fit
from analysis.stats.fits.laws import LawFit, fit_across_resamples
from analysis.stats.gains.compare import Budget, baseline_map, compare
from analysis.stats.gains.levels import ALPHA, MIN_SEEDS, holm_levels, p_two_sided
from analysis.stats.lr.frontier import LRFrontier, lr_frontier, unbracketed_summary
from analysis.stats.rules import verdict as verdicts
from analysis.stats.rules import verdict_tokens
from analysis.stats.variance.cells import Groups, build_groups, selected_lrs, usable_cells

# Token counts of one size within 2% of each other are one budget: whole-step rounding (one
# step of >= 50) or an N-based budget computed from an arm's own N (nonlinear adds 2d per
# layer, well under 1%). Budgets of a sweep differ by >= 1.25x.
SAME_BUDGET_RTOL = 0.02


def snap_budgets(table: pd.DataFrame) -> pd.DataFrame:
    """``tokens`` of each size grouped into budgets (``SAME_BUDGET_RTOL``), each run's value
    replaced by its budget's largest; ``flops`` keep each run's own count."""
    out = table.copy()
    for _, rows in out.groupby("size", sort=False):
        values = np.sort(rows["tokens"].unique())
        label, start = {}, values[0]
        for d in values:
            if d > start * (1.0 + SAME_BUDGET_RTOL):
                start = d
            label[d] = start
        top: dict[float, float] = {}
        for d, s in label.items():
            top[s] = max(top.get(s, d), d)
        out.loc[rows.index, "tokens"] = rows["tokens"].map({d: top[s] for d, s in label.items()})
    return out


def budget_rank(table: pd.DataFrame) -> pd.Series:
    """Per row: its budget's rank among the budgets of its size (0 = the largest)."""
    rank = table.groupby("size")["tokens"].rank(method="dense", ascending=False)
    return (rank - 1).astype(int)


def n_axis_rows(table: pd.DataFrame, baselines: list[str]) -> pd.DataFrame:
    """The rows the N verdict reads: at each size, only the largest budget the baseline(s)
    measured there (the largest budget of any arm where no baseline ran)."""
    is_base = table["variant"].isin(baselines)
    anchor = table[is_base].groupby("size")["tokens"].max()
    anchor = anchor.reindex(table["size"].unique()).fillna(table.groupby("size")["tokens"].max())
    keep = table["tokens"].to_numpy() == table["size"].map(anchor).to_numpy()
    return table[keep].reset_index(drop=True)


def has_token_axis(table: pd.DataFrame) -> bool:
    """Some (variant, size) measured at two or more budgets."""
    return bool((table.groupby(["variant", "size"])["tokens"].nunique() >= 2).any())


@dataclasses.dataclass
class Slice:
    """One budget rank: its runs, LR frontiers and bootstrap groups."""

    rank: int
    groups: Groups
    frontier: dict[tuple[str, str, float], LRFrontier]
    has_ci: bool
    num_used: int


@dataclasses.dataclass
class Point:
    """One matched (size, tokens) of one variant, with the slice it came from."""

    budget: Budget
    rank: int
    n_params: float
    has_ci: bool


def build_slices(table: pd.DataFrame, num_resamples: int, seed: int) -> list[Slice]:
    """One ``Slice`` per budget rank that has usable runs. Slice ``j`` draws with seed
    ``seed + j``, so the largest-budget slice reproduces the N analysis's draws exactly."""
    out = []
    ranks = budget_rank(table)
    for rank in sorted(ranks.unique()):
        part = table[ranks == rank].reset_index(drop=True)
        frontiers = lr_frontier(part)
        usable = usable_cells(part, frontiers)
        if usable.empty:
            continue
        chosen = selected_lrs(part, frontiers)
        groups = build_groups(usable, num_resamples, seed + int(rank), chosen)
        has_ci = groups.noise is not None and len(groups.seeds) >= MIN_SEEDS and num_resamples > 0
        frontier = {(f.variant, f.size, f.tokens): f for f in frontiers}
        out.append(Slice(int(rank), groups, frontier, has_ci, len(usable)))
    return out


def matched_points(slices: list[Slice], baselines: list[str], variant: str) -> list[Point]:
    """Every (size, tokens) where ``variant`` and a baseline both have usable runs, by N then D."""
    points = []
    for sl in slices:
        if variant not in set(sl.groups.info["variant"]):
            continue
        base_of = baseline_map(sl.groups, baselines)
        for b in compare(sl.groups, base_of, variant).budgets:
            n = float(sl.groups.info.at[b.base, "num_nonembedding_params"])
            points.append(Point(b, sl.rank, n, sl.has_ci and b.num_paired >= MIN_SEEDS))
    return sorted(points, key=lambda p: (p.n_params, p.budget.tokens))


def by_size(points: list[Point]) -> dict[str, list[Point]]:
    """Size -> its points by tokens, sizes by N."""
    out: dict[str, list[Point]] = {}
    for p in points:
        out.setdefault(p.budget.size, []).append(p)
    return out


def slope(points: list[Point]) -> np.ndarray:
    """``[B+1]`` change of the paired gain (loss units) per doubling of D: least squares of
    gain on log2 D with one intercept per size (sizes with >= 2 budgets), the same slope for
    all. A constant absolute gap has slope 0; a gap that closes with more tokens, < 0."""
    x, y, size_of = [], [], []
    for size, pts in by_size(points).items():
        if len(pts) < 2:
            continue
        logd = np.log2([p.budget.tokens for p in pts])
        x.append(logd - logd.mean())
        gains = np.stack([p.budget.gain_loss for p in pts], axis=1)  # [B+1, budgets]
        y.append(gains - gains.mean(axis=1, keepdims=True))
        size_of.append(size)
    if not x:
        return np.full(1, np.nan)
    xc = np.concatenate(x)  # [P]
    yc = np.concatenate(y, axis=1)  # [B+1, P]
    return yc @ xc / float(xc @ xc)


def token_lr_guards(points: list[Point], slices: list[Slice]) -> list[str]:
    """One sentence naming every compared (arm, size, tokens) whose best LR is not bracketed."""
    frontier = {k: f for sl in slices for k, f in sl.frontier.items()}
    cells = []
    for p in points:
        b = p.budget
        sl = next(s for s in slices if s.rank == p.rank)
        for g in (b.base, b.var):
            key = (sl.groups.info.at[g, "variant"], b.size, b.tokens)
            if key in frontier:
                cells.append(frontier[key])
    summary = unbracketed_summary(cells)
    return [summary] if summary else []


def fit_nd(slices: list[Slice], num_resamples: int) -> list[LawFit]:
    """``L(N, D) = E + A/N^alpha + B/D^beta`` per arm with >= 2 budgets at some size: Approach 3
    (``analysis.stats.fits.fit``: Huber in log space, the full initialisation grid) on every (size,
    tokens) of the arm at its best LR, each bootstrap draw refitted from the full-data optimum."""
    columns: dict[str, list[tuple[str, float, float, np.ndarray]]] = {}
    for sl in slices:
        info = sl.groups.info
        for g in range(len(info)):
            loss = sl.groups.loss[:, g]
            if loss.shape[0] != num_resamples + 1:  # no draws in this slice: data only
                loss = np.concatenate([loss[:1], np.full(num_resamples, np.nan)])
            n, d = float(info.at[g, "num_nonembedding_params"]), float(info.at[g, "tokens"])
            columns.setdefault(info.at[g, "variant"], []).append((info.at[g, "size"], n, d, loss))
    fits = []
    for variant, cols in sorted(columns.items()):
        sizes = [c[0] for c in cols]
        if max(sizes.count(s) for s in sizes) < 2 or len(cols) < 5:
            continue  # no size with two budgets: B and beta are not identified apart from N
        model = fit.chinchilla_model(np.array([c[1] for c in cols]), np.array([c[2] for c in cols]))
        loss = np.stack([c[3] for c in cols], axis=1)  # [B+1, P]
        params, counts = fit_across_resamples(model, loss, fit.grid_starts(model), 5)
        fits.append(LawFit("L(N,D)", variant, model.names, params, np.arange(len(cols)), counts))
    return fits


def _stat(x: np.ndarray, has_ci: bool) -> dict:
    return verdicts.stat(x, has_ci and x.shape[0] > 1)


def _point_rows(points: list[Point]) -> list[dict]:
    return [
        {
            "size": p.budget.size,
            "tokens": p.budget.tokens,
            "n_params": p.n_params,
            "budget_rank": p.rank,
            "baseline_arm": p.budget.base_arm,
            "gain_loss": _stat(p.budget.gain_loss, p.has_ci),
            "gain_pct": _stat(p.budget.gain_pct, p.has_ci),
            "num_paired_seeds": p.budget.num_paired,
        }
        for p in points
    ]


def _slopes_by_size(points: list[Point]) -> dict[str, dict]:
    out = {}
    for size, pts in by_size(points).items():
        if len(pts) >= 2:
            out[size] = _stat(slope(pts), all(p.has_ci for p in pts))
    return out


@dataclasses.dataclass
class TokenAnalysis:
    verdict: dict  # verdict.json's "tokens" section
    fits: list[LawFit]
    slices: list[Slice]


def analyse_tokens(
    table: pd.DataFrame, baselines: list[str], num_resamples: int, seed: int
) -> TokenAnalysis | None:
    """Per-budget gains, L(N, D) fits and the verdict along D; None without a token axis.

    ``table``: the run table after ``snap_budgets``, every budget.
    """
    if not has_token_axis(table):
        return None
    slices = build_slices(table, num_resamples, seed)
    variants = sorted(set(table["variant"]) - set(baselines))
    judged = {}
    for variant in variants:
        points = matched_points(slices, baselines, variant)
        judged[variant] = (points, verdict_tokens.top_point(points))
    p_values = {
        v: p_two_sided(top.budget.gain_loss[1:]) if top is not None and top.has_ci else 1.0
        for v, (_, top) in judged.items()
    }
    # at 5% whatever the N verdict's level (a sequential look's included): as it always was
    levels = holm_levels(p_values, ALPHA) if p_values else {}
    rows = []
    for variant, (points, top) in judged.items():
        guards = verdict_tokens.guards(points, top) + token_lr_guards(
            verdict_tokens.axis_points(points), slices
        )
        decision = verdict_tokens.apply_rule_d(
            points, top, slope(points), levels.get(variant), guards
        )
        rows.append(
            {
                "variant": variant,
                "baseline": ",".join(baselines),
                "verdict": decision.pop("verdict"),
                "reason": decision.pop("reason"),
                "decision": {**decision, "top_gain_p": p_values[variant]},
                "gain_by_budget": _point_rows(points),
                "slope_by_size": _slopes_by_size(points),
            }
        )
    fits = fit_nd(slices, num_resamples)
    verdict = {
        "budgets_by_size": {
            str(s): sorted(float(t) for t in frame["tokens"].unique())
            for s, frame in table.groupby("size", sort=False)
        },
        "num_slices": len(slices),
        "num_used": int(sum(sl.num_used for sl in slices)),
        "variants": rows,
        "rule": verdict_tokens.RULE_D,
    }
    return TokenAnalysis(verdict, fits, slices)
