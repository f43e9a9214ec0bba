"""`scaling pilot` on Slurm within the cluster's limits, as `scaling run` submits.

A pilot has one probe per distinct (size, variant, layout): a ladder of 10 sizes and 4 arms is
40 jobs, more than many sites let one user queue (`MaxSubmitJobs`), and each was one sbatch.
Here the probes go through the round's `ArraySubmitter` (`scaling.backends.slurm.submit`)
with the limits `SlurmExecutor.limits` reads: one array per world size split at
`MaxArraySize`, at most the cap of the user's jobs queued at once, the rest submitted as jobs
leave the queue, an sbatch refusal over a limit waited out. The records of that submission
(`jobs.json`, the waiting note) are the pilot's own, in its submitit folder, never the study's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.backends.executors import Executor
from scaling.backends.slurm.submit import ArraySubmitter, Group
from scaling.costs.pilot_job import PilotJob

__all__ = ["submit_probes"]


@dataclass(frozen=True)
class _ProbeSlot:
    """A probe where `ArraySubmitter` expects a cell: it reads only `cell_id`."""

    cell_id: str  # the probe's key
    job: PilotJob


def submit_probes(
    executor: Executor, probes: list, folder: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    """probe key -> its submitit job, every probe queued within the cluster's limits; returns
    once the last is queued. `probes`: `scaling.costs.pilot.Probe`s."""
    by_world: dict[int, list[_ProbeSlot]] = {}
    for probe in probes:
        job = PilotJob(probe.config, probe.warmup_steps, probe.steps, probe.memory_limit_bytes)
        by_world.setdefault(probe.config.parallel.world_size, []).append(_ProbeSlot(probe.key, job))
    groups = [
        Group(slots, lambda world=world: {"world_size": world})  # type: ignore[arg-type]
        for world, slots in sorted(by_world.items())
    ]

    def submit_chunk(chunk: list[_ProbeSlot], params: dict[str, Any]) -> list[Any]:
        slurm = executor.probe_executor(folder, params["world_size"], None)
        with slurm.batch():  # one array (one job if alone), queued as the block ends
            handles = [slurm.submit(slot.job) for slot in chunk]
        return handles

    queue = folder / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    submitter = ArraySubmitter(
        queue,
        executor.name,
        executor.limits,
        submit_chunk,  # type: ignore[arg-type]
        executor.poll_interval(),
        say,
        on_interrupt="the pilot stops; probes already queued stay in Slurm's queue",
    )
    submitted: dict[str, Any] = {}
    submitter.run(groups, {}, submitted)
    return submitted
