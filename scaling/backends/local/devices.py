"""The machine's GPUs as local jobs get them: each running cell holds devices of its own.

`scaling.backends.local.round` hands them out (`DeviceSlots`) and asks submitit for them
(`gpu_params`, `local_gpus`); no CUDA is initialised here, the driver's device list is read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DeviceSlots", "visible_gpu_indices", "job_gpus", "gpu_params", "local_gpus"]


class DeviceSlots:
    """The machine's GPUs, handed out so that concurrent cells never share one.

    Each running cell holds `world_size` devices of its own (its job's
    ``CUDA_VISIBLE_DEVICES``); a cell waits in the queue while fewer are free, and a cell that
    needs more than the machine has is refused (it would wait forever).
    """

    def __init__(self, devices: list[int]) -> None:
        self.total = len(devices)
        self.free = list(devices)

    def take(self, world_size: int) -> tuple[int, ...] | None:
        """`world_size` free devices, or None while running cells hold too many."""
        if world_size > self.total:
            raise ValueError(
                f"a cell needs {world_size} GPUs (TP x PP x DP) and this machine shows "
                f"{self.total}; lower data_parallel or run the study on Slurm"
            )
        if world_size > len(self.free):
            return None
        taken, self.free = tuple(self.free[:world_size]), self.free[world_size:]
        return taken

    def take_these(self, devices: tuple[int, ...]) -> tuple[int, ...]:
        """Mark `devices` held (a running job's, started by an earlier driver); those taken."""
        taken = tuple(d for d in devices if d in self.free)
        self.free = [d for d in self.free if d not in taken]
        return taken

    def give_back(self, devices: tuple[int, ...]) -> None:
        self.free = sorted({*self.free, *devices})


def visible_gpu_indices() -> list[int]:
    """The GPU indices local jobs may use: a numeric `CUDA_VISIBLE_DEVICES` the user set, else
    the driver's device list (no CUDA is initialised here); [] without GPUs, or when the user
    named devices by UUID (then `local_gpus` shares them as before)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        driver = Path("/proc/driver/nvidia/gpus")
        return list(range(len(list(driver.iterdir())))) if driver.is_dir() else []
    devices = [d.strip() for d in visible.split(",") if d.strip()]
    return [int(d) for d in devices] if all(d.isdigit() for d in devices) else []


def job_gpus(job_id: str) -> tuple[int, ...]:
    """The GPUs a running local job was given (its controller's `CUDA_VISIBLE_DEVICES`)."""
    try:
        environ = Path(f"/proc/{int(job_id)}/environ").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return ()
    for entry in environ:
        if entry.startswith(b"CUDA_VISIBLE_DEVICES="):
            value = entry.split(b"=", 1)[1].decode(errors="replace")
            return tuple(int(d) for d in value.split(",") if d.strip().isdigit())
    return ()


def gpu_params(gpus: tuple[int, ...]) -> dict[str, Any]:
    """submitit's request for exactly these GPUs (one per rank)."""
    return {"gpus_per_node": len(gpus), "visible_gpus": gpus}


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
