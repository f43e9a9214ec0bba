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

from foundation.atomic import write_text
from foundation.config import ConfigError
from scaling.state.files.io_retry import written

__all__ = [
    "LOOKS_FILE",
    "read_looks",
    "write_looks",
    "looks_summary",
]

LOOKS_FILE = "looks.json"
_LOOK_KEYS = ("look", "round", "level", "verdict", "stop", "reason", "add_seeds", "added")


def looks_path(folder: Path) -> Path:
    return Path(folder) / LOOKS_FILE


def read_looks(folder: Path) -> dict[str, Any]:
    """`{"design": {...}, "looks": [...]}` (no looks before the first one was judged)."""
    path = looks_path(folder)
    if not path.is_file():
        return {"design": None, "looks": []}
    problem = None
    try:
        data = json.loads(path.read_text())
        looks = data["looks"]
        missing = sorted({k for look in looks for k in _LOOK_KEYS if k not in look})
        if missing:
            problem = f"a look lacks {', '.join(missing)}"
    except (OSError, ValueError, KeyError, TypeError) as err:  # cut short, not JSON, not ours
        problem = str(err)
    if problem:
        raise ConfigError(
            f"{path}: not a sequential-seeds state ({problem}); restore it, or delete it to "
            "judge the looks again from the runs in MLflow (they are kept and reused)"
        )
    return data


def write_looks(folder: Path, data: dict[str, Any]) -> None:
    """Write the looks atomically, through a transient I/O error (`written`)."""
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"

    def write() -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_text(looks_path(folder), text)

    written(write, looks_path(folder))


def looks_summary(folder: Path) -> dict[str, Any] | None:
    """The file's content for `status`, the live bar and the report; None before look 1."""
    data = read_looks(folder)
    return data if data["looks"] else None
