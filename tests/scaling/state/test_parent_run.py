"""The study's parent run in MLflow: RUNNING while the study runs, then FINISHED or FAILED."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

import scaling.backends.executors
import scaling.backends.local.executor
from data_prep.manifest import load_manifest
from scaling.driver.run import run_study
from scaling.driver.submission import study_parent_run_id
from scaling.study import Study
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import write_and_load

pytestmark = pytest.mark.slow


def _tiny(data_dir, tmp_path, uri: str, variants: list[str]):
    """One size, one rank per cell: the cheapest study that still has a parent and children."""
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        uri,
        sizes=["30K"],
        variants=variants,
        parallel={},
        tokens={"per_size": {"30K": 3072}},
    )
    return write_and_load(spec, tmp_path / "study.yaml")


class _Crash:
    """A job that dies before training: its cell's run stays SCHEDULED, so the cell is failed."""

    def __call__(self) -> None:
        raise RuntimeError("injected by the test")


def test_parent_is_running_during_scaling_run_then_finished(tmp_path, data_dir, mlflow_server):
    study = _tiny(data_dir, tmp_path, mlflow_server, ["linear"])
    client = MlflowClient(mlflow_server)
    seen: list[str] = []

    def say(message: str) -> None:  # called on every progress line, while cells train
        parent = study_parent_run_id(study)
        if parent is not None:
            seen.append(client.get_run(parent).info.status)

    outcome = run_study(study, analyze=False, say=say)
    assert [r.state for r in outcome.rows] == ["completed"]
    assert seen and set(seen) == {"RUNNING"}, seen
    parent = client.get_run(outcome.parent_run_id).info
    assert parent.status == "FINISHED"
    cell = client.get_run(outcome.rows[0].run_id)
    assert parent.end_time >= cell.info.end_time  # it ended with the study, not before its cells
    (dataset,) = cell.inputs.dataset_inputs  # the UI's Dataset column: what the cell trained on
    assert dataset.dataset.digest == load_manifest(data_dir).digest

    # a resubmission with nothing to do runs the (empty) rest of the study and ends it again
    again = Study(study).submit(rounds=False)
    assert again.submitted == []
    assert client.get_run(outcome.parent_run_id).info.status == "FINISHED"


def test_parent_fails_when_a_cell_fails(tmp_path, data_dir, mlflow_server, monkeypatch):
    study = _tiny(data_dir, tmp_path, mlflow_server, ["linear", "nonlinear"])
    real_job = scaling.backends.executors._job

    def job(cell):
        return _Crash() if cell.cell_id.startswith("30K-nonlinear") else real_job(cell)

    monkeypatch.setattr(scaling.backends.executors, "_job", job)
    outcome = run_study(study, analyze=False, say=lambda _msg: None)
    states = {r.cell_id.split("-s")[0]: r.state for r in outcome.rows}
    assert states == {"30K-linear": "completed", "30K-nonlinear": "failed"}, outcome.rows
    assert MlflowClient(mlflow_server).get_run(outcome.parent_run_id).info.status == "FAILED"


def test_parent_fails_when_the_study_raises(tmp_path, data_dir, mlflow_server, monkeypatch):
    study = _tiny(data_dir, tmp_path, mlflow_server, ["linear"])

    def broken(*_args, **_kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(scaling.backends.local.executor.LocalExecutor, "submit", broken)
    with pytest.raises(OSError, match="disk gone"):
        run_study(study, analyze=False, say=lambda _msg: None)
    parent = study_parent_run_id(study)
    assert MlflowClient(mlflow_server).get_run(parent).info.status == "FAILED"
