"""What every backend implements, the registry of backends by name, and the study-wide questions
asked of a study's jobs whatever backend holds each: which are live, and stopping them.

A backend is one class, as submitit has one `Executor` per backend: `scaling.backends.local`
and `scaling.backends.slurm` each hold everything of theirs, and each backend's class extends
`JobBackend` (through `scaling.backends.executors.Executor`): its jobs say themselves which are
live and stop themselves. As `jobs.engine_specs` registers engines, each backend is registered
here once, by name, as `(module, class)` and imported only when a record or a spec names it:
this module stays low (the spec's `executor` field and `scaling.state.status` read it), and no
other table is keyed by a backend's name. Every call has a timeout, so `status` never hangs.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal

from scaling.state.files.job_records import RECORDS, JobRecord

__all__ = [
    "JobBackend",
    "BACKENDS",
    "BACKEND_NAMES",
    "BackendName",
    "backend_class",
    "live_jobs",
    "cancel_jobs",
    "ESCALATE_S",
]

ESCALATE_S = 5.0  # a job still alive this long after it was asked to stop is killed

# name → (module, class) of its backend, imported when asked for (`backend_class`)
BACKENDS: dict[str, tuple[str, str]] = {
    "local": ("scaling.backends.local.executor", "LocalExecutor"),  # the default
    "slurm": ("scaling.backends.slurm.executor", "SlurmExecutor"),
}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
# the spec's `executor` type: a name outside the registry is refused where a spec is read
BackendName = Literal[BACKEND_NAMES]  # type: ignore[valid-type]


class JobBackend:
    """One backend's jobs of a study, as `status` and `cancel` ask about them: which are live,
    how to stop them, where their logs are, and what `status` may say of a waiting one.

    The scheduler-facing half of a backend's class (`Executor` adds submitting, slots and
    costs); its classmethods need no study, so `status` asks them from a `JobRecord` alone.
    """

    name: ClassVar[str]  # its key in `BACKENDS`: the spec's `executor` and each JobRecord's
    label: ClassVar[str]  # its name in a sentence ("Slurm job 12_3")
    # a `queued-<pid>` record waits in its submit for room under the cluster's limits (Slurm),
    # rather than for a slot on this machine: `status` says why (`waiting_reason`)
    waits_for_cluster_room: ClassVar[bool] = False

    @classmethod
    def log_folder_in(cls, submitit_folder: Path) -> Path:
        """Where submitit writes this backend's job logs and pickles."""
        return Path(submitit_folder) / cls.name

    @classmethod
    def error_log(cls, submitit_folder: Path, job_id: str) -> Path:
        """The stderr of rank 0 of one job (submitit's `<job id>_0_log.err`)."""
        return cls.log_folder_in(submitit_folder) / f"{job_id}_0_log.err"

    @classmethod
    def waiting_reason(cls, folder: Path) -> str:
        """Why this backend's cells wait in a submit of the study in `folder`, in words; ""
        when none says."""
        return ""

    @classmethod
    def live(cls, records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
        """cell_id → scheduler state for those of `records` whose job has not ended."""
        raise NotImplementedError

    @classmethod
    def stop(cls, records: dict[str, JobRecord]) -> None:
        """Ask these live jobs to stop (their cells' runs end KILLED)."""
        raise NotImplementedError

    @classmethod
    def kill(cls, records: dict[str, JobRecord]) -> None:
        """End those that did not stop within `ESCALATE_S`."""
        raise NotImplementedError


def backend_class(name: str, where: str = "study.executor", fix: str = "") -> type[JobBackend]:
    """The class of the backend registered as `name`; else a ValueError naming `where`, `name`,
    the registered ones and `fix` (by default: use one of them)."""
    if name not in BACKENDS:
        raise ValueError(
            f"{where}: executor {name!r} is not one this version knows "
            f"({', '.join(BACKEND_NAMES)}); {fix or 'use one of those'}"
        )
    module, attribute = BACKENDS[name]
    cls = getattr(importlib.import_module(module), attribute)
    assert cls.name == name, f"BACKENDS[{name!r}] is {cls.__name__}, named {cls.name!r}"
    return cls


def _by_backend(
    records: dict[str, JobRecord],
) -> list[tuple[type[JobBackend], dict[str, JobRecord]]]:
    """`records` split by the backend that submitted each (`JobRecord.executor`): each backend
    polls and stops its own jobs."""
    groups: dict[str, dict[str, JobRecord]] = {}
    for cid, rec in records.items():
        groups.setdefault(rec.executor, {})[cid] = rec
    fix = "submit the study again with one of those, or restore the jobs.json it wrote"
    return [
        (backend_class(name, f"{RECORDS}: cell {next(iter(group))}", fix), group)
        for name, group in groups.items()
    ]


def live_jobs(records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
    """cell_id → scheduler state (PENDING, RUNNING, ...) for the cells whose job is still live."""
    live: dict[str, str] = {}
    for backend, group in _by_backend(records):
        live.update(backend.live(group, submitit_folder))
    return live


def cancel_jobs(
    records: dict[str, JobRecord],
    submitit_folder: Path,
    wait_s: float = 30,
    reread: Callable[[], dict[str, JobRecord]] | None = None,
) -> list:
    """Cancel the live jobs among `records`; returns the cancelled cell ids. `reread`: the
    records as they are now, asked while waiting: a driver stopped by its SIGINT puts back the
    `queued-` records that named it, and is then neither waited for nor killed."""
    live = live_jobs(records, submitit_folder)
    groups = _by_backend({c: records[c] for c in live})
    for backend, group in groups:
        backend.stop(group)
    deadline = time.monotonic() + wait_s
    escalate = time.monotonic() + min(wait_s, ESCALATE_S)
    while time.monotonic() < deadline:
        now = records if reread is None else reread()
        left = {
            c: now[c] for c in live_jobs({c: now[c] for c in live if c in now}, submitit_folder)
        }
        if not left:
            break
        if time.monotonic() > escalate:
            for backend, group in _by_backend(left):
                backend.kill(group)
            escalate = deadline
        time.sleep(1)
    return sorted(live)
