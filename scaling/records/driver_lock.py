"""One study, one driver: `<study folder>/driver.pid` names the process driving the study.

`scaling run`, `submit` and `status --watch` submit cells and write the study's state files;
two of them at once would race on the state files and on creating a new SQLite store (an
alembic migration run twice). The second refuses at once, naming the first's pid.

A pid file, not `flock`: cells forked from the driver (the local executor, the warm-start
server) would inherit a lock and keep it after the driver died. A file whose pid is no live
process is stale (the driver was killed) and is taken over.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from foundation.config import ConfigError

__all__ = ["LOCK_NAME", "one_driver", "acquire", "release"]

LOCK_NAME = "driver.pid"
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
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder is not None:
                raise ConfigError(
                    f"{folder}: this study is already driven by pid {holder} (`scaling run`, "
                    f"`submit` or `status --watch`, {path}); wait for it to end, or stop it "
                    f"(Ctrl-C there, or `kill {holder}`) and run again"
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
                handle.write(f"{os.getpid()}\n")
        except OSError as err:  # a full disk: one line, and no half-written lock left
            path.unlink(missing_ok=True)
            raise ConfigError(
                f"{path}: cannot write the study's driver lock ({err.strerror}); free space "
                "or fix the folder's permissions"
            ) from None
        return path
    raise ConfigError(f"{path}: could not take the study's driver lock; run again")


def release(path: Path) -> None:
    """Remove the lock if it is still this process's."""
    if _read_pid(path) == os.getpid():
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def one_driver(folder: Path) -> Iterator[None]:
    path = acquire(folder)
    try:
        yield
    finally:
        release(path)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _holder(path: Path) -> int | str | None:
    """The live process that holds the lock, else None (stale)."""
    pid = _read_pid(path)
    if pid is None:
        try:
            young = time.time() - path.stat().st_mtime < _WRITING_S
        except OSError:
            return None
        return "(starting)" if young else None
    if pid == os.getpid():
        return None  # this process, e.g. a second command in one test session
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, another user's
    return None if _zombie(pid) else pid


def _zombie(pid: int) -> bool:
    """A driver that exited but was not reaped yet (Linux; elsewhere: not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]
