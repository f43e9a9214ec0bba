"""What `scaling status` prints for a large grid, and the exit status of `run` and `--watch`."""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

import scaling.backends.executors
from foundation import contract as C
from scaling.cli import app
from scaling.cli.status_view import EXIT_CELLS_FAILED, exit_code, status_tables, tally
from scaling.driver.submission import study_parent_run_id
from scaling.spec.grid import Cell
from scaling.state.status import StatusRow
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load


def _row(i: int, state: str, size: str = "30K", variant: str = "linear") -> StatusRow:
    loss = 4.0 - i / 1000 if state == C.COMPLETED else None
    return StatusRow(
        Cell(f"{size}-{variant}-s{i}", size, variant, i, 1e-3, None), state, loss, None, None
    )


def test_a_small_grid_is_listed_cell_by_cell():
    rows = [_row(i, C.PENDING) for i in range(4)]
    ((title, header, lines, footer),) = status_tables("s", rows)
    assert header[:2] == ["cell", "state"] and len(lines) == 4 and footer == "4 pending"


def test_a_large_grid_is_summarised_with_the_cells_to_watch():
    states = [C.COMPLETED] * 1990 + [C.FAILED] * 3 + [C.RUNNING] * 2 + [C.PENDING] * 5
    rows = [
        _row(
            i,
            state,
            size=("60K" if i % 2 else "30K"),
            variant=("nonlinear" if i % 4 < 2 else "linear"),
        )
        for i, state in enumerate(states)
    ]
    summary, watch = status_tables("s", rows)
    assert summary[1] == [
        "size",
        "variant",
        "cells",
        "pending",
        "running",
        "completed",
        "failed",
        "best val loss",
    ]
    assert [line[:3] for line in summary[2]] == [
        ["30K", "linear", "500"],
        ["30K", "nonlinear", "500"],
        ["60K", "linear", "500"],
        ["60K", "nonlinear", "500"],
    ]
    # per group the state counts add up to its cells, and together to the tally
    assert all(sum(map(int, line[3:7])) == 500 for line in summary[2])
    assert sum(int(line[5]) for line in summary[2]) == 1990
    best = {}
    for r in rows:
        if r.val_loss is not None:
            key = (r.size, r.variant)
            best[key] = min(best.get(key, 9.0), r.val_loss)
    assert {tuple(line[:2]): line[7] for line in summary[2]} == {
        k: f"{v:.4f}" for k, v in best.items()
    }
    assert summary[3].startswith("5 pending, 2 running, 1990 completed, 3 failed (2000 cells")
    assert sorted(line[1] for line in watch[2]) == ["failed"] * 3 + ["running"] * 2
    assert tally(rows) in summary[3]
    every = status_tables("s", rows, show_all=True)
    assert len(every) == 1 and len(every[0][2]) == 2000


def test_exit_code_counts_diverged_as_a_result_and_failed_or_cancelled_as_not():
    assert exit_code([_row(0, C.COMPLETED), _row(1, C.DIVERGED)]) == 0
    assert exit_code([_row(0, C.COMPLETED), _row(1, C.FAILED)]) == EXIT_CELLS_FAILED
    assert exit_code([_row(0, C.CANCELLED)]) == EXIT_CELLS_FAILED


class _Crash:
    """A job that dies before training: its cell's run stays SCHEDULED, so the cell is failed."""

    def __call__(self) -> None:
        raise RuntimeError("injected by the test")


@pytest.mark.slow
def test_scaling_run_exits_3_when_a_cell_failed(tmp_path, data_dir, mlflow_server, monkeypatch):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 12)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = write_and_load(spec, path)
    real_job = scaling.backends.executors._job
    monkeypatch.setattr(
        scaling.backends.executors,
        "_job",
        lambda cell: _Crash() if "nonlinear" in cell.cell_id else real_job(cell),
    )
    result = CliRunner().invoke(app, ["run", str(path), "--no-analyze"], env={"COLUMNS": "200"})
    assert result.exit_code == EXIT_CELLS_FAILED, result.output
    assert "1 completed" in result.output and "1 failed" in result.output
    # the crash, then `retries` (2) resubmissions, then it is left failed
    assert result.output.count("retrying the failed cells (study.retries: 2)") == 2, result.output
    assert "gave up after 3 failures; retries: 2" in result.output
    assert "MLflow UI:" in result.output  # everything after the wait was still printed
    parent = study_parent_run_id(study)
    assert MlflowClient(mlflow_server).get_run(parent).info.status == "FAILED"

    # the watch of the ended study reports the same: exit 3, no cell active
    watch = CliRunner().invoke(app, ["status", str(path), "--watch", "--interval", "0.1"])
    assert watch.exit_code == EXIT_CELLS_FAILED, watch.output

    # rerunning leaves the cell given up on; --retry-failed retries it, and with every cell
    # completed the exit status is 0
    monkeypatch.setattr(scaling.backends.executors, "_job", real_job)
    left = CliRunner().invoke(app, ["run", str(path), "--no-analyze"], env={"COLUMNS": "200"})
    assert left.exit_code == EXIT_CELLS_FAILED and "1 failed" in left.output, left.output
    again = CliRunner().invoke(
        app, ["run", str(path), "--no-analyze", "--retry-failed"], env={"COLUMNS": "200"}
    )
    assert again.exit_code == 0, again.output
    assert "2 completed" in again.output
    assert MlflowClient(mlflow_server).get_run(parent).info.status == "FINISHED"
