"""Executors: where a study's cells run, one class per backend (as submitit has them).

The round driver (`scaling.driver`) and the cost estimates hold an `Executor` and never ask
which backend it is. `SlurmExecutor.submit` returns once the cells are queued as job arrays;
`LocalExecutor.submit` runs them as local submitit jobs, at most `local.max_parallel` at once,
and returns when all have ended (`runs_cells_in_submit`). Both record each cell's job in the
study folder (`scaling.scheduler`), which is how `status` finds it. `executor_for(study)` is
the one place that reads `study.spec.executor`; a new backend is one new subclass.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from foundation import contract as C
from foundation.config import Problems
from scaling.grid import Cell
from scaling.mlflow_state import cell_runs, fail_cell_run, kill_cell_run
from scaling.resolved import ResolvedStudy
from scaling.resources import check_local_devices, check_slurm, check_slurm_gpus
from scaling.scheduler import (
    QUEUED,
    JobRecord,
    cancel_jobs,
    live_jobs,
    new_record,
    read_records,
    write_records,
)
from scaling.state import cell_state, submitit_folder
from scaling.study import Study
from scaling.warmstart import warm_python

__all__ = [
    "Executor",
    "LocalExecutor",
    "SlurmExecutor",
    "executor_for",
    "slurm_parameters",
    "local_gpus",
    "LOCAL_ROUND_S",
]

LOCAL_POLL_S = 0.25  # how soon a free slot gets its next cell
CANCEL_WAIT_S = 30.0  # how long an interrupted `submit` waits for its cancelled jobs to end
LOCAL_ROUND_S = 10.0  # a local round's warm server imports and half a status poll (scaling.wall)
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def _job(cell: Cell) -> Any:
    import jobs  # lazy: torch; the CLI's start-up path never trains

    return jobs.TrainingJob(cell.run)


class Executor(ABC):
    """Where a study's cells run: submit them, ask which are live, cancel them.

    Each cell's job is recorded in `records` (cell id → `JobRecord`, written to the study
    folder) as it is submitted; `poll` and `cancel` read those records.
    """

    name: ClassVar[str]  # the `executor` of the spec and of each JobRecord
    label: ClassVar[str]  # its name in a sentence ("Slurm job 12_3")
    runs_cells_in_submit: ClassVar[bool]  # `submit` returns when its cells have ended
    per_round_overhead_s: ClassVar[float]  # wall seconds a round costs besides its cells
    parallel_probes: ClassVar[bool]  # `scaling pilot` may run its probes at once

    def __init__(self, study: ResolvedStudy) -> None:
        self.study = study

    @property
    def log_folder(self) -> Path:
        """Where submitit writes this executor's job logs and pickles."""
        return submitit_folder(self.study) / self.name

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
    ) -> dict[str, JobRecord]:
        """Submit `cells` (an array); cell id → its job. `states`: cells not submitted now."""

    def poll(self, records: dict[str, JobRecord]) -> dict[str, str]:
        """cell id → scheduler state (PENDING, RUNNING, ...) of this executor's live jobs."""
        mine = {cid: r for cid, r in records.items() if r.executor == self.name}
        return live_jobs(mine, submitit_folder(self.study))

    def cancel(self, records: dict[str, JobRecord]) -> list[str]:
        """Cancel the live jobs among `records`; returns the cancelled cell ids."""
        mine = {cid: r for cid, r in records.items() if r.executor == self.name}
        return cancel_jobs(mine, submitit_folder(self.study))

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many cells run at once (an upper bound where a scheduler decides)."""

    @property
    @abstractmethod
    def slots_note(self) -> str:
        """`slots` in words, naming the spec field that sets it."""

    @property
    @abstractmethod
    def uses_gpus(self) -> bool:
        """The cells train on GPUs."""

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
        """The scheduler's partition the cells run in, if it has partitions."""
        return None

    @property
    @abstractmethod
    def probe_timeout_s(self) -> float:
        """How long `scaling pilot` waits for one probe's result."""

    @abstractmethod
    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        """A submitit executor for one pilot probe of `world_size` ranks."""

    @abstractmethod
    def check_environment(self) -> None:
        """Raise ConfigError unless the study's cells can run here (cluster, devices)."""


