"""16 training processes log 1,000 steps each to one MLflow server at the same time (in CI, the
PostgreSQL-backed server .ci/run starts): every point arrives exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from jobs.testing import tiny_run_dict
from tests.reliability.helpers import cli_env

pytestmark = pytest.mark.slow
NUM_WRITERS, STEPS = 16, 1000
# what the training loop logs every step (log_interval 1)
TRAIN_METRICS = [
    "train/loss",
    "lr",
    "grad_norm",
    "tokens_seen",
    "tokens_per_s",
    "mfu",
    "step_time_s",
]


def _config(tmp_path: Path, data_dir: Path, uri: str, experiment: str, i: int) -> Path:
    cfg = tiny_run_dict(
        tmp_path / f"w{i:02d}",
        data_dir,
        name=f"writer-{i:02d}",
        seed=i,
        # 1 layer, d 16, one micro-batch of 4 x 16 tokens: the step costs about nothing, so
        # the processes spend their time logging
        model={"num_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "seq_length": 16},
        train={"steps": STEPS, "global_batch_tokens": 64, "micro_batch_size": 4},
        data={"num_val_windows": 2},
        schedule={"warmup_steps": 10},
        tracking={"enabled": True, "tracking_uri": uri, "experiment": experiment},
    )
    path = tmp_path / f"w{i:02d}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_sixteen_writers_log_every_point_exactly_once(tmp_path, data_dir, mlflow_server):
    experiment = f"concurrent-{os.getpid()}-{time.time_ns()}"
    paths = [_config(tmp_path, data_dir, mlflow_server, experiment, i) for i in range(NUM_WRITERS)]
    start = time.monotonic()
    procs = []
    for i, path in enumerate(paths):
        log = open(tmp_path / f"w{i:02d}.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs", str(path)], env=cli_env(), stdout=log, stderr=log
        )
        procs.append((proc, log))
    for i, (proc, log) in enumerate(procs):
        code = proc.wait(timeout=900)
        log.close()
        assert code == 0, (tmp_path / f"w{i:02d}.log").read_text()[-3000:]
    wall = time.monotonic() - start

    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert len(runs) == NUM_WRITERS and {r.info.status for r in runs} == {"FINISHED"}
    # all were live at once: the last run started before the first one ended
    assert max(r.info.start_time for r in runs) < min(r.info.end_time for r in runs)
    results = [json.loads(p.read_text()) for p in tmp_path.glob("w*/run/result.json")]
    losses_by_run = {r["run_id"]: r["train_losses"] for r in results}
    expected = received = 0
    for run in runs:
        for key in TRAIN_METRICS:
            counts = Counter(m.step for m in client.get_metric_history(run.info.run_id, key))
            expected += STEPS
            received += sum(counts.values())
            assert sorted(counts) == list(range(1, STEPS + 1)), (run.info.run_name, key)
            assert set(counts.values()) == {1}, (run.info.run_name, key)  # no duplicate
        losses = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/loss")}
        want = losses_by_run[run.info.run_id]
        assert [losses[s] for s in range(1, STEPS + 1)] == pytest.approx(want)
    backend = os.environ.get("SCALING_TEST_MLFLOW_BACKEND", "?")
    print(
        f"[concurrent] {NUM_WRITERS} writers x {STEPS} steps x {len(TRAIN_METRICS)} metrics to "
        f"a {backend}-backed server: points expected {expected}, received {received}; "
        f"wall {wall:.0f} s"
    )
    assert received == expected
