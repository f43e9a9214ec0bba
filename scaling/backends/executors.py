"""Executors: where a study's cells run, one class per backend (as submitit has them).

A backend is its class: submitting, polling, cancelling, its logs, what the plan and the pilot
price it as (device, precision, probes), and what it can do (`runs_cells_in_submit`,
`measures_inference_here`). Callers (the round driver, `scaling.costs`, `scaling run`'s
analysis, `scaling plan`) hold an `Executor` and never ask which backend it is.
`SlurmExecutor.submit` returns once the cells are queued as job arrays; `LocalExecutor.submit`
runs them as local submitit jobs, at most `local.max_parallel` at once, and returns when all
have ended. Both record each cell's job in the study folder (`scaling.state.files.job_records`),
which is how `status` finds it: its scheduler-facing half (which jobs are live, stopping them,
their error logs) is the base each executor extends, `scaling.state.scheduler.JobBackend`,
whose `named` is the one lookup from a backend's name to its class. A new backend is one new
subclass here (with its `JobBackend` half).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from foundation import contract
from foundation.config import ConfigError, Problems, seconds_from_env
from scaling.backends.local_jobs import LocalRound, local_gpus, visible_gpu_indices
from scaling.backends.slurm_jobs import slurm_parameters
from scaling.backends.slurm_limits import SlurmLimits, num_arrays, read_limits
from scaling.backends.slurm_submit import ArraySubmitter, Group
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.spec.resources import check_local_devices, check_slurm, check_slurm_gpus
from scaling.state.files.job_records import JobRecord, read_records
from scaling.state.scheduler import JobBackend, LocalJobs, SlurmJobs, cancel_jobs
from scaling.state.status import submitit_folder
from scaling.warmstart.server import warm_python

__all__ = [
    "Executor",
    "LocalExecutor",
    "SlurmExecutor",
    "executor_for",
    "slurm_parameters",
    "local_gpus",
    "LOCAL_ROUND_S",
]

# a local round's warm-server imports and half a status poll (`scaling.costs.wall`)
LOCAL_ROUND_S = 10.0
POLL_ENV = "SCALING_POLL_S"  # seconds between a driver's status polls (the test suite: 1)
LOCAL_POLL_S = 5.0
SLURM_POLL_S = 60.0  # sites ask scripts to poll slurmctld at most about once a minute
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def check_no_oversubscription(spec: Any, num_devices: int, p: Problems) -> None:
    """On a machine with GPUs every rank of a cell gets its own, whatever the precision: two
    ranks on one device fail at NCCL's first collective ("duplicate GPU")."""
    if num_devices == 0:
        return
    for size in spec.sizes:
        world = spec.parallel_for(size).world_size
        if world > num_devices:
            p.add(
                f"study.parallel: size {size} needs {world} GPUs (TP x PP x DP) and this "
                f"machine shows {num_devices} (CUDA_VISIBLE_DEVICES); lower data_parallel or "
                "run it on Slurm"
            )


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


