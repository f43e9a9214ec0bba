"""A test-only pause point: fault tests hold a run at a known step instead of racing its speed.

    SCALING_TEST_PAUSE_AT_STEP=N SCALING_TEST_PAUSE_FILE=/tmp/pause/{name} python -m jobs cfg.yaml

After step N (its metrics spooled, its eval and checkpoint done) the trainer writes
`PATH.reached` and holds until `PATH` exists; a test restarts a server, kills a job, fills a
disk or downs a node in between, then creates `PATH`, and knows the exact step everything
happened at, on any machine speed. `{name}` in PATH stands for the run's name (a cell's id), so
the cells of one study are held and released one by one. Nothing outside tests sets these;
unset (the normal case), the trainer holds no `PausePoint` and pays one `is None` per step.

- Releasing is for good: a resumed attempt that re-executes step N finds `PATH` there and goes
  on (it still rewrites `PATH.reached`); one that resumes at or after step N never reaches it.
- Ranks leave together: every rank polls, and each poll is one `any_rank` all-reduce, so all
  ranks see the same answer at the same poll (a released file seen by rank 1 a poll earlier
  than by rank 0 cannot split them).
- Preemption still works: the stop flag that SIGUSR2 sets (`TrainingJob.checkpoint`, rank 0
  only) ends the hold at the next poll on every rank, and the loop then takes its usual path:
  save step N, return `preempted`, requeue. Only the worker thread holds, in short sleeps, so
  the main thread keeps handling signals: SIGTERM does what it does to a running step (a submitit
  task saves step N and ends as interrupted, see jobs/loop/stop.py; a bare `python -m jobs` dies of
  it), and SIGKILL kills.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from jobs.engines.collectives import any_rank

__all__ = ["ENV_STEP", "ENV_FILE", "PausePoint", "pause_point"]

ENV_STEP = "SCALING_TEST_PAUSE_AT_STEP"
ENV_FILE = "SCALING_TEST_PAUSE_FILE"
POLL_S = 0.05  # a release or a stop is seen within this (plus one all-reduce)


@dataclass(frozen=True)
class PausePoint:
    """Hold after `step` until `release` exists (or a stop is asked); `release`.reached says
    that the hold has begun."""

    step: int
    release: Path

    @property
    def reached(self) -> Path:
        return self.release.with_name(self.release.name + ".reached")

    def after_step(self, step: int, stop: threading.Event | None, rank: int) -> None:
        """Called once per step by the loop, on every rank; holds only after `self.step`."""
        if step != self.step:
            return
        if rank == 0:
            self.reached.parent.mkdir(parents=True, exist_ok=True)
            self.reached.write_text(f"{step}\n")
        while not any_rank(self.release.exists() or (stop is not None and stop.is_set())):
            time.sleep(POLL_S)


def pause_point(run_name: str) -> PausePoint | None:
    """The pause point the environment asks for (`run_name` fills `{name}`), or None."""
    step, path = os.environ.get(ENV_STEP), os.environ.get(ENV_FILE)
    if not step and not path:
        return None
    if not step or not path:
        raise ValueError(f"{ENV_STEP} and {ENV_FILE} go together; set both or neither")
    if not step.isdigit() or int(step) < 1:
        raise ValueError(f"{ENV_STEP} must be a step >= 1, got {step!r}")
    return PausePoint(int(step), Path(path.replace("{name}", run_name)))
