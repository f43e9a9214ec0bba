"""The cost of sequential seeds (`seeds: {start, max, step}`) up front, for `scaling plan`.

Three figures, in the study's device-hours:

- minimum: `start` seeds at every size, the study stopping at look 1: the first round's seed runs
  (the starting grid and, with an LR search, its followers at the winner and `follow_neighbours`
  LRs either side; the search's extra scan LRs are its own line of the plan);
- maximum: `max` seeds at every size;
- expected: the minimum plus the seeds the looks add on average, from a simulation of the
  design's binding test (`analysis.stats.looks.seq_cost.expected_seeds`) at a true gain: while
  the top gain's interval holds 0 only the top size gets seeds, so the other sizes keep `start`.

A seed a look adds runs each arm once at its chosen LR (`scaling.looks.sequential_seeds`), so one
more seed
at a size costs one grid point per arm there (a WSD family whole), priced from the plan's rows
(with `lr.search.transfer: law`, the sizes past the first wave from the full grid's plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from foundation.contract import size_key
from scaling.costs.plan import Plan, plan_study
from scaling.spec.resolved import ResolvedStudy

__all__ = [
    "SeedCost",
    "seed_cost",
    "format_seed_cost",
    "point_hours",
    "first_round",
    "format_hours",
]


@dataclass(frozen=True)
class SeedCost:
    """A sequential design's seed runs, priced by the plan."""

    start: int
    max: int
    step: int
    margin_pct: float
    alpha: float  # the study's verdict.alpha: the looks' family-wise level
    sizes: tuple[str, ...]  # smallest to largest; the last is the top size
    first_round_gpu_hours: float  # `start` seeds at every size (with the LR search's followers)
    per_seed: dict[str, float]  # device-hours of one seed a look adds at each size
    num_followers: int = 0  # first-round seeds that follow the LR search (priced in the minimum)
    follower_lrs: int = 0  # LRs each follower runs per arm (winner + neighbours)

    @property
    def top(self) -> str:
        return self.sizes[-1]

    @property
    def minimum(self) -> float:
        """Stop at look 1: the first round's `start` seeds only."""
        return self.first_round_gpu_hours

    @property
    def maximum(self) -> float:
        """`max` seeds at every size."""
        return self.minimum + (self.max - self.start) * sum(self.per_seed.values())

    def at_top_seeds(self, top_seeds: float) -> float:
        """The seeds' cost when the top size ends with `top_seeds` seeds, the others at `start`."""
        return self.minimum + (top_seeds - self.start) * self.per_seed[self.top]

    def design(self):
        """The study's sequential design at its own margin and level, by the one builder."""
        from analysis.judgement import make_design  # lazy: scipy

        d = {"start": self.start, "max": self.max, "step": self.step}
        return make_design({**d, "margin_pct": self.margin_pct, "alpha": self.alpha})


def point_hours(study: ResolvedStudy, plan: Plan | None = None) -> dict[tuple[str, str], float]:
    """Device-hours of one grid point (one seed at one LR: a cell, or a WSD family whole) of each
    (size, arm), from the starting grid's rows; an arm's points all cost the same (LR does not
    change FLOPs). With `lr.search.transfer: law` the sizes past the first wave are not in the
    starting grid: they are priced from the same study without transfer, as the search's worst
    case (`scaling.costs.lr_search.search_cost`) prices them."""
    search = study.spec.lr.search
    if search is not None and search.transfer == "law":
        if set(study.spec.first_wave) != set(study.spec.sizes):
            from dataclasses import replace

            from scaling.spec.loader import resolve  # lazy: pricing only, for a study in waves

            spec = study.spec
            lr = replace(spec.lr, search=replace(search, transfer="none"))
            study, plan = resolve(replace(spec, lr=lr)), None
    plan = plan or plan_study(study)
    points: dict[tuple[str, str], dict[tuple[int, float], float]] = {}
    for cell, row in zip(study.cells, plan.rows, strict=True):
        if cell.round == 0:
            arm = points.setdefault((row.size, row.variant), {})
            key = (cell.seed, cell.lr)
            arm[key] = arm.get(key, 0.0) + row.gpu_hours
    return {key: next(iter(arm.values())) for key, arm in points.items()}


def first_round(
    study: ResolvedStudy, plan: Plan, points: dict[tuple[str, str], float]
) -> tuple[float, int, int]:
    """(device-hours, follower seeds, LRs each follower runs per arm) of the first round: the
    starting grid (round 0) and, with an LR search, the seeds past the scan at each arm's winner
    and `follow_neighbours` LRs either side, at every size. `points`: `point_hours`."""
    spec = study.spec
    hours = sum(r.gpu_hours for c, r in zip(study.cells, plan.rows, strict=True) if c.round == 0)
    search = spec.lr.search
    if search is None:
        return hours, 0, 0
    num_followers = len(spec.seeds) - len(spec.scan_seeds)
    follower_lrs = 1 + 2 * search.follow_neighbours
    return hours + num_followers * follower_lrs * sum(points.values()), num_followers, follower_lrs


