"""Bad state files and bad flags are one line, exit 2, nothing lost (issue 63, finding 11).

A damaged `jobs.json` once ended `scaling status` and `scaling run` in a JSONDecodeError
traceback, and `status --watch --interval -1` in a ValueError from `time.sleep`. Now each is one
`error:` line naming the file (or the flag), what is wrong and what to do; the file is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from mlflow.tracking import MlflowClient

from scaling.state.files.job_records import RECORDS
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import assert_one_error_line

DAMAGED = b'{"30K-linear-s0": {"cell_id": "30K-linear-s0", "exec'


def _scaling(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.fixture
def study_file(tmp_path, data_dir):
    """A study whose folder holds a `jobs.json` cut short, and a store: the test server's if
    there is one (then `run` reaches the submission without creating a SQLite store), else a
    SQLite store made here (without one `status` first says that the store is missing, a
    second stderr line, and the test read differently with and without the services)."""
    uri = os.environ.get("SCALING_TEST_MLFLOW_URI")
    if uri is None:
        uri = f"sqlite:///{tmp_path}/m.db"
        MlflowClient(uri).search_experiments()  # creates the store
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(small_spec(data_dir, tmp_path / "study", uri)))
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / RECORDS).write_bytes(DAMAGED)
    return path


@pytest.mark.parametrize("command", ["status", "run"])
def test_a_damaged_jobs_json_is_one_line_and_kept(study_file, command):
    proc = _scaling(command, str(study_file), cwd=study_file.parent)
    jobs = study_file.parent / "study" / RECORDS
    line = assert_one_error_line(proc, "Traceback", f"error: {jobs}: not the study's job records")
    assert "delete it if none of the study's jobs is queued or running" in line
    assert jobs.read_bytes() == DAMAGED


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_watch_interval_that_is_not_a_positive_number_of_seconds_is_one_line(study_file, value):
    (study_file.parent / "study" / RECORDS).unlink()
    proc = _scaling(
        "status", str(study_file), "--watch", f"--interval={value}", cwd=study_file.parent
    )
    line = assert_one_error_line(proc, "Traceback", "error: --interval: ")
    assert "is not a number of seconds > 0" in line
