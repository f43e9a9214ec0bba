"""`scaling plan --noise`'s "cost vs naive" line: the study's expected device-hours against the
naive grid's at equal power.

*Naive*: `NAIVE_LRS` (3) LRs x `n` fixed seeds at every (arm, size), one grid point each priced
from the plan (`scaling.costs.seeds.point_hours`), `n` the smallest fixed seed count whose power
at the study's margin (`analysis.stats.planning.power.power_of`: the verdict's top-size paired
t-test) reaches the study's own there: for `seeds: {start, max, step}` the design's simulated power
at a true gain equal to the margin (`analysis.stats.looks.seq_cost.expected_seeds`: the share of
simulated studies that claim it), for a fixed seed list `power_of` on its seeds (so `n` is their
count). A finished study as `--noise` also brings its LR grid's term in the top-size test
(`analysis.stats.analyze.grid_terms`): the study's power and looks are simulated with it, while
the naive grid is priced at the power on the seeds alone (no fixed seed count lowers the term).

*Expected*: what the study runs when its LR search needs no edge round:
- the first round (`scaling.costs.seeds.first_round`): the starting grid and the search's
  follower seeds at each arm's winner and `follow_neighbours` LRs either side;
- with `lr.search.transfer: law`, every size past the first wave scanned by the scan seeds on
  each arm's law while it holds: `MAX_SCAN` (2) LRs per arm (`analysis.stats.lr.lr_law.plan_arm`,
  `scaling.lr_search.law_transfer.next_wave`), and the one LR that extends their edge (the winner
  of two
  LRs always sits at an edge of them, and the analysis needs a neighbour on each side):
  `WAVE_LRS` (3);
- with sequential seeds, the seeds the looks add on average at a true gain equal to the margin
  (`SeedCost.at_top_seeds`, from the same simulation as the power).
Edge rounds, a broken law and a law too uncertain to narrow the scan are not in it: the plan's
"lr search" line prints their worst case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.stats.lr.lr_law import MAX_SCAN
from analysis.stats.planning.power import MAX_SEEDS, power_of
from foundation.contract import size_key
from scaling.costs.plan import Plan
from scaling.costs.seeds import first_round, format_hours, point_hours, seed_cost
from scaling.spec.resolved import ResolvedStudy

__all__ = [
    "NAIVE_LRS",
    "WAVE_LRS",
    "NaiveCost",
    "naive_cost",
    "equal_power_seeds",
    "format_naive_cost",
]

NAIVE_LRS = 3  # the naive grid: every arm at every size at 3 LRs, every seed at each
WAVE_LRS = MAX_SCAN + 1  # a size scanned on a law: its LRs, then the one past the winner's edge


@dataclass(frozen=True)
class NaiveCost:
    """A study's expected device-hours and the naive grid's at the same power at the margin."""

    expected: float
    per_seed_naive: float  # NAIVE_LRS grid points of every (arm, size): one naive seed
    num_seeds: int | None  # n: fixed seeds of equal power (None: none up to MAX_SEEDS, or no power)
    power: float  # the study's power at the margin (NaN: under 2 seeds)
    margin_pct: float
    sd_pct: float  # the top size's paired sd, % of the loss
    sd_at: str  # the size the sd was measured at ("all": a number)
    top: str
    wave_sizes: tuple[str, ...] = ()  # past the first wave, at WAVE_LRS LRs per arm
    num_followers: int = 0  # follower seeds of the LR search (0: none or no search)
    has_search: bool = False
    mean_top_seeds: float | None = None  # sequential seeds: E[seeds at the top] at the margin
    tune_var: float = 0.0  # the LR grid's term in the top-size test (%^2) the --noise runs show
    seeds_power: float = math.nan  # the power on the seeds alone (= power without a term)

    @property
    def naive(self) -> float:
        return math.nan if self.num_seeds is None else self.num_seeds * self.per_seed_naive

    @property
    def ratio(self) -> float:
        return self.expected / self.naive


def equal_power_seeds(power: float, margin_pct: float, sd_pct: float) -> int | None:
    """Smallest fixed paired seed count (>= 2) whose power at `margin_pct` reaches `power`;
    None when `power` is NaN or beyond `MAX_SEEDS` seeds. Power rises with the seeds, so a
    bisection finds it."""
    if not math.isfinite(power) or power_of(margin_pct, sd_pct, MAX_SEEDS) < power:
        return None
    lo, hi = 2, MAX_SEEDS
    while lo < hi:  # the first n with power_of(n) >= power lies in [lo, hi]
        mid = (lo + hi) // 2
        if power_of(margin_pct, sd_pct, mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo


def naive_cost(
    study: ResolvedStudy, plan: Plan, sd: tuple[float, str], tune_var: float = 0.0
) -> NaiveCost | None:
    """The study against the naive grid at equal power; None for a study with neither
    `lr.search` nor `seeds: {start, max, step}` (it is a fixed grid already).
    `sd`: (the top size's paired sd in % of the loss, the size it was measured at).
    `tune_var`: the LR grid's term (%^2) in the top-size test, read from a finished study's runs
    (`analysis.stats.analyze.grid_terms`): the study's power and its looks' seeds are simulated
    with it; the naive grid is priced at the study's power on the seeds alone, since no fixed
    seed count lowers that term (as benchmarks/bench_ladder_cost.py prices it)."""
    from analysis.stats.looks.seq_cost import expected_seeds  # lazy: scipy's simulation

    spec = study.spec
    if spec.lr.search is None and spec.seed_rounds is None:
        return None
    margin = spec.verdict.margin_pct
    points = point_hours(study, plan)
    hours, num_followers, _ = first_round(study, plan, points)
    mean_top = None
    seeds = seed_cost(study, plan)
    if seeds is not None:
        out = expected_seeds(seeds.design(), margin, sd[0], tune_var=tune_var)
        power, mean_top = out.claim_rate, out.mean_top_seeds
        hours = seeds.at_top_seeds(mean_top)  # the first round and the looks' seeds
        alone = expected_seeds(seeds.design(), margin, sd[0]).claim_rate if tune_var else power
    else:
        power = power_of(margin, sd[0], len(spec.seeds), tune_var=tune_var)
        alone = power_of(margin, sd[0], len(spec.seeds))
    waves = tuple(s for s in sorted(spec.sizes, key=size_key) if s not in spec.first_wave)
    scan = WAVE_LRS * len(spec.scan_seeds)
    hours += scan * sum(h for (size, _), h in points.items() if size in waves)
    return NaiveCost(
        expected=hours,
        per_seed_naive=NAIVE_LRS * sum(points.values()),
        num_seeds=equal_power_seeds(alone, margin, sd[0]),
        power=power,
        margin_pct=margin,
        sd_pct=sd[0],
        sd_at=sd[1],
        top=max(spec.sizes, key=size_key),
        wave_sizes=waves,
        num_followers=num_followers,
        has_search=spec.lr.search is not None,
        mean_top_seeds=mean_top,
        tune_var=tune_var,
        seeds_power=alone,
    )


def format_naive_cost(cost: NaiveCost, device: str = "GPU") -> str:
    """One line: `cost vs naive: X.XX× (expected E <device>-h: ...; naive N <device>-h at
    equal power: ...)`, each figure followed by what it counts."""
    unit = f"{device}-h"
    what = ["the starting grid"]
    if cost.num_followers:
        what[0] += f" and {cost.num_followers} follower seed(s)"
    if cost.wave_sizes:
        what.append(
            f"{', '.join(cost.wave_sizes)} at {WAVE_LRS} LRs per arm (each arm's LR law holding: "
            f"{MAX_SCAN} on the law, 1 past the winner's edge)"
        )
    if cost.has_search:
        what.append("no edge round (worst case: the lr search line)")
    if cost.mean_top_seeds is not None:
        what.append(
            f"{cost.mean_top_seeds:.2f} seeds at {cost.top} on average at a "
            f"{cost.margin_pct:g}% gain"
        )
    at = "" if cost.sd_at in (cost.top, "all") else f", measured at {cost.sd_at}"
    whose = "the design's, simulated" if cost.mean_top_seeds is not None else "its fixed seeds'"
    measured = f"({whose}; paired sd {cost.sd_pct:.3g}% at {cost.top}{at})"
    power = f"power {cost.power:.3f} at the {cost.margin_pct:g}% margin {measured}"
    if cost.tune_var > 0:
        power = (
            f"power {cost.seeds_power:.3f} on the seeds alone at the {cost.margin_pct:g}% margin "
            f"{measured}; {cost.power:.3f} with the LR grid's resolution, sd "
            f"{math.sqrt(cost.tune_var):.3g}% in the test, which no fixed seed count lowers"
        )
    expected = f"expected {format_hours(cost.expected)} {unit}: {', '.join(what)}"
    if cost.num_seeds is None:
        why = (
            "under 2 seeds the paired test has no power"
            if not math.isfinite(cost.power)
            else f"no fixed seed count up to {MAX_SEEDS:,} reaches the study's {power}"
        )
        return f"cost vs naive: not computed ({expected}; naive: {why})"
    return (
        f"cost vs naive: {cost.ratio:.2f}× ({expected}; naive {format_hours(cost.naive)} {unit} "
        f"at equal power: {NAIVE_LRS} LRs × {cost.num_seeds} fixed seeds at every arm and size, "
        f"{power})"
    )
