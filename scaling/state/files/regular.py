"""Every read and write of a study-folder file goes through here: regular files only.

`foundation.atomic` refuses a symbolic link, a directory or a FIFO where a state file should be
(`UnsafePath`: never followed, read or replaced, issue 63); here that refusal becomes
`BadStateFile`, a ConfigError, which the commands print as one `error:` line (exit 2). `fix`
says what the user does about it: delete the file (it is rebuilt), or restore it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from foundation import atomic
from foundation.config import ConfigError

__all__ = [
    "BadStateFile",
    "REMOVE",
    "read_bytes",
    "read_text",
    "read_json",
    "write_text",
    "open_lock",
]

REMOVE = "remove it (`rm -r` for a directory), then run again"


class BadStateFile(ConfigError):
    """A study-folder file that cannot be trusted or written; one line naming it and the fix."""


def _bad(err: atomic.UnsafePath, fix: str) -> BadStateFile:
    return BadStateFile(f"{err.path}: {err.kind}, not a regular file (left as it is); {fix}")


def read_bytes(path: Path, fix: str = REMOVE) -> bytes | None:
    """The file's bytes, None if there is none; BadStateFile if it is not a regular file or
    cannot be read."""
    try:
        return atomic.read_bytes(path)
    except atomic.UnsafePath as err:
        raise _bad(err, fix) from None
    except OSError as err:
        raise BadStateFile(f"{path}: cannot be read ({err.strerror or err}); {fix}") from None


def read_text(path: Path, fix: str = REMOVE) -> str | None:
    """`read_bytes` as UTF-8 text; BadStateFile if it is not."""
    data = read_bytes(path, fix)
    try:
        return None if data is None else data.decode()
    except UnicodeDecodeError:
        raise BadStateFile(f"{path}: not UTF-8 text; {fix}") from None


def read_json(path: Path, what: str, fix: str = REMOVE) -> object | None:
    """The file's JSON, None if there is none; BadStateFile (naming `what` the file should be)
    if it is not a regular file or not JSON (cut short, garbled, nested past Python's stack)."""
    text = read_text(path, fix)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise BadStateFile(f"{path}: not {what} (not JSON: {err}); {fix}") from None


def write_text(path: Path, text: str, fix: str = REMOVE) -> None:
    """`foundation.atomic.write_text`, its refusal as BadStateFile; an OSError (a full disk, a
    read-only spell) is raised as it is, for `io_retry.written` to try again."""
    try:
        atomic.write_text(path, text)
    except atomic.UnsafePath as err:
        raise _bad(err, fix) from None


@contextlib.contextmanager
def open_lock(path: Path, fix: str = REMOVE) -> Iterator[BinaryIO]:
    """`foundation.atomic.open_lock`, its refusal as BadStateFile."""
    stack = contextlib.ExitStack()
    try:
        handle = stack.enter_context(atomic.open_lock(path))
    except atomic.UnsafePath as err:
        raise _bad(err, fix) from None
    with stack:
        yield handle
