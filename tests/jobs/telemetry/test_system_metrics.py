"""MLflow's system metrics on a real two-rank run: each node's local rank 0 logs them into the
cell's run (CPU, host memory; GPU where NVML sees one), and the other rank logs none."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from jobs.testing import tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import train_ranks

SYSTEM_KEYS = ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes")


@pytest.mark.slow  # two spawned ranks importing megatron: ~27 s on 2 busy cores
def test_local_rank_0_logs_system_metrics_and_rank_1_none(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")  # spawned ranks inherit
    monkeypatch.delenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", raising=False)
    experiment = f"jobs-system-{uuid.uuid4().hex[:8]}"  # the server may outlive one test run
    tracking = {"enabled": True, "tracking_uri": mlflow_server, "experiment": experiment}
    cfg = tiny_run_dict(
        tmp_path,
        data_dir,
        name="system",
        train={"steps": 12, "global_batch_tokens": 256, "micro_batch_size": 2},
        parallel={"data_parallel": 2},
        tracking=tracking,
    )
    results = run_ranks(train_ranks, 2, [cfg])
    run_id = results[0][0]["run_id"]
    client = MlflowClient(mlflow_server)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    for key in SYSTEM_KEYS:
        steps = Counter(m.step for m in client.get_metric_history(run_id, key))
        assert steps, f"{key} was not logged: {sorted(run.data.metrics)}"
        # each sample step once: a second monitor (rank 1) would log every step again
        assert sorted(steps) == list(range(len(steps))) and set(steps.values()) == {1}, steps
    assert not [k for k in run.data.metrics if k.startswith("system/node_")]  # one node
