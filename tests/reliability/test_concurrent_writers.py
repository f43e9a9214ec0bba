"""16 training processes (tiny torch models, the job's own `Tracker`) log 1,000 steps each to
one PostgreSQL-backed MLflow server at the same time (the one .ci/run starts, with
scripts/services.sh): every point arrives exactly once. tests/reliability/_writer.py says why the
writer is not a full `python -m jobs` process.

That the server is PostgreSQL-backed is checked twice: the services script says so
(`SCALING_TEST_MLFLOW_BACKEND`), and every point the server reports is also counted in that
PostgreSQL database (`SCALING_TEST_PG_DSN`), so a server on another store fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import skip_unless_required
from tests.reliability.helpers import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # slow on a shared 2-core box
NUM_WRITERS, STEPS = 16, 1000
TRAIN_METRICS = ["train/loss", "grad_norm"]  # what tests/reliability/_writer.py logs


def _postgres_dsn(uri: str) -> str:
    """The PostgreSQL store behind the MLflow server at `uri`, as scripts/services.sh started
    it; skips (fails in CI) if that server is not PostgreSQL-backed."""
    backend = os.environ.get("SCALING_TEST_MLFLOW_BACKEND")
    dsn = os.environ.get("SCALING_TEST_PG_DSN", "")
    if uri != os.environ.get("SCALING_TEST_MLFLOW_URI") or backend != "postgresql" or not dsn:
        skip_unless_required(
            f"the MLflow server at {uri} is not the PostgreSQL-backed one scripts/services.sh "
            f"starts (SCALING_TEST_MLFLOW_BACKEND={backend!r}, SCALING_TEST_PG_DSN={dsn!r})"
        )
    assert dsn.startswith("postgresql"), dsn
    return dsn


def _points_in_postgres(dsn: str, experiment: str) -> int:
    """Metric points of `experiment` in MLflow's own tables of that database."""
    import sqlalchemy as sa

    query = sa.text(
        "SELECT count(*) FROM metrics m JOIN runs r ON m.run_uuid = r.run_uuid "
        "JOIN experiments e ON r.experiment_id = e.experiment_id "
        "WHERE e.name = :experiment AND m.key IN :keys"
    ).bindparams(sa.bindparam("keys", expanding=True))
    engine = sa.create_engine(dsn)
    try:
        with engine.connect() as conn:
            return conn.execute(query, {"experiment": experiment, "keys": TRAIN_METRICS}).scalar()
    finally:
        engine.dispose()


def test_sixteen_writers_log_every_point_exactly_once(tmp_path, mlflow_server):
    dsn = _postgres_dsn(mlflow_server)
    experiment = f"concurrent-{os.getpid()}-{time.time_ns()}"
    start = time.monotonic()
    procs = []
    for i in range(NUM_WRITERS):
        out = tmp_path / f"w{i:02d}"
        out.mkdir()
        log = open(out / "log.txt", "wb")  # noqa: SIM115 - closed below
        args = [str(out), mlflow_server, experiment, str(STEPS), str(i)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._writer", *args],
            env=cli_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append((proc, log, out))
    for proc, log, out in procs:
        code = proc.wait(timeout=900)
        log.close()
        assert code == 0, (out / "log.txt").read_text()[-3000:]
    wall = time.monotonic() - start

    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert len(runs) == NUM_WRITERS and {r.info.status for r in runs} == {"FINISHED"}
    logged = [json.loads((out / "losses.json").read_text()) for _, _, out in procs]
    losses_by_run = {w["run_id"]: w["losses"] for w in logged}
    expected = received = 0
    for run in runs:
        for key in TRAIN_METRICS:
            counts = Counter(m.step for m in client.get_metric_history(run.info.run_id, key))
            expected += STEPS
            received += sum(counts.values())
            assert sorted(counts) == list(range(1, STEPS + 1)), (run.info.run_name, key)
            assert set(counts.values()) == {1}, (run.info.run_name, key)  # no duplicate
        history = client.get_metric_history(run.info.run_id, "train/loss")
        losses = {m.step: m.value for m in history}
        assert [losses[s] for s in range(1, STEPS + 1)] == losses_by_run[run.info.run_id]
    in_postgres = _points_in_postgres(dsn, experiment)
    print(
        f"[concurrent] {NUM_WRITERS} writers x {STEPS} steps x {len(TRAIN_METRICS)} metrics to "
        f"a PostgreSQL-backed server: points expected {expected}, received {received}, in "
        f"PostgreSQL {in_postgres}; wall {wall:.0f} s"
    )
    assert received == expected
    assert in_postgres == expected  # the server measured stores its points in PostgreSQL
