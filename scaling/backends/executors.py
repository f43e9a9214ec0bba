"""Executors: where a study's cells run, one class per backend (as submitit has them).

A backend is its class: submitting, polling, cancelling, its logs, what the plan and the pilot
price it as (device, precision, probes), and what it can do (`runs_cells_in_submit`,
`measures_inference_here`). Callers (the round driver, `scaling.costs`, `scaling run`'s
analysis, `scaling plan`) hold an `Executor` and never ask which backend it is.
`SlurmExecutor.submit` (`scaling.backends.slurm`) returns once the cells are queued as job
arrays; `LocalExecutor.submit` (`scaling.backends.local`) runs them as local submitit jobs, at
most `local.max_parallel` at once, and returns when all have ended. Both record each cell's job
in the study folder (`scaling.state.files.job_records`), which is how `status` finds it: its
scheduler-facing half (which jobs are live, stopping them, their error logs) is the base each
executor extends, `scaling.backends.base.JobBackend`. A new backend is one new package beside
those two and one line of `scaling.backends.base.BACKENDS`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from foundation.config import seconds_from_env
from scaling.backends.base import JobBackend, backend_class, cancel_jobs
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.job_records import JobRecord, read_records
from scaling.state.status import submitit_folder

__all__ = ["Executor", "executor_for", "POLL_ENV", "LOCAL_POLL_S"]

POLL_ENV = "SCALING_POLL_S"  # seconds between a driver's status polls (the test suite: 1)
LOCAL_POLL_S = 5.0


def _job(cell: Cell) -> Any:
    import jobs  # lazy: torch; the CLI's start-up path never trains

    return jobs.TrainingJob(cell.run)


class Executor(JobBackend, ABC):
    """Where a study's cells run: submit them, ask which are live, cancel them; and what the plan
    and the pilot price them as there.

    Each cell's job is recorded in `records` (cell id → `JobRecord`, written to the study
    folder) as it is submitted; `poll` and `cancel` read those records.
    """

    # seconds between status polls unless `SCALING_POLL_S` says otherwise: a site's slurmctld
    # answers every user, so a driver asks it once a minute; local polls cost nothing
    default_poll_s: ClassVar[float] = LOCAL_POLL_S
    runs_cells_in_submit: ClassVar[bool]  # `submit` returns when its cells have ended
    per_round_overhead_s: ClassVar[float]  # wall seconds a round costs besides its cells
    # its cells run on this machine, so `scaling run` may measure inference cost here
    # (`scaling.inference_cost.inference_study`); elsewhere `scaling pilot` measures it
    measures_inference_here: ClassVar[bool] = False
    parallel_probes: ClassVar[bool]  # `scaling pilot` may run its probes at once

    def __init__(self, study: ResolvedStudy) -> None:
        self.study = study

    def poll_interval(self) -> float:
        """Seconds between status polls: `SCALING_POLL_S`, else `default_poll_s`."""
        return seconds_from_env(
            POLL_ENV, self.default_poll_s, "the wait between status polls", positive=True
        )

    def job(self, cell: Cell) -> Any:
        """What a cell's submitit job calls: its training run (`_job`, looked up at each call:
        tests replace it)."""
        return _job(cell)

    @property
    def log_folder(self) -> Path:
        """Where submitit writes this executor's job logs and pickles."""
        return self.log_folder_in(submitit_folder(self.study))

    def log_path(self, record: JobRecord) -> Path:
        """The log of rank 0 of `record`'s job (submitit's `<job id>_0_log.out`)."""
        return self.log_folder / f"{record.job_id}_0_log.out"

    @abstractmethod
    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Submit `cells` (an array); cell id → its submitit job (its `JobRecord` is written
        to `records` and the study folder). `states`: cells not submitted now."""

    def poll(self, records: dict[str, JobRecord]) -> dict[str, str]:
        """cell id → scheduler state (PENDING, RUNNING, ...) of this executor's live jobs."""
        mine = {cid: r for cid, r in records.items() if r.executor == self.name}
        return self.live(mine, submitit_folder(self.study))

    def cancel(self, records: dict[str, JobRecord]) -> list[str]:
        """Cancel the live jobs among `records`; returns the cancelled cell ids."""
        mine = {cid: r for cid, r in records.items() if r.executor == self.name}
        folder = self.study.folder  # the records as its driver leaves them (`cancel_jobs`)
        return cancel_jobs(mine, submitit_folder(self.study), reread=lambda: read_records(folder))

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many cells run at once (an upper bound where a scheduler decides)."""

    @abstractmethod
    def check_environment(self) -> None:
        """Raise ConfigError unless the study's cells can run here (cluster, devices)."""

    def check_submit(self) -> None:
        """Raise ConfigError when no cell could ever be submitted here (asked before a
        submission writes or queues anything; `status` and `cancel` never ask it)."""

    # what the plan and the pilot price the study's cells as here (`scaling.costs`)

    @property
    @abstractmethod
    def slots_note(self) -> str:
        """`slots` in words, with the setting that sets it."""

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

    def plan_note(self, ask_scheduler: bool) -> str | None:
        """A line `scaling plan` adds about how this backend takes the first round (None: no
        line). `ask_scheduler`: read the scheduler's limits (False: offline)."""
        return None


def executor_for(study: ResolvedStudy) -> Executor:
    """The study's executor: its class is the backend its spec's `executor` names
    (`scaling.backends.base.BACKENDS`, the one lookup by name)."""
    cls = backend_class(study.spec.executor)
    assert issubclass(cls, Executor), f"{cls.__name__} has no executor half"
    return cls(study)
