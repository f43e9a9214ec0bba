"""The resolve path's state file, `<study folder>/resolve.json`: the declared plan, each look and
the cells each extension bought.

Its name, format, reader and writer, like `looks.json`'s (`scaling.state.files.look_state`).
`added_resolve_points` turns the cells each extension bought into grid points, which
`scaling.spec.loader.resolve` expands into cells through the same `scaling.spec.grid` path as the
starting grid's; how the path is driven is `scaling.driver.resolve`'s.

    {"plan": {"budget", "max_looks", "alpha", "kinds", "max_seeds", "start_seeds"},
     "looks": [{"look", "level", "words", "estimate_pct", "half_width_pct",
                "bought" (an extension: the option), "round", "cells": [{cell_id, variant,
                spec_variant, size, seed, lr, and tokens for a longer run}]}],
     "path": null, or the loop's `Path.as_dict()` once it ended}

The plan is written before the first extension; an extension's look (its cells) before its
cells are submitted, so a rerun finds them and trains nothing twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scaling.state.files.io_retry import written
from scaling.state.files.regular import BadStateFile, read_json, write_text

__all__ = ["RESOLVE_FILE", "read_resolve", "write_resolve", "added_resolve_points"]

RESOLVE_FILE = "resolve.json"
PLAN_KEYS = ("budget", "max_looks", "alpha", "kinds", "max_seeds", "start_seeds")
_FIX = (
    "restore it; deleting it forgets the declared plan and the path (the cells it bought stay in "
    "MLflow, but no longer in the study)"
)


def resolve_path_file(folder: Path) -> Path:
    return Path(folder) / RESOLVE_FILE


def read_resolve(folder: Path) -> dict[str, Any] | None:
    """The file's content, or None before a resolve plan was declared."""
    path = resolve_path_file(folder)
    data = read_json(path, "a resolve state", _FIX)
    if data is None:
        return None
    problem = None
    if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
        problem = "no plan"
    elif missing := [k for k in PLAN_KEYS if k not in data["plan"]]:
        problem = f"its plan lacks {', '.join(missing)}"
    elif not isinstance(data.get("looks"), list) or not all(
        isinstance(look, dict) and "look" in look for look in data["looks"]
    ):
        problem = "no list of looks"
    if problem:
        raise BadStateFile(f"{path}: not a resolve state ({problem}); {_FIX}")
    return data


def write_resolve(folder: Path, data: dict[str, Any]) -> None:
    """Write the state atomically, through a transient I/O error (`written`)."""
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"

    def write() -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_text(resolve_path_file(folder), text, _FIX)

    written(write, resolve_path_file(folder))


def added_resolve_points(folder: Path) -> list[tuple]:
    """(size, variant as the study file names it, seed, lr, round[, tokens]) of every cell an
    extension bought, for `scaling.spec.grid.expand_cells` (tokens: a longer run's budget);
    [] without a resolve state."""
    data = read_resolve(folder)
    if data is None:
        return []
    return [
        (c["size"], c["spec_variant"], int(c["seed"]), float(c["lr"]), int(look["round"]))
        + ((float(c["tokens"]),) if c.get("tokens") else ())  # longer training's budget
        for look in data["looks"]
        for c in look.get("cells", [])
    ]
