"""What the scheduler says about a study's jobs, asked in bounded time, and how to stop them.

Every submitted cell is recorded in `STUDY_DIR/jobs.json` (cell → executor, job id;
`scaling.state.files.job_records`). Live state comes from the scheduler itself: `squeue` for Slurm
(no `sacct`: without slurmdbd it fails, and a job that has left the queue is simply not live any
more; MLflow says how it ended), and the controller process for local jobs. Every call has a
timeout, so `status` never hangs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from foundation.process.proc import kill_tree
from scaling.state.files.job_records import RECORDS, JobRecord

__all__ = [
    "JobBackend",
    "SlurmJobs",
    "LocalJobs",
    "live_jobs",
    "cancel_jobs",
    "parse_squeue",
    "SQUEUE_TIMEOUT_S",
    "WAITING",
    "waiting_reason",
]

SQUEUE_TIMEOUT_S = 30.0
# Slurm job states of a job that has not ended (squeue(1) "JOB STATE CODES").
LIVE_SLURM_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "SUSPENDED",
    "STOPPED",
}
LOCAL_CONTROLLER = "submitit.local._local"
ESCALATE_S = 5.0  # a local job still alive this long after SIGINT is killed
# local job id of a cell waiting for a slot: "queued-<pid of submit>-<its start time>" (`queued_id`)
QUEUED = "queued-"
# in the study folder while Slurm cells wait in a submit for room under the cluster's limits
WAITING = "slurm_waiting.json"


def waiting_reason(folder: Path) -> str:
    """Why a study's Slurm cells wait in their submit ("MaxSubmitJobs 6 (association x)"),
    from the note it leaves (`scaling.backends.slurm_submit`); "" when none waits."""
    try:
        return str(json.loads((Path(folder) / WAITING).read_text())["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


class SqueueBackoff:
    """Spares a slow or refusing slurmctld: after a failed `squeue`, or one slower than
    `SLOW_SQUEUE_S`, the next `BACKOFF_FIRST_S` (doubling up to `BACKOFF_MAX_S` while it lasts)
    ask it nothing. Meanwhile a failure is raised again at once, and a slow answer is reused
    for the same jobs (a job it showed live stays live: never a crash that did not happen)."""

    def __init__(self) -> None:
        self.until = 0.0
        self.wait = 0.0
        self.error: str | None = None
        self.answer: tuple[tuple[str, ...], dict[str, str]] | None = None
        self.calls = 0  # squeue calls made (the benchmark and tests count them)

    def held(self, arrays: tuple[str, ...]) -> dict[str, str] | None:
        """The answer to give without asking, while backing off; None: ask."""
        if time.monotonic() >= self.until:
            return None
        if self.error is not None:
            left = self.until - time.monotonic()
            raise RuntimeError(f"{self.error} (slurmctld is left alone for {left:.0f} s more)")
        if self.answer is not None and self.answer[0] == arrays:
            return self.answer[1]
        return None

    def took(self, seconds: float, arrays: tuple[str, ...], answer: dict[str, str]) -> None:
        self.error = None
        if seconds > SLOW_SQUEUE_S:
            self._back_off()
            self.answer = (arrays, answer)
        else:
            self.wait, self.until, self.answer = 0.0, 0.0, None

    def failed(self, error: str) -> None:
        self._back_off()
        self.error, self.answer = error, None

    def _back_off(self) -> None:
        self.wait = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, 2 * self.wait))
        self.until = time.monotonic() + self.wait


SLOW_SQUEUE_S = 10.0
BACKOFF_FIRST_S = 30.0
BACKOFF_MAX_S = 600.0
_BACKOFFS: dict[str | None, SqueueBackoff] = {}


def squeue_backoff() -> SqueueBackoff:
    """This process's backoff for the cluster `SLURM_CONF` names (a driver polls from one)."""
    return _BACKOFFS.setdefault(os.environ.get("SLURM_CONF"), SqueueBackoff())


