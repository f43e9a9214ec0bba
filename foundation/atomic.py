"""Atomic writes: a reader sees the old file or the new one, never half of either.

Every file that another process polls (run id, job records, results, offsets, the status cache)
is written to a temporary name in the same directory and renamed over the target, which POSIX
makes atomic. The temporary name is unique to the writer (pid and a random suffix): two
processes writing the same file at once each rename a whole file of their own, so the last
rename wins and no one can move the other's half-written bytes into place.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_text", "write_bytes"]


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary sibling and a rename; returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or a kill must not leave temporaries behind
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    """`write_bytes` for UTF-8 text."""
    return write_bytes(path, text.encode())
