"""`scaling cancel` ends the study's parent run KILLED only while it is running, so a study that
already ended keeps the FINISHED or FAILED it ended with (scaling.state.mlflow_state)."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from scaling.spec.resolved import ResolvedStudy
from scaling.state.mlflow_state import end_parent_run, ensure_parent_run
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load


def _study(tmp_path: Path, data_dir: Path) -> ResolvedStudy:
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/mlflow.db", steps=12)
    return write_and_load(spec, tmp_path / "study.yaml")


def test_a_cancel_kills_a_running_parent_and_leaves_an_ended_one(tmp_path, data_dir):
    study = _study(tmp_path, data_dir)
    client = MlflowClient(study.mlflow.tracking_uri)
    parent = ensure_parent_run(study, client)
    for ended in ("FINISHED", "FAILED"):
        end_parent_run(study, ended, client)
        end_parent_run(study, "KILLED", client, if_running=True)
        assert client.get_run(parent).info.status == ended
        assert ensure_parent_run(study, client) == parent  # a resubmission: RUNNING again
    end_parent_run(study, "KILLED", client, if_running=True)
    assert client.get_run(parent).info.status == "KILLED"
    end_parent_run(study, "FINISHED", client)  # the study's own end is not conditional
    assert client.get_run(parent).info.status == "FINISHED"
