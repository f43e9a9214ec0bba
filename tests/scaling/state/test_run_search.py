"""`scaling.state.run_search`: the REST search status uses reads what the MLflow client reads."""

from __future__ import annotations

import uuid

from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from foundation import contract as C
from foundation import mlflow_rest
from scaling.state import run_search
from scaling.state.run_search import experiment_id_http, search_http, search_with_client


def test_rest_search_matches_the_mlflow_client_across_pages(mlflow_server, monkeypatch):
    client = MlflowClient(mlflow_server)
    name = f"tests-search-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name)
    for i in range(7):
        run = client.create_run(exp_id, run_name=f"c{i}")
        tags = {
            C.TAG_STUDY: "s" if i < 6 else "other",
            C.TAG_CELL_ID: f"c{i}",
            "outcome": "completed",
        }
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(C.FINAL_VAL_LOSS, 4.0 + i, 0, 3), Metric(C.VAL_LOSS, 5.0, 0, 3)],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )
        if i % 2:
            client.set_terminated(run.info.run_id, "FINISHED")
    monkeypatch.setattr(run_search, "PAGE_SIZE", 4)  # 6 runs: two pages
    query = f"tags.{C.TAG_STUDY} = 's'"
    assert experiment_id_http(mlflow_server, name) == exp_id
    rest = sorted(search_http(mlflow_server, exp_id, query), key=lambda r: r.run_id)
    mlflow = sorted(search_with_client(client, exp_id, query), key=lambda r: r.run_id)
    assert len(rest) == 6
    assert rest == mlflow  # ids, statuses, start times, every tag and metric
    assert {r.status for r in rest} == {"RUNNING", "FINISHED"}
    assert experiment_id_http(mlflow_server, f"absent-{uuid.uuid4().hex}") is None


def test_credentials_come_from_mlflows_own_variables(monkeypatch):
    for key in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    assert "Authorization" not in mlflow_rest._headers()
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ann")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw")
    assert mlflow_rest._headers()["Authorization"] == "Basic YW5uOnB3"  # base64("ann:pw")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok")
    assert mlflow_rest._headers()["Authorization"] == "Bearer tok"