def _squeue(job_ids: list[str]) -> dict[str, str]:
    """job id → Slurm state (PENDING, RUNNING, ...) for the ids still in the queue.

    One call for all of a study's arrays; while slurmctld is slow or refuses, not asked again
    for a while (`SqueueBackoff`)."""
    if not job_ids:
        return {}
    # -r: one line per array element, so "12_3" appears as itself, never inside "12_[3-7]".
    # Ask for the array ids (the part before "_"): squeue rejects unknown ids as a whole.
    arrays = tuple(sorted({jid.split("_")[0] for jid in job_ids}))
    backoff = squeue_backoff()
    held = backoff.held(arrays)
    if held is not None:
        return {jid: held[jid] for jid in job_ids if jid in held}
    start = time.monotonic()
    backoff.calls += 1
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(arrays)],
            capture_output=True,
            text=True,
            errors="replace",  # bytes that are not UTF-8 in a job's line: that line unread
            timeout=SQUEUE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        why = (
            f"cannot ask Slurm about this study's jobs ({err}); is the controller up and "
            "SLURM_CONF exported?"
        )
        backoff.failed(why)
        raise RuntimeError(why) from err
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            backoff.took(time.monotonic() - start, arrays, {})
            return {}  # all of them left the queue long ago
        backoff.failed(f"squeue failed: {proc.stderr.strip()}")
        raise RuntimeError(f"squeue failed: {proc.stderr.strip()}")
    states = parse_squeue(proc.stdout)
    backoff.took(time.monotonic() - start, arrays, states)
    return {jid: states[jid] for jid in job_ids if jid in states}


def parse_squeue(text: str) -> dict[str, str]:
    """job id → state of the live jobs in `squeue -o %i|%T` lines; any other line is skipped
    (asked by id, squeue also lists jobs that ended a moment ago)."""
    states = {}
    for line in text.splitlines():
        jid, _, state = line.strip().partition("|")
        if state in LIVE_SLURM_STATES:
            states[jid] = state
    return states


