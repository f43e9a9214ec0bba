"""Executors: the cells of a submission as Slurm job arrays, or as bounded local processes.

`submit_slurm` returns once the arrays are queued; `run_local` runs the cells as local submitit
jobs, at most `local.max_parallel` at once, and returns when all have ended. Both record each
cell's job in the study folder (`scaling.scheduler`), which is how `status` finds it.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from foundation import contract as C
from scaling.grid import Cell
from scaling.mlflow_state import fail_cell_run, kill_cell_run
from scaling.resolved import ResolvedStudy
from scaling.scheduler import QUEUED, JobRecord, new_record, write_records
from scaling.state import submitit_folder
from scaling.study import Study
from scaling.warmstart import warm_python

__all__ = ["slurm_parameters", "submit_slurm", "run_local"]

LOCAL_POLL_S = 0.25  # how soon a free slot gets its next cell
CANCEL_WAIT_S = 30.0  # how long an interrupted `submit` waits for its cancelled jobs to end


def _job(cell: Cell) -> Any:
    import jobs

    return jobs.TrainingJob(cell.run)


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


def submit_slurm(
    study: ResolvedStudy,
    cells: list[Cell],
    records: dict[str, JobRecord],
    states: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One job array per world size; then, per parent, its branches as an array that depends
    on the parent's own job (`afterok`, `--kill-on-invalid-dep=yes`: a failed parent ends its
    branches instead of leaving them pending forever). `states`: cells not submitted now."""
    submitted: dict[str, Any] = {}
    by_world: dict[int, list[Cell]] = {}
    dependent: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.depends_on is None:
            by_world.setdefault(cell.world_size, []).append(cell)
        else:
            dependent.setdefault(cell.depends_on, []).append(cell)
    for world, group in sorted(by_world.items()):
        _submit_array(study, group, records, submitted, slurm_parameters(study.spec, world))
    for parent, group in dependent.items():
        params = slurm_parameters(study.spec, group[0].world_size)
        job_id = _parent_job(parent, submitted, records, (states or {}).get(parent))
        if job_id is not None:
            params["additional_parameters"] = {
                **params["additional_parameters"],
                "dependency": f"afterok:{job_id}",
                "kill_on_invalid_dep": "yes",
            }
        _submit_array(study, group, records, submitted, params)
    return submitted


def _parent_job(
    parent: str, submitted: dict[str, Any], records: dict[str, JobRecord], state: str | None
) -> str | None:
    """The Slurm job a branch waits for: its parent's, if submitted now or still live."""
    if parent in submitted:
        return submitted[parent].job_id
    if state in C.ACTIVE_STATES and parent in records:
        return records[parent].job_id
    return None  # ended earlier: the branch starts at once (and checks its checkpoint itself)


def _submit_array(
    study: ResolvedStudy,
    group: list[Cell],
    records: dict[str, JobRecord],
    submitted: dict[str, Any],
    params: dict[str, Any],
) -> None:
    import submitit

    # submitit fails a job after 3 time-outs by default; a cell longer than 3 time limits is
    # normal on a cluster, and each requeue resumes from the last checkpoint
    executor = submitit.SlurmExecutor(
        folder=submitit_folder(study) / "slurm", max_num_timeout=study.spec.slurm.max_timeouts
    )
    executor.update_parameters(**params)
    with executor.batch():
        handles = [executor.submit(_job(cell)) for cell in group]
    for cell, job in zip(group, handles, strict=True):
        submitted[cell.cell_id] = job
        records[cell.cell_id] = new_record(records, cell.cell_id, "slurm", job.job_id)
    write_records(study.folder, records)


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


def run_local(
    study: ResolvedStudy,
    cells: list[Cell],
    records: dict[str, JobRecord],
    say: Callable[[str], None],
    states: dict[str, str] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run cells as local submitit jobs, `max_parallel` at a time; return when all ended.

    A cell with `depends_on` (a WSD branch) starts once that cell has ended completed or
    diverged (a branch whose checkpoint the divergence preceded still trains; one without it
    fails with the reason); if it failed or was cancelled, the branch is not started and its
    run ends FAILED with "parent <id> failed". `states`: cells not run by this call. The cells
    are forked from one warm process that has imported torch, megatron-core and mlflow
    (`scaling.warmstart`), each still its own submitit job.

    Interrupted (KeyboardInterrupt, or `stop` set from another thread), it starts nothing
    more, cancels the running jobs, waits for them and ends their runs KILLED, then raises
    KeyboardInterrupt; cells it never started keep their `queued-` records for the caller
    (`scaling.submission`) to restore.
    """
    folder = submitit_folder(study) / "local"
    with warm_python(folder) as python:
        return _run_local(study, cells, records, say, states, folder, python, stop)


def _run_local(
    study: ResolvedStudy,
    cells: list[Cell],
    records: dict[str, JobRecord],
    say: Callable[[str], None],
    states: dict[str, str] | None,
    folder: Path,
    python: str | None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    from scaling.local_executor import SessionLocalExecutor  # imports submitit: when used

    # longest first: the last cells of a round (which the next round waits for) are short ones
    queue = sorted(cells, key=_cost, reverse=True)
    running: dict[str, Any] = {}
    finished: dict[str, Any] = {}
    ended = dict(states or {})  # cell id → state, for parents not (or no longer) running here
    queued_id = f"{QUEUED}{os.getpid()}"
    for cell in queue:  # visible to `scaling status` from another shell as pending
        records[cell.cell_id] = new_record(records, cell.cell_id, "local", queued_id)
    write_records(study.folder, records)
    try:
        while queue or running:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            for cell, reason in _blocked(study, queue, running, ended):
                queue.remove(cell)
                records.pop(cell.cell_id, None)  # no job: status reads the FAILED run
                write_records(study.folder, records)
                fail_cell_run(study, cell, reason)
                ended[cell.cell_id] = C.FAILED
                say(f"not started {cell.cell_id}: {reason}")
            while len(running) < study.spec.local.max_parallel:
                cell = _next_ready(queue, running, ended)
                if cell is None:
                    break
                queue.remove(cell)
                executor = SessionLocalExecutor(folder=folder, python=python)
                threads = max(
                    1, (os.cpu_count() or 1) // (study.spec.local.max_parallel * cell.world_size)
                )
                executor.update_parameters(
                    tasks_per_node=cell.world_size,
                    timeout_min=study.spec.local.timeout_min,
                    **local_gpus(cell.world_size),
                )
                with _env(OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads))):
                    job = executor.submit(_job(cell))  # the controller copies this environment
                running[cell.cell_id] = job
                records[cell.cell_id] = new_record(records, cell.cell_id, "local", job.job_id)
                write_records(study.folder, records)
                say(f"started {cell.cell_id} (pid {job.job_id})")
            time.sleep(LOCAL_POLL_S)
            for cid, job in list(running.items()):
                if job.done():
                    finished[cid] = running.pop(cid)
                    ended[cid] = _job_state(job)
                    say(f"ended {cid}: {job.state}")
    except BaseException:
        _cancel_running(study, cells, running)
        raise
    return finished


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
    from models.accounting import flops_per_token

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
    from scaling.mlflow_state import cell_runs
    from scaling.scheduler import live_jobs, read_records
    from scaling.state import cell_state

    live = live_jobs(read_records(study.folder), submitit_folder(study))
    return cell_state(cell_runs(study).get(cell_id), live.get(cell_id))
