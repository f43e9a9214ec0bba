"""The tracker against real `mlflow server`s: nothing lost through an outage."""

from __future__ import annotations

import json
import subprocess
import uuid

from mlflow.tracking import MlflowClient

from jobs.config import TrackingConfig
from jobs.telemetry.tracking import Tracker
from jobs.telemetry.upload import upload_spool
from tests.conftest import start_mlflow_server
from tests.distributed import free_port


def _stop(proc: subprocess.Popen) -> None:
    import os
    import signal

    os.killpg(proc.pid, signal.SIGKILL)  # the server runs in its own session (conftest)
    proc.wait(timeout=30)


def test_server_outage_mid_run_loses_nothing(tmp_path):
    port = free_port()
    proc, uri = start_mlflow_server(tmp_path / "server", port=port)
    try:
        tracking = TrackingConfig(tracking_uri=uri, experiment="outage", flush_interval_s=0.2)
        tracker = Tracker(tmp_path / "run", tracking, run_name="cell")
        run_id = tracker.run_id
        assert run_id is not None  # created at start while the server is up
        for step in range(1, 21):
            tracker.log_metrics({"train/loss": 10.0 / step, "lr": 1e-3}, step=step)
        assert tracker.flush()
        _stop(proc)  # the server goes away mid-run
        for step in range(21, 41):
            tracker.log_metrics({"train/loss": 10.0 / step, "lr": 1e-3}, step=step)
        tracker.set_tags({"outcome": "completed"})
        assert not tracker.flush() and tracker.last_error  # it noticed, and kept the records
        proc, uri = start_mlflow_server(tmp_path / "server", port=port)  # same store returns
        assert tracker.close(timeout_s=60)
        client = MlflowClient(uri)
        history = client.get_metric_history(run_id, "train/loss")
        assert sorted(m.step for m in history) == list(range(1, 41))
        assert {m.step: m.value for m in history}[40] == 10.0 / 40
        assert client.get_run(run_id).data.tags["outcome"] == "completed"
    finally:
        _stop(proc)


def test_spool_left_by_an_unreachable_server_uploads_later(tmp_path, mlflow_server):
    dead = f"http://127.0.0.1:{free_port()}"
    tracking = TrackingConfig(tracking_uri=dead, experiment="late", flush_interval_s=0.2)
    tracker = Tracker(tmp_path / "run", tracking, run_name="cell")
    tracker.log_params({"model.hidden_size": 64})
    tracker.log_metrics({"val/loss": 3.5}, step=7)
    assert not tracker.close(timeout_s=1)  # never reachable: everything stays spooled
    late = TrackingConfig(tracking_uri=mlflow_server, experiment="late")
    assert upload_spool(tmp_path / "run", late, run_name="cell") == 0
    run_id = (tmp_path / "run" / "mlflow_run_id").read_text()
    run = MlflowClient(mlflow_server).get_run(run_id)
    assert run.data.params["model.hidden_size"] == "64" and run.data.metrics["val/loss"] == 3.5


def test_a_refused_param_does_not_block_metrics(tmp_path, mlflow_server):
    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment="refused")
    first = Tracker(tmp_path / "run", tracking, run_name="cell")
    first.log_params({"optimizer.lr": 0.001})
    assert first.close(timeout_s=30)
    again = Tracker(tmp_path / "run", tracking, run_name="cell")  # same run (id file)
    again.log_params({"optimizer.lr": 0.002})  # MLflow refuses to change a param
    again.log_metrics({"train/loss": 2.5}, step=3)
    assert again.close(timeout_s=30)
    run = MlflowClient(mlflow_server).get_run(first.run_id)
    assert run.data.params["optimizer.lr"] == "0.001" and run.data.metrics["train/loss"] == 2.5


def test_the_dataset_is_one_input_with_the_manifest_digest(tmp_path, mlflow_server, data_dir):
    from data_prep.manifest import load_manifest
    from jobs.telemetry.record import dataset_input

    manifest = load_manifest(data_dir)
    # A fresh experiment: MLflow keeps one dataset per (experiment, name, digest), with the
    # source it was first logged with, and the shared server outlives this test's tmp_path.
    experiment = f"datasets-{uuid.uuid4().hex[:12]}"
    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment=experiment)
    first = Tracker(tmp_path / "run", tracking, run_name="cell")
    first.log_dataset(**dataset_input(data_dir))
    assert first.close(timeout_s=30)
    again = Tracker(tmp_path / "run", tracking, run_name="cell")  # a resume logs it again
    again.log_dataset(**dataset_input(data_dir))
    assert again.close(timeout_s=30)

    (logged,) = MlflowClient(mlflow_server).get_run(first.run_id).inputs.dataset_inputs
    assert logged.dataset.digest == manifest.digest and len(manifest.digest) == 16
    assert json.loads(logged.dataset.source) == {"uri": str(data_dir.resolve())}
    profile = json.loads(logged.dataset.profile)
    assert profile["num_train_tokens"] == manifest["splits"]["train"]["tokens"] > 0
    assert [(t.key, t.value) for t in logged.tags] == [("mlflow.data.context", "training")]


def test_a_scheduled_run_starts_again_when_its_training_starts(tmp_path, mlflow_server):
    """`scaling submit` makes a cell's run SCHEDULED; the job's tracker makes it again at the
    training start (same tags and name, the wait as `queue_s`), and keeps a run with metrics."""
    import time

    from foundation.contract import RUN_ID_FILE, ensure_experiment
    from jobs.telemetry.upload import METRIC_QUEUE_S

    client = MlflowClient(mlflow_server)
    name = f"queue-{uuid.uuid4().hex[:8]}"
    exp = ensure_experiment(client, name, mlflow_server)
    tags = {"cell_id": "30K-linear-s0-lr0.01", "study": "s", "mlflow.parentRunId": "p" * 32}
    placeholder = client.create_run(exp, run_name="30K-linear-s0-lr0.01", tags=tags).info
    client.update_run(placeholder.run_id, status="SCHEDULED")
    out = tmp_path / "cell"
    out.mkdir()
    (out / RUN_ID_FILE).write_text(placeholder.run_id)
    time.sleep(1.5)  # the cell waits for a slot

    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment=name, flush_interval_s=0.2)
    tracker = Tracker(out, tracking, run_name="30K-linear-s0-lr0.01")
    tracker.log_metrics({"train/loss": 4.0}, step=1)
    assert tracker.close(timeout_s=30)
    new_id = (out / RUN_ID_FILE).read_text()
    assert new_id == tracker.run_id != placeholder.run_id
    assert client.get_run(placeholder.run_id).info.lifecycle_stage == "deleted"
    run = client.get_run(new_id)
    assert {k: run.data.tags[k] for k in tags} == tags and run.info.run_name == placeholder.run_name
    assert run.info.start_time - placeholder.start_time >= 1500
    assert abs(run.data.metrics[METRIC_QUEUE_S] - float(run.data.tags["queue_s"])) < 0.1
    assert run.data.metrics[METRIC_QUEUE_S] >= 1.5
    assert [r.info.run_id for r in client.search_runs([exp])] == [new_id]  # one run per cell

    # resumed (a requeue, a retry): the run has metrics and keeps its id and start
    client.update_run(new_id, status="SCHEDULED")
    again = Tracker(out, tracking, run_name="30K-linear-s0-lr0.01")
    assert again.close(timeout_s=30) and again.run_id == new_id
    assert client.get_run(new_id).info.start_time == run.info.start_time