def _cmdline(pid: str) -> str:
    """The command line of a live process ('' if there is none)."""
    try:
        return Path(f"/proc/{int(pid)}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return ""


def _local_alive(pid: str, folder: Path) -> bool:
    """True if `pid` is still this study's submitit controller (not a recycled pid)."""
    cmdline = _cmdline(pid)
    return LOCAL_CONTROLLER in cmdline and str(folder) in cmdline


class JobBackend:
    """One backend's jobs of a study, as `status` and `cancel` ask about them: which are live,
    how to stop them, where their logs are, and what `status` may say of a waiting one.

    The scheduler-facing half of an executor class: `scaling.backends.executors`
    subclasses each backend here (`SlurmExecutor(SlurmJobs)`) and adds submitting, slots and
    costs. It lives in this room because `status` asks it, and `status` is below the rounds.
    A class that sets `name` in its own body is the backend of that name: `named(name)` is the
    one lookup from a `JobRecord.executor` or a spec's `executor` to its class (the most derived
    class that set it), so no table keyed by a backend's name exists anywhere else.
    """

    name: ClassVar[str]  # the spec's `executor` and each JobRecord's
    label: ClassVar[str]  # its name in a sentence ("Slurm job 12_3")
    # a `queued-<pid>` record waits in its submit for room under the cluster's limits (Slurm),
    # rather than for a slot on this machine: `status` says why (`waiting_reason`)
    waits_for_cluster_room: ClassVar[bool] = False
    _named: ClassVar[dict[str, type[JobBackend]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            prior = JobBackend._named.get(cls.name)
            assert prior is None or issubclass(cls, prior), f"two backends named {cls.name!r}"
            JobBackend._named[cls.name] = cls

    @staticmethod
    def named(name: str, where: str = "study.executor", fix: str = "") -> type[JobBackend]:
        """The backend class of `name`; else a ValueError naming `where`, `name`, the known
        ones and `fix` (by default: use one of them)."""
        if name not in JobBackend._named:
            known = ", ".join(JobBackend._named)
            raise ValueError(
                f"{where}: executor {name!r} is not one this version knows ({known}); "
                f"{fix or 'use one of those'}"
            )
        return JobBackend._named[name]

    @classmethod
    def known(cls) -> tuple[str, ...]:
        """The names of the backends, in the order they were defined."""
        return tuple(JobBackend._named)

    @classmethod
    def log_folder_in(cls, submitit_folder: Path) -> Path:
        """Where submitit writes this backend's job logs and pickles."""
        return Path(submitit_folder) / cls.name

    @classmethod
    def error_log(cls, submitit_folder: Path, job_id: str) -> Path:
        """The stderr of rank 0 of one job (submitit's `<job id>_0_log.err`)."""
        return cls.log_folder_in(submitit_folder) / f"{job_id}_0_log.err"

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


class SlurmJobs(JobBackend):
    """Slurm's jobs of a study: one `squeue` says which are live, `scancel` stops them.

    A cell that waits in a `scaling submit` for room under the cluster's limits has the record
    `queued-<pid of that submit>` (`scaling.backends.slurm_submit`): it is live (PENDING)
    while that process is, and stopping it interrupts that process (which then leaves it
    pending), as for a local cell waiting for a slot.
    """

    name = "slurm"
    label = "Slurm"
    waits_for_cluster_room = True

    @classmethod
    def live(cls, records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
        held = {cid: r for cid, r in records.items() if r.job_id.startswith(QUEUED)}
        cell_of = {r.job_id: cid for cid, r in records.items() if cid not in held}
        live = {cell_of[jid]: state for jid, state in _squeue(list(cell_of)).items()}
        live.update(LocalJobs.live(held, submitit_folder))
        return live

    @classmethod
    def stop(cls, records: dict[str, JobRecord]) -> None:
        held = {cid: r for cid, r in records.items() if r.job_id.startswith(QUEUED)}
        LocalJobs.stop(held)
        ids = [r.job_id for cid, r in records.items() if cid not in held]
        if not ids:
            return
        try:
            proc = subprocess.run(
                ["scancel", *ids],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=SQUEUE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RuntimeError(f"scancel did not run ({err}); is Slurm on PATH?") from err
        if proc.returncode != 0:
            raise RuntimeError(f"scancel failed: {proc.stderr.strip()}")

    @classmethod
    def kill(cls, records: dict[str, JobRecord]) -> None:
        """Nothing more: Slurm ends a cancelled job itself (KillWait, then SIGKILL)."""


def _start_ticks(pid: int | str) -> str:
    """Field 22 of /proc/<pid>/stat, the process's start time in clock ticks since boot ('' if
    there is none). With the pid it names one process: pids are reused (pid_max 32768), and a
    process that took a recorded pid has another start time."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return ""
    fields = stat.rpartition(")")[2].split()  # after the name, which may hold spaces
    return fields[19] if len(fields) > 19 else ""


def queued_id(pid: int | None = None) -> str:
    """The job id of a cell waiting in process `pid` (this one by default) for a slot."""
    pid = os.getpid() if pid is None else pid
    return f"{QUEUED}{pid}-{_start_ticks(pid)}"


def _queued_pid(job_id: str) -> str | None:
    """The pid of the process a `queued-` record names, while that very process lives (same pid,
    same start time); None once it has ended, or its pid belongs to another process now. A
    record written before start times were recorded (`queued-<pid>`) counts only a process of
    the `scaling` command."""
    pid, _, start = job_id.removeprefix(QUEUED).partition("-")
    now = _start_ticks(pid)
    if not now or (start and now != start):
        return None
    if not start and "scaling" not in _cmdline(pid):
        return None
    return pid


class LocalJobs(JobBackend):
    """Local jobs of a study: each is a submitit controller process (or a `submit` still waiting
    for a free slot); SIGINT stops one as submitit cancels it, a kill ends one that ignores it.
    A recorded pid is taken as the job only while it is still that process (`_queued_pid`,
    `_local_alive`): a reused pid is neither live nor signalled."""

    name = "local"
    label = "local"

    @classmethod
    def live(cls, records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
        live = {}
        for cid, rec in records.items():
            if rec.job_id.startswith(QUEUED):  # waiting in a local `submit` for a free slot
                if _queued_pid(rec.job_id) is not None:
                    live[cid] = "PENDING"
            elif _local_alive(rec.job_id, submitit_folder):
                live[cid] = "RUNNING"
        return live

    @staticmethod
    def _pids(records: dict[str, JobRecord]) -> set[str]:
        """The controllers' pids; a cell queued in a `submit` is stopped by interrupting that
        submit (it cancels its jobs), unless it is this very process. Only pids that are still
        the recorded process."""
        pids = set()
        for rec in records.values():
            if rec.job_id.startswith(QUEUED):
                pid = _queued_pid(rec.job_id)
            else:
                pid = rec.job_id if LOCAL_CONTROLLER in _cmdline(rec.job_id) else None
            if pid is not None:
                pids.add(pid)
        return pids - {str(os.getpid())}

    @classmethod
    def stop(cls, records: dict[str, JobRecord]) -> None:
        for pid in cls._pids(records):
            try:
                os.kill(int(pid), signal.SIGINT)
            except ProcessLookupError:
                pass

    @classmethod
    def kill(cls, records: dict[str, JobRecord]) -> None:
        # a controller started where SIGINT is ignored (a background shell) never stops on it:
        # kill it and its tasks
        for pid in cls._pids(records):
            kill_tree(int(pid))


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
        (JobBackend.named(name, f"{RECORDS}: cell {next(iter(group))}", fix), group)
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
