"""The folders a study writes to, checked before anything is made: the study folder, the
dataset's folder (each job takes a lock in `<data>/cache/`) and a SQLite store.

A folder that cannot be made or written fails a study late and obscurely (a PermissionError in
every cell, a store half made); a path too long for the file system fails with OSError 36
wherever it is first used. Here each is one problem naming the field and the fix, found by
looking only: nothing is created.
"""

from __future__ import annotations

import os
from pathlib import Path

from foundation.config import Problems
from foundation.studypaths import sqlite_path
from scaling.spec.study import StudySpec

__all__ = ["MAX_NAME_BYTES", "check_paths", "check_places"]

MAX_NAME_BYTES = 255  # one path component (NAME_MAX on Linux, macOS and Windows file systems)
# A study folder's files lie up to ~200 characters below it (cells/<cell id>/checkpoints/...),
# so the folder itself must leave that room under PATH_MAX (4096 on Linux).
MAX_FOLDER_CHARS = 3800
_STORE = "study.mlflow.tracking_uri"


def check_paths(study: StudySpec) -> None:
    """Raise ConfigError listing each path of `study` too long for the file system, or that
    is (or lies below) a file. Part of the spec's checks: a path that cannot exist is wrong
    wherever the study runs (and reading the study's state files there would raise OSError)."""
    p = Problems()
    for field, path in _places(study):
        if field == _STORE:  # a file itself, in a folder
            if _check_length(p, field, path) and not _is_file(p, field, path.parent):
                if path.is_dir():
                    p.add(f"{field}: {path} is a folder; name a file, e.g. mlflow.db")
        elif _check_length(p, field, path):
            _is_file(p, field, path)
    p.raise_if_any()


def check_places(study: StudySpec) -> None:
    """Raise ConfigError listing each folder of `study` that this user cannot write or make:
    the study folder and the dataset's folder (its `cache/`). Checked by the commands that
    write (`submit`, `run`) before they make anything."""
    check_paths(study)
    p = Problems()
    _check_writable(p, "study.output_dir", study.folder, "the study's folder")
    field, data = _places(study)[1]
    cache = data / "cache"  # each job's index-cache lock (data_prep.access)
    _check_writable(p, field, cache if cache.exists() else data, "the dataset's folder")
    p.raise_if_any()


def _places(study: StudySpec) -> list[tuple[str, Path]]:
    """(field, path) of the study folder, the dataset and the SQLite store if any."""
    data_field = "study.data.path" if study.data.path else "study.data.prepare.output_dir"
    places = [("study.output_dir", study.folder), (data_field, study.dataset_path)]
    store = sqlite_path(study.mlflow.tracking_uri)
    if store is not None:
        places.append((_STORE, store))
    return places


def _check_length(p: Problems, field: str, path: Path) -> bool:
    for part in path.parts:
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            p.add(
                f"{field}: the name {part[:40]}... is {len(os.fsencode(part))} bytes, over the "
                f"file system's limit of {MAX_NAME_BYTES}; use a shorter name"
            )
            return False
    if len(str(path)) > MAX_FOLDER_CHARS:
        p.add(
            f"{field}: {str(path)[:60]}... is {len(str(path))} characters, over the "
            f"{MAX_FOLDER_CHARS} that leave room for the files below it; use a shorter path"
        )
        return False
    return True


def _is_file(p: Problems, field: str, path: Path) -> bool:
    """True (and a problem) if `path` or a folder above it is a file."""
    for place in (path, *path.parents):
        if place.exists() and not place.is_dir():
            p.add(
                f"{field}: {place} is a file, not a folder; move it or choose another folder"
                + ("" if place == path else f" for {path}")
            )
            return True
    return False


def _check_writable(p: Problems, field: str, folder: Path, what: str) -> None:
    """`folder` (or, when it does not exist yet, the nearest folder above it, where it will be
    made) must be writable by this user."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        made = "" if existing == folder else f" (to make {folder} in it)"
        p.add(
            f"{field}: {existing} is not writable{made}, and {what} must be; fix its "
            "permissions or choose another folder"
        )