class SlurmExecutor(Executor, SlurmJobs):
    """Slurm job arrays through submitit; `submit` returns once they are queued."""

    name = "slurm"
    runs_cells_in_submit = False
    parallel_probes = True  # each job has its own nodes
    per_round_overhead_s = 0.0  # the queue wait is the cluster's, not counted
    default_poll_s = SLURM_POLL_S

    def __init__(self, study: ResolvedStudy) -> None:
        super().__init__(study)
        self._limits: SlurmLimits | None = None
        self.last_submitter: ArraySubmitter | None = None  # the latest submit's, for tests

    @property
    def slots(self) -> int:
        return self.study.spec.slurm.array_parallelism

    def check_environment(self) -> None:
        check_slurm(self.study.spec.slurm.partition)
        if self.study.spec.slurm.gpus_per_node > 0:
            p = Problems()
            check_slurm_gpus(self.study.spec, p)
            p.raise_if_any()

    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """One job array per world size; then, per parent, its branches as an array that
        depends on the parent's own job (`afterok`, `--kill-on-invalid-dep=yes`: a failed
        parent ends its branches instead of leaving them pending forever).

        Within the cluster's limits (`limits`): an array holds at most `MaxArraySize` cells,
        and at most the cap of the user's jobs are queued at once; the rest wait in this call,
        which returns once every cell is queued (`scaling.backends.slurm_submit`)."""
        self.check_submit()  # a cap of 0 would keep the cells waiting here for ever
        study = self.study
        submitted: dict[str, Any] = {}
        by_world: dict[int, list[Cell]] = {}
        dependent: dict[str, list[Cell]] = {}
        for cell in cells:
            if cell.depends_on is None:
                by_world.setdefault(cell.world_size, []).append(cell)
            else:
                dependent.setdefault(cell.depends_on, []).append(cell)
        groups = [
            Group(group, lambda world=world: slurm_parameters(study.spec, world))
            for world, group in sorted(by_world.items())
        ]
        for parent, group in dependent.items():
            state = (states or {}).get(parent)
            params = partial(self._branch_params, parent, group, submitted, records, state)
            groups.append(Group(group, params, parent))
        where = (study.folder, self.name, self.limits, self._submit_array)
        submitter = ArraySubmitter(*where, self.poll_interval(), say, stop)
        submitter.run(groups, records, submitted)
        self.last_submitter = submitter
        return submitted

    def check_submit(self) -> None:
        refusal = self.limits.refusal()  # `MaxSubmitJobs 0`: waiting never makes room
        if refusal is not None:
            raise ConfigError(refusal)

    @property
    def limits(self) -> SlurmLimits:
        """The cluster's limits on this user's submissions, read once per executor."""
        if self._limits is None:
            slurm = self.study.spec.slurm
            self._limits = read_limits(slurm.max_submitted, slurm.qos, slurm.account)
        return self._limits

    @property
    def slots_note(self) -> str:
        return f"at most {self.slots} jobs at a time (slurm.array_parallelism)"

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

        executor = submitit.SlurmExecutor(folder=folder / self.name, max_num_timeout=0)
        params = slurm_parameters(self.study.spec, world_size)
        params.pop("array_parallelism", None)
        params["job_name"] = f"pilot-{self.study.name}"
        executor.update_parameters(**params)
        return executor

    def plan_note(self, ask_scheduler: bool) -> str | None:
        """How many sbatch arrays the first round becomes under the cluster's limits (read from
        Slurm unless offline), and how many of its cells wait for room."""
        slurm = self.study.spec.slurm
        if ask_scheduler:
            limits = self.limits
        else:
            cap = slurm.max_submitted
            limits = SlurmLimits(cap=cap, cap_reason=f"slurm.max_submitted {cap}", accounting=True)
        groups: dict[object, int] = {}
        for cell in self.study.cells:
            key = cell.world_size if cell.depends_on is None else cell.depends_on
            groups[key] = groups.get(key, 0) + 1
        cells = len(self.study.cells)
        arrays = num_arrays(list(groups.values()), limits)
        line = (
            f"Slurm: the first round's {cells} cells become {arrays} job array(s) "
            f"({limits.describe()}"
        )
        line += ")" if ask_scheduler else "; offline: the cluster's limits not read)"
        if limits.refusal() is not None:  # what `submit` refuses with
            line += f"; `scaling submit` refuses: {limits.refusal()}"
        elif limits.cap is not None and cells > limits.cap:
            line += (
                f"; {cells - limits.cap} wait in `scaling submit` and are queued as jobs leave "
                "the queue"
            )
        return line

    def _branch_params(
        self,
        parent: str,
        group: list[Cell],
        submitted: dict[str, Any],
        records: dict[str, JobRecord],
        state: str | None,
    ) -> dict[str, Any]:
        params = slurm_parameters(self.study.spec, group[0].world_size)
        job_id = _parent_job(parent, submitted, records, state)
        if job_id is not None:
            params["additional_parameters"] = {
                **params["additional_parameters"],
                "dependency": f"afterok:{job_id}",
                "kill_on_invalid_dep": "yes",
            }
        return params

    def _submit_array(self, group: list[Cell], params: dict[str, Any]) -> list[Any]:
        """Queue `group` as one job array (one job if alone); its submitit jobs."""
        import submitit  # lazy: kept out of the CLI's start-up path

        # submitit fails a job after 3 time-outs by default; a cell longer than 3 time limits
        # is normal on a cluster, and each requeue resumes from the last checkpoint
        executor = submitit.SlurmExecutor(
            folder=self.log_folder, max_num_timeout=self.study.spec.slurm.max_timeouts
        )
        executor.update_parameters(**params)
        with executor.batch():
            handles = [executor.submit(_job(cell)) for cell in group]
        return handles


