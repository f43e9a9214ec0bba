"""Does the study's hardware exist where it will run? Checked before anything is submitted.

Three mistakes that would otherwise surface only after queueing: a study that trains in bf16
on a machine without CUDA (local executor), a Slurm partition with no GPUs (or fewer per node
than asked for; read from `sinfo`'s GRES column), and a tensor-parallel group that does not
fit inside one node (`study.slurm.gpus_per_node`), where its every-layer all-reduces would
cross the network. Each error names the field and the fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from foundation.config import ConfigError, Problems
from scaling.spec.ladder import ANY
from scaling.spec.study import StudySpec

__all__ = [
    "split_problems",
    "check_tasks_per_node",
    "check_local_devices",
    "check_slurm_gpus",
    "check_slurm",
    "slurm_available",
    "partition_gpus",
    "cuda_devices",
]

PROBE_TIMEOUT_S = 10.0

_GRES_GPU = re.compile(r"gpu(?::[^:(,]+)?:([0-9]{1,9})(?![0-9])")


def cuda_devices() -> int:
    """CUDA devices this process sees (0 without CUDA); imports torch, so only called when a
    study asks for a GPU."""
    import torch  # deliberate: seconds to import, paid only by studies that need the answer

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def partition_gpus(partition: str | None, timeout_s: float = 10.0) -> tuple[str, int]:
    """(partition name, most GPUs on one of its nodes) from `sinfo`; the default partition
    when `partition` is None. Raises ConfigError when sinfo cannot answer."""
    args = ["sinfo", "-h", "-o", "%P %G"] + (["-p", partition] if partition else [])
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",  # a site's sinfo may print bytes that are not UTF-8
            timeout=timeout_s,
            env=os.environ,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ConfigError(f"study.slurm.partition: sinfo did not answer ({err})") from None
    lines = [line.split(None, 1) for line in proc.stdout.splitlines() if line.strip()]
    if not partition:
        lines = [parts for parts in lines if parts[0].endswith("*")]
    if proc.returncode != 0 or not lines:
        raise ConfigError(
            f"study.slurm.partition: sinfo knows no partition {partition or '(default)'}; "
            "name one of `sinfo -o %P`"
        )
    name = lines[0][0].rstrip("*")
    counts = [int(n) for parts in lines for n in _GRES_GPU.findall(parts[-1])]
    return name, max(counts, default=0)


def check_local_devices(spec: StudySpec, p: Problems) -> None:
    """A study run on this machine: bf16 needs CUDA, and each size's ranks a device each."""
    if spec.precision != "bf16":
        return
    devices = cuda_devices()
    if devices == 0:
        p.add(
            "study.precision: 'bf16' needs a CUDA GPU and this machine has none "
            "(torch.cuda.is_available() is False); use precision auto or fp32 here, or run "
            "the study where the GPUs are (executor: slurm)"
        )
    for size in spec.sizes:
        world = spec.parallel_for(size).world_size
        if devices and world > devices:
            p.add(
                f"study.parallel: size {size} needs {world} GPUs (TP x PP x DP) and this "
                f"machine has {devices}; lower data_parallel or run it on Slurm"
            )


def check_slurm_gpus(spec: StudySpec, p: Problems) -> None:
    """A study on Slurm GPUs: a TP group inside one node, a partition with that many GPUs."""
    per_node = spec.slurm.gpus_per_node
    for key, par in sorted(spec.parallel.items()):
        if per_node % par.tensor_parallel:
            p.add(
                f"study.parallel.{key}.tensor_parallel: {par.tensor_parallel} does not divide "
                f"study.slurm.gpus_per_node={per_node}; a tensor-parallel group must sit inside "
                f"one node: use a divisor of {per_node}"
            )
    try:
        name, available = partition_gpus(spec.slurm.partition)
    except ConfigError as err:
        p.extend(err)
        return
    if available == 0:
        p.add(
            f"study.slurm.partition: {name!r} has no GPUs (no gpu GRES in `sinfo -p {name} -o "
            f"%G`) but study.slurm.gpus_per_node is {per_node}; pick a GPU partition "
            "(`sinfo -o '%P %G'`) or set gpus_per_node: 0 for CPU nodes"
        )
    elif available < per_node:
        p.add(
            f"study.slurm.gpus_per_node: {per_node}, but the nodes of partition {name!r} have "
            f"at most {available} GPUs; use {available} or fewer per node"
        )


