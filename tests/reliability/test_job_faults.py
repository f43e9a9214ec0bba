"""A real job on a corrupted dataset (its train.idx garbled) ends with one line, the known
fault's (`jobs.faults`), from each entry point: `python -m jobs` (exit 3, the traceback in a
file beside its log, in the log only with `--verbose`), and a study's cell run by submitit,
whose line `scaling status` shows as the cell's cause: in the status row's `cause` field, and
whole on the cell's one row of the public command's table at any terminal width once the data
is whole again (while it is damaged, `scaling status` refuses the study in one line of its own
that names the same file and fix).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from foundation import contract as C
from jobs.faults import EXIT_KNOWN_FAULT
from jobs.testing import tiny_run_dict
from scaling.backends.base import backend_class
from scaling.driver.environment import load_study_spec
from scaling.state.job_errors import last_error_line
from scaling.state.status import study_status, submitit_folder
from scaling.study import Study
from tests.reliability.helpers import cli_env
from tests.scaling.conftest import one_size_spec

pytestmark = pytest.mark.slow


@pytest.fixture
def data_copy(data_dir, tmp_path) -> Path:
    return Path(shutil.copytree(data_dir, tmp_path / "data"))


def _garble(data: Path) -> Path:
    """train.idx loses its header (a stray write, a bad copy)."""
    with open(data / "train.idx", "r+b") as idx:
        idx.write(b"garbage!")
    return data


def _expected_line(data: Path) -> str:
    return (
        f"error: corrupted or missing data: {data / 'train.idx'}: not a megatron index (bad "
        "header); rebuild it with `scaling prepare-data ... --force`"
    )


def _train(tmp_path: Path, data: Path, log: Path, *flags: str) -> int:
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, data)))
    with open(log, "wb") as out:
        cmd = [sys.executable, "-m", "jobs", str(cfg_path), *flags]
        return subprocess.run(cmd, env=cli_env(), stdout=out, stderr=subprocess.STDOUT).returncode


def test_python_m_jobs_ends_with_the_line_and_keeps_the_traceback_aside(tmp_path, data_copy):
    garbled_data = _garble(data_copy)
    log = tmp_path / "train.log"
    assert _train(tmp_path, garbled_data, log) == EXIT_KNOWN_FAULT, log.read_text()[-3000:]
    lines = log.read_text().splitlines()
    (line,) = [x for x in lines if x.startswith("error: ")]
    assert line == _expected_line(garbled_data) == last_error_line(log)
    assert "Traceback" not in log.read_text()
    kept = log.with_suffix(".traceback")
    assert lines[lines.index(line) - 1] == f"[jobs] the traceback of the error below: {kept}"
    assert "ValueError" in kept.read_text() and "data_prep/manifest.py" in kept.read_text()

    verbose = tmp_path / "verbose.log"
    assert _train(tmp_path, garbled_data, verbose, "--verbose") == EXIT_KNOWN_FAULT
    assert "Traceback (most recent call last)" in verbose.read_text()
    assert last_error_line(verbose) == _expected_line(garbled_data)


def test_a_cells_job_on_corrupted_data_shows_the_line_in_status(tmp_path, data_dir, data_copy):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = one_size_spec(data_copy, tmp_path / "study", uri, 4, variants=["linear"], retries=0)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)  # checks the data: still whole
    _garble(data_copy)  # damaged once the study was planned

    Study(study).submit(rounds=False)  # a real local submitit job: jobs.TrainingJob
    (row,) = study_status(study)
    assert row.state == C.FAILED, row
    assert row.cause == _expected_line(data_copy), row
    log = backend_class("local").error_log(submitit_folder(study), row.job_id)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]

    # the public command. While the data is damaged it refuses the study in one line that
    # names the file and the fix (it checks the data as it loads the study); once the data is
    # whole again the failed cell's row shows the job's line, whole, though the terminal is
    # narrower than the line (the columns never wrap; the table widens past the terminal)
    refused = _status(path, tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    (refusal,) = [x for x in refused.stderr.splitlines() if x.startswith("error: ")]
    assert refusal.endswith(_expected_line(data_copy).split("corrupted or missing data: ")[1])
    shutil.copyfile(data_dir / "train.idx", data_copy / "train.idx")  # rebuilt
    shown = _status(path, tmp_path)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    rows = [x for x in shown.stdout.splitlines() if row.cell_id in x]
    assert len(rows) == 1, shown.stdout  # the cell id whole, on one row
    cell_row = rows[0]
    # "failed (gave up after 1 failure; retries: 0; error: corrupted or missing data: ...)"
    assert f"{C.FAILED} (" in cell_row and f"; {_expected_line(data_copy)})" in cell_row, cell_row


def _status(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`scaling status` on a terminal 40 columns wide."""
    narrow = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "40", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "scaling", "status", str(path)],
        cwd=cwd, env=narrow, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
