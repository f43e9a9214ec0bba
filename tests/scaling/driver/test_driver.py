"""The round driver's retry and given-up rules, once, against both executors.

`StudyRun.next_cells` decides what follows a round from its rows alone (checked here on rows
made by hand); `StudyRun.drive` then runs them: a failing cell is resubmitted `study.retries`
times, then given up on (its run ends FAILED and says why, the parent run ends FAILED), and
`retry_failed` tries it again with a fresh count. The same test runs real tiny cells on the
local executor and on the real Slurm cluster; the failure is injected.
"""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient

import scaling.backends.executors
from foundation import contract as C
from scaling.backends.executors import executor_for
from scaling.backends.local.executor import LocalExecutor
from scaling.backends.slurm.executor import SlurmExecutor
from scaling.driver.environment import load_study_spec
from scaling.driver.round_driver import StudyRun
from scaling.driver.submission import study_parent_run_id
from scaling.spec.grid import Cell
from scaling.state.files.job_records import read_records
from scaling.state.status import StatusRow
from tests.conftest import REPO
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load

SLURM = {"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1}


class _Crash:
    """A job that dies before training: its cell's run never finishes, so the cell is failed."""

    def __call__(self) -> None:
        raise RuntimeError("injected by the test")


def _row(cell_id: str, state: str, given_up: bool = False) -> StatusRow:
    return StatusRow(
        Cell(cell_id, "30K", "linear", 0, 1e-3, None), state, None, "1", None, "", given_up
    )


@pytest.mark.parametrize("executor", ["local", "slurm"])
def test_what_follows_a_round_is_decided_from_its_rows(tmp_path, data_dir, executor):
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", 4)
    spec |= {"executor": executor, "retries": 1}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    driver = StudyRun(study)
    assert isinstance(driver.executor, {"local": LocalExecutor, "slurm": SlurmExecutor}[executor])
    first, second = (c.cell_id for c in study.cells)
    done = _row(first, C.COMPLETED)
    # a failed cell with retries left runs again, alone
    assert [c.cell_id for c in driver.next_cells([done, _row(second, C.FAILED)])] == [second]
    # given up on: nothing more (no LR search to judge it)
    assert driver.next_cells([done, _row(second, C.FAILED, given_up=True)]) == []
    # a round that has not ended decides nothing yet
    assert driver.next_cells([done, _row(second, C.RUNNING)]) == []
    assert driver.next_cells([done, _row(second, C.QUEUED)]) == []
    assert driver.next_cells([done, _row(second, C.COMPLETED)]) == []


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_a_failing_cell_is_retried_then_given_up_then_retried_on_request(
    tmp_path, data_dir, mlflow_server, monkeypatch, request, executor
):
    if executor == "slurm":
        request.getfixturevalue("slurm_cluster")
        monkeypatch.setenv("PYTHONPATH", str(REPO))  # sbatch passes it on: jobs unpickle _Crash
    extra = {"executor": executor, "slurm": SLURM} if executor == "slurm" else {}
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 8, retries=1, **extra)
    study = write_and_load(spec, tmp_path / "study.yaml")
    doomed = next(c.cell_id for c in study.cells if c.variant == "nonlinear")
    real = scaling.backends.executors._job
    monkeypatch.setattr(
        scaling.backends.executors,
        "_job",
        lambda cell: _Crash() if cell.cell_id == doomed else real(cell),
    )

    said: list[str] = []
    driver = StudyRun(study, executor_for(study), say=said.append, poll_s=1.0)
    rows = {r.cell_id: r for r in driver.drive()}
    driver.finish(list(rows.values()))
    # the first job and one retry (retries: 1), then it is left failed
    assert said.count("retrying the failed cells (study.retries: 1)") == 1, said
    assert rows[doomed].state == C.FAILED and rows[doomed].given_up
    assert rows[doomed].note == "gave up after 2 failures; retries: 1"
    assert read_records(study.folder)[doomed].failures == 1
    assert [r.state for r in rows.values() if r.cell_id != doomed] == [C.COMPLETED]
    client = MlflowClient(mlflow_server)
    run = client.get_run(rows[doomed].run_id)  # MLflow agrees, and says what to do
    assert run.info.status == "FAILED"
    assert run.data.tags[C.TAG_ERROR] == (
        "gave up after 2 failures; retries: 1: RuntimeError: injected by the test. "
        "`scaling submit --retry-failed` tries again"
    )
    parent = study_parent_run_id(study)
    assert client.get_run(parent).info.status == "FAILED"
    assert driver.next_cells(list(rows.values())) == []  # given up: not resubmitted

    # on request it is tried again with a fresh count; fixed, it completes and the study too
    monkeypatch.setattr(scaling.backends.executors, "_job", real)
    again = StudyRun(study, say=said.append, poll_s=1.0)
    rows = {r.cell_id: r for r in again.drive(retry_failed=True)}
    again.finish(list(rows.values()))
    assert again.submitted == [doomed]
    assert {r.state for r in rows.values()} == {C.COMPLETED}
    assert read_records(study.folder)[doomed].failures == 0
    assert client.get_run(parent).info.status == "FINISHED"
