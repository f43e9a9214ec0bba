"""`scaling cancel` stops the study, not only its jobs: `<study folder>/cancelled.json`.

A round whose cells were cancelled is otherwise judged with them (so that a job a scheduler
killed does not hold a study forever), and a `scaling run` or `status --watch` still polling
would then submit the next LR-search round or look. The mark says the user stopped the study:
while it is there no driver starts new cells, and `scaling status` says so. `scaling run` and
`scaling submit` remove it (the user asks to go on); `status --watch` only watches.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from foundation.atomic import write_text

__all__ = ["CANCEL_FILE", "mark_cancelled", "read_cancel_mark", "clear_cancel_mark", "cancel_line"]

CANCEL_FILE = "cancelled.json"


def mark_cancelled(folder: Path, cell_ids: list[str]) -> dict:
    """Write the mark (atomically; the cells of an earlier mark kept) and return it."""
    before = read_cancel_mark(folder) or {}
    cells = sorted({*before.get("cells", []), *cell_ids})
    mark = {"at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cells": cells}
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / CANCEL_FILE, json.dumps(mark, indent=2) + "\n")
    return mark


def read_cancel_mark(folder: Path) -> dict | None:
    """The mark, or None when the study was not cancelled. A file that does not parse still
    means cancelled (it was written by `scaling cancel`, then damaged): its time is unknown."""
    path = folder / CANCEL_FILE
    if not path.is_file():
        return None
    try:
        mark = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"at": f"an unknown time ({path} does not parse)", "cells": []}
    if not isinstance(mark, dict):
        return {"at": f"an unknown time ({path} is not a JSON object)", "cells": []}
    return mark


def clear_cancel_mark(folder: Path) -> dict | None:
    """Remove the mark; what it said (None: there was none)."""
    mark = read_cancel_mark(folder)
    if mark is not None:
        (folder / CANCEL_FILE).unlink(missing_ok=True)
    return mark


def cancel_line(mark: dict) -> str:
    """What `status`, `run` and `status --watch` say of a cancelled study."""
    return (
        f"study cancelled by `scaling cancel` at {mark.get('at', '?')}: no further cells are "
        "started; `scaling run` or `scaling submit` goes on"
    )
