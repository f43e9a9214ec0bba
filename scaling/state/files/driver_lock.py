"""One study, one driver: `<study folder>/driver.pid` names the process driving the study.

`scaling run`, `submit` and `status --watch` submit cells and write the study's state files;
two of them at once would race on the state files and on creating a new SQLite store (an
alembic migration run twice). The second refuses at once, naming the first's pid.

A pid file, not `flock`: cells forked from the driver (the local executor, the warm-start
server) would inherit a lock and keep it after the driver died. The file names its owner three
ways, `PID START HOST`: the pid, the process's start time (field 22 of `/proc/PID/stat`, clock
ticks since boot) and the hostname. A pid is reused once its process is gone, so a live pid alone
proves nothing: the lock is held only while a process with that pid AND that start time lives on
this host. A lock whose owner is gone (the driver was killed) is stale and taken over. A lock
written on another host (a study folder on a shared file system) cannot be checked from here and
is honoured, naming the host. A lock of an older version (a pid alone) is held only by a live
`scaling` process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from foundation.config import ConfigError
from scaling.state.files.regular import read_text

__all__ = ["LOCK_NAME", "one_driver", "acquire", "release", "process_start", "owner_line"]

LOCK_NAME = "driver.pid"
_FIX = (
    "remove it (`rm -r` for a directory) if no `scaling` command drives the study, then run again"
)
_WRITING_S = 5.0  # an empty lock file younger than this is being written by its driver


def acquire(folder: Path) -> Path:
    """Make `folder/driver.pid` hold this process's pid; ConfigError if a live process holds
    it. The folder is made if needed (the study's checks passed before)."""
    path = folder / LOCK_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{folder}: cannot make the study folder ({err.strerror})") from None
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder is not None:
                pid, host = holder
                where = "" if host is None else f" on host {host}"
                stop = f"`kill {pid}`" if host is None else f"`kill {pid}` on {host}"
                raise ConfigError(
                    f"{folder}: this study is already driven by pid {pid}{where} (`scaling "
                    f"run`, `submit` or `status --watch`, {path}); wait for it to end, or stop "
                    f"it (Ctrl-C there, or {stop}) and run again"
                ) from None
            path.unlink(missing_ok=True)  # stale: its driver is gone
            continue
        except OSError as err:
            raise ConfigError(
                f"{path}: cannot write the study's driver lock ({err.strerror}); fix the "
                "folder's permissions"
            ) from None
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(owner_line(os.getpid()))
        except OSError as err:  # a full disk: one line, and no half-written lock left
            path.unlink(missing_ok=True)
            raise ConfigError(
                f"{path}: cannot write the study's driver lock ({err.strerror}); free space "
                "or fix the folder's permissions"
            ) from None
        return path
    raise ConfigError(f"{path}: could not take the study's driver lock; run again")


def release(path: Path) -> None:
    """Remove the lock if it is still this process's (a lock replaced by a link, a directory or
    a FIFO is not: it is left as it is)."""
    try:
        pid = _read_pid(path)
    except ConfigError:
        return
    if pid == os.getpid():
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def one_driver(folder: Path) -> Iterator[None]:
    path = acquire(folder)
    try:
        yield
    finally:
        release(path)


def process_start(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot, `/proc/PID/stat` field 22);
    None if there is no such process (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def owner_line(pid: int) -> str:
    """What the lock file holds for its owner `pid`: `PID START HOST`."""
    return f"{pid} {process_start(pid) or 0} {socket.gethostname()}\n"


def _read_owner(path: Path) -> tuple[int, int | None, str | None] | None:
    """(pid, start time, host) from the lock; start and host None in an older pid-only lock;
    None if the file is empty or not a lock; ConfigError (`regular.BadStateFile`) if it is a
    link, a directory or a FIFO (never followed, nor read: a FIFO would block)."""
    text = read_text(path, _FIX)
    parts = (text or "").split()
    try:
        pid = int(parts[0])
        start = int(parts[1]) if len(parts) > 1 else None
    except (IndexError, ValueError):
        return None
    return pid, start, parts[2] if len(parts) > 2 else None


def _read_pid(path: Path) -> int | None:
    owner = _read_owner(path)
    return None if owner is None else owner[0]


def _holder(path: Path) -> tuple[int | str, str | None] | None:
    """The owner that holds the lock, as (pid, its host if not this one); None if it is stale."""
    owner = _read_owner(path)
    if owner is None:
        try:
            young = time.time() - path.stat().st_mtime < _WRITING_S
        except OSError:
            return None
        return ("(starting)", None) if young else None
    pid, start, host = owner
    if host is not None and host != socket.gethostname():
        return pid, host  # another machine's process: it cannot be checked from here
    if pid == os.getpid():
        return None  # this process, e.g. a second command in one test session
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's: its start time still tells whether it is the owner
    if _zombie(pid):
        return None
    if start is None:  # an older lock: a pid alone, held only by a live `scaling` process
        return (pid, None) if _is_scaling(pid) else None
    return (pid, None) if process_start(pid) == start else None  # else: a reused pid


def _is_scaling(pid: int) -> bool:
    """True if process `pid` runs `scaling` (its command line names it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: cannot tell, so honour the lock
    return b"scaling" in cmdline


def _zombie(pid: int) -> bool:
    """A driver that exited but was not reaped yet (Linux; elsewhere: not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]
