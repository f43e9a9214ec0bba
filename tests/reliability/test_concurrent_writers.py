"""16 training processes (tiny torch models, the job's own `Tracker`, forked from one launcher
that imported torch and MLflow once) log 600 steps each to one PostgreSQL-backed MLflow server
at the same time (the one .ci/run starts, with scripts/services.sh): every point arrives exactly
once. tests/reliability/_writer.py says why the
writer is not a full `python -m jobs` process.

"At the same time" is a barrier, not luck: each writer makes its run and waits for one go file,
so all sixteen log and upload together (before, 1,000 steps each overlapped only as far as the
process starts, seconds apart under load, let them). 600 steps of two metrics a writer are
19,200 points in all (32,000 before), every writer's periodic uploads and its last one at
`close` overlapping the others'. (MLflow's client splits a batch over its 1,000-metric limit
itself, so the uploader's own split is not what a count of points per writer could check.)

That the server is PostgreSQL-backed is checked twice: the services script says so
(`SCALING_TEST_MLFLOW_BACKEND`), and every point the server reports is also counted in that
PostgreSQL database (`SCALING_TEST_PG_DSN`), so a server on another store fails the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import skip_unless_required
from tests.reliability.helpers import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # slow on a shared 2-core box
NUM_WRITERS, STEPS = 16, 600
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


def _writers_ready(launcher: subprocess.Popen, outs: list, log, timeout_s: float) -> None:
    """Wait until every writer has made its run and waits at the barrier."""
    deadline = time.monotonic() + timeout_s
    while not all((out / "ready").exists() for out in outs):
        assert launcher.poll() is None, log.read_text()[-3000:] + _logs(outs)
        assert time.monotonic() < deadline, "the writers did not all start" + _logs(outs)
        time.sleep(0.2)


def _logs(outs: list) -> str:
    logs = [out / "log.txt" for out in outs]
    return "".join(f"\n{f}: {f.read_text()[-1000:]}" for f in logs if f.is_file())


def test_sixteen_writers_log_every_point_exactly_once(tmp_path, mlflow_server):
    dsn = _postgres_dsn(mlflow_server)
    experiment = f"concurrent-{os.getpid()}-{time.time_ns()}"
    outs = [tmp_path / f"w{i:02d}" for i in range(NUM_WRITERS)]
    log = tmp_path / "launcher.log"
    args = [str(tmp_path), mlflow_server, experiment, str(STEPS), str(NUM_WRITERS)]
    with open(log, "wb") as out:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._writer", *args],
            env=cli_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _writers_ready(launcher, outs, log, timeout_s=1200)
        start = time.monotonic()
        (tmp_path / "go").touch()  # every writer's run exists: all log and upload at once
        code = launcher.wait(timeout=900)
        wall = time.monotonic() - start
    finally:
        if launcher.poll() is None:  # a failed wait: no writer left waiting or logging
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    codes = json.loads((tmp_path / "exit_codes.json").read_text())
    assert code == 0 and codes == {out.name: 0 for out in outs}, (codes, _logs(outs))

    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert len(runs) == NUM_WRITERS and {r.info.status for r in runs} == {"FINISHED"}
    logged = [json.loads((out / "losses.json").read_text()) for out in outs]
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
        f"a PostgreSQL-backed server, all started at one barrier: points expected {expected}, "
        f"received {received}, in PostgreSQL {in_postgres}; wall from the go {wall:.0f} s"
    )
    assert received == expected
    assert in_postgres == expected  # the server measured stores its points in PostgreSQL
