"""Cells that wait in a `scaling submit` process rather than in a scheduler's queue.

A local cell waiting for a free slot, or a Slurm cell waiting for room under the cluster's
limits, has the job record `queued-<pid of that submit>-<its start time>` (`queued_id`). It is
live (PENDING) while that very process is, and stopping it interrupts that process, which then
leaves it pending (`scaling.driver.submission` restores its record). A recorded pid is taken as
the process only while it still is (same pid, same start time): pids are reused.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from scaling.state.files.job_records import JobRecord

__all__ = ["QUEUED", "queued_id", "queued_pid", "waiting_live", "submit_pids", "interrupt"]

# job id of a cell waiting in a submit: "queued-<pid of submit>-<its start time>" (`queued_id`)
QUEUED = "queued-"


def cmdline(pid: str) -> str:
    """The command line of a live process ('' if there is none)."""
    try:
        return Path(f"/proc/{int(pid)}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return ""


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


def queued_pid(job_id: str) -> str | None:
    """The pid of the process a `queued-` record names, while that very process lives (same pid,
    same start time); None once it has ended, or its pid belongs to another process now. A
    record written before start times were recorded (`queued-<pid>`) counts only a process of
    the `scaling` command."""
    pid, _, start = job_id.removeprefix(QUEUED).partition("-")
    now = _start_ticks(pid)
    if not now or (start and now != start):
        return None
    if not start and "scaling" not in cmdline(pid):
        return None
    return pid


def waiting_live(records: dict[str, JobRecord]) -> dict[str, str]:
    """cell_id → PENDING for the `queued-` records among `records` whose submit still waits."""
    return {
        cid: "PENDING"
        for cid, rec in records.items()
        if rec.job_id.startswith(QUEUED) and queued_pid(rec.job_id) is not None
    }


def submit_pids(records: dict[str, JobRecord]) -> set[str]:
    """The pids of the submits the `queued-` records among `records` wait in, while they live."""
    pids = {queued_pid(rec.job_id) for rec in records.values() if rec.job_id.startswith(QUEUED)}
    return {pid for pid in pids if pid is not None}


def interrupt(pids: set[str]) -> None:
    """SIGINT each of `pids` but this process (a submit cancels its jobs on it, as submitit
    cancels a local job); one already gone is skipped."""
    for pid in pids - {str(os.getpid())}:
        try:
            os.kill(int(pid), signal.SIGINT)
        except ProcessLookupError:
            pass