class SlurmExecutor(Executor):
    """Slurm job arrays through submitit; `submit` returns once they are queued."""

    name = "slurm"
    label = "Slurm"
    runs_cells_in_submit = False
    per_round_overhead_s = 0.0  # the queue wait is the cluster's, not counted
    parallel_probes = True  # each job has its own nodes

    @property
    def slots(self) -> int:
        return self.study.spec.slurm.array_parallelism

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

    def check_environment(self) -> None:
        check_slurm(self.study.spec.slurm.partition)
        if self.uses_gpus:
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
    ) -> dict[str, JobRecord]:
        """One job array per world size; then, per parent, its branches as an array that
        depends on the parent's own job (`afterok`, `--kill-on-invalid-dep=yes`: a failed
        parent ends its branches instead of leaving them pending forever)."""
        study = self.study
        submitted: dict[str, JobRecord] = {}
        by_world: dict[int, list[Cell]] = {}
        dependent: dict[str, list[Cell]] = {}
        for cell in cells:
            if cell.depends_on is None:
                by_world.setdefault(cell.world_size, []).append(cell)
            else:
                dependent.setdefault(cell.depends_on, []).append(cell)
        for world, group in sorted(by_world.items()):
            self._submit_array(group, records, submitted, slurm_parameters(study.spec, world))
        for parent, group in dependent.items():
            params = slurm_parameters(study.spec, group[0].world_size)
            job_id = _parent_job(parent, submitted, records, (states or {}).get(parent))
            if job_id is not None:
                params["additional_parameters"] = {
                    **params["additional_parameters"],
                    "dependency": f"afterok:{job_id}",
                    "kill_on_invalid_dep": "yes",
                }
            self._submit_array(group, records, submitted, params)
        return submitted

    def _submit_array(
        self,
        group: list[Cell],
        records: dict[str, JobRecord],
        submitted: dict[str, JobRecord],
        params: dict[str, Any],
    ) -> None:
        import submitit  # lazy: kept out of the CLI's start-up path

        # submitit fails a job after 3 time-outs by default; a cell longer than 3 time limits
        # is normal on a cluster, and each requeue resumes from the last checkpoint
        executor = submitit.SlurmExecutor(
            folder=self.log_folder, max_num_timeout=self.study.spec.slurm.max_timeouts
        )
        executor.update_parameters(**params)
        with executor.batch():
            handles = [executor.submit(_job(cell)) for cell in group]
        for cell, job in zip(group, handles, strict=True):
            records[cell.cell_id] = new_record(records, cell.cell_id, self.name, job.job_id)
            submitted[cell.cell_id] = records[cell.cell_id]
        write_records(self.study.folder, records)


def _parent_job(
    parent: str, submitted: dict[str, JobRecord], records: dict[str, JobRecord], state: str | None
) -> str | None:
    """The Slurm job a branch waits for: its parent's, if submitted now or still live."""
    if parent in submitted:
        return submitted[parent].job_id
    if state in C.ACTIVE_STATES and parent in records:
        return records[parent].job_id
    return None  # ended earlier: the branch starts at once (and checks its checkpoint itself)


class LocalExecutor(Executor):
    """Local submitit jobs, `local.max_parallel` at a time; `submit` returns when all ended.

    A cell with `depends_on` (a WSD branch) starts once that cell has ended completed or
    diverged (a branch whose checkpoint the divergence preceded still trains; one without it
    fails with the reason); if it failed or was cancelled, the branch is not started and its
    run ends FAILED with "parent <id> failed". The cells are forked from one warm process that
    has imported torch, megatron-core and mlflow (`scaling.warmstart`), each still its own
    submitit job.

    Interrupted (KeyboardInterrupt, or `stop` set from another thread), it starts nothing
    more, cancels the running jobs, waits for them and ends their runs KILLED, then raises
    KeyboardInterrupt; cells it never started keep their `queued-` records for the caller
    (`scaling.driver`) to restore.
    """

    name = "local"
    label = "local"
    runs_cells_in_submit = True
    per_round_overhead_s = LOCAL_ROUND_S
    parallel_probes = False  # probes sharing this machine would time each other

    @property
    def slots(self) -> int:
        return self.study.spec.local.max_parallel

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

    def check_environment(self) -> None:
        p = Problems()
        check_local_devices(self.study.spec, p)
        p.raise_if_any()

    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, JobRecord]:
        """Run `cells`; cell id → the job of each cell that ran (see the class)."""
        with warm_python(self.log_folder) as python:
            return _LocalRound(self, cells, records, say, states, python, stop).run()


