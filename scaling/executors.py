"""Executors: the cells of a submission as Slurm job arrays, or as bounded local processes.

`submit_slurm` returns once the arrays are queued; `run_local` runs the cells as local submitit
jobs, at most `local.max_parallel` at once, and returns when all have ended. Both record each
cell's job in the study folder (`scaling.scheduler`), which is how `status` finds it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from scaling.grid import Cell
from scaling.resolved import ResolvedStudy
from scaling.scheduler import QUEUED, JobRecord, write_records
from scaling.state import submitit_folder
from scaling.study import Study

__all__ = ["slurm_parameters", "submit_slurm", "run_local"]

LOCAL_POLL_S = 1.0


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


def submit_slurm(
    study: ResolvedStudy, cells: list[Cell], records: dict[str, JobRecord]
) -> dict[str, Any]:
    import submitit

    submitted: dict[str, Any] = {}
    by_world: dict[int, list[Cell]] = {}
    for cell in cells:
        by_world.setdefault(cell.world_size, []).append(cell)
    for world, group in sorted(by_world.items()):
        executor = submitit.SlurmExecutor(folder=submitit_folder(study) / "slurm")
        executor.update_parameters(**slurm_parameters(study.spec, world))
        with executor.batch():
            handles = [executor.submit(_job(cell)) for cell in group]
        now = time.time()
        for cell, job in zip(group, handles, strict=True):
            submitted[cell.cell_id] = job
            records[cell.cell_id] = JobRecord(cell.cell_id, "slurm", job.job_id, now)
        write_records(study.folder, records)
    return submitted


def run_local(
    study: ResolvedStudy,
    cells: list[Cell],
    records: dict[str, JobRecord],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Run cells as local submitit jobs, `max_parallel` at a time; return when all ended."""
    import submitit

    folder = submitit_folder(study) / "local"
    queue = list(cells)
    running: dict[str, Any] = {}
    finished: dict[str, Any] = {}
    queued_id = f"{QUEUED}{os.getpid()}"
    for cell in queue:  # visible to `scaling status` from another shell as pending
        records[cell.cell_id] = JobRecord(cell.cell_id, "local", queued_id, time.time())
    write_records(study.folder, records)
    try:
        while queue or running:
            while queue and len(running) < study.spec.local.max_parallel:
                cell = queue.pop(0)
                executor = submitit.LocalExecutor(folder=folder)
                threads = max(
                    1, (os.cpu_count() or 1) // (study.spec.local.max_parallel * cell.world_size)
                )
                executor.update_parameters(
                    tasks_per_node=cell.world_size, timeout_min=study.spec.local.timeout_min
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