def slurm_available(timeout_s: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """(True, "") if a Slurm controller answers `sinfo`, else (False, why)."""
    if shutil.which("sinfo") is None:
        return False, "sinfo is not on PATH (Slurm client not installed)"
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        return False, f"SLURM_CONF={conf} does not exist"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%P"],
            capture_output=True,
            text=True,
            errors="replace",  # a site's sinfo may print bytes that are not UTF-8
            timeout=timeout_s,
            env=os.environ,
        )
    except subprocess.TimeoutExpired:
        return False, f"sinfo did not answer within {timeout_s:.0f} s"
    except OSError as err:  # on PATH but not runnable: a shebang to a missing interpreter
        return False, _not_runnable(err.strerror or str(err))
    if proc.returncode in (126, 127):  # the shell's "cannot execute" and "not found"
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, _not_runnable(f"exit {proc.returncode}: {lines[-1] if lines else ''}")
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, f"sinfo failed: {lines[-1] if lines else f'exit {proc.returncode}'}"
    return True, proc.stdout


def _not_runnable(error: str) -> str:
    return (
        f"sinfo at {shutil.which('sinfo')} cannot be executed ({error.strip()}); reinstall the "
        "Slurm client or put a working one first on PATH"
    )


def check_slurm(partition: str | None = None) -> None:
    """Raise ConfigError unless a Slurm controller answers (and has `partition`, if given)."""
    ok, answer = slurm_available()
    if not ok:
        raise ConfigError(
            f"study.executor: 'slurm', but no Slurm controller is reachable ({answer}); set "
            "executor: local, or export SLURM_CONF for a running cluster"
        )
    partitions = {p.strip().rstrip("*") for p in answer.split()}
    if partition is not None and partition not in partitions:
        raise ConfigError(
            f"study.slurm.partition: {partition!r} is not a partition of this cluster "
            f"({', '.join(sorted(partitions))}); pick one of them"
        )


def check_tasks_per_node(study: StudySpec, p: Problems) -> None:
    """`slurm.tasks_per_node` (CPU nodes only): >= 1, and a whole number of nodes per job."""
    per_node = study.slurm.tasks_per_node
    if study.slurm.gpus_per_node > 0:
        p.add(
            "study.slurm.tasks_per_node: only for CPU nodes (gpus_per_node 0); with GPUs a "
            "job has one task per GPU, so remove it"
        )
    elif per_node < 1:
        p.add(f"study.slurm.tasks_per_node: {per_node} must be >= 1 (or left out: one node)")
    else:
        for size in study.sizes:
            world = study.parallel_for(size).world_size
            if world > per_node and world % per_node:
                p.add(
                    f"study.parallel: size {size} has {world} ranks, not a whole number of "
                    f"nodes of study.slurm.tasks_per_node={per_node}; use a divisor of {world}"
                )


def split_problems(study: StudySpec, size: str) -> list[str]:
    """TP must divide the heads and PP the layers of the size's shape (named study fields)."""
    shape = study.shape(size)
    par = study.parallel_for(size)
    key = size if size in study.parallel else ANY
    described = (
        f"size {size} is {shape.num_layers} layers x {shape.hidden_size} hidden x "
        f"{shape.num_attention_heads} heads"
    )
    problems = []
    if shape.num_attention_heads % par.tensor_parallel:
        problems.append(
            f"study.parallel.{key}.tensor_parallel: {par.tensor_parallel} does not divide the "
            f"heads; {described}; use a divisor of {shape.num_attention_heads} or give an "
            f"explicit shape under study.ladder.shapes.{size}"
        )
    if shape.num_layers % par.pipeline_parallel:
        problems.append(
            f"study.parallel.{key}.pipeline_parallel: {par.pipeline_parallel} does not divide "
            f"the layers; {described}; use a divisor of {shape.num_layers} or give an explicit "
            f"shape under study.ladder.shapes.{size}"
        )
    return problems