class _LocalRound:
    """One `LocalExecutor.submit`: a queue, the running jobs, and the cells ended."""

    def __init__(
        self,
        executor: LocalExecutor,
        cells: list[Cell],
        records: dict[str, JobRecord],
        say: Callable[[str], None],
        states: dict[str, str] | None,
        python: str | None,
        stop: threading.Event | None,
    ) -> None:
        self.executor, self.study = executor, executor.study
        self.cells, self.records, self.say = cells, records, say
        self.python, self.stop = python, stop
        # longest first: the last cells of a round (which the next round waits for) are short
        self.queue = sorted(cells, key=_cost, reverse=True)
        self.running: dict[str, Any] = {}
        self.finished: dict[str, JobRecord] = {}
        self.ended = dict(states or {})  # cell id → state, for parents not running here

    def run(self) -> dict[str, JobRecord]:
        queued_id = f"{QUEUED}{os.getpid()}"
        for cell in self.queue:  # visible to `scaling status` from another shell as pending
            self.records[cell.cell_id] = new_record(
                self.records, cell.cell_id, self.executor.name, queued_id
            )
        write_records(self.study.folder, self.records)
        try:
            while self.queue or self.running:
                if self.stop is not None and self.stop.is_set():
                    raise KeyboardInterrupt
                self._drop_blocked()
                self._start_ready()
                time.sleep(LOCAL_POLL_S)
                self._collect_ended()
        except BaseException:
            _cancel_running(self.study, self.cells, self.running)
            raise
        return self.finished

    def _drop_blocked(self) -> None:
        for cell, reason in _blocked(self.study, self.queue, self.running, self.ended):
            self.queue.remove(cell)
            self.records.pop(cell.cell_id, None)  # no job: status reads the FAILED run
            write_records(self.study.folder, self.records)
            fail_cell_run(self.study, cell, reason)
            self.ended[cell.cell_id] = C.FAILED
            self.say(f"not started {cell.cell_id}: {reason}")

    def _start_ready(self) -> None:
        from scaling.local_executor import SessionLocalExecutor  # lazy: imports submitit

        max_parallel = self.study.spec.local.max_parallel
        while len(self.running) < max_parallel:
            cell = _next_ready(self.queue, self.running, self.ended)
            if cell is None:
                return
            self.queue.remove(cell)
            executor = SessionLocalExecutor(folder=self.executor.log_folder, python=self.python)
            threads = max(1, (os.cpu_count() or 1) // (max_parallel * cell.world_size))
            executor.update_parameters(
                tasks_per_node=cell.world_size,
                timeout_min=self.study.spec.local.timeout_min,
                **local_gpus(cell.world_size),
            )
            with _env(OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads))):
                job = executor.submit(_job(cell))  # the controller copies this environment
            self.running[cell.cell_id] = job
            self.records[cell.cell_id] = new_record(
                self.records, cell.cell_id, self.executor.name, job.job_id
            )
            write_records(self.study.folder, self.records)
            self.say(f"started {cell.cell_id} (pid {job.job_id})")

    def _collect_ended(self) -> None:
        for cid, job in list(self.running.items()):
            if job.done():
                del self.running[cid]
                self.finished[cid] = self.records[cid]
                self.ended[cid] = _job_state(job)
                self.say(f"ended {cid}: {job.state}")


