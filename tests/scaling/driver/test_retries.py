"""A cell that keeps failing is resubmitted `study.retries` times, then left failed: `submit`
stops retrying it, an LR-search round is judged with it failed, and `--retry-failed` tries it
again with a fresh count. Real local jobs and a real MLflow server; the failure is injected."""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

import scaling.backends.executors
from foundation import contract as C
from scaling.cli import app
from scaling.cli.status_view import EXIT_CELLS_FAILED
from scaling.spec.loader import resolve
from scaling.state.files.job_records import read_records
from scaling.state.files.search_state import read_state
from scaling.state.status import study_status
from scaling.study import Study
from tests.conftest import REPO
from tests.scaling.conftest import lr_search_spec, one_size_spec
from tests.scaling.helpers import write_and_load

pytestmark = pytest.mark.slow


class _Crash:
    """A job that dies before training: its cell's run never finishes, so the cell is failed."""

    def __call__(self) -> None:
        raise RuntimeError("injected by the test")


def _crash(monkeypatch, doomed: str):
    """Make `doomed`'s jobs crash; returns the real job factory."""
    real = scaling.backends.executors._job
    monkeypatch.setattr(
        scaling.backends.executors,
        "_job",
        lambda cell: _Crash() if cell.cell_id == doomed else real(cell),
    )
    return real


