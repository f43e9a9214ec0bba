"""Why a run stops early: a preemption submitit requeues, or a SIGTERM that ends the job.

Slurm sends USR2 before a time-out (`--signal=USR2@90`): submitit checkpoints and requeues, so
the run stays RUNNING in MLflow and the next attempt continues it. A SIGTERM is either a
preemption (`PreemptMode=REQUEUE`: Slurm requeues the job itself) or a user's `scancel`
(nothing requeues it): the job cannot tell which, so it only saves the current step and ends as
interrupted. Its MLflow run is marked KILLED (the cell reads as cancelled, which the next
`scaling submit` resubmits), and a requeued or resubmitted attempt resumes from that step.
"""

from __future__ import annotations

import threading

__all__ = ["REQUEUE", "TERMINATE", "StopRequest"]

REQUEUE = "requeue"  # USR2: submitit requeues after the save
TERMINATE = "terminate"  # SIGTERM: save and end; any requeue is the scheduler's


class StopRequest(threading.Event):
    """A stop flag that also says why; the first reason asked wins, except that a requeue
    (submitit's USR2 path, which resubmits the job) always wins over a plain terminate."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = TERMINATE

    def request(self, reason: str) -> None:
        if reason == REQUEUE or not self.is_set():
            self.reason = reason
        self.set()
