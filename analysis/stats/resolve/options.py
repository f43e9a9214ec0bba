"""The evidence that could resolve an unresolved verdict, priced and ranked.

For one variant's deciding interval (``evidence.Evidence``: the top gain's estimate, its seeds'
paired sd ``s`` on ``n`` seeds, the LR grid's term ``g`` in %^2) and the level of the next look
``a``, each option says which cells it adds, what they cost (``cost(variant, N, tokens)``: one
run's device-hours, the plan's or the pilot's figure), the half-width the interval will have and
the probability that the next look resolves the verdict (a claim, ``|E'| > h'``, or equivalence,
``|E'| + h' <= margin``). ``E'`` is the next look's estimate predicted from this one: centred on
the estimate, spread by what the option changes (the predictive distribution under a flat prior
on the true gain):

- **more seeds** (``m`` at the top, each arm at its chosen LR): ``h'`` is
  ``t_half(1 - a/2, s / sqrt(n + m), n + m - 1, g)``; the new mean averages ``m`` new seeds in,
  ``sd(E') = s sqrt(m / (n (n + m)))``. Within the design's ``max_seeds``.
- **a finer LR grid** (each arm's best LR times ``exp(+-step / 2)`` at the top, on the seeds it
  has): the grid's step halves, and the term ``c u^2``'s variance, a function of ``u``'s range to
  the 4th power, falls 16x (``g / 16``); ``E'`` moves by the old and new grid errors,
  ``sd(E') = sqrt(g + g / 16)``.
- **one more size** above the top (the ladder's ratio), each arm at its grid around its LR law's
  prediction, ``start`` seeds: the seeds' sd carried to it by a power law in N across the
  measured sizes, the same grid term; the gain there is predicted to be the top's, with the
  top's whole uncertainty. The backtest's word on extrapolating a step rides along. With the
  study's ``grow`` (``Grow``) it is the size the study's own rules make, at their N and tokens;
  without, a hand edit of the study file at the top's tokens per parameter.
- **longer training** (2x tokens at the top, each arm on its grid multiples around its chosen
  LR, on the seeds it has, where the study has a tokens axis): a new deciding cell with the
  top's sd and grid term. Its cells carry ``budget``: each is one run to that many tokens
  (``scaling.spec.branches.longer_run``), not a branch of a longer stable run.
- **the LR past an edge** (``lr_edge``; ``Evidence.edges``): where the verdict is inconclusive
  because a compared arm's best LR is not bracketed (one LR tried, or the best at the grid's
  edge), the LRs the frontier names at each such (arm, size), run by the seeds its best LR ran.
  Only this option can lift that guard, so while it holds it is the only option priced: a seed
  or a finer grid bought then leaves the verdict ``inconclusive`` whatever the interval does.
  ``E'`` moves as the best LR may move, ``sd(E') = sqrt(2 g + sigma^2 / n)``; its P(resolve)
  is that of the interval once the guard is lifted (the next look may find the new LR best and
  at the edge again; the loop then prices the next step).

Ranked by probability of resolving per device-hour.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from analysis.stats.gains.resolution import t_half
from analysis.stats.resolve.evidence import Evidence, half_width
from foundation.contract import size_label

Cost = Callable[[str, float, float], float]  # (variant, N, tokens) -> one run's device-hours
# (top size, N ratio wanted) -> the study's next size: (label, its N and tokens over the top's,
# its shape in words), or None where the study cannot take one (scaling.spec.next_size)
Grow = Callable[[str, float], "tuple[str, float, float, str] | None"]
SEED_STEPS = (2, 4, 8)
NUM_DRAWS = 4000  # predictive draws per option: P(resolve) to about +-0.008
DRAW_SEED = 61
KINDS = ("seeds", "lr_grid", "lr_edge", "size", "tokens")


@dataclasses.dataclass(frozen=True)
class Option:
    variant: str
    kind: str  # one of KINDS
    cells: tuple[dict, ...]  # {variant, size, n_params, tokens, lr, seed[, budget]}: its runs
    cost: float  # device-hours
    half_width_pct: float  # predicted half-width of the deciding interval after it
    p_resolve: float  # predicted probability that the next look resolves the verdict
    edit: str  # the study-file edit that carries it out
    why: str
    note: str = ""
    # the plan's P(resolve): the mean over a truth at 0 and at the margin; a function of the
    # noise and the grid's term, not of the estimate (what the closed loop buys by)
    p_plan: float = 0.0

    @property
    def per_hour(self) -> float:
        return self.p_resolve / self.cost if self.cost > 0 else 0.0

    @property
    def plan_per_hour(self) -> float:
        return self.p_plan / self.cost if self.cost > 0 else 0.0

    def as_dict(self) -> dict:
        keys = ("variant", "kind", "cost", "half_width_pct", "p_resolve", "p_plan", "edit")
        keys += ("why", "note")
        return {**{k: getattr(self, k) for k in keys}, "num_runs": len(self.cells)}


def _draws(ev: Evidence) -> tuple[np.random.Generator, np.ndarray]:
    """The predictive's generator (fixed: the same evidence is priced the same) and draws of the
    seeds' true sd: ``sigma^2 = (n - 1) s^2 / chi2_{n-1}``, the posterior of a variance
    estimated on ``n - 1`` df (an sd on 2 df that happened to be small must not promise a
    narrow interval)."""
    rng = np.random.default_rng(DRAW_SEED)
    df = ev.num_seeds - 1
    return rng, ev.seed_sd_pct * np.sqrt(df / rng.chisquare(df, NUM_DRAWS))


def _resolves(estimate: np.ndarray, half: np.ndarray, margin_pct: float) -> float:
    e = np.abs(estimate)
    return float(np.mean((e > half) | (e + half <= margin_pct)))


def _p_more_seeds(ev: Evidence, m: int, level: float, center: float | None = None) -> float:
    """The next look's estimate and half-width after ``m`` more seeds, drawn: the true mean
    ``D ~ N(est, sigma^2 / n)``, the new seeds' mean and sum of squares, the pooled sd. With
    ``center``, the plan's probability instead: the truth at ``center`` and this look's
    estimate drawn around it (a function of the noise, not of the estimate)."""
    rng, sigma = _draws(ev)
    n, est, s = ev.num_seeds, ev.estimate_pct, ev.seed_sd_pct
    if center is None:
        true = est + sigma / math.sqrt(n) * rng.standard_normal(NUM_DRAWS)
    else:
        true = center + math.sqrt(ev.grid_var) * rng.standard_normal(NUM_DRAWS)
        est = true + sigma / math.sqrt(n) * rng.standard_normal(NUM_DRAWS)
    new_mean = true + sigma / math.sqrt(m) * rng.standard_normal(NUM_DRAWS)
    new_ss = sigma**2 * (rng.chisquare(m - 1, NUM_DRAWS) if m > 1 else 0.0)
    total = n + m
    ss = (n - 1) * s**2 + new_ss + n * m / total * (est - new_mean) ** 2
    estimate = (n * est + m * new_mean) / total
    se = np.sqrt(ss / (total - 1) / total)
    half = t_half(1.0 - level / 2.0, se, total - 1, ev.grid_var)
    return _resolves(estimate, half, ev.margin_pct)


def _p_fresh(
    ev: Evidence,
    sigma,
    num_seeds: int,
    shift_var,
    grid_var: float,
    level: float,
    center: float | None = None,
):
    """P(resolve) for a deciding interval read on ``num_seeds`` fresh seeds of true sd
    ``sigma`` (draws), its estimate moved from this one by ``N(0, shift_var)``; with
    ``center``, from a truth there (the plan's probability, as in ``_p_more_seeds``)."""
    rng = np.random.default_rng([DRAW_SEED, 1])
    if center is not None:
        shift_var = shift_var + sigma**2 / ev.num_seeds + ev.grid_var
    mid = ev.estimate_pct if center is None else center
    estimate = mid + np.sqrt(shift_var) * rng.standard_normal(NUM_DRAWS)
    df = num_seeds - 1
    sd = sigma * np.sqrt(rng.chisquare(df, NUM_DRAWS) / df)
    half = t_half(1.0 - level / 2.0, sd / math.sqrt(num_seeds), df, grid_var)
    return _resolves(estimate, half, ev.margin_pct)


def _plan(p_at: Callable[[float], float], ev: Evidence) -> float:
    """The plan's P(resolve): the mean of ``p_at`` a true gain of 0 and of the margin."""
    return (p_at(0.0) + p_at(ev.margin_pct)) / 2


def _cell(ev: Evidence, arm: str, size: str, n_params: float, tokens: float, lr: float, seed: int):
    return {
        "variant": arm,
        "size": size,
        "n_params": n_params,
        "tokens": tokens,
        "lr": lr,
        "seed": int(seed),
    }


def _arms(ev: Evidence) -> list[str]:
    return [ev.baseline, ev.variant]


def seed_options(
    ev: Evidence, level: float, cost: Cost, max_seeds: int | None = None
) -> list[Option]:
    out = []
    top = max(ev.seeds)
    for m in SEED_STEPS:
        total = ev.num_seeds + m
        if max_seeds is not None and total > max_seeds:
            break
        cells = tuple(
            _cell(ev, arm, ev.size, ev.n_params, ev.tokens, ev.best_lrs[arm], top + 1 + i)
            for arm in _arms(ev)
            for i in range(m)
        )
        half = half_width(ev.seed_sd_pct, total, ev.grid_var, level)
        p = _p_more_seeds(ev, m, level)
        plan = _plan(lambda c, m=m: _p_more_seeds(ev, m, level, c), ev)
        hours = sum(cost(c["variant"], c["n_params"], c["tokens"]) for c in cells)
        why = f"{total} paired seeds at {ev.size} narrow the seeds' part of the interval"
        out.append(Option(
                ev.variant, "seeds", cells, hours, half, p,
                f"seeds: add {top + 1}-{top + m} ({total} paired at {ev.size})", why,
                p_plan=plan,
            )
        )  # fmt: skip
    return out


def grid_option(ev: Evidence, level: float, cost: Cost) -> Option | None:
    if not ev.grid_var > 0:
        return None
    step = ev.grid_step / 2
    cells = tuple(
        _cell(ev, arm, ev.size, ev.n_params, ev.tokens, ev.best_lrs[arm] * math.exp(s * step), sd)
        for arm in _arms(ev)
        for s in (-1, 1)
        for sd in ev.seeds
    )
    new_var = ev.grid_var / 16.0  # the term's variance goes as the step to the 4th power
    half = half_width(ev.seed_sd_pct, ev.num_seeds, new_var, level)
    # E' moves by the old and the new grid errors, and by the new LRs' own runs where they win
    _, sigma = _draws(ev)
    shift = ev.grid_var + new_var + sigma**2 / ev.num_seeds
    p = _p_fresh(ev, sigma, ev.num_seeds, shift, new_var, level)
    plan = _plan(lambda c: _p_fresh(ev, sigma, ev.num_seeds, shift, new_var, level, c), ev)
    hours = sum(cost(c["variant"], c["n_params"], c["tokens"]) for c in cells)
    ratio = math.exp(step)
    lrs = ", ".join(f"{arm} {ev.best_lrs[arm] / ratio:.3g}, {ev.best_lrs[arm] * ratio:.3g}"
                    for arm in _arms(ev))  # fmt: skip
    edit = f"lr.grid at {ev.size}: add {lrs} (a {ratio:.3g}x step around each best LR)"
    why = (
        f"the LR grid's term (sd {math.sqrt(ev.grid_var):.2f}%) is "
        f"{math.sqrt(ev.grid_var) / max(ev.seeds_se, 1e-12):.1f}x the seeds' se"
    )
    return Option(ev.variant, "lr_grid", cells, hours, half, p, edit, why, p_plan=plan)


def edge_option(ev: Evidence, level: float, cost: Cost) -> Option | None:
    if not ev.lr_guarded:
        return None
    cells = tuple(
        _cell(ev, e["arm"], e["size"], e["n_params"], e["tokens"], lr, sd)
        for e in ev.edges
        for lr in e["lrs"]
        for sd in e["seeds"]
    )
    _, sigma = _draws(ev)
    shift = 2 * ev.grid_var + sigma**2 / ev.num_seeds
    p = _p_fresh(ev, sigma, ev.num_seeds, shift, ev.grid_var, level)
    plan = _plan(lambda c: _p_fresh(ev, sigma, ev.num_seeds, shift, ev.grid_var, level, c), ev)
    hours = sum(cost(c["variant"], c["n_params"], c["tokens"]) for c in cells)
    where = _edge_words(ev.edges)
    why = f"{len(ev.edges)} compared arm(s) and size(s) have a best LR not bracketed"
    return Option(ev.variant, "lr_edge", cells, hours, ev.half_width_pct, p,
                  f"lr.grid: add {where}", why, p_plan=plan)  # fmt: skip


def _edge_words(edges: tuple[dict, ...]) -> str:
    """``0.005, 0.02 for linear and nonlinear at 12K, 25K; 0.04 for linear at 60K``: the cells
    that add the same LRs named together, arms with the same sizes together."""
    by_lrs: dict[str, dict[str, list[str]]] = {}
    for e in edges:
        lrs = ", ".join(f"{x:.3g}" for x in e["lrs"])
        by_lrs.setdefault(lrs, {}).setdefault(e["arm"], []).append(e["size"])
    clauses = []
    for lrs, arms in by_lrs.items():
        by_sizes: dict[tuple[str, ...], list[str]] = {}
        for arm, sizes in arms.items():
            by_sizes.setdefault(tuple(sizes), []).append(arm)
        where = "; ".join(f"{' and '.join(a)} at {', '.join(s)}" for s, a in by_sizes.items())
        clauses.append(f"{lrs} for {where}")
    return "; ".join(clauses)


def _size_sd(ev: Evidence, n_params: float) -> float:
    """The seeds' paired sd carried to ``n_params`` by a power law in N over the measured sizes."""
    pts = [(n, ev.sd_by_size[s]) for s, n in ev.sizes if ev.sd_by_size.get(s, 0) > 0]
    if len(pts) < 2:
        return ev.seed_sd_pct
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    slope, icept = np.polyfit(x, y, 1)
    return float(np.exp(icept + slope * math.log(n_params)))


def size_option(
    ev: Evidence, level: float, cost: Cost, start_seeds: int = 3, grow: Grow | None = None
) -> Option | None:
    """One more size above the top at the ladder's ratio. With ``grow`` (the study's rules:
    ``scaling.spec.next_size.study_grow``) the size the study would train, at its own N and
    tokens, or None where the study cannot take one; without, a size ``ratio`` x the top's N at
    the top's tokens per parameter, priced for a study file a user extends by hand."""
    if len(ev.sizes) < 1:
        return None
    ns = [n for _, n in ev.sizes]
    ratio = ns[-1] / ns[-2] if len(ns) > 1 else 2.0
    if grow is None:
        label, n_ratio, tokens_ratio = size_label(ev.n_params * ratio), ratio, ratio
        edit = f"sizes: add {label} (its shape, tokens and LRs too)"
    elif (found := grow(ev.size, ratio)) is None:
        return None
    else:
        label, n_ratio, tokens_ratio, words = found
        edit = f"--resolve --options size adds size {label} ({words})"
    new_n, tokens = ev.n_params * n_ratio, ev.tokens * tokens_ratio
    lr_scale = n_ratio ** (-1.0 / 3.0)  # the synthetic and default LR law: N^-1/3
    cells = tuple(
        _cell(ev, arm, label, new_n, tokens, ev.best_lrs[arm] * lr_scale * m, s)
        for arm in _arms(ev)
        for m in ev.grid_multiples.get(arm, (1.0,))
        for s in range(start_seeds)
    )
    sd = _size_sd(ev, new_n)
    half = half_width(sd, start_seeds, ev.grid_var, level)
    _, sigma = _draws(ev)
    sigma = sigma * sd / ev.seed_sd_pct  # the top's uncertainty about its sd, carried up
    shift = ev.seeds_se**2 + 2 * ev.grid_var + sigma**2 / start_seeds
    p = _p_fresh(ev, sigma, start_seeds, shift, ev.grid_var, level)
    plan = _plan(lambda c: _p_fresh(ev, sigma, start_seeds, shift, ev.grid_var, level, c), ev)
    hours = sum(cost(c["variant"], c["n_params"], c["tokens"]) for c in cells)
    why = f"a top size {n_ratio:.3g}x larger, where the seeds' sd is predicted {sd:.2f}%"
    note = ev.backtest or "extrapolating a step past the top is unchecked here"
    return Option(ev.variant, "size", cells, hours, half, p, edit, why, note, plan)


def tokens_option(ev: Evidence, level: float, cost: Cost) -> Option | None:
    if not ev.has_tokens_axis:
        return None
    tokens = 2.0 * ev.tokens
    cells = tuple(  # each arm's best LR on its grid multiples: the LR bracketed at the budget
        _cell(ev, arm, ev.size, ev.n_params, tokens, ev.best_lrs[arm] * m, s) | {"budget": tokens}
        for arm in _arms(ev)
        for m in ev.grid_multiples.get(arm, (1.0,))
        for s in ev.seeds
    )
    half = ev.half_width_pct
    _, sigma = _draws(ev)
    shift = 2 * (sigma**2 / ev.num_seeds + ev.grid_var)
    p = _p_fresh(ev, sigma, ev.num_seeds, shift, ev.grid_var, level)
    plan = _plan(lambda c: _p_fresh(ev, sigma, ev.num_seeds, shift, ev.grid_var, level, c), ev)
    hours = sum(cost(c["variant"], c["n_params"], c["tokens"]) for c in cells)
    edit = f"--resolve --options tokens trains {ev.size} to {tokens:.3g} tokens"
    why = "2x tokens at the top size, each arm's LR bracketed there"
    return Option(ev.variant, "tokens", cells, hours, half, p, edit, why, p_plan=plan)


def price(
    ev: Evidence,
    level: float,
    cost: Cost,
    *,
    max_seeds: int | None = None,
    start_seeds: int = 3,
    kinds: tuple[str, ...] = KINDS,
    grow: Grow | None = None,
) -> list[Option]:
    """Every option for one unresolved variant at the next look's ``level``, best P(resolve)
    per device-hour first. While the verdict holds its LR guard, only ``lr_edge`` (none when
    ``kinds`` leaves it out: nothing else can resolve it)."""
    if ev.lr_guarded:
        edge = edge_option(ev, level, cost) if "lr_edge" in kinds else None
        return [edge] if edge is not None else []
    found: list[Option | None] = []
    if "seeds" in kinds:
        found += seed_options(ev, level, cost, max_seeds)
    if "lr_grid" in kinds:
        found.append(grid_option(ev, level, cost))
    if "size" in kinds:
        found.append(size_option(ev, level, cost, start_seeds, grow))
    if "tokens" in kinds:
        found.append(tokens_option(ev, level, cost))
    return sorted((o for o in found if o is not None), key=lambda o: -o.per_hour)
