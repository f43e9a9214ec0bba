"""How long a study takes on its executor: `plan`'s wall-clock estimate.

A cell takes its training FLOPs and its evaluations' forward FLOPs at the study's sustained
rate (`cost.flops_per_gpu_s` per device), plus `cost.startup_s` of work that is not arithmetic
(process start, model and data set-up, checkpoints, tracking). Cells run `slots` at a time:
`local.max_parallel` on the local executor, `slurm.array_parallelism` on Slurm (an upper
bound: the cluster may run fewer). A free slot takes the longest waiting cell, as
`scaling.backends.local.executor.LocalExecutor` does, so a phase lasts what that greedy
schedule says. A
local round also starts a warm server (`scaling.warmstart.server`: torch, megatron-core and mlflow
imported, about 8 CPU s) and is seen to end at the next status poll
(`scaling.driver.watcher.POLL_S`, 5 s: 2.5 s on average): the executor's `per_round_overhead_s`.
A Slurm round's queue wait is the cluster's, not counted.

With `lr.search` a study runs in phases, each waiting for the one before: the starting grid,
then up to `max_rounds` refinement rounds (one LR per arm and scan seed each), then the
followers (the other seeds at each arm's winner). The estimate gives the study with no
refinement round, and with every round (the worst case).

With `transfer: law` the sizes past the first wave run one after another, each a phase of its
own (`_waves_wall`): the price of the law's saving is this wall-clock.
`scaling run`'s inference-cost measurement, where it makes one (`Plan.inference`), runs after
the last round and adds its seconds to both. `planned_seconds` gives each cell's estimate to the
progress line's ETA (`scaling.driver.progress`), so the ETA starts from the plan's own numbers.
The device is named as the study runs: GPUs on a Slurm partition with `gpus_per_node`, else
CPU processes; locally, GPUs when this machine shows an NVIDIA device to the study.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from scaling.backends.executors import executor_for
from scaling.costs.plan import Plan, cell_seconds, plan_study
from scaling.spec.resolved import ResolvedStudy

__all__ = [
    "WallEstimate",
    "wall_estimate",
    "rounds_seconds",
    "cell_seconds",
    "planned_seconds",
    "format_wall",
]


@dataclass(frozen=True)
class WallEstimate:
    """Wall-clock seconds of the whole study at its executor's parallelism."""

    seconds: float  # no LR-search refinement round (or no search)
    worst_seconds: float  # every refinement round runs
    slots: int
    slots_note: str  # `slots` in words: "2 cell(s) at a time (local.max_parallel)"
    device: str  # "GPU" or "CPU"


def _makespan(durations: list[float], slots: int) -> float:
    """Greedy longest-first schedule of `durations` on `slots` parallel slots: its length."""
    ends = [0.0] * max(1, min(slots, len(durations)))
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + duration)  # the slot that frees first
    return max(ends, default=0.0)


def planned_seconds(study: ResolvedStudy, plan: Plan | None = None) -> dict[str, float]:
    """Each cell's wall seconds as the plan estimates them (`cell_seconds` at the study's
    `cost`; measured tokens/s where the pilot measured the cell's arm)."""
    plan = plan or plan_study(study)
    cost = study.spec.cost
    return {
        r.cell_id: cell_seconds(r, cost.flops_per_gpu_s, cost.startup_s, cost.step_s)
        for r in plan.rows
    }


def wall_estimate(study: ResolvedStudy, plan: Plan) -> WallEstimate:
    """The study's wall-clock on its executor (module docstring), from its plan's cells, then
    the inference measurement where `scaling run` makes one."""
    wall = _cells_wall(study, plan)
    if plan.inference is None:
        return wall
    extra = plan.inference.seconds
    return replace(wall, seconds=wall.seconds + extra, worst_seconds=wall.worst_seconds + extra)


def _cells_wall(study: ResolvedStudy, plan: Plan) -> WallEstimate:
    spec, executor = study.spec, executor_for(study)
    slots, per_round = executor.slots, executor.per_round_overhead_s
    rate, startup, step = spec.cost.flops_per_gpu_s, spec.cost.startup_s, spec.cost.step_s
    seconds = {r.cell_id: cell_seconds(r, rate, startup, step) for r in plan.rows}
    search = spec.lr.search
    if search is None:
        total = per_round + _makespan(list(seconds.values()), slots)
        return WallEstimate(total, total, slots, executor.slots_note, executor.device_name)
    if search.transfer == "law" and set(spec.first_wave) != set(spec.sizes):
        return _waves_wall(study)
    grid = [seconds[c.cell_id] for c in study.cells if c.round == 0]
    # one grid point of an arm (a cell, or a WSD family) costs alike at every LR and seed
    points: dict[tuple[str, str], dict[tuple[int, float], float]] = {}
    for cell in study.cells:
        if cell.round == 0:
            arm = points.setdefault((cell.variant, cell.size), {})
            point = (cell.seed, cell.lr)
            arm[point] = arm.get(point, 0.0) + seconds[cell.cell_id]
    arm_point = {key: next(iter(arm.values())) for key, arm in points.items()}
    num_scan, num_follow = len(spec.scan_seeds), len(spec.seeds) - len(spec.scan_seeds)
    round_cells = [s for s in arm_point.values() for _ in range(num_scan)]
    per_arm = num_follow * (1 + 2 * search.follow_neighbours)
    followers = [s for s in arm_point.values() for _ in range(per_arm)]
    base = per_round + _makespan(grid, slots)
    base += (per_round + _makespan(followers, slots)) if followers else 0.0
    worst = base + search.max_rounds * (per_round + _makespan(round_cells, slots))
    return WallEstimate(base, worst, slots, executor.slots_note, executor.device_name)


