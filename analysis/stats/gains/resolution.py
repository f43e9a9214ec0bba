"""The LR grid's resolution, and the LR search's pick, as an error term of each gain.

An arm is compared at its best grid LR, which sits up to half a step from its true optimum (more
when the search picked on one noisy scan seed); its loss there is above the optimum's by the
curve's rise over that distance. Two arms sit at different distances, so the grid alone moves
their measured gain, and no number of seeds averages that away: it is one draw per (arm, size).

Modelled here: the loss rises as ``c u^2`` at ``u`` (ln LR) from the optimum. ``c`` is in nats per
ln(LR)^2, the same at every size and arm: the median over every bracketed sweep of the study
(per size it would rest on the few arms there), taken relative to each arm's own loss. The
optimum lies uniformly between the midpoints to the best LR's neighbours, reaching further
towards a neighbour the run noise cannot exclude as the better LR, and up to one step past it
(``_reach``, with the noise model's run sd). Each arm's loss above its optimum then has
a mean and a variance; a gain's term is both arms' variances plus the square of the difference
of their means (``pair_var``), added to the paired t's squared standard error
(``analysis.stats.gains.robust``) with Welch-Satterthwaite df (``effective_df``); the term only
ever widens the seeds' own interval (``t_half``).

Why not correct each arm to its fitted optimum (a parabola through the best LR and its
neighbours): three points cannot tell a parabola's dip from a steep side, and on LR curves
steeper above the optimum that claimed more than the grid itself (docs/statistics.md, "The LR
grid's resolution"). A variance term does not move the estimate; it only admits the grid's
uncertainty, as large as the correction it does not make.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.lr.frontier import BRACKETED, LRFrontier, selection_column

__all__ = [
    "curvature",
    "effective_df",
    "pair_var",
    "groups_pair_var",
    "penalty_moments",
    "t_half",
    "t_p",
    "tuning_variances",
]

Key = tuple[str, str, float]
# A neighbour may be the better LR while its seen rise is within Z_PICK sds of the curve's. A
# gain compares two arms' picks, and a pick whose optimum lies past its reach is a bias the term
# does not carry: at 2 sds one arm's optimum lay past its reach in 3.1% of one-seed picks at the
# ladder's 1% noise (about 6% of comparisons, and most such claimed), at 2.5 sds in 1.0%
# (tests/analysis/stats/gains/test_resolution.py; the claims: docs/statistics.md).
Z_PICK = 2.5


Cells = dict[tuple[str, str, float, float], dict[object, tuple[float, float]]]
Seen = tuple[float, float, int]  # a tried LR: ln-LR distance, how much worse seen, common seeds
Side = tuple[float, float, int, tuple[Seen, ...]]  # the neighbour's, then the farther LRs'


def _cells(table: pd.DataFrame, column: str) -> Cells:
    """``{(variant, size, tokens, lr): {seed: (selection loss, final loss)}}`` over the completed
    runs with an LR (a seed's repeats averaged): one pass, read by every sweep below."""
    done = table[table["lr"].notna() & (table["status"] == "completed")]
    sums: dict = {}
    keys = zip(done["variant"], done["size"], done["tokens"], done["lr"], done["seed"], strict=True)
    for (v, s, t, lr, seed), sel, fin in zip(
        keys, done[column], done["final_val_loss"], strict=True
    ):
        cell = sums.setdefault((str(v), str(s), float(t), float(lr)), {})
        total = cell.setdefault(seed, [0.0, 0.0, 0])
        total[0] += float(sel)
        total[1] += float(fin)
        total[2] += 1
    return {k: {seed: (a / n, b / n) for seed, (a, b, n) in c.items()} for k, c in sums.items()}


def _sweep_curvature(cells: Cells, group: Key, lrs: list[float]) -> float | None:
    """The second divided difference of the mean loss in ln LR through three LRs, on the seeds
    all three completed; None without a common seed."""
    runs = [cells.get((*group, float(lr)), {}) for lr in lrs]
    seeds = set(runs[0]).intersection(*runs[1:])
    if not seeds:
        return None
    y = [float(np.mean([r[seed][1] for seed in seeds])) for r in runs]
    x = [math.log(lr) for lr in lrs]
    slope_low, slope_high = (y[1] - y[0]) / (x[1] - x[0]), (y[2] - y[1]) / (x[2] - x[1])
    return (slope_high - slope_low) / (x[2] - x[0])


def curvature(
    table: pd.DataFrame, frontiers: list[LRFrontier], cells: Cells | None = None
) -> float:
    """The loss's curvature in ln LR (nats per ln(LR)^2), the median over every sweep whose best
    LR has a completed neighbour on each side; 0 when none has (nothing to scale by)."""
    cells = _cells(table, selection_column(table)) if cells is None else cells
    found = []
    for f in frontiers:
        if f.best_lr is None or f.state not in BRACKETED:
            continue
        i = f.lrs.index(f.best_lr)
        if i == 0 or i == len(f.lrs) - 1:
            continue
        value = _sweep_curvature(cells, (f.variant, f.size, float(f.tokens)), f.lrs[i - 1 : i + 2])
        if value is not None and math.isfinite(value):
            found.append(value)
    return max(0.0, float(np.median(found))) if found else 0.0


def penalty_moments(c: float, low: float, high: float) -> tuple[float, float]:
    """(mean %, variance %^2) of ``100 c u^2`` for ``u`` uniform in (-low, high): the loss above
    the optimum at the best LR when the optimum lies anywhere from ``low`` below it to ``high``
    above it in ln LR (half a 2x step each side: ``ln(2) / 2``)."""
    if low + high <= 0:
        return 0.0, 0.0
    m2 = (high**3 + low**3) / (3.0 * (low + high))  # E[u^2]
    m4 = (high**5 + low**5) / (5.0 * (low + high))  # E[u^4]
    return 100.0 * c * m2, (100.0 * c) ** 2 * max(0.0, m4 - m2**2)


def effective_df(se2, df, tune_var: float):
    """Welch-Satterthwaite df of ``se2 + tune_var``: ``se2`` (a squared standard error, scalar or
    array) estimated on ``df`` df, ``tune_var`` taken as known; ``df`` itself when it is 0."""
    if not tune_var > 0:
        return df
    # seeds that agree exactly (se2 0) give a normal test; capped so the square stays finite
    return df * (1.0 + np.minimum(tune_var / np.maximum(se2, 1e-300), 1e100)) ** 2


def t_half(q: float, se, df, tune_var: float = 0.0):
    """The paired t interval's half-width at quantile ``q`` (e.g. ``1 - alpha/2``): the wider of
    the seeds' own (``t_q(df) se``) and the one with the grid's term (``t_q(df_eff)
    sqrt(se^2 + tune_var)``, Welch-Satterthwaite df). With 2-3 seeds the seeds' sd is itself
    uncertain, and the Satterthwaite df (large once the known term dominates) would then
    shrink the interval below the seeds' own: the term may only widen it."""
    se = np.asarray(se, dtype=float)
    own = stats.t.ppf(q, df) * se
    if not tune_var > 0:
        return own
    both = stats.t.ppf(q, effective_df(se**2, df, tune_var)) * np.sqrt(se**2 + tune_var)
    return np.maximum(own, both)


def t_p(mean: float, se: float, df: int, tune_var: float = 0.0) -> float:
    """Two-sided p of "no gain" for ``t_half``'s interval: the larger of the two tests' p (with
    ``se`` 0, seeds that agree exactly, the grid's term alone decides)."""
    if se == 0:
        own = 1.0 if mean == 0 else 0.0
    else:
        own = 2 * stats.t.sf(abs(mean) / se, df)
    if not tune_var > 0:
        return float(own)
    both = 2 * stats.t.sf(
        abs(mean) / math.sqrt(se**2 + tune_var), effective_df(se**2, df, tune_var)
    )
    return float(max(own, both))


def _pick_gap(cells: Cells, group: Key, best: float, other: float) -> tuple[float, int]:
    """(how much worse ``other`` LR is than ``best`` on the seeds both completed, those seeds),
    on the selection loss; (nan, 0) without a common seed (a diverged neighbour)."""
    mine, theirs = cells.get((*group, float(other)), {}), cells.get((*group, float(best)), {})
    common = set(mine) & set(theirs)
    if not common:
        return float("nan"), 0
    return float(np.mean([mine[seed][0] - theirs[seed][0] for seed in common])), len(common)


def _bound(dist: float, c: float, seen: float, num: int, sd_run: float) -> float:
    """The farthest optimum (ln LR from the best LR, towards a tried LR ``dist`` away) whose
    rise there, ``c dist (dist - 2u)``, is still within ``Z_PICK`` sds (both cells' run noise on
    their ``num`` common seeds) of the ``seen`` one; inf without a comparison (no common seed)."""
    if not (num > 0 and math.isfinite(seen)):
        return math.inf
    slack = Z_PICK * sd_run * math.sqrt(2.0 / num) - seen
    return dist / 2.0 + slack / (2.0 * c * dist)


def _reach(
    gap: float, c: float, seen: float, num: int, sd_run: float | None,
    further: tuple[Seen, ...] = (),
) -> float:  # fmt: skip
    """How far towards a neighbour ``gap`` away (ln LR) the optimum may lie: the midpoint, or
    further where the run noise cannot exclude that the neighbour is the better LR (``_bound``),
    up to the neighbour; and past it, up to one more step (``2 gap``), while the neighbour's
    seen rise and every farther tried LR's on that side (``further``: distance, seen rise,
    common seeds) still allow it. A search that picked on one noisy scan seed can sit two steps
    from the optimum when the step between looked flat. A side seen far worse is never taken to
    push the optimum away: curves rise faster towards divergence than any parabola through
    three LRs says; so the farther LRs only ever bound the reach past the neighbour."""
    if sd_run is None or not (num > 0 and math.isfinite(seen) and c > 0):
        return gap / 2.0
    near = _bound(gap, c, seen, num, sd_run)
    past = min([near, 2.0 * gap, *(_bound(d, c, s, n, sd_run) for d, s, n in further)])
    return max(gap / 2.0, min(gap, near), past)


def _location_var_pct(
    c: float, relative: float, sides: list[Side | None], sd_run: float | None
) -> tuple[float, float]:
    """(mean, variance) (%, %^2) of the best LR's loss above the optimum, ``relative u^2``, with
    the optimum uniform (in ln LR) between its reaches towards the neighbours (``_reach``).

    ``sides``: per neighbour (below, above) its ln-LR distance, how much worse it was seen on
    the seeds both ran, those seeds, and the same (distance, seen, seeds) for every farther LR
    tried on that side (None: no neighbour there; that side mirrors the other)."""
    reach = [None if s is None else _reach(s[0], c, s[1], s[2], sd_run, s[3]) for s in sides]
    low, high = reach
    low = high if low is None else low
    high = low if high is None else high
    if low is None or not relative > 0:
        return 0.0, 0.0
    return penalty_moments(relative, low, high)


def tuning_variances(
    table: pd.DataFrame,
    frontiers: list[LRFrontier],
    sd_run: dict[str, float] | None = None,
) -> dict[Key, tuple[float, float]]:
    """``{(variant, size, tokens): (mean, variance)}`` of the arm's loss above its optimum at its
    best LR (% of the loss, %^2) for every sweep with a best LR (``_location_var_pct``; the run
    noise ``sd_run`` per size, e.g. the noise model's)."""
    cells = _cells(table, selection_column(table))
    c = curvature(table, frontiers, cells)
    out: dict[Key, tuple[float, float]] = {}
    for f in frontiers:
        if f.best_lr is None:
            continue
        loss = f.mean_loss.get(f.best_lr)
        relative = c / loss if loss and math.isfinite(loss) and loss > 0 else 0.0
        noise = None if sd_run is None else sd_run.get(f.size)
        group = (f.variant, f.size, float(f.tokens))
        out[group] = _location_var_pct(c, relative, _sides(cells, group, f), noise)
    return out


def _sides(cells: Cells, group: Key, f: LRFrontier) -> list[Side | None]:
    """Below and above the best LR: the tried LRs on that side, nearest first, each as (ln-LR
    distance, how much worse it was seen, common seeds) (``_pick_gap``); None without one."""
    i = f.lrs.index(f.best_lr)
    out: list[Side | None] = []
    for others in (f.lrs[:i][::-1], f.lrs[i + 1 :]):
        seen = [
            (abs(math.log(lr / f.best_lr)), *_pick_gap(cells, group, f.best_lr, lr))
            for lr in others
        ]
        out.append((*seen[0], tuple(seen[1:])) if seen else None)
    return out


def pair_var(tuning: dict[Key, tuple[float, float]], base: Key, variant: Key) -> float:
    """The grid's term in a gain of ``variant`` over ``base`` (%^2): both arms' variances and the
    square of the difference of their mean penalties. That difference is not subtracted from
    the gain (three LRs cannot tell a parabola's dip from a steep side: docs/statistics.md); it
    is admitted as an error of that size."""
    mb, vb = tuning.get(base, (0.0, 0.0))
    mv, vv = tuning.get(variant, (0.0, 0.0))
    return vb + vv + (mb - mv) ** 2


def groups_pair_var(groups, base: int, var: int) -> float:
    """``pair_var`` of two rows of the bootstrap groups (``analysis.stats.variance.cells.Groups``:
    its ``info`` and ``tuning_var``), keyed as ``tuning_variances`` keys an arm: (variant, size,
    tokens). The one place a gain's grid term is read: the verdict's test, the report's power
    table and `scaling plan`'s ``grid_terms``."""
    info = groups.info
    keys = [
        (str(info.at[g, "variant"]), str(info.at[g, "size"]), float(info.at[g, "tokens"]))
        for g in (base, var)
    ]
    return pair_var(groups.tuning_var, *keys)


def trend_draws(groups, curve: list, num_rows: int, rng: np.random.Generator, shared: np.ndarray):
    """The LR grid's term in the k(C) fit's draws: ``[num_rows, len(curve)]`` errors (% of the
    baseline's loss) to add to each size's gain in each bootstrap draw (row 0, the data, gets
    none), each of variance ``groups_pair_var`` at that size, so gamma's and k0's intervals carry
    the grid as the paired test does. Where an arm's grid sits off its optimum is one draw per
    (arm, size) that no seed averages away; with many seeds it dominates the trend, and a
    constant gain read `grows` or `fades` in a third of studies (docs/statistics.md).

    How the sizes' errors go together is unknown: one grid offset per arm at every size (a grid
    placed by a fixed rule) is one loss gap at every size, which k(C) reads as a trend; offsets
    drawn afresh per size scatter the points. Each draw takes both: ``shared`` ``[num_rows]``
    bool says which draws use one normal for every size (in loss units: the error's sd scaled
    with each size's loss, as one offset of one curve gives) and which draw one per size."""
    sd = np.array([math.sqrt(groups_pair_var(groups, b.base, b.var)) for b in curve])
    out = np.zeros((num_rows, len(curve)))
    if num_rows <= 1 or not (sd > 0).any():
        return out
    own = rng.standard_normal((num_rows - 1, len(curve)))
    common = np.broadcast_to(rng.standard_normal((num_rows - 1, 1)), own.shape)
    out[1:] = sd * np.where(shared[1:, None], common, own)
    return out
