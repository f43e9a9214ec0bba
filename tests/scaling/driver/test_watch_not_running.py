"""`status --watch` of a study whose driver was killed (`kill -9`): its cells are left pending
with no job queued or running, and none failed. The exit status and its line follow the counts:
the study is not running and `scaling run` goes on (`EXIT_NOT_RUNNING`), never "some cells
failed or were cancelled" (exit 3), which is kept for a study where some did."""

from __future__ import annotations

import subprocess

from typer.testing import CliRunner

from foundation import contract as C
from scaling.backends.queued import queued_id
from scaling.cli import app
from scaling.cli.status_view import EXIT_CELLS_FAILED, EXIT_NOT_RUNNING, exit_words
from scaling.spec.grid import Cell
from scaling.state.files.job_records import new_record, write_records
from scaling.state.status import StatusRow
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load


def _rows(*states: str) -> list[StatusRow]:
    return [
        StatusRow(Cell(f"30K-linear-s{i}", "30K", "linear", i, 1e-3, None), s, None, None, None)
        for i, s in enumerate(states)
    ]


def test_the_exit_words_follow_the_counts():
    assert exit_words(_rows(C.COMPLETED, C.DIVERGED)) == (0, "")
    code, line = exit_words(_rows(*[C.PENDING] * 6))
    assert code == EXIT_NOT_RUNNING and "6 cell(s) pending" in line
    assert "not running" in line and "`scaling run` goes on" in line and "failed" not in line
    code, line = exit_words(_rows(C.PENDING, C.FAILED, C.COMPLETED))
    assert code == EXIT_CELLS_FAILED and line.startswith("some cells failed or were cancelled")
    code, line = exit_words(_rows(C.PENDING, C.STALE))
    assert code == EXIT_CELLS_FAILED and "1 pending, 1 stale" in line and "failed" not in line


def test_a_watch_after_a_killed_driver_says_the_study_is_not_running(
    tmp_path, data_dir, mlflow_server
):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 4, seeds=[0, 1, 2])
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)
    # what a driver SIGKILLed while its cells waited for a slot leaves: `queued-<its pid>`
    gone = subprocess.Popen(["true"])
    gone.wait()
    records: dict = {}
    for cell in study.cells:
        records[cell.cell_id] = new_record(records, cell.cell_id, "local", queued_id(gone.pid))
    write_records(study.folder, records)
    result = CliRunner().invoke(app, ["status", str(path), "--watch", "--interval", "0.1"])
    assert result.exit_code == EXIT_NOT_RUNNING, result.output
    assert f"{len(study.cells)} cell(s) pending and no job queued or running" in result.output
    assert "some cells failed" not in result.output