def _parent_job(
    parent: str, submitted: dict[str, Any], records: dict[str, JobRecord], state: str | None
) -> str | None:
    """The Slurm job a branch waits for: its parent's, if submitted now or still live."""
    if parent in submitted:
        return submitted[parent].job_id
    if state in contract.ACTIVE_STATES and parent in records:
        return records[parent].job_id
    return None  # ended earlier: the branch starts at once (and checks its checkpoint itself)


class LocalExecutor(Executor, LocalJobs):
    """Local submitit jobs, `local.max_parallel` at a time; `submit` returns when all ended.

    A cell with `depends_on` (a WSD branch) starts once that cell has ended completed or
    diverged (a branch whose checkpoint the divergence preceded still trains; one without it
    fails with the reason); if it failed or was cancelled, the branch is not started and its
    run ends FAILED with "parent <id> failed". The cells are forked from one warm process that
    has imported torch, megatron-core and mlflow (`scaling.warmstart.server`), each still its own
    submitit job.

    Interrupted (KeyboardInterrupt, or `stop` set from another thread), it starts nothing
    more, cancels the running jobs, waits for them and ends their runs KILLED, then raises
    KeyboardInterrupt; cells it never started keep their `queued-` records for the caller
    (`scaling.driver.round_driver`) to restore.
    """

    name = "local"
    runs_cells_in_submit = True
    per_round_overhead_s = LOCAL_ROUND_S
    measures_inference_here = True  # its cells' device is this machine's
    parallel_probes = False  # probes sharing this machine would time each other

    @property
    def slots(self) -> int:
        return self.study.spec.local.max_parallel

    def check_environment(self) -> None:
        p = Problems()
        check_local_devices(self.study.spec, p)
        if self.study.spec.precision != "bf16":  # bf16: check_local_devices counted them
            check_no_oversubscription(self.study.spec, len(visible_gpu_indices()), p)
        p.raise_if_any()

    @property
    def slots_note(self) -> str:
        return f"{self.slots} cell(s) at a time (local.max_parallel)"

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

        executor = submitit.LocalExecutor(folder=folder / self.name, python=python)
        executor.update_parameters(
            tasks_per_node=world_size,
            timeout_min=self.study.spec.local.timeout_min,
            **local_gpus(world_size),
        )
        return executor

    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Run `cells`; cell id → the submitit job of each cell that ran (see the class)."""
        with warm_python(self.log_folder) as python:
            job = _job  # looked up at each call: tests replace it
            where = (self.study, self.name, self.log_folder, job)
            return LocalRound(*where, cells, records, say, states, python, stop).run()


def executor_for(study: ResolvedStudy) -> Executor:
    """The study's executor: its class is the backend its spec's `executor` names
    (`JobBackend.named`, the one lookup by name)."""
    cls = JobBackend.named(study.spec.executor)
    assert issubclass(cls, Executor), f"{cls.__name__} has no executor half"
    return cls(study)
