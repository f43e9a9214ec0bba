"""Where a run's tracking spool lives, and what its tail says about the run's progress.

`jobs.telemetry.tracking.Tracker` appends every record to the spool before MLflow sees it, so the
spool is the freshest word on how far a run is: `scaling status` reads its last metric's step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["SPOOL", "UPLOADED_OFFSET", "last_logged_step", "reset_uploaded"]

SPOOL = Path("tracking") / "spool.jsonl"  # in the run's output dir
UPLOADED_OFFSET = Path("tracking") / "uploaded_offset"  # how far MLflow has the spool
_TAIL_BYTES = 16384  # the end of a spool that holds its last metric lines


def last_logged_step(output_dir: str | Path) -> int | None:
    """The step of the last metric the run spooled (None: none yet), from the spool's tail:
    what `scaling status` shows for a running cell, without asking MLflow."""
    path = Path(output_dir) / SPOOL
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line (the first of the tail, or one being written)
        if isinstance(record, dict) and record.get("t") == "metric":
            return int(record["step"])
    return None


def reset_uploaded(output_dir: str | Path) -> None:
    """Send the whole spool again on the next upload: the run it went to is gone (a lost
    tracking store, a deleted run), and the run that replaces it has none of it. Exactly once
    still holds: the uploader skips what the new run already has (`jobs.telemetry.tracking`)."""
    (Path(output_dir) / UPLOADED_OFFSET).unlink(missing_ok=True)
