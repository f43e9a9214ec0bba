"""What the LR search can add to a study's starting grid, in the worst case (`scaling plan`).

The starting grid is `scaling.costs.plan`'s; the rounds the search adds are decided as the runs
finish (`scaling.lr_search.extend_grid`), so the plan prices their most: every arm at an edge every
round, then the followers; with `lr.search.transfer: law`, every size past the first wave on
its full grid (every law broken).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaling.costs.plan import Plan, PlanRow, plan_study
from scaling.spec.resolved import ResolvedStudy

__all__ = ["SearchCost", "search_cost", "format_search_cost"]


@dataclass(frozen=True)
class SearchCost:
    """The worst case `lr.search` can add beyond the starting grid
    (`scaling.lr_search.extend_grid`)."""

    num_scan_cells: int  # max_rounds x arms x scan seeds (every arm at an edge every round)
    num_follower_cells: int  # other seeds x (winner + 2 x follow_neighbours) per arm
    gpu_hours: float

    @property
    def num_cells(self) -> int:
        return self.num_scan_cells + self.num_follower_cells


def search_cost(study: ResolvedStudy, plan: Plan | None = None) -> SearchCost | None:
    """Worst-case extra cells and GPU-hours of the LR search; None without `lr.search`.

    Each round adds at most one LR per arm (two when the arm's grid has a single LR, which is
    at both edges), run by the scan seeds; then the other seeds follow at the winner and
    `follow_neighbours` LRs either side; `find_edge` adds up to one more LR per arm and round
    (the scan upward). An arm's cells all cost the same (LR does not change
    FLOPs), so a starting-grid cell prices them.
    """
    search = study.spec.lr.search
    if search is None:
        return None
    if search.transfer == "law" and set(study.spec.first_wave) != set(study.spec.sizes):
        return _waves_cost(study)
    plan = plan or plan_study(study)
    spec = study.spec
    num_scan = len(spec.scan_seeds)
    num_followers = len(spec.seeds) - num_scan
    # one grid point = one cell, or a WSD family (stable + branches): priced whole
    families: dict[tuple[str, str], dict[tuple[int, float], list[PlanRow]]] = {}
    for cell, row in zip(study.cells, plan.rows, strict=True):
        if cell.round == 0:
            arm = families.setdefault((row.variant, row.size), {})
            arm.setdefault((cell.seed, cell.lr), []).append(row)
    scan = follow = 0
    hours = 0.0
    for points in families.values():
        family = next(iter(points.values()))
        num_lrs = len({lr for _, lr in points})
        lrs_added = search.max_rounds + (1 if num_lrs == 1 and search.max_rounds else 0)
        lrs_added += search.max_rounds if search.find_edge else 0  # + one up a round (edge scan)
        arm_scan = lrs_added * num_scan * len(family)
        arm_follow = num_followers * (1 + 2 * search.follow_neighbours) * len(family)
        scan, follow = scan + arm_scan, follow + arm_follow
        hours += (arm_scan + arm_follow) * sum(r.gpu_hours for r in family) / len(family)
    return SearchCost(scan, follow, hours)


def _waves_cost(study: ResolvedStudy) -> SearchCost:
    """`lr.search.transfer: law`: the sizes past the first wave are not in the starting grid;
    in the worst case each one's law is broken or missing and it runs the full grid, its edges
    and followers, so the worst case is the study's without transfer, less the first wave."""
    from scaling.spec.loader import resolve  # lazy: pricing only, for a study with waves

    spec = study.spec
    full = resolve(
        replace(spec, lr=replace(spec.lr, search=replace(spec.lr.search, transfer="none")))
    )
    plan = plan_study(full)
    first = set(spec.first_wave)
    waves = [
        r
        for r, c in zip(plan.rows, full.cells, strict=True)
        if c.round == 0 and c.size not in first
    ]
    cost = search_cost(full, plan)
    return SearchCost(
        cost.num_scan_cells + len(waves),
        cost.num_follower_cells,
        cost.gpu_hours + sum(r.gpu_hours for r in waves),
    )


def format_search_cost(
    cost: SearchCost, plan: Plan, study: ResolvedStudy, device: str = "GPU"
) -> str:
    """One line for `scaling plan` beside the starting grid's totals."""
    search = study.spec.lr.search
    base = sum(r.gpu_hours for r, c in zip(plan.rows, study.cells, strict=True) if c.round == 0)
    waves = [s for s in study.spec.sizes if s not in study.spec.first_wave]
    if search.transfer == "law" and waves:
        base_sizes = ", ".join(study.spec.first_wave)
        return (
            f"lr search with transfer: law: the starting grid holds {base_sizes} "
            f"({base:.4g} {device}-hours); then {', '.join(waves)} one wave each, smallest first, "
            f"on each arm's LR law (2 LRs, then 1 past the winner's edge) or its full grid; worst "
            f"case (every law broken) "
            f"+{cost.num_cells} cells, +{cost.gpu_hours:.4g} {device}-hours; total at most "
            f"{base + cost.gpu_hours:.4g} {device}-hours"
        )
    return (
        f"lr search (max_rounds {search.max_rounds}, scan seeds {len(study.spec.scan_seeds)} of "
        f"{len(study.spec.seeds)}): worst case +{cost.num_cells} cells ({cost.num_scan_cells} "
        f"scan, {cost.num_follower_cells} follower), +{cost.gpu_hours:.4g} {device}-hours beside "
        f"the starting grid's {base:.4g}; total at most {base + cost.gpu_hours:.4g} {device}-hours"
    )