def test_a_failing_cell_is_retried_then_left_until_retry_failed(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 12, retries=1)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = write_and_load(spec, path)
    doomed = next(c.cell_id for c in study.cells if c.variant == "nonlinear")
    (other,) = (c.cell_id for c in study.cells if c.cell_id != doomed)
    real = _crash(monkeypatch, doomed)

    said: list[str] = []
    Study(study, said.append).submit()
    # one local `submit`: the first job and one retry, then it stops
    assert sum(m.startswith(f"started {doomed}") for m in said) == 2, said
    # issue 55 #17: the cell's end as it is, not submitit's `FINISHED`
    ended = [m for m in said if m.startswith("ended ")]
    crashed = f"ended {doomed}: {C.FAILED} (RuntimeError: injected by the test)"
    assert sorted(ended) == sorted([crashed] * 2 + [f"ended {other}: {C.COMPLETED}"]), ended
    rows = {r.cell_id: r for r in study_status(study)}
    assert rows[doomed].state == C.FAILED and rows[doomed].given_up
    assert rows[doomed].note == "gave up after 2 failures; retries: 1"
    assert read_records(study.folder)[doomed].failures == 1
    run = MlflowClient(mlflow_server).get_run(rows[doomed].run_id)  # MLflow agrees
    assert run.info.status == "FAILED"
    assert (
        run.data.tags[C.TAG_ERROR]
        == "gave up after 2 failures; retries: 1: RuntimeError: injected by the test. "
        "`scaling submit --retry-failed` tries again"
    )
    assert [r.state for r in rows.values() if r.cell_id != doomed] == [C.COMPLETED]

    # the next submit leaves it, and says why and what to do
    said.clear()
    again = Study(study, said.append).submit(rounds=False)
    assert again.submitted == [] and again.skipped[doomed] == C.FAILED
    assert any(
        f"not resubmitted {doomed}: gave up after 2 failures; retries: 1" in m for m in said
    ), said
    assert any("--retry-failed" in m for m in said)

    # the CLI's flag retries it with a fresh count; fixed, it completes
    monkeypatch.setattr(scaling.backends.executors, "_job", real)
    out = CliRunner().invoke(app, ["submit", str(path), "--retry-failed"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "submitted 1 cell(s)" in out.output
    assert {r.state for r in study_status(study)} == {C.COMPLETED}
    assert read_records(study.folder)[doomed].failures == 0


def _search_spec(tmp_path, data_dir, mlflow_server, **overrides) -> dict:
    """The search of tests/scaling/e2e/test_refine_e2e.py on one seed, without retries."""
    return lr_search_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        local={"max_parallel": 2, "timeout_min": 20},
        retries=0,
        **overrides,
    )


def test_an_lr_search_round_is_judged_with_a_cell_given_up(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    # nonlinear's 1.0 (which diverges in that search) crashes instead: the search must still
    # end, with the same optimum
    spec = _search_spec(tmp_path, data_dir, mlflow_server)
    study = write_and_load(spec, tmp_path / "study.yaml")
    doomed = next(c.cell_id for c in study.cells if c.variant == "nonlinear" and c.lr == 1.0)
    _crash(monkeypatch, doomed)

    said: list[str] = []
    Study(study, said.append).submit()
    assert sum(m.startswith(f"started {doomed}") for m in said) == 1, said  # retries: 0
    state = read_state(study.folder)
    assert state.ended and state.round >= 1, state
    study = resolve(study.spec)  # with the cells the search added
    rows = {r.cell_id: r for r in study_status(study)}
    assert rows[doomed].state == C.FAILED and rows[doomed].given_up
    others = [r.state for r in rows.values() if r.cell_id != doomed]
    assert set(others) <= {C.COMPLETED, C.DIVERGED} and len(others) >= 4
    from analysis.stats.lr.frontier import lr_frontier
    from analysis.tables.mlflow_io import load_study_runs as load_table

    # the analysis reads the study, the crashed run as a failed row of its arm
    table, _ = load_table(mlflow_server, study.mlflow.experiment, study.name)
    (failed,) = table[table["run_id"] == rows[doomed].run_id].to_dict("records")
    assert failed["status"] == C.FAILED and failed["lr"] == 1.0
    arm = table[(table["variant"] == "nonlinear") & (table["status"] == C.COMPLETED)]
    assert failed["num_nonembedding_params"] == arm["num_nonembedding_params"].iloc[0]
    assert failed["tokens"] == arm["tokens"].iloc[0]
    final = {f.variant: f for f in lr_frontier(table)}
    assert final["nonlinear"].best_lr == pytest.approx(1e-2), final
    assert final["nonlinear"].state == "interior"
    print(f"[retries] search ended after round {state.round}; {len(rows)} cells; {doomed} given up")


@pytest.mark.slurm
def test_on_slurm_status_watch_judges_a_round_with_a_cell_given_up(
    tmp_path, data_dir, mlflow_server, slurm_cluster, monkeypatch
):
    # Before `retries`, a cell that always failed stopped the search here: `submit` resubmitted
    # it every time and `status --watch` never judged its round.
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # sbatch passes it on: jobs unpickle _Crash
    slurm = {"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1}
    spec = _search_spec(tmp_path, data_dir, mlflow_server, executor="slurm", slurm=slurm)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = write_and_load(spec, path)
    doomed = next(c.cell_id for c in study.cells if c.variant == "nonlinear" and c.lr == 1.0)
    _crash(monkeypatch, doomed)

    assert len(Study(study).submit().submitted) == 4  # round 0 queued
    watch = CliRunner().invoke(
        app, ["status", str(path), "--watch", "--interval", "1"], env={"COLUMNS": "200"}
    )
    assert read_state(study.folder).ended, watch.output
    assert watch.exit_code == EXIT_CELLS_FAILED, watch.output  # the given-up cell
    study = resolve(study.spec)
    rows = {r.cell_id: r for r in study_status(study)}
    assert rows[doomed].given_up and rows[doomed].note == "gave up after 1 failure; retries: 0"
    run = MlflowClient(mlflow_server).get_run(rows[doomed].run_id)  # ended by the watch's rounds
    assert run.info.status == "FAILED" and run.data.tags[C.TAG_ERROR].startswith(rows[doomed].note)
    assert {r.state for r in rows.values() if r.cell_id != doomed} <= {C.COMPLETED, C.DIVERGED}
    assert "LR-search round 1" in watch.output
    print(f"[retries slurm] search ended after round {read_state(study.folder).round}")
