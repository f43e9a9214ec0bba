"""What Slurm says of a study's jobs, asked in bounded time, and how to stop them.

One `squeue` for all of a study's arrays says which jobs are live (no `sacct`: without slurmdbd
it fails, and a job that has left the queue is simply not live any more; MLflow says how it
ended); while slurmctld is slow or refuses it is left alone for a while (`SqueueBackoff`).
`scancel` stops them. Every call has a timeout, so `status` never hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

__all__ = [
    "parse_squeue",
    "squeue_states",
    "squeue_backoff",
    "scancel",
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
# in the study folder while Slurm cells wait in a submit for room under the cluster's limits
WAITING = "slurm_waiting.json"


def waiting_reason(folder: Path) -> str:
    """Why a study's Slurm cells wait in their submit ("MaxSubmitJobs 6 (association x)"),
    from the note it leaves (`scaling.backends.slurm.submit`); "" when none waits."""
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


def squeue_states(job_ids: list[str]) -> dict[str, str]:
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


def scancel(job_ids: list[str]) -> None:
    """Cancel these Slurm jobs (their cells' runs end KILLED); a RuntimeError if scancel fails."""
    if not job_ids:
        return
    try:
        proc = subprocess.run(
            ["scancel", *job_ids],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SQUEUE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"scancel did not run ({err}); is Slurm on PATH?") from err
    if proc.returncode != 0:
        raise RuntimeError(f"scancel failed: {proc.stderr.strip()}")
