"""Where the plan and the pilot price a study's cells: one class per backend, beside its executor.

An `Executor` (`scaling.rounds.backends.executors`) runs cells: it submits, polls, cancels and
checks its environment. What a study *would* cost there is this room's: the device its hours are
counted on, the precision `precision: auto` is planned in, how many cells run at a time in
words, and how `scaling pilot` submits and waits for its probes. `target_for(study)` pairs the
study's executor with its target by the executor's class; a new backend is one new executor and
one new target.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from scaling.rounds.backends.executors import (
    Executor,
    LocalExecutor,
    SlurmExecutor,
    executor_for,
    local_gpus,
    slurm_parameters,
)
from scaling.spec.resolved import ResolvedStudy

__all__ = ["CostTarget", "LocalTarget", "SlurmTarget", "target_for"]

_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


class CostTarget(ABC):
    """The plan's and the pilot's view of one backend, for one study."""

    executor_class: ClassVar[type[Executor]]
    parallel_probes: ClassVar[bool]  # `scaling pilot` may run its probes at once

    def __init__(self, study: ResolvedStudy, executor: Executor) -> None:
        self.study, self.executor = study, executor

    @property
    @abstractmethod
    def slots_note(self) -> str:
        """`Executor.slots` in words, with the setting that sets it."""

    @property
    @abstractmethod
    def uses_gpus(self) -> bool:
        """Whether the study's cells get GPUs there."""

    @property
    def device_name(self) -> str:
        """ "GPU" or "CPU": what the plan prices a cell's hours on."""
        return "GPU" if self.uses_gpus else "CPU"

    @property
    @abstractmethod
    def planned_precision(self) -> str:
        """What `precision: auto` is planned to train in (its checkpoints' size)."""

    @property
    def partition(self) -> str | None:
        """The Slurm partition the pilot measured on (None off Slurm)."""
        return None

    @property
    @abstractmethod
    def probe_timeout_s(self) -> float:
        """How long `scaling pilot` waits for one probe's result."""

    @abstractmethod
    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        """A submitit executor for one pilot probe of `world_size` ranks."""


class SlurmTarget(CostTarget):
    executor_class = SlurmExecutor
    parallel_probes = True  # each job has its own nodes

    @property
    def slots_note(self) -> str:
        return f"at most {self.executor.slots} jobs at a time (slurm.array_parallelism)"

    @property
    def uses_gpus(self) -> bool:
        return self.study.spec.slurm.gpus_per_node > 0

    @property
    def planned_precision(self) -> str:
        return "bf16" if self.uses_gpus else "fp32"

    @property
    def partition(self) -> str | None:
        return self.study.spec.slurm.partition

    @property
    def probe_timeout_s(self) -> float:
        # queue wait included: the whole time limit, then some, for the last of them
        return 60.0 * self.study.spec.slurm.time_limit_min + 600.0

    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        import submitit  # lazy: only a pilot submits

        executor = submitit.SlurmExecutor(folder=folder / self.executor.name, max_num_timeout=0)
        params = slurm_parameters(self.study.spec, world_size)
        params.pop("array_parallelism", None)
        params["job_name"] = f"pilot-{self.study.name}"
        executor.update_parameters(**params)
        return executor


class LocalTarget(CostTarget):
    executor_class = LocalExecutor
    parallel_probes = False  # probes sharing this machine would time each other

    @property
    def slots_note(self) -> str:
        return f"{self.executor.slots} cell(s) at a time (local.max_parallel)"

    @property
    def uses_gpus(self) -> bool:
        """This machine shows an NVIDIA device to the study."""
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            return False
        return _NVIDIA_GPUS.is_dir() and any(_NVIDIA_GPUS.iterdir())

    @property
    def planned_precision(self) -> str:
        return "fp32"  # planned without asking CUDA (seconds to import torch)

    @property
    def probe_timeout_s(self) -> float:
        return 60.0 * self.study.spec.local.timeout_min

    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        import submitit  # lazy: only a pilot submits

        executor = submitit.LocalExecutor(folder=folder / self.executor.name, python=python)
        executor.update_parameters(
            tasks_per_node=world_size,
            timeout_min=self.study.spec.local.timeout_min,
            **local_gpus(world_size),
        )
        return executor


TARGETS: dict[type[Executor], type[CostTarget]] = {
    cls.executor_class: cls for cls in (LocalTarget, SlurmTarget)
}


def target_for(study: ResolvedStudy) -> CostTarget:
    """The study's cost target: the one that goes with its executor (`executor_for`)."""
    executor = executor_for(study)
    return TARGETS[type(executor)](study, executor)
