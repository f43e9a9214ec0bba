"""Where a study's relative paths point, and whether its tracking store exists yet.

A study file's relative paths (`data.path`, `data.prepare.output_dir`, `output_dir`, a
`sqlite:///` store, `python_path`) resolve against the folder that holds the study file, never
against the working directory: the same file means the same study folder, store and dataset
from wherever a command runs. `scaling` (the loader) and `analysis` (`scaling analyze STUDY`)
both resolve through these functions, so they cannot disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "resolve_path",
    "resolve_tracking_uri",
    "sqlite_path",
    "missing_store",
    "missing_store_message",
]

SQLITE = "sqlite:///"
DEFAULT_OUTPUT_DIR = "runs/{name}"  # relative to the study file's folder


def resolve_path(path: str | Path, base: Path) -> Path:
    """`path` as an absolute, normalised path: `~` expanded, a relative one taken from `base`.

    Normalised (no `..`) so that the same place is the same string from any working directory:
    the study folder and store URI are keys of caches and run configs.
    """
    p = Path(path).expanduser()
    return Path(os.path.normpath(p if p.is_absolute() else Path(base).absolute() / p))


def sqlite_path(uri: str) -> Path | None:
    """The file of a `sqlite:///` store (None for a server or an in-memory store)."""
    if not uri.startswith(SQLITE) or uri == SQLITE + ":memory:":
        return None
    return Path(uri[len(SQLITE) :])


def resolve_tracking_uri(uri: str, base: Path) -> str:
    """`uri` with a relative SQLite store path taken from `base`; other URIs unchanged."""
    path = sqlite_path(uri)
    return uri if path is None else SQLITE + str(resolve_path(path, base))


def missing_store(uri: str) -> Path | None:
    """The SQLite file `uri` names if it does not exist yet, else None (servers: None).

    Read-only commands (`status`, `plan`, `analyze`) check this first: opening a SQLite URI
    with MLflow creates the file, and a store created in the wrong place hides the real one.
    """
    path = sqlite_path(uri)
    return path if path is not None and not path.exists() else None


def missing_store_message(path: Path) -> str:
    """What a read-only command says when the study's SQLite store is not there."""
    return (
        f"no MLflow store at {path} (the study's mlflow.tracking_uri): nothing of this study "
        "was submitted with this spec yet; `scaling submit` or `scaling run` creates it, or fix "
        "the URI if the store is elsewhere"
    )
