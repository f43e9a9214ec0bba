"""The sequential seeds' state file, `<study folder>/looks.json`: every look and the seeds it added.

Part of the study's expansion, like `lr_search.json` (`scaling.spec.search.search_state`):
`scaling.spec.loader.resolve` turns the seeds each look added into cells through the same
`scaling.spec.grid` path as the starting grid. How a look is judged and the file written is the
round driver's (`scaling.rounds.looks`); the statistics are `analysis.stats.looks.sequential`'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foundation.atomic import write_text
from foundation.config import ConfigError
from scaling.spec.ladder import resolve_arm
from scaling.spec.study import Study

__all__ = [
    "LOOKS_FILE",
    "read_looks",
    "write_looks",
    "looks_summary",
    "looks_over",
    "added_look_points",
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
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_text(looks_path(folder), json.dumps(data, indent=1, allow_nan=False) + "\n")


def looks_summary(folder: Path) -> dict[str, Any] | None:
    """The file's content for `status`, the live bar and the report; None before look 1."""
    data = read_looks(folder)
    return data if data["looks"] else None


def looks_over(study: Study) -> bool:
    """True when the study has no sequential seeds, or its last look stopped it."""
    if study.seed_rounds is None:
        return True
    looks = read_looks(study.folder)["looks"]
    return bool(looks) and bool(looks[-1]["stop"])


def added_look_points(study: Study) -> list[tuple[str, str, int, float, int]]:
    """(size, variant, seed, lr, round) of every cell the looks added, for `expand_cells`.

    Arms are stored by their arm name; the spec's own variant string is handed back to the grid
    so that the cell is built exactly as the starting grid's are.
    """
    if study.seed_rounds is None:
        return []
    spec_variant = {resolve_arm(v)[0]: v for v in study.variants}
    points = []
    for look in read_looks(study.folder)["looks"]:
        for a in look["added"]:
            variant = spec_variant.get(a["variant"], a["variant"])
            round_ = int(look["round"])
            points += [(a["size"], variant, int(s), float(a["lr"]), round_) for s in a["seeds"]]
    return points