def _waves_wall(study: ResolvedStudy) -> WallEstimate:
    """`lr.search.transfer: law`: the first wave, then each later size as its own phases (2 LRs
    per arm on its law, then one edge round past the winner's edge; in the worst case its full
    grid and `max_rounds` edge rounds), then the
    followers of every size. Priced on the study's cells without transfer (the later sizes are
    not in its starting grid)."""
    from scaling.spec.loader import resolve  # lazy: pricing the waves' sizes

    spec, executor = study.spec, executor_for(study)
    search = spec.lr.search
    full = resolve(replace(spec, lr=replace(spec.lr, search=replace(search, transfer="none"))))
    slots, per_round = executor.slots, executor.per_round_overhead_s
    rate, startup, step = spec.cost.flops_per_gpu_s, spec.cost.startup_s, spec.cost.step_s
    seconds = {r.cell_id: cell_seconds(r, rate, startup, step) for r in plan_study(full).rows}
    grid: dict[str, list[float]] = {}  # size -> its starting-grid cells
    point: dict[tuple[str, str], float] = {}  # (arm, size) -> one grid point
    for cell in full.cells:
        if cell.round == 0:
            grid.setdefault(cell.size, []).append(seconds[cell.cell_id])
            point.setdefault((cell.variant, cell.size), seconds[cell.cell_id])
    num_scan, num_follow = len(spec.scan_seeds), len(spec.seeds) - len(spec.scan_seeds)

    def phase(durations: list[float]) -> float:
        return per_round + _makespan(durations, slots) if durations else 0.0

    def edges(sizes) -> float:  # one edge round: an LR per arm and scan seed
        return phase([t for (_, s), t in point.items() if s in sizes for _ in range(num_scan)])

    first = spec.first_wave
    base = phase([t for s in first for t in grid[s]])
    worst = base + search.max_rounds * edges(first)
    for size in [s for s in full.spec.first_wave if s not in first]:  # smallest first
        base += phase([t for (_, s), t in point.items() if s == size for _ in range(2 * num_scan)])
        base += edges([size])  # the winner of two LRs sits at an edge: one LR past it
        worst += phase(grid[size]) + search.max_rounds * edges([size])
    per_arm = num_follow * (1 + 2 * search.follow_neighbours)
    followers = phase([t for t in point.values() for _ in range(per_arm)])
    return WallEstimate(
        base + followers, worst + followers, slots, executor.slots_note, executor.device_name
    )


def rounds_seconds(study: ResolvedStudy, plan: Plan) -> float:
    """Wall seconds of the cells the study holds now, round after round (each round waits for
    the one before): for a finished LR search, the estimate of the rounds that actually ran."""
    spec, executor = study.spec, executor_for(study)
    slots, per_round = executor.slots, executor.per_round_overhead_s
    rate, startup, step = spec.cost.flops_per_gpu_s, spec.cost.startup_s, spec.cost.step_s
    seconds = {r.cell_id: cell_seconds(r, rate, startup, step) for r in plan.rows}
    by_round: dict[int, list[float]] = {}
    for cell in study.cells:
        by_round.setdefault(cell.round, []).append(seconds[cell.cell_id])
    return sum(per_round + _makespan(durations, slots) for durations in by_round.values())


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def format_wall(
    wall: WallEstimate, startup_s: float, step_s: float = 0.0, inference_s: float | None = None
) -> str:
    """One line for `scaling plan` (`inference_s`: the inference measurement, included)."""
    text = f"wall-clock on {wall.device}: about {_clock(wall.seconds)} with {wall.slots_note}"
    if wall.worst_seconds > wall.seconds:
        text += f"; {_clock(wall.worst_seconds)} if every LR-search round runs"
    steps = f" + cost.step_s {step_s:g} s a step" if step_s else ""
    after = "" if inference_s is None else f"; then the inference measurement {_clock(inference_s)}"
    return (
        f"{text} (each cell: its FLOPs at cost.flops_per_gpu_s{steps} + cost.startup_s "
        f"{startup_s:g} s{after})"
    )
