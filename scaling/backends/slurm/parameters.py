"""The sbatch options of a study's Slurm jobs: whole nodes, one task per GPU, the study's setup."""

from __future__ import annotations

import os
import shlex
from typing import Any

from scaling.spec.study import StudySpec

__all__ = ["slurm_parameters"]


def slurm_parameters(study: StudySpec, world_size: int) -> dict[str, Any]:
    """sbatch options of a job of `world_size` processes: whole nodes, one task per GPU (on CPU
    nodes `slurm.tasks_per_node` tasks a node, else all on one)."""
    slurm = study.slurm
    per_node = slurm.gpus_per_node or slurm.tasks_per_node  # GPUs: one task per GPU
    if per_node:
        nodes = max(1, world_size // per_node)
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
