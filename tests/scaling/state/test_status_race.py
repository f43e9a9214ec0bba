"""A job that ends while `status` or `submit` reads the study is never taken for a crash.

A cell's state joins two reads: MLflow (its run) and the scheduler (its live job). A job ends its
run FINISHED before it leaves the queue, so reading the scheduler first sees such a job live, or
finished. Read the other way round, a job ending between the reads is a RUNNING run without a live
job: "failed" (a poll that ends `Study.wait` at once) and, in `submit`, a duplicate of a cell that
had just completed. Here the job ends right after whichever read comes first, on a real SQLite
store and a real process standing as the local job's controller.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from foundation import contract as C
from scaling.backends.local.executor import LOCAL_CONTROLLER
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.job_records import JobRecord, read_records, write_records
from scaling.state.mlflow_state import ensure_cell_run, ensure_parent_run
from scaling.state.status import study_status, submitit_folder
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load


class _EndingJob:
    """One cell's RUNNING run and a live controller process; `end()` finishes both, once."""

    def __init__(self, study: ResolvedStudy) -> None:
        self.client = MlflowClient(study.mlflow.tracking_uri)
        self.cell = study.cells[0]
        parent = ensure_parent_run(study, self.client)
        exp_id = C.experiment_id(self.client, study.mlflow.experiment)
        self.run_id = ensure_cell_run(self.client, exp_id, parent, self.cell, None)
        self.client.update_run(self.run_id, status="RUNNING")
        folder = submitit_folder(study)
        folder.mkdir(parents=True, exist_ok=True)
        # what `_local_alive` recognises: the controller's module and this study's folder
        code = "import time; time.sleep(120)"
        self.proc = subprocess.Popen([sys.executable, "-c", code, LOCAL_CONTROLLER, str(folder)])
        record = JobRecord(self.cell.cell_id, "local", str(self.proc.pid), time.time())
        write_records(study.folder, {self.cell.cell_id: record})
        self.ended = False

    def end(self) -> None:
        """What the job does last: its run FINISHED with its loss, then the process exits."""
        if self.ended:
            return
        self.ended = True
        loss, tag = Metric(C.FINAL_VAL_LOSS, 4.2, 0, 12), RunTag(C.TAG_OUTCOME, C.COMPLETED)
        self.client.log_batch(self.run_id, metrics=[loss], tags=[tag])
        self.client.set_terminated(self.run_id, "FINISHED")
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def ending(tmp_path: Path, data_dir: Path, monkeypatch):
    """A study of one running cell whose job ends right after the first of the two reads."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec = one_size_spec(data_dir, tmp_path / "study", uri, steps=12, variants=["linear"])
    study = write_and_load(spec, tmp_path / "study.yaml")
    job = _EndingJob(study)

    def then_end(module, name: str) -> None:
        real = getattr(module, name)

        def read(*args, **kwargs):
            out = real(*args, **kwargs)
            job.end()
            return out

        monkeypatch.setattr(module, name, read)

    import scaling.driver.submission as submission
    import scaling.state.status as status

    for module in (status, submission):
        then_end(module, "cell_runs")
        then_end(module, "live_jobs")
    yield study, job
    if job.proc.poll() is None:
        job.proc.kill()


def test_a_job_ending_during_a_status_poll_is_running_or_completed(ending):
    study, job = ending
    (row,) = [r for r in study_status(study) if r.cell_id == job.cell.cell_id]
    assert job.ended and job.proc.returncode is not None
    assert row.state in (C.RUNNING, C.COMPLETED), row  # never "failed": nothing crashed
    (row,) = [r for r in study_status(study) if r.cell_id == job.cell.cell_id]
    assert (row.state, row.val_loss) == (C.COMPLETED, 4.2)


def test_a_job_ending_during_a_submit_is_not_trained_again(ending):
    from scaling.study import Study

    study, job = ending
    result = Study(study).submit(rounds=False)
    assert job.ended
    assert job.cell.cell_id not in result.submitted, result.submitted
    record = read_records(study.folder)[job.cell.cell_id]
    assert (record.job_id, record.failures) == (str(job.proc.pid), 0)  # no failure counted
