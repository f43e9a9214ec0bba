"""Submit, watch and cancel a study: submitit job arrays on Slurm, or bounded local processes.

`submit_study` is idempotent. Each cell's state is read from MLflow and the scheduler first:
finished and diverged cells are skipped, pending and running ones left alone, and only new or
failed cells are (re)submitted, reusing their MLflow run and output dir (so a retried cell
resumes from its newest checkpoint and stays one run). One submit per study at a time (a lock
file in the study folder).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.config import from_dict
from scaling.cells import Cell, expand_cells
from scaling.loader import vocab_size
from scaling.mlflow_state import (
    CellRun,
    cell_runs,
    client_for,
    ensure_cell_run,
    ensure_parent_run,
    experiment_id,
    find_parent_run,
)
from scaling.scheduler import QUEUED, JobRecord, cancel_jobs, live_jobs, read_records, write_records
from scaling.study import Study

__all__ = [
    "StatusRow",
    "Submitted",
    "cell_state",
    "study_status",
    "submit_study",
    "wait_study",
    "cancel_study",
    "study_parent_run_id",
    "prepare_data",
    "DONE_STATES",
]

DONE_STATES = ("finished", "diverged")
ACTIVE_STATES = ("pending", "running")
_PENDING_SLURM = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SUSPENDED",
    "STOPPED",
}
LOCAL_POLL_S = 1.0


@dataclass(frozen=True)
class StatusRow:
    """One cell as `scaling status` shows it."""

    cell_id: str
    size: str
    variant: str
    seed: int
    lr: float
    state: str  # unsubmitted | pending | running | finished | diverged | failed
    val_loss: float | None
    job_id: str | None
    run_id: str | None


@dataclass(frozen=True)
class Submitted:
    """What one `submit_study` call did."""

    parent_run_id: str
    submitted: list[str]  # cell ids (re)submitted now
    skipped: dict[str, str]  # cell id → the state that made it skip (finished, running, ...)
    jobs: dict[str, Any]  # cell id → submitit Job


def cell_state(run: CellRun | None, live: str | None) -> str:
    """One state from what MLflow (`run`) and the scheduler (`live`) say about a cell."""
    if run is not None and run.status == "FINISHED":
        return "diverged" if run.outcome == "diverged" else "finished"
    if live is not None:
        return "pending" if live in _PENDING_SLURM else "running"
    if run is None:
        return "unsubmitted"
    # A run that is not finished and has no live job: it failed, was cancelled, or its job died.
    return "failed"


def study_parent_run_id(study: Study) -> str | None:
    """The MLflow run id of the study's parent run (None before the first submit)."""
    return find_parent_run(study)


def prepare_data(study: Study) -> None:
    """Prepare the study's dataset if the spec gives `data.prepare` and it is not there yet."""
    from data_prep.config import DataPrepConfig
    from data_prep.manifest import MANIFEST_NAME

    if study.data.prepare is None or (study.dataset_path / MANIFEST_NAME).is_file():
        return
    from data_prep import prepare

    prepare(from_dict(DataPrepConfig, study.data.prepare, "study.data.prepare"))


def _cells(study: Study, parent_run_id: str | None = None) -> list[Cell]:
    return expand_cells(study, vocab_size(study), parent_run_id)


def _submitit_folder(study: Study) -> Path:
    return study.folder / "submitit"


def study_status(study: Study) -> list[StatusRow]:
    """The grid's state, from MLflow (results) and the scheduler (live jobs); bounded in time."""
    cells = _cells(study)
    runs = cell_runs(study)
    records = read_records(study.folder)
    live = live_jobs(records, _submitit_folder(study))
    rows = []
    for cell in cells:
        run = runs.get(cell.cell_id)
        record = records.get(cell.cell_id)
        val = None
        if run is not None:
            val = run.final_val_loss if run.final_val_loss is not None else run.last_val_loss
        rows.append(
            StatusRow(
                cell_id=cell.cell_id,
                size=cell.size,
                variant=cell.variant,
                seed=cell.seed,
                lr=cell.lr,
                state=cell_state(run, live.get(cell.cell_id)),
                val_loss=val,
                job_id=record.job_id if record else None,
                run_id=run.run_id if run else None,
            )
        )
    return rows


@contextmanager
def _submit_lock(study: Study) -> Iterator[None]:
    study.folder.mkdir(parents=True, exist_ok=True)
    with open(study.folder / ".submit.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{study.folder}: another `scaling submit` of study {study.name} is running; "
                "wait for it (or check `scaling status`)"
            ) from None
        yield


def submit_study(study: Study, on_progress: Callable[[str], None] | None = None) -> Submitted:
    """Submit every cell that is new or failed; skip finished, pending and running ones.

    Slurm: one job array per world size, returns once submitted. Local: runs the cells as
    subprocesses, at most `local.max_parallel` at once, and returns when all have ended.
    """
    say = on_progress or (lambda _msg: None)
    prepare_data(study)
    with _submit_lock(study):
        client = client_for(study)
        runs = cell_runs(study, client)
        _check_unchanged(study, _cells(study), runs)
        parent = ensure_parent_run(study, client)  # before any child: each one points at it
        exp_id = experiment_id(client, study.mlflow.experiment)
        cells = _cells(study, parent)
        records = read_records(study.folder)
        live = live_jobs(records, _submitit_folder(study))
        todo, skipped = [], {}
        for cell in cells:
            state = cell_state(runs.get(cell.cell_id), live.get(cell.cell_id))
            if state in ("unsubmitted", "failed"):
                todo.append(cell)
            else:
                skipped[cell.cell_id] = state
        for cell in todo:
            ensure_cell_run(client, exp_id, parent, cell, runs.get(cell.cell_id))
        say(f"{len(todo)} cell(s) to submit, {len(skipped)} skipped")
        if study.executor == "slurm":
            jobs = _submit_slurm(study, todo, records)
        else:
            jobs = _run_local(study, todo, records, say)
        return Submitted(parent, [c.cell_id for c in todo], skipped, jobs)


