"""`plan`: what a study will train and what it will cost, before anything is submitted.

Cost is arithmetic, not a guess about hardware: FLOPs C = flops_per_token(model) × D (training,
forward + backward, from `models.accounting`), and time = C / (GPUs × the study's stated sustained
FLOP/s per GPU, `cost.flops_per_gpu_s`). GPU-hours = C / flops_per_gpu_s / 3600, whatever the
parallelism.

With `--noise`, `scaling.costs.power.power_plan` adds what the study's seeds can detect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from foundation import contract
from models.accounting import flops_per_token, num_nonembedding_params, num_params
from scaling.costs.disk import cell_checkpoint_bytes, num_checkpoints_kept
from scaling.costs.inference_plan import InferenceEstimate, inference_estimate
from scaling.costs.pilot import PILOT_FILE, load_pilot, probe_key
from scaling.spec.grid import Cell, OfCell
from scaling.spec.resolved import ResolvedStudy

__all__ = [
    "PlanRow",
    "Plan",
    "plan_study",
    "plan_cost",
    "format_plan",
    "cell_seconds",
    "format_count",
    "format_duration",
    "format_bytes",
    "BranchSaving",
    "branch_saving",
    "format_branch_saving",
]


@dataclass(frozen=True)
class PlanRow(OfCell):
    """One cell and its cost."""

    cell: Cell
    num_nonembedding_params: int  # N of this arm (models.accounting)
    num_params_total: int
    tokens: int  # D the cell ends at: steps × tokens per step (a branch: its budget)
    steps: int
    tokens_per_step: int
    flops: float  # C this cell computes: flops_per_token × its own tokens (a branch: cooldown)
    gpus: int  # processes on CPU: TP × PP × DP
    hours: float  # training time at cost.flops_per_gpu_s per GPU, or at the pilot's tokens/s
    measured: bool = False  # hours from `scaling pilot`'s measured tokens/s, not assumed
    checkpoint_bytes: int = 0  # one checkpoint, all ranks (models.accounting.checkpoint_bytes)
    num_checkpoints: int = 0  # kept on disk at the end: the rotation's newest + keep_steps
    eval_flops: float = 0.0  # forward FLOPs of its evaluations (`scaling.costs.wall` times them)

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.gpus


def cell_seconds(
    row: PlanRow, flops_per_gpu_s: float, startup_s: float, step_s: float = 0.0
) -> float:
    """One cell's wall seconds: its training time (assumed from FLOPs plus `step_s` a step, or
    measured by the pilot, whose tokens/s hold the per-step overhead already), its evaluation
    FLOPs on its devices, and start-up."""
    per_step = 0.0 if row.measured else row.steps * step_s
    return row.hours * 3600 + per_step + row.eval_flops / (row.gpus * flops_per_gpu_s) + startup_s


@dataclass(frozen=True)
class Plan:
    rows: list[PlanRow]
    flops_per_gpu_s: float
    pilot: str | None = None  # when and where the measured rows were measured
    startup_s: float = 0.0  # cost.startup_s: each cell's wall time beside its FLOPs
    step_s: float = 0.0  # cost.step_s: each training step's wall time beside its FLOPs
    # `scaling run`'s inference-cost measurement after the cells (None: it makes none)
    inference: InferenceEstimate | None = None

    @property
    def checkpoint_bytes(self) -> int:
        """Checkpoints on disk once every cell has ended (each cell's kept ones)."""
        return sum(r.checkpoint_bytes * r.num_checkpoints for r in self.rows)

    @property
    def measured_gpu_hours(self) -> float:
        return sum(r.gpu_hours for r in self.rows if r.measured)

    @property
    def num_runs(self) -> int:
        return len(self.rows)

    @property
    def total_flops(self) -> float:
        return sum(r.flops for r in self.rows)

    @property
    def gpu_hours(self) -> float:
        return sum(r.gpu_hours for r in self.rows)

    @property
    def total_gpu_hours(self) -> float:
        """The cells' device-hours and the inference measurement's."""
        return self.gpu_hours + (self.inference.gpu_hours if self.inference else 0.0)

    @property
    def max_hours(self) -> float:
        """The longest cell: the study's wall-clock with unlimited GPUs."""
        return max((r.hours for r in self.rows), default=0.0)


def plan_study(study: ResolvedStudy) -> Plan:
    """Cost every cell of the (resolved) study; writes and submits nothing."""

    flops_per_gpu_s = study.spec.cost.flops_per_gpu_s
    pilot = load_pilot(study.folder)
    measured = _measured_tokens_per_s(pilot)
    rows = []
    # the model's counts are one (size, variant, layout)'s: counted once, not once per seed and
    # LR (10,000 cells: a third of `plan`'s time was recounting them)
    counts: dict[tuple[str, str, int], tuple[int, int, int]] = {}
    for cell in study.cells:
        run = cell.run
        tokens, flops = cell.tokens, cell.flops
        key = (cell.size, cell.variant, run.parallel.world_size)
        if key not in counts:
            counts[key] = (
                int(num_nonembedding_params(run.model)),
                int(num_params(run.model)),
                cell_checkpoint_bytes(study, run),
            )
        n_params, n_total, ckpt_bytes = counts[key]
        start = run.init_from.step if run.init_from is not None else 0  # a branch's fork
        gpus = run.parallel.world_size
        hours = flops / (gpus * flops_per_gpu_s) / 3600
        tokens_per_s = measured.get(probe_key(run, cell.size, cell.variant))
        if tokens_per_s:
            hours = (run.train.steps - start) * run.tokens_per_step / tokens_per_s / 3600
        rows.append(
            PlanRow(
                cell=cell,
                num_nonembedding_params=n_params,
                num_params_total=n_total,
                tokens=tokens,
                steps=run.train.steps,
                tokens_per_step=run.tokens_per_step,
                flops=flops,
                gpus=gpus,
                hours=hours,
                measured=bool(tokens_per_s),
                checkpoint_bytes=ckpt_bytes,
                num_checkpoints=num_checkpoints_kept(run.train),
                eval_flops=_eval_flops(run),
            )
        )
    note = None
    if pilot is not None:
        note = f"pilot of {pilot['measured_at']} ({pilot['executor']}, {PILOT_FILE})"
    return Plan(
        rows,
        flops_per_gpu_s,
        pilot=note,
        startup_s=study.spec.cost.startup_s,
        step_s=study.spec.cost.step_s,
        inference=inference_estimate(study, rows),
    )


def plan_cost(study: ResolvedStudy) -> Callable[[str, float, float], float]:
    """cost(variant, N, tokens): one run's device-hours as the plan prices the study's cells (the
    pilot's measured tokens/s where there are some): the plan's cell of that arm nearest in N,
    scaled by N and tokens. What `--resolve` and verdict.json's `resolve` price options by; the
    plan is worked out at the first call (a resolved verdict prices nothing)."""
    by_arm: dict[str, list[tuple[float, float, float]]] = {}

    def cost(variant: str, n_params: float, tokens: float) -> float:
        if not by_arm:
            for row in plan_study(study).rows:
                by_arm.setdefault(row.variant, []).append(
                    (float(row.num_nonembedding_params), float(row.tokens), row.gpu_hours)
                )
        rows = by_arm.get(variant) or [r for rs in by_arm.values() for r in rs]
        n, d, hours = min(rows, key=lambda r: (abs(math.log(r[0] / n_params)), -r[2]))
        return hours * (n_params / n) * (tokens / d)

    return cost


def _measured_tokens_per_s(pilot: dict | None) -> dict[str, float]:
    if pilot is None:
        return {}
    return {k: m["tokens_per_s"] for k, m in pilot["probes"].items() if m["status"] == "ok"}


def _eval_flops(run) -> float:
    """Forward FLOPs of a run's evaluations: one at every `eval_interval` before the end and
    one at the end, each over the loss and the LR-selection windows; a forward pass costs a
    third of a training token's FLOPs (the backward pass two thirds)."""

    train, data = run.train, run.data
    start = run.init_from.step if run.init_from is not None else 0
    num_evals = 1 + (
        (train.steps - 1) // train.eval_interval - start // train.eval_interval
        if train.eval_interval
        else 0
    )
    tokens = num_evals * (data.num_val_windows + data.num_select_windows) * run.model.seq_length
    return float(flops_per_token(run.model)) / 3 * tokens


def format_count(value: float) -> str:
    """3 significant digits with K/M/B/T (counts of parameters and tokens)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def format_duration(hours: float) -> str:
    seconds = hours * 3600
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{hours:.2f}h"


def format_plan(plan: Plan, device: str = "GPU") -> tuple[list[str], list[list[str]], str]:
    """(header, rows, totals line) as strings, for a rich table or plain text; costs are in
    `device`-hours ("GPU", or "CPU": one process each, `Executor.device_name`)."""
    header = ["cell", "size", "N", "N total", "tokens", "steps", "FLOPs", f"{device}s", "time"]
    header += ["cost", "ckpt", "ckpts kept"]
    rows = [
        [
            r.cell_id,
            r.size,
            format_count(r.num_nonembedding_params),
            format_count(r.num_params_total),
            format_count(r.tokens),
            str(r.steps),
            f"{r.flops:.2e}",
            str(r.gpus),
            format_duration(
                cell_seconds(r, plan.flops_per_gpu_s, plan.startup_s, plan.step_s) / 3600
            ),
            "measured" if r.measured else "assumed",
            format_bytes(r.checkpoint_bytes),
            f"{r.num_checkpoints} = {format_bytes(r.checkpoint_bytes * r.num_checkpoints)}",
        ]
        for r in plan.rows
    ]
    if plan.inference is not None:
        time = format_duration(plan.inference.seconds / 3600)
        rows.append(plan.inference.table_row(header, device, time))
    return header, rows, plan_totals(plan, device)


def plan_totals(plan: Plan, device: str) -> str:
    """The totals line under the plan table: cells, FLOPs, device-hours (the inference
    measurement's included), the longest cell, checkpoints."""
    num_measured = sum(r.measured for r in plan.rows)
    if num_measured == 0:
        cost = (
            f"{plan.total_gpu_hours:.4g} {device}-hours at {plan.flops_per_gpu_s:.3g} FLOP/s "
            f"per {device} (assumed)"
        )
    else:
        cost = (
            f"{plan.total_gpu_hours:.4g} {device}-hours: {plan.measured_gpu_hours:.4g} measured "
            f"for {num_measured} of {plan.num_runs} cells by the {plan.pilot}"
        )
        if num_measured < plan.num_runs:
            cost += f", the rest assumed at {plan.flops_per_gpu_s:.3g} FLOP/s per {device}"
    if plan.inference is not None:
        cost += f" (with {plan.inference.gpu_hours:.2g} for the inference measurement)"
    return (
        f"{plan.num_runs} runs, {plan.total_flops:.3g} FLOPs, {cost}; longest cell "
        f"{format_duration(plan.max_hours)} of training; checkpoints on disk at the end "
        f"{format_bytes(plan.checkpoint_bytes)} (keep_checkpoints newest + keep_steps, per cell)"
    )


def format_bytes(count: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count:.0f} B"


@dataclass(frozen=True)
class BranchSaving:
    """A branched study's cost against the same budgets trained as independent runs."""

    num_cells: int  # stable + branch + ordinary cells
    flops: float
    gpu_hours: float
    num_independent_cells: int  # one full run per budget, no stable runs
    independent_flops: float
    independent_gpu_hours: float


def branch_saving(study: ResolvedStudy, plan: Plan | None = None) -> BranchSaving | None:
    """What WSD branches save (None for a study without them): each branch replaced by a full
    run to its budget, each stable run dropped. GPU-hours scale with FLOPs per cell."""

    plan = plan or plan_study(study)
    kinds = {c.cell_id: c.kind for c in study.cells}
    if contract.KIND_BRANCH not in kinds.values():
        return None
    independent = [r for r in plan.rows if kinds[r.cell_id] != contract.KIND_STABLE]

    def full(row: PlanRow) -> float:  # a full run to the row's budget, FLOPs
        return row.flops * row.tokens / (row.tokens - _fork_tokens(study, row))

    flops = [full(r) for r in independent]
    hours = [r.gpu_hours * f / r.flops for r, f in zip(independent, flops, strict=True)]
    return BranchSaving(
        plan.num_runs,
        plan.total_flops,
        plan.gpu_hours,
        len(independent),
        sum(flops),
        sum(hours),
    )


def _fork_tokens(study: ResolvedStudy, row: PlanRow) -> int:
    init = study.cell(row.cell_id).run.init_from
    return init.step * row.tokens_per_step if init is not None else 0


def format_branch_saving(saving: BranchSaving) -> str:
    """Two lines: branched vs independent cells, FLOPs and GPU-hours, and the saving."""
    return (
        f"WSD branches: {saving.num_cells} cells, {saving.flops:.3g} FLOPs, "
        f"{saving.gpu_hours:.4g} GPU-hours\n"
        f"independent runs per budget: {saving.num_independent_cells} cells, "
        f"{saving.independent_flops:.3g} FLOPs, {saving.independent_gpu_hours:.4g} GPU-hours "
        f"(branches save {1 - saving.flops / saving.independent_flops:.0%} of the FLOPs)"
    )
