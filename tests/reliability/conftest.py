"""Fixtures of the fault tests: a tiny dataset, a private PostgreSQL + MLflow server pair, and
the test-only pause point's files (jobs/loop/pause.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobs.testing import PauseFiles
from tests.conftest import skip_unless_required
from tests.reliability.services import MlflowServer, Postgres, postgres_available


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    from data_prep.testing import tiny_dataset

    return tiny_dataset(tmp_path_factory.mktemp("reliability_data"))


@pytest.fixture(scope="module")
def private_stack(tmp_path_factory) -> Iterator[tuple[Postgres, MlflowServer]]:
    """This module's own PostgreSQL and MLflow server on it, free to kill and restart."""
    ok, why = postgres_available()
    if not ok:
        skip_unless_required(why)
    # not under pytest's tmp dir: that is 0700 root's, and as root PostgreSQL runs as `postgres`
    pg_root = Path(tempfile.mkdtemp(prefix="scaling-test-pg-"))
    pg = Postgres(pg_root).start()
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"), pg.dsn)
    try:
        server.start()
        yield pg, server
    finally:
        server.kill()
        pg.stop()
        shutil.rmtree(pg_root, ignore_errors=True)


@pytest.fixture
def hold_at(tmp_path) -> Iterator[Callable[[int], PauseFiles]]:
    """`hold_at(step)`: the pause files of runs to hold after `step`. At teardown every run held
    is released, so a failing test leaves no job holding (on a shared cluster, for hours)."""
    made: list[PauseFiles] = []

    def make(step: int) -> PauseFiles:
        made.append(PauseFiles(tmp_path / f"pause-{step}", step))
        return made[-1]

    yield make
    for pause in made:
        pause.release_all()
