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

from scaling.state.files.regular import read_bytes, write_text

__all__ = ["CANCEL_FILE", "mark_cancelled", "read_cancel_mark", "clear_cancel_mark", "cancel_line"]

CANCEL_FILE = "cancelled.json"
_FIX = "remove it (`rm -r` for a directory), then `scaling run` or `scaling submit` to go on"


def mark_cancelled(folder: Path, cell_ids: list[str]) -> dict:
    """Write the mark (atomically; the cells of an earlier mark kept) and return it."""
    before = read_cancel_mark(folder) or {}
    cells = sorted({*before.get("cells", []), *cell_ids})
    mark = {"at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cells": cells}
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / CANCEL_FILE, json.dumps(mark, indent=2) + "\n", _FIX)
    return mark


def read_cancel_mark(folder: Path) -> dict | None:
    """The mark, or None when the study was not cancelled. A file that does not parse still
    means cancelled (it was written by `scaling cancel`, then damaged): its time is unknown."""
    path = folder / CANCEL_FILE
    data = read_bytes(path, _FIX)  # a link, a directory, a FIFO: BadStateFile
    if data is None:
        return None
    try:
        mark = json.loads(data)
    except (ValueError, RecursionError):
        return {"at": f"an unknown time ({path} does not parse)", "cells": []}
    cells = mark.get("cells", []) if isinstance(mark, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        return {"at": f"an unknown time ({path} is not a cancel mark)", "cells": []}
    at = mark.get("at")
    return {"at": at if isinstance(at, str) else "an unknown time", "cells": cells}


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
