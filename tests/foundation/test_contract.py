"""The MLflow run contract's experiments: the kind the UI reads, and where artifacts go."""

from __future__ import annotations

import uuid
from pathlib import Path

from foundation import contract as C


def test_a_new_experiment_on_the_server_opens_on_the_runs_and_keeps_the_servers_artifacts(
    mlflow_server,
):
    client = C.make_client(mlflow_server)
    name = f"contract-{uuid.uuid4().hex[:8]}"
    exp_id = C.ensure_experiment(client, name, mlflow_server)
    exp = client.get_experiment(exp_id)
    assert exp.tags[C.EXPERIMENT_KIND_TAG] == "custom_model_development"
    assert exp.artifact_location.startswith("mlflow-artifacts:")  # the server's artifact root
    assert C.ensure_experiment(client, name, mlflow_server) == exp_id  # found, not made again


def test_an_experiment_made_before_the_tag_gets_it(mlflow_server):
    client = C.make_client(mlflow_server)
    name = f"contract-old-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name)  # as an earlier version of the project made it
    assert C.EXPERIMENT_KIND_TAG not in client.get_experiment(exp_id).tags
    assert C.ensure_experiment(client, name, mlflow_server) == exp_id
    assert client.get_experiment(exp_id).tags[C.EXPERIMENT_KIND_TAG] == C.EXPERIMENT_KIND


def test_a_sqlite_store_keeps_artifacts_beside_it_whatever_the_working_directory(
    tmp_path, monkeypatch
):
    store = tmp_path / "study" / "mlflow.db"
    uri = f"sqlite:///{store}"
    monkeypatch.chdir(tmp_path)  # not the store's folder: ./mlruns here would be the old bug
    client = C.make_client(uri)
    exp = client.get_experiment(C.ensure_experiment(client, "demo", uri))
    assert exp.tags[C.EXPERIMENT_KIND_TAG] == C.EXPERIMENT_KIND
    assert exp.artifact_location == (store.parent / "mlartifacts").as_uri()
    run = client.create_run(exp.experiment_id)
    (tmp_path / "note.txt").write_text("x")
    client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
    assert list((store.parent / "mlartifacts").rglob("note.txt"))
    assert not Path(tmp_path / "mlruns").exists()