def seed_cost(study: ResolvedStudy, plan: Plan | None = None) -> SeedCost | None:
    """The study's seed runs at the minimum and maximum; None without `seeds: {start, max, step}`.

    Priced on the starting grid (round 0), so a study already past some rounds is planned as it
    was at the start."""
    rounds = study.spec.seed_rounds
    if rounds is None:
        return None
    plan = plan or plan_study(study)
    spec = study.spec
    points = point_hours(study, plan)
    sizes = tuple(sorted(spec.sizes, key=size_key))
    per_seed = dict.fromkeys(sizes, 0.0)
    for (size, _), hours in points.items():
        per_seed[size] += hours
    first, num_followers, follower_lrs = first_round(study, plan, points)
    return SeedCost(
        rounds.start,
        rounds.max,
        rounds.step,
        spec.verdict.margin_pct,
        spec.verdict.alpha,
        sizes,
        first,
        per_seed,
        num_followers,
        follower_lrs,
    )


def format_hours(value: float) -> str:
    """Device-hours as the plan's seed lines print them: whole hours from 100, else 3 digits."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def format_seed_cost(
    cost: SeedCost,
    device: str = "GPU",
    sd: tuple[float, str] | None = None,
    target_gain: float | None = None,
    noise: str | None = None,
    tune_var: float = 0.0,
) -> str:
    """The plan's lines on the seeds: per-seed cost, minimum, expected and maximum.

    `sd`: (paired sd in % of the loss at the top size, the size it was measured at) from
    `--noise`; the expected figure is simulated at `target_gain` and at no gain. Without `sd`
    the lines say what the expected figure needs. `tune_var`: the LR grid's term (%^2) a
    finished `--noise` study shows at the top size, which the looks' test adds (0: none)."""
    from analysis.stats.looks.seq_cost import NUM_STUDIES, expected_seeds  # lazy: scipy

    design = cost.design()
    looks = ", ".join(str(n) for n in design.planned_seeds())
    unit = f"{device}-hours"
    first = "the first round"
    if cost.num_followers:
        first += (
            f": the starting grid and {cost.num_followers} follower seed(s) at "
            f"{cost.follower_lrs} LRs per arm; the LR search's extra scan LRs are the line above"
        )
    lines = [
        f"sequential seeds (start {cost.start}, max {cost.max}, step {cost.step}; looks at "
        f"{looks} paired seeds at {cost.top}): {unit} of the seed runs",
        "  one more seed (each arm once, at its chosen LR): "
        + ", ".join(f"{s} {format_hours(cost.per_seed[s])}" for s in cost.sizes)
        + f" {unit}",
        f"  minimum {format_hours(cost.minimum)} {unit}: {cost.start} seeds at every size, the "
        f"study stopping at look 1 ({first})",
    ]
    if sd is None:
        lines.append(
            "  expected: needs --noise SOURCE and --target-gain PCT (a simulation of the "
            "design's binding test at that noise and gain)"
        )
    else:
        gains = ([target_gain] if target_gain is not None else []) + [0.0]
        parts = []
        for gain in gains:
            out = expected_seeds(design, gain, sd[0], tune_var=tune_var)
            what = f"at a {gain:g}% gain" if gain else "at no gain"
            claims = f"; claims it in {out.claim_rate:.0%} of studies" if gain else ""
            parts.append(
                f"{format_hours(cost.at_top_seeds(out.mean_top_seeds))} {unit} {what} "
                f"({out.mean_top_seeds:.2f} seeds at {cost.top} on average{claims})"
            )
        lines.append("  expected " + ", ".join(parts))
        source = f" from --noise {noise}" if noise else ""
        at = "" if sd[1] in (cost.top, "all") else f", measured at {sd[1]}"
        lines.append(
            f"    {NUM_STUDIES:,} simulated studies of the binding test (Student's t on the "
            f"{cost.top} paired seeds, paired sd {sd[0]:.3g}%{source}{at}, at 80% of each "
            f"look's level, margin {cost.margin_pct:g}%); the other sizes keep {cost.start} seeds"
        )
        if tune_var > 0:
            lines.append(f"    {_grid_words(tune_var, noise)}")
        if target_gain is None:
            lines.append("    at a target gain: add --target-gain PCT")
    lines.append(f"  maximum {format_hours(cost.maximum)} {unit}: {cost.max} seeds at every size")
    return "\n".join(lines)


def _grid_words(tune_var: float, noise: str | None) -> str:
    """The plan's words for the LR grid's term it simulated with."""
    return (
        f"with the LR grid's resolution the verdict reads from {noise or 'the --noise runs'}: "
        f"sd {math.sqrt(tune_var):.3g}% of the loss in the top-size test, which no number of "
        'seeds shrinks (docs/statistics.md, "The LR grid\'s resolution")'
    )
