"""The sequential seeds' state file, `<study folder>/looks.json`: every look and the seeds it added.

Its name, format, reader and writer, like `lr_search.json`'s (`scaling.state.files.search_state`).
`scaling.spec.loader.added_look_points` turns the seeds each look added into cells (through the
same `scaling.spec.grid` path as the starting grid); how a look is judged and the file written is
the round driver's (`scaling.looks.sequential_seeds`); the statistics are
`analysis.stats.looks.sequential`'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scaling.state.files.io_retry import written
from scaling.state.files.regular import BadStateFile, read_json, write_text

__all__ = [
    "LOOKS_FILE",
    "read_looks",
    "write_looks",
    "looks_summary",
]

LOOKS_FILE = "looks.json"
_LOOK_KEYS = ("look", "round", "level", "verdict", "stop", "reason", "add_seeds", "added")
_FIX = (
    "restore it, or delete it to judge the looks again from the runs in MLflow (they are kept "
    "and reused)"
)


def looks_path(folder: Path) -> Path:
    return Path(folder) / LOOKS_FILE


def read_looks(folder: Path) -> dict[str, Any]:
    """`{"design": {...}, "looks": [...]}` (no looks before the first one was judged)."""
    path = looks_path(folder)
    data = read_json(path, "a sequential-seeds state", _FIX)
    if data is None:
        return {"design": None, "looks": []}
    looks = data.get("looks") if isinstance(data, dict) else None
    if not isinstance(looks, list) or not all(isinstance(look, dict) for look in looks):
        problem = "no list of looks"
    elif not isinstance(data.get("design"), dict | None):
        problem = "its design is not an object"
    else:
        missing = sorted({k for look in looks for k in _LOOK_KEYS if k not in look})
        problem = f"a look lacks {', '.join(missing)}" if missing else None
    if problem:
        raise BadStateFile(f"{path}: not a sequential-seeds state ({problem}); {_FIX}")
    return data


def write_looks(folder: Path, data: dict[str, Any]) -> None:
    """Write the looks atomically, through a transient I/O error (`written`)."""
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"

    def write() -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_text(looks_path(folder), text, _FIX)

    written(write, looks_path(folder))


def looks_summary(folder: Path) -> dict[str, Any] | None:
    """The file's content for `status`, the live bar and the report; None before look 1."""
    data = read_looks(folder)
    return data if data["looks"] else None
