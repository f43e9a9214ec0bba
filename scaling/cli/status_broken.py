"""`scaling status` while a variant of the user's own does not import (issue 54).

Every other command refuses such a study: nothing can be planned, trained or judged with an arm
whose code does not load. `status` only reads, and a user who just broke the file wants to see
the grid: the other arms are shown as usual, and each cell of the broken arm that was submitted
(its id in `jobs.json`: the arm's name and learning rates come from the variant's own code, so
the cells never submitted cannot be named) is listed with the import error in place of a state.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["broken_variants", "import_note", "unloadable_rows"]

# models.catalog.variants.load_variant: "... importing module 'm' (FILE) failed: ERROR, at F:L"
_IMPORT_FAILED = re.compile(r"\((?P<file>[^()]+)\) failed: (?P<error>.*), at (?P<where>\S+:\d+)$")


def broken_variants(path: Path) -> dict[str, str]:
    """Entry → why it does not load, for each variant of the user's own in the study file at
    `path` that does not (its module fails to import, or its function fails). Built-in arms and
    unknown names are not here: those stay the loader's errors."""
    from foundation.config import load_file  # lazy: `scaling --help` stays fast
    from scaling.spec.ladder import ARMS, resolve_arm  # lazy: as above

    data = load_file(path)
    entries = data.get("variants") if isinstance(data, dict) else None
    broken = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, str) or entry in ARMS or ":" not in entry:
            continue
        try:
            resolve_arm(entry)
        except ValueError as err:
            broken[entry] = str(err)
    return broken


def import_note(message: str) -> str:
    """What a cell of a variant that does not load shows: ``variant file does not import:
    FILE:LINE ERROR`` for an import failure, else the loader's own words."""
    found = _IMPORT_FAILED.search(message)
    if found:
        return f"variant file does not import: {found['where']} {found['error']}"
    return f"variant does not load: {message}"


def unloadable_rows(spec, broken: dict[str, str]) -> list[list[str]]:
    """Status table rows (cell, state, val loss, job, run) for the submitted cells that belong
    to none of the arms that loaded: the broken variants' cells, marked with why."""
    from scaling.state.files.job_records import read_records  # lazy: `scaling --help` stays fast

    known = {cell.cell_id for cell in spec.cells}
    note = "; ".join(import_note(message) for message in broken.values())
    records = read_records(spec.folder)
    return [[cid, note, "", records[cid].job_id, ""] for cid in sorted(set(records) - known)]
