"""A failed cell carries its cause, the last error line of its job, to `scaling status` (the
note column) and to its MLflow run (tag `error`) (issue 39, D11). A real local submitit job dies
before training, as one does on a data cache it cannot lock; a real SQLite store."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

import scaling.backends.executors
from foundation import contract as C
from scaling.cli import app
from scaling.driver.environment import load_study_spec
from scaling.state.job_errors import last_error_line
from scaling.state.mlflow_state import client_for
from scaling.state.status import study_status
from scaling.study import Study
from tests.scaling.conftest import one_size_spec

# ~27 s on 2 busy cores: a real local job starts (and crashes) and a SQLite store is created
CAUSE = "PermissionError: [Errno 13] Permission denied: '/data/cache/.lock'"


class _Crash:
    """A job that dies before its training loop: its run never says why."""

    def __call__(self) -> None:
        raise PermissionError(13, "Permission denied", "/data/cache/.lock")


@pytest.mark.slow
def test_a_failed_cells_cause_reaches_status_and_mlflow(tmp_path, data_dir, monkeypatch):
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}", 6)
    spec.update(variants=["linear"], retries=0)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    monkeypatch.setattr(scaling.backends.executors, "_job", lambda cell: _Crash())

    Study(study).submit(rounds=False)
    (row,) = study_status(study)
    assert row.state == C.FAILED and row.given_up, row
    assert row.cause == CAUSE, row
    tags = client_for(study).get_run(row.run_id).data.tags
    assert tags[C.TAG_ERROR] == (
        f"gave up after 1 failure; retries: 0: {CAUSE}. `scaling submit --retry-failed` tries again"
    )
    shown = CliRunner().invoke(app, ["status", str(path)], env={"COLUMNS": "250"})
    assert f"failed (gave up after 1 failure; retries: 0; {CAUSE})" in shown.output, shown.output


def test_the_last_error_line_of_a_job_log(tmp_path):
    log = tmp_path / "1_0_log.err"
    assert last_error_line(log) is None  # no log (yet)
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "    raise ValueError('first')\n"
        "ValueError: first\n"
        "During handling of the above exception, another exception occurred:\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "warning: something harmless\n"
    )
    assert (
        last_error_line(log)
        == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    log.write_text(
        "step 10 loss 3.2\n"
        "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-12-03T09:00 DUE TO TIME LIMIT ***\n"
        "srun: Job step aborted\n"
    )
    assert last_error_line(log).startswith("slurmstepd: error: *** JOB 12 ON n1 CANCELLED")
    log.write_text("error: the tracking server http://bob:hunter2@host:5000 refused\n" + "x" * 400)
    assert last_error_line(log) == "error: the tracking server http://***@host:5000 refused"
    # srun's echo of the exit restates the traceback above it; alone, it is the cause
    log.write_text(
        "RuntimeError: injected\n"
        "srun: error: vm: task 0: Exited with exit code 1\n"
        "srun: error: vm: tasks 1-3: Killed\n"
    )
    assert last_error_line(log) == "RuntimeError: injected"
    log.write_text("step 3\nsrun: error: n1: task 0: Exited with exit code 137\n")
    assert last_error_line(log) == "srun: error: n1: task 0: Exited with exit code 137"
    log.write_text("KeyboardInterrupt\n")
    assert last_error_line(log) == "KeyboardInterrupt"
    log.write_text("all fine\n  ValueError: indented, inside a traceback's source\n")
    assert last_error_line(log) is None
