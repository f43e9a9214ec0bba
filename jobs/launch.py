"""Who started this process: a submitit executor that sets a job's torch.distributed environment,
or something else (a direct call, submitit's in-process `DebugExecutor`, a test).

submitit's own executors name themselves in `SUBMITIT_EXECUTOR` in each task they start: its
`SlurmExecutor` as "slurm", its `LocalExecutor` as "local" (`scaling.backends.local.session`
sets the same for its controllers). Only under those does `submitit.JobEnvironment` describe the
ranks, so only there may a job export `submitit.helpers.TorchDistributedEnvironment` and wait
for USR2; submitit's `DebugExecutor` ("debug") runs the job in the submitting thread. These are
submitit's names, not a study's `executor`: the same names by submitit's choice, not ours.
"""

from __future__ import annotations

import os

__all__ = ["launched_by_submitit", "SUBMITIT_TASK_EXECUTORS"]

# submitit's executors that start one process per task with a job environment (submitit's
# `SlurmExecutor` and `LocalExecutor` set SUBMITIT_EXECUTOR to these)
SUBMITIT_TASK_EXECUTORS = frozenset({"slurm", "local"})


def launched_by_submitit() -> bool:
    """Whether this process is a task that a submitit executor started (its ranks described by
    `submitit.JobEnvironment`), rather than a direct or in-process call."""
    return os.environ.get("SUBMITIT_EXECUTOR") in SUBMITIT_TASK_EXECUTORS
