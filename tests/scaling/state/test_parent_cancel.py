"""`scaling cancel` ends the study's parent run KILLED only while it is running, so a study that
already ended keeps the FINISHED or FAILED it ended with (scaling.state.mlflow_state); and the
command leaves an ended study as it is: no cancelled.json (scaling.driver.round_driver)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from scaling.cli import app
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.cancel_mark import read_cancel_mark
from scaling.state.files.job_records import JobRecord, write_records
from scaling.state.mlflow_state import end_parent_run, ensure_parent_run
from scaling.study import Cancelled, Study
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


def test_cancel_leaves_an_ended_study_and_marks_one_between_rounds(tmp_path, data_dir):
    study = _study(tmp_path, data_dir)
    client = MlflowClient(study.mlflow.tracking_uri)
    parent = ensure_parent_run(study, client)
    job = subprocess.Popen([sys.executable, "-c", "pass"])  # the local job, ended
    job.wait()
    cell = study.cells[0].cell_id
    write_records(study.folder, {cell: JobRecord(cell, "local", str(job.pid), time.time())})
    end_parent_run(study, "FINISHED", client)
    path = str(tmp_path / "study.yaml")

    assert Study(study).cancel() == Cancelled([], "FINISHED")  # left as it was, as the command does
    assert read_cancel_mark(study.folder) is None
    out = CliRunner().invoke(app, ["cancel", path])
    assert out.exit_code == 0, out.output
    assert "already ended FINISHED, no job live; nothing to cancel" in out.output
    assert read_cancel_mark(study.folder) is None  # `status` says nothing of a cancel
    assert client.get_run(parent).info.status == "FINISHED"

    ensure_parent_run(study, client)  # a next round is due: the study runs, no job is live
    out = CliRunner().invoke(app, ["cancel", path])
    assert out.exit_code == 0, out.output
    assert "cancelled 0 job(s)" in out.output
    mark = read_cancel_mark(study.folder)
    assert mark is not None and mark["cells"] == []
    assert client.get_run(parent).info.status == "KILLED"
