"""Why a cell's job failed: the last error line of its log, for `scaling status` and MLflow
(and of a pilot probe's job, for `scaling pilot`: `failure_reason`).

A job that dies before its training loop starts (a data cache it cannot lock, an import error,
a node without the GPU it asked for) ends with no MLflow tag of its own: its run only shows as
unfinished. Its cause is in the job's stderr, which submitit keeps as
`<study>/submitit/<executor>/<job id>_0_log.err` (rank 0: `backends.base.JobBackend.error_log`;
Slurm's `srun: error:` lines land there too). The last line that reads as an error is the
cause: a traceback's final line, or a `...: error: ...` line of Slurm or of this project's own
commands. srun's own report that a task exited (`srun: error: n1: task 0: Exited with exit code
1`) follows the task's traceback and only restates it; it is the cause only when nothing else
in the tail names one.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

from foundation.secrets import mask_userinfo

__all__ = ["last_error_line", "last_error_in", "failure_reason"]

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

# a traceback's frame: '  File "/home/me/my_query.py", line 12, in __init__'
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)', re.MULTILINE)
_LIBRARIES = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}


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
    return last_error_in(tail)


def last_error_in(text: str) -> str | None:
    """The last error line of `text` (a log's tail, a job's traceback), masked and at most 300
    characters; None if no line reads as an error."""
    echo = None
    for line in reversed(text.splitlines()):
        line = line.rstrip()
        if _TASK_EXIT.match(line):
            echo = echo or line
        elif _ERROR_LINE.match(line):
            return _shown(line)
    return _shown(echo) if echo else None


def _shown(line: str) -> str:
    line = mask_userinfo(line)
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..."


def failure_reason(text: str, own_file: str | None = None) -> str:
    """Why a job failed, from submitit's report of it (the job's traceback, then where its
    logs are): the traceback's last error line and where it arose, e.g. "ValueError: ... (at
    /home/me/my_query.py:12)": the deepest frame in a file whose path ends with `own_file` (a
    user's variant module), else the deepest outside Python and its installed packages. The
    report's first line if no line reads as an error (a job that left no result)."""
    reason = last_error_in(text)
    if reason is None:
        lines = text.strip().splitlines()
        return _shown(lines[0]) if lines else ""
    frames = [m for m in _FRAME.finditer(text) if not _in_library(m["path"])]
    own = [m for m in frames if own_file and m["path"].endswith(own_file)]
    where = (own or frames)[-1] if frames else None
    return f"{reason} (at {where['path']}:{where['line']})" if where else reason


def _in_library(path: str) -> bool:
    """A frame of Python itself or of an installed package (also on a node whose prefix differs
    from this machine's: by the folder names pip and Debian install into)."""
    if path.startswith("<") or "/site-packages/" in path or "/dist-packages/" in path:
        return True
    return any(path.startswith(root + "/") for root in _LIBRARIES if root)
