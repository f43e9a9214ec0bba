"""What `scaling run`'s inference-cost measurement costs, for `scaling plan`.

A study whose cells run on this machine, with no figures in its folder yet and
`SCALING_INFERENCE_COST` not `off`, measures every (size, variant) once after its last round
(`scaling.inference_cost.inference_study`): one child process (priced as a cell's start-up,
`cost.startup_s`) that runs, per model, the rounds `measurement_seconds` counts. A forward call
is priced at the study's `cost.step_s` plus its tokens at a third of a training token's
device-seconds as the plan prices that arm (the pilot's measured tokens/s where it measured
the arm, else its FLOPs at `cost.flops_per_gpu_s`): a forward pass is a third of a training
token's FLOPs, the backward two thirds. It runs on one device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from models.accounting import flops_per_token
from scaling.backends.executors import executor_for
from scaling.inference_cost.inference import measurement_seconds
from scaling.inference_cost.inference_study import settings_for, will_measure
from scaling.spec.resolved import ResolvedStudy

__all__ = ["InferenceEstimate", "inference_estimate", "INFERENCE_ROW"]

INFERENCE_ROW = "inference measurement"  # its name in the plan's table


class PricedCell(Protocol):
    """What this needs of a `scaling.costs.plan.PlanRow` (plan.py imports this module)."""

    cell_id: str
    flops: float
    measured: bool

    @property
    def gpu_hours(self) -> float: ...


@dataclass(frozen=True)
class InferenceEstimate:
    """The inference measurement's wall seconds on one device."""

    num_models: int  # (size, variant) pairs, each measured once
    num_rounds: int  # warm-up + timed rounds per model
    seconds: float
    measured: bool  # every arm's per-token time from the pilot, not assumed

    @property
    def gpu_hours(self) -> float:
        return self.seconds / 3600  # one process on one device

    def table_row(self, header: list[str], device: str, time: str) -> list[str]:
        """Its row in the plan's table (`header`'s columns; `time`: its seconds as written)."""
        cost = "measured" if self.measured else "assumed"  # its per-token times
        named = {"cell": INFERENCE_ROW, "size": f"{self.num_models} models", "cost": cost}
        named |= {"steps": f"{self.num_rounds} rounds", f"{device}s": "1"}
        named |= {"time": time, "time (longest)": time, f"{device}-hours": f"{self.gpu_hours:.4g}"}
        return [named.get(column, "") for column in header]


def inference_estimate(
    study: ResolvedStudy, rows: Sequence[PricedCell]
) -> InferenceEstimate | None:
    """The measurement `scaling run` makes after the study's cells (module docstring), or None
    where it makes none."""
    executor = executor_for(study)
    if not will_measure(study, executor.measures_inference_here):
        return None
    first = {}  # (size, variant) -> its first cell, as `inference_study.arms` takes it
    for cell in study.cells:
        first.setdefault((cell.size, cell.variant), cell)
    by_id = {r.cell_id: r for r in rows}
    cost = study.spec.cost
    settings = settings_for(min(c.run.model.seq_length for c in first.values()))
    seconds, measured = cost.startup_s, True
    for cell in first.values():
        row = by_id[cell.cell_id]
        per_token = flops_per_token(cell.run.model)
        # a training token's device-seconds as priced: FLOPs / rate, or the pilot's tokens/s
        train_s = row.gpu_hours * 3600 * per_token / row.flops if row.flops > 0 else 0.0
        seconds += measurement_seconds(
            settings, train_s / 3, cost.step_s, peak_pass=executor.device_name == "GPU"
        )
        measured = measured and row.measured
    return InferenceEstimate(len(first), settings.warmup + settings.repeats, seconds, measured)