def slurm_parameters(study: Study, world_size: int) -> dict[str, Any]:
    """sbatch options of a job of `world_size` processes: whole nodes, one task per GPU."""
    slurm = study.slurm
    if slurm.gpus_per_node > 0:
        nodes = max(1, world_size // slurm.gpus_per_node)
        tasks = world_size // nodes
    else:
        nodes, tasks = 1, world_size
    params: dict[str, Any] = {
        "job_name": f"scaling-{study.name}",
        "time": slurm.time_limit_min,
        "nodes": nodes,
        "ntasks_per_node": tasks,
        "cpus_per_task": slurm.cpus_per_task,
        "array_parallelism": slurm.array_parallelism,
        # sbatch's working directory: nothing a job writes lands where `submit` was run
        "additional_parameters": {"chdir": str(study.folder), **slurm.additional},
    }
    if slurm.gpus_per_node > 0:
        params["gpus_per_node"] = tasks
    optional = {
        "partition": slurm.partition,
        "account": slurm.account,
        "qos": slurm.qos,
        "constraint": slurm.constraint,
        "mem": f"{slurm.mem_gb:g}GB" if slurm.mem_gb else None,
        "setup": _thread_setup(slurm.cpus_per_task)
        + _python_path_setup(study.python_path)
        + list(slurm.setup),
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return params


def _thread_setup(threads: int) -> list[str]:
    """Shell lines that cap each task's CPU threads at its share of cores.

    Without cgroups nothing stops every rank from spawning one thread per core of the node;
    ranks that oversubscribe cores run several times slower. A value the user exported wins.
    """
    return [f'export OMP_NUM_THREADS="${{OMP_NUM_THREADS:-{threads}}}"']


def _python_path_setup(folders: str | list[str]) -> list[str]:
    """The study's `python_path` (absolute once loaded) first on each job's PYTHONPATH."""
    folders = [folders] if isinstance(folders, str) else list(folders)
    if not folders:
        return []
    joined = shlex.quote(os.pathsep.join(folders))
    return [f'export PYTHONPATH={joined}"${{PYTHONPATH:+:$PYTHONPATH}}"']


@contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def local_gpus(world_size: int) -> dict[str, Any]:
    """submitit's GPU request for a local job: the machine's GPUs, up to one per rank.

    Without it submitit's local executor sets `CUDA_VISIBLE_DEVICES=""` and a study on a GPU
    machine trains on the CPU. The count honours a `CUDA_VISIBLE_DEVICES` the user set, else
    the driver's device list (no CUDA is initialised here); ranks beyond it share devices
    (`models.runtime` picks `local rank % visible devices`).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        driver = Path("/proc/driver/nvidia/gpus")
        count = len(list(driver.iterdir())) if driver.is_dir() else 0
        return {"gpus_per_node": min(count, world_size)} if count else {}
    devices = [d.strip() for d in visible.split(",") if d.strip()]
    if not devices:
        return {}
    params = {"gpus_per_node": min(len(devices), world_size)}
    if all(d.isdigit() for d in devices):  # submitit would otherwise renumber them from 0
        params["visible_gpus"] = tuple(int(d) for d in devices)
    return params


def _cancel_running(study: ResolvedStudy, cells: list[Cell], running: dict[str, Any]) -> None:
    """Cancel the running jobs, wait (bounded) for them to end, and end their runs KILLED, so
    the cells read `cancelled` (resubmitted, not counted as failures) and not `failed`."""
    for job in running.values():
        job.cancel()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline and not all(job.done() for job in running.values()):
        time.sleep(LOCAL_POLL_S)
    by_id = {cell.cell_id: cell for cell in cells}
    for cid in running:
        try:
            kill_cell_run(study, by_id[cid])
        except Exception:  # noqa: BLE001, S110 - MLflow down: `status` shows it failed instead
            pass


def _cost(cell: Cell) -> float:
    """A cell's training FLOPs, to order the queue (sorted() keeps the grid order on ties)."""
    from models.accounting import flops_per_token  # lazy: torch, imported by a run only

    train = cell.run.train
    return float(flops_per_token(cell.run.model)) * train.steps * train.global_batch_tokens


def _job_state(job: Any) -> str:
    """completed / diverged from the job's RunResult; failed if it raised or died."""
    try:
        status = job.results()[0].status
    except Exception:  # noqa: BLE001 - any failure of the job is the cell's failure
        return C.FAILED
    return status if status in C.DONE_STATES else C.FAILED


def _next_ready(queue: list[Cell], running: dict[str, Any], ended: dict[str, str]) -> Cell | None:
    """The first queued cell whose parent (if any) has ended with a result."""
    for cell in queue:
        if cell.depends_on is None or ended.get(cell.depends_on) in C.DONE_STATES:
            if cell.depends_on is None or cell.depends_on not in running:
                return cell
    return None


def _blocked(
    study: ResolvedStudy, queue: list[Cell], running: dict[str, Any], ended: dict[str, str]
) -> list[tuple[Cell, str]]:
    """Queued cells whose parent ended without a result (failed, cancelled): never startable.

    A parent neither queued here nor ended is live in another submit: its state is re-read.
    """
    waiting = {c.cell_id for c in queue} | set(running)
    out = []
    for cell in queue:
        parent = cell.depends_on
        if parent is None or parent in waiting:
            continue
        state = ended.get(parent)
        if state in C.ACTIVE_STATES or state is None:
            state = ended[parent] = _current_state(study, parent)
        if state in (C.FAILED, C.CANCELLED, C.PENDING):
            out.append((cell, f"parent {parent} {state}"))
    return out


def _current_state(study: ResolvedStudy, cell_id: str) -> str:
    live = live_jobs(read_records(study.folder), submitit_folder(study))
    return cell_state(cell_runs(study).get(cell_id), live.get(cell_id))


EXECUTORS: dict[str, type[Executor]] = {cls.name: cls for cls in (LocalExecutor, SlurmExecutor)}


def executor_for(study: ResolvedStudy) -> Executor:
    """The study's executor: the one place that reads `study.spec.executor`."""
    return EXECUTORS[study.spec.executor](study)
