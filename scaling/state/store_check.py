"""A study's SQLite tracking store lost or broken: one line and the fix, never a retry loop.

A study's results live twice: in MLflow, and on disk in each cell's folder (its spool of every
record it logged, and `result.json`). A SQLite store can be deleted, emptied or left half-made
(`foundation.sqlite_store`) while the cells' folders stay. Three checks:

- `check_store` (every command that loads the study): the store the study logged into
  (`tracking_store.json` in the study folder, written by each submit) is gone, empty, without
  the study's experiment, or its schema is not whole -> `StoreLost`, before anything is made
  or submitted;
- `StoreWatch` (the driver, every poll): the store file vanished or was replaced by another
  file while the study ran -> `StoreLost`, instead of retrying a status that cannot come back;
- `adopt_new_store` (`scaling run|submit --new-store`, the fix both name): a broken file is
  moved aside (never deleted), and the next submit uploads the completed cells' results on
  disk into the fresh store (`scaling.driver.reupload`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from foundation.atomic import write_text
from foundation.config import ConfigError
from foundation.sqlite_store import has_experiment, schema_problem, store_lock
from foundation.studypaths import sqlite_path
from scaling.spec.resolved import ResolvedStudy
from scaling.state.run_cache import CACHE_NAME

__all__ = [
    "MARKER",
    "StoreLost",
    "check_store",
    "store_trouble",
    "record_store",
    "adopt_new_store",
    "StoreWatch",
]

MARKER = "tracking_store.json"  # in the study folder: the SQLite store its runs went to
FIX_FLAG = "--new-store"


class StoreLost(ConfigError):
    """The study's SQLite store is gone or broken; str: one line naming the file and the fix."""


def _logged_into(folder: Path, store: Path, experiment: str) -> bool:
    """Whether the study in `folder` submitted runs into `store` (same experiment) before."""
    try:
        mark = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(mark, dict)
        and mark.get("store") == str(store)
        and mark.get("experiment") == experiment
    )


def record_store(study: ResolvedStudy) -> None:
    """Note the SQLite store this study submits into (once its experiment exists there)."""
    store = sqlite_path(study.mlflow.tracking_uri)
    if store is None or _logged_into(study.folder, store, study.mlflow.experiment):
        return
    mark = {"store": str(store), "experiment": study.mlflow.experiment}
    study.folder.mkdir(parents=True, exist_ok=True)
    write_text(study.folder / MARKER, json.dumps(mark, indent=1))


def _lost(store: Path, what: str, folder: Path, broken: bool) -> StoreLost:
    num_results = sum(1 for _ in folder.glob("cells/*/result.json"))  # `Cell.run.output_dir`
    kept = f"{num_results} completed cell(s) keep their results on disk"
    if broken:
        fix = f"`scaling run STUDY {FIX_FLAG}` moves it aside and makes a fresh one"
    else:
        fix = f"restore the file, or `scaling run STUDY {FIX_FLAG}` makes a fresh one"
    return StoreLost(
        f"the MLflow store {store} {what} ({kept}); {fix}, into which those results are "
        "uploaded again"
    )


def store_trouble(uri: str, experiment: str, folder: Path) -> StoreLost | None:
    """What is wrong with the SQLite store at `uri` of the study in `folder`, as the error to
    raise; None if nothing (or `uri` is a server)."""
    store = sqlite_path(uri)
    if store is None:
        return None
    logged = _logged_into(folder, store, experiment)
    if not store.exists():  # nothing to lock: a store being made exists from its first byte
        return _lost(store, "is gone", folder, broken=False) if logged else None
    with store_lock(store, shared=True):  # not while another process creates its schema
        if store.stat().st_size == 0:
            return _lost(store, "is empty", folder, broken=False) if logged else None
        problem = schema_problem(store)
        if problem is not None:
            return _lost(store, f"is not a whole MLflow store: {problem}", folder, broken=True)
        if logged and not has_experiment(store, experiment):
            what = f"no longer holds the study's experiment {experiment!r}"
            return _lost(store, what, folder, broken=False)
    return None


def check_store(study: ResolvedStudy) -> None:
    """Raise `StoreLost` if the study's SQLite store is gone or broken (`store_trouble`)."""
    trouble = store_trouble(study.mlflow.tracking_uri, study.mlflow.experiment, study.folder)
    if trouble is not None:
        raise trouble


def adopt_new_store(study: ResolvedStudy, say: Callable[[str], None]) -> None:
    """`--new-store`: move a broken store file aside (said where), forget the old store (the
    marker and the study's cache of its finished runs); the next submit makes a fresh store and
    uploads the completed cells' results on disk into it."""
    store = sqlite_path(study.mlflow.tracking_uri)
    if store is None:
        return
    with store_lock(store):
        if store.is_file() and store.stat().st_size and schema_problem(store) is not None:
            aside = store.with_name(f"{store.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}")
            os.rename(store, aside)
            say(f"moved the broken MLflow store {store} aside to {aside}")
    for name in (MARKER, CACHE_NAME):
        (study.folder / name).unlink(missing_ok=True)
    say(f"MLflow store {store}: the completed cells' results on disk are uploaded into it")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class StoreWatch:
    """Notices the study's SQLite store file vanish or be replaced while a driver runs."""

    def __init__(self, study: ResolvedStudy) -> None:
        self.study = study
        self.store = sqlite_path(study.mlflow.tracking_uri)
        self.seen = None if self.store is None else _identity(self.store)

    def check(self) -> None:
        """Raise `StoreLost` if the file seen before is gone or is another file now."""
        if self.store is None:
            return
        now = _identity(self.store)
        if self.seen is None:
            self.seen = now
        elif now != self.seen:
            what = "vanished" if now is None else "was replaced by another file"
            raise _lost(self.store, f"{what} while the study ran", self.study.folder, False)
