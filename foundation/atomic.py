"""Atomic writes: a reader sees the old file or the new one, never half of either.

Every file that another process polls (run id, job records, results, offsets, the status cache)
is written to a temporary name in the same directory and renamed over the target, which POSIX
makes atomic. The temporary name is unique to the writer (pid and a random suffix): two
processes writing the same file at once each rename a whole file of their own, so the last
rename wins and no one can move the other's half-written bytes into place.

No write or read here follows a symbolic link or touches anything but a regular file (issue 63):
a link planted at a study's `jobs.json` would otherwise have its target replaced, a FIFO named
like a cache would block the reader forever, a directory would end the command in a traceback.
Such a path is `UnsafePath` (a ValueError, one line naming it and the fix), and what it points
at is left byte for byte as it was. The temporary file is created with `O_EXCL | O_NOFOLLOW`,
so a link planted at its name is refused too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "UnsafePath",
    "check_regular",
    "read_bytes",
    "read_text",
    "write_text",
    "write_bytes",
    "open_lock",
]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class UnsafePath(ValueError):
    """`path` is not a regular file (`kind` says what it is): not followed, read or replaced."""

    def __init__(self, path: Path, kind: str, fix: str = "remove it, then run again") -> None:
        self.path, self.kind = Path(path), kind
        super().__init__(f"{path}: {kind}, not a regular file (left as it is); {fix}")


def _kind(path: Path, mode: int) -> str:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            kind += f" to {os.readlink(path)}"
    return kind


def check_regular(path: str | Path) -> bool:
    """True if `path` is a regular file, False if there is nothing there; UnsafePath else."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if not stat.S_ISREG(mode):
        raise UnsafePath(path, _kind(path, mode))
    return True


def read_bytes(path: str | Path) -> bytes | None:
    """The file's bytes, None if there is none; UnsafePath if it is not a regular file (a FIFO is
    opened non-blocking and refused, never read: a read would wait for a writer forever)."""
    path = Path(path)
    if not check_regular(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except FileNotFoundError:
        return None  # removed since the check
    except OSError as err:
        if err.errno == errno.ELOOP:  # replaced by a link since the check
            raise UnsafePath(path, "a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):  # replaced since the check
            raise UnsafePath(path, _KINDS.get(stat.S_IFMT(mode), "not a regular file"))
        return handle.read()


def read_text(path: str | Path) -> str | None:
    """`read_bytes` as UTF-8 text (UnicodeDecodeError, a ValueError, if it is not)."""
    data = read_bytes(path)
    return None if data is None else data.decode()


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary sibling and a rename; returns the path.
    UnsafePath if `path` is there and not a regular file (it is left as it is)."""
    path = Path(path)
    check_regular(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        _write_new(tmp, data)
        check_regular(path)  # a link planted meanwhile is refused, not replaced
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or a kill must not leave temporaries behind
        raise
    return path


def _write_new(tmp: Path, data: bytes) -> None:
    """Create `tmp` (never there before, never through a link) holding `data`."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
    except FileExistsError:
        raise UnsafePath(tmp, "already there (planted?)") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def write_text(path: str | Path, text: str) -> Path:
    """`write_bytes` for UTF-8 text."""
    return write_bytes(path, text.encode())


@contextlib.contextmanager
def open_lock(path: str | Path) -> Iterator[BinaryIO]:
    """A lock file to `flock`, made if absent, never truncated, never through a link;
    UnsafePath if `path` is not a regular file."""
    path = Path(path)
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafePath(path, "a symbolic link") from None
        raise
    with os.fdopen(fd, "rb+") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafePath(path, _KINDS.get(stat.S_IFMT(mode), "not a regular file"))
        yield handle