def _check_unchanged(study: Study, cells: list[Cell], runs: dict[str, CellRun]) -> None:
    """Refuse to mix recipes: a cell's existing run must train the same resolved run config."""
    changed = [
        c.cell_id
        for c in cells
        if c.cell_id in runs and runs[c.cell_id].config_hash not in (None, c.config_hash)
    ]
    if changed:
        raise ValueError(
            f"study {study.name}: {len(changed)} cell(s) already have MLflow runs trained with a "
            f"different run config ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})"
            "; the spec's recipe changed since they were submitted. Restore it, or give the "
            "study a new name (or mlflow.experiment) to start a separate grid"
        )


def _job(cell: Cell) -> Any:
    import jobs

    return jobs.TrainingJob(cell.run)


def _slurm_parameters(study: Study, world_size: int) -> dict[str, Any]:
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
        "setup": _thread_setup(slurm.cpus_per_task) + list(slurm.setup),
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return params


def _thread_setup(threads: int) -> list[str]:
    """Shell lines that cap each task's CPU threads at its share of cores.

    Without cgroups nothing stops every rank from spawning one thread per core of the node;
    ranks that oversubscribe cores run several times slower. A value the user exported wins.
    """
    return [f'export OMP_NUM_THREADS="${{OMP_NUM_THREADS:-{threads}}}"']


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


def _submit_slurm(study: Study, cells: list[Cell], records: dict[str, JobRecord]) -> dict[str, Any]:
    import submitit

    submitted: dict[str, Any] = {}
    by_world: dict[int, list[Cell]] = {}
    for cell in cells:
        by_world.setdefault(cell.world_size, []).append(cell)
    for world, group in sorted(by_world.items()):
        executor = submitit.SlurmExecutor(folder=_submitit_folder(study) / "slurm")
        executor.update_parameters(**_slurm_parameters(study, world))
        with executor.batch():
            handles = [executor.submit(_job(cell)) for cell in group]
        now = time.time()
        for cell, job in zip(group, handles, strict=True):
            submitted[cell.cell_id] = job
            records[cell.cell_id] = JobRecord(cell.cell_id, "slurm", job.job_id, now)
        write_records(study.folder, records)
    return submitted


def _run_local(
    study: Study, cells: list[Cell], records: dict[str, JobRecord], say: Callable[[str], None]
) -> dict[str, Any]:
    """Run cells as local submitit jobs, `max_parallel` at a time; return when all ended."""
    import submitit

    folder = _submitit_folder(study) / "local"
    queue = list(cells)
    running: dict[str, Any] = {}
    finished: dict[str, Any] = {}
    queued_id = f"{QUEUED}{os.getpid()}"
    for cell in queue:  # visible to `scaling status` from another shell as pending
        records[cell.cell_id] = JobRecord(cell.cell_id, "local", queued_id, time.time())
    write_records(study.folder, records)
    try:
        while queue or running:
            while queue and len(running) < study.local.max_parallel:
                cell = queue.pop(0)
                executor = submitit.LocalExecutor(folder=folder)
                threads = max(
                    1, (os.cpu_count() or 1) // (study.local.max_parallel * cell.world_size)
                )
                executor.update_parameters(
                    tasks_per_node=cell.world_size, timeout_min=study.local.timeout_min
                )
                with _env(OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads))):
                    job = executor.submit(_job(cell))  # the controller copies this environment
                running[cell.cell_id] = job
                records[cell.cell_id] = JobRecord(cell.cell_id, "local", job.job_id, time.time())
                write_records(study.folder, records)
                say(f"started {cell.cell_id} (pid {job.job_id})")
            time.sleep(LOCAL_POLL_S)
            for cid, job in list(running.items()):
                if job.done():
                    finished[cid] = running.pop(cid)
                    say(f"ended {cid}: {job.state}")
    except BaseException:
        for job in running.values():
            job.cancel()
        raise
    return finished


def wait_study(
    study: Study,
    callback: Callable[[list[StatusRow]], None] | None = None,
    poll_s: float = 10.0,
    timeout_s: float | None = None,
) -> list[StatusRow]:
    """Poll `study_status` until no cell is pending or running; TimeoutError after timeout_s."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        rows = study_status(study)
        if callback is not None:
            callback(rows)
        if not any(r.state in ACTIVE_STATES for r in rows):
            return rows
        if deadline is not None and time.monotonic() > deadline:
            active = [r.cell_id for r in rows if r.state in ACTIVE_STATES]
            raise TimeoutError(f"study {study.name}: still active after {timeout_s} s: {active}")
        time.sleep(poll_s)


def cancel_study(study: Study) -> list[str]:
    """Cancel the study's live jobs and mark their MLflow runs KILLED; returns their cell ids."""
    records = read_records(study.folder)
    cancelled = cancel_jobs(records, _submitit_folder(study))
    runs = cell_runs(study)
    client = client_for(study)
    for cid in cancelled:
        run = runs.get(cid)
        if run is not None and run.status in ("SCHEDULED", "RUNNING"):
            client.set_terminated(run.run_id, "KILLED")
    return cancelled
