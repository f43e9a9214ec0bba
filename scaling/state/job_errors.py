"""Why a cell's job failed: the last error line of its log, for `scaling status` and MLflow.

A job that dies before its training loop starts (a data cache it cannot lock, an import error,
a node without the GPU it asked for) ends with no MLflow tag of its own: its run only shows as
unfinished. Its cause is in the job's stderr, which submitit keeps as
`<study>/submitit/<executor>/<job id>_0_log.err` (rank 0; Slurm's `srun: error:` lines land
there too). The last line that reads as an error is the cause: a traceback's final line, or a
`...: error: ...` line of Slurm or of this project's own commands. srun's own report that a task
exited (`srun: error: n1: task 0: Exited with exit code 1`) follows the task's traceback and only
restates it; it is the cause only when nothing else in the tail names one.
"""

from __future__ import annotations

import re
from pathlib import Path

from foundation.secrets import mask_userinfo

__all__ = ["job_error_log", "last_error_line"]

TAIL_BYTES = 64 * 1024  # a traceback's last line is near the end; a log may be gigabytes
MAX_CHARS = 300
# "RuntimeError: ...", "torch.OutOfMemoryError: ...", "KeyboardInterrupt", "error: ...",
# "srun: error: ...", "slurmstepd: error: *** JOB 12 CANCELLED ... DUE TO TIME LIMIT ***"
_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b(?::.*)?$"
    r"|(?:[\w.-]+: )?error: .+)"
)
# srun's echo of a task's exit: "srun: error: n1: task 0: Exited with exit code 1", "... Killed"
_TASK_EXIT = re.compile(
    r"^srun: error: [^:]+: tasks? [\d,-]+: (?:Exited with exit code|Killed|Terminated)"
)


def job_error_log(submitit_folder: Path, executor: str, job_id: str) -> Path:
    """The stderr of rank 0 of one job, where submitit writes it."""
    return Path(submitit_folder) / executor / f"{job_id}_0_log.err"


def last_error_line(path: Path) -> str | None:
    """The last error line of the log at `path` (masked, at most 300 characters); None if the
    log is missing, unreadable or names no error."""
    try:
        with open(path, "rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read().decode(errors="replace")
    except OSError:
        return None
    echo = None
    for line in reversed(tail.splitlines()):
        line = line.rstrip()
        if _TASK_EXIT.match(line):
            echo = echo or line
        elif _ERROR_LINE.match(line):
            return _shown(line)
    return _shown(echo) if echo else None


def _shown(line: str) -> str:
    line = mask_userinfo(line)
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..."
