"""Atomic writes: a reader sees the old file or the new one, never half of either.

Every file that another process polls (run id, job records, results, offsets) is written to a
temporary name in the same directory and renamed over the target, which POSIX makes atomic.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_text", "write_bytes"]


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary sibling and a rename; returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_text(path: str | Path, text: str) -> Path:
    """`write_bytes` for UTF-8 text."""
    return write_bytes(path, text.encode())
