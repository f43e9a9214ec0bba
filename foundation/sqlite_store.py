"""A SQLite MLflow store on disk: whether its schema is whole, and one creator at a time.

MLflow creates a SQLite store's schema on first use, in whichever process opens it first
(`SqlAlchemyStore.__init__`: the initial tables, then every alembic migration). Two processes
that open a new store at once (two studies, or jobs of a study whose store was deleted) both
see no tables and both migrate: one fails with `table ... already exists`, and a process killed
meanwhile leaves a half-made schema that every later open fails on. So:

- `store_lock` serialises that first open through an `flock` on `<store>.lock` beside the file
  (`foundation.contract.make_client` opens every store under it);
- `schema_problem` reads the file with the standard `sqlite3` module (no MLflow import) and says
  what is wrong with it: not an SQLite file, no `alembic_version`, or a revision that is not
  this MLflow's newest one (a half-made schema, or a store of an older MLflow).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import re
import sqlite3
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

__all__ = ["store_lock", "lock_path", "schema_problem", "head_revision", "has_experiment"]

_REVISION = re.compile(r'^(down_)?revision\s*=\s*["\']([0-9a-f]+)["\']', re.MULTILINE)


def lock_path(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


@contextlib.contextmanager
def store_lock(store: Path, shared: bool = False) -> Iterator[None]:
    """Hold `<store>.lock` (exclusive, or `shared` for a reader that only inspects the file).

    Best effort where the folder is not writable (someone else's study, read only) or its file
    system has no `flock`: the caller then goes on without the lock.
    """
    try:
        if not shared:
            store.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path(store), "a")  # noqa: SIM115 - closed below
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError:  # a file system without flock (some NFS): as without the lock
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    """The newest schema revision of the installed MLflow, read from its migration scripts
    (None if MLflow is not installed or its scripts are not where MLflow 3 keeps them)."""
    spec = importlib.util.find_spec("mlflow")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    versions = Path(next(iter(spec.submodule_search_locations))) / "store/db_migrations/versions"
    revisions, parents = set(), set()
    for script in versions.glob("*.py"):
        for down, value in _REVISION.findall(script.read_text(errors="replace")):
            (parents if down else revisions).add(value)
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None


def _connect(store: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{store.absolute().as_uri()}?mode=ro", uri=True, timeout=10)


def _roll_back_hot_journal(store: Path) -> bool:
    """Roll back the transaction a killed writer left in `<store>-journal` (a hot journal).

    A read-only connection cannot: SQLite must undo the dead transaction before anyone reads,
    and says "attempt to write a readonly database". Opening the file read-write and reading it
    once makes SQLite roll back, exactly as the next writer would: the store is again as its
    last commit left it, and the dead transaction, never committed, is gone either way. True if
    there was a journal to roll back.
    """
    if not store.with_name(store.name + "-journal").is_file():
        return False
    with contextlib.closing(sqlite3.connect(store, timeout=10)) as db:
        db.execute("select count(*) from sqlite_master").fetchall()
    return True


def _read_only(store: Path) -> sqlite3.Connection:
    """A read-only connection that can read: a killed writer's hot journal rolled back first."""
    db = _connect(store)
    try:
        db.execute("select count(*) from sqlite_master").fetchall()
    except sqlite3.OperationalError as err:
        db.close()
        if "readonly" not in str(err) or not _roll_back_hot_journal(store):
            raise
        db = _connect(store)
    return db


def schema_problem(store: Path) -> str | None:
    """What is wrong with the MLflow schema of the existing, non-empty SQLite file `store`, in
    words; None if it is whole (its revision is this MLflow's newest)."""
    try:
        with contextlib.closing(_read_only(store)) as db:
            tables = {row[0] for row in db.execute("select name from sqlite_master")}
            if "alembic_version" not in tables:
                return f"half-made: no table alembic_version among its {len(tables)} tables"
            versions = [row[0] for row in db.execute("select version_num from alembic_version")]
            has_runs = "experiments" in tables and bool(
                db.execute("select 1 from experiments limit 1").fetchall()
            )
    except sqlite3.DatabaseError as err:
        return f"not an MLflow SQLite store ({err})"
    head = head_revision()
    if len(versions) != 1:
        return f"half-made: {len(versions)} schema revisions recorded"
    if head is not None and versions[0] != head:
        if has_runs:
            return (
                f"its schema revision {versions[0]} is older than this MLflow's {head} (made "
                "by an older MLflow: back it up, then `mlflow db upgrade sqlite:///"
                f"{store}`, or half-made)"
            )
        return f"half-made: schema revision {versions[0]}, not {head}, and no experiment"
    return None


def has_experiment(store: Path, name: str) -> bool:
    """Whether the whole store `store` holds an active experiment called `name`."""
    with contextlib.closing(_read_only(store)) as db:
        found = db.execute(
            "select 1 from experiments where name = ? and lifecycle_stage = 'active'", (name,)
        ).fetchall()
    return bool(found)
