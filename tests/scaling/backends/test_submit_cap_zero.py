"""A cluster whose `MaxSubmitJobs` (or `GrpSubmit`) is 0 lets this user queue nothing: `submit`
refuses at once (one `error:` line naming the limit and what to do, exit 2, nothing queued or
recorded) instead of waiting for room that never comes, and `plan` says the same.

The Slurm client is faked first on PATH (`sinfo`, `scontrol`, `sacctmgr`, and an `sbatch` that
only records that it was called), so the limit is the fake association's and no real job can be
queued whatever the code does.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from foundation.config import ConfigError
from scaling.backends.executors import executor_for
from scaling.cli import app
from scaling.spec.loader import read_study
from scaling.state.files.job_records import read_records
from tests.scaling.backends.fake_slurm import fake_slurm, slurm_study

REFUSAL = "MaxSubmitJobs 0 (association acct0) lets this user queue no Slurm job at all"

ZERO = {
    "sacctmgr": 'case "$*" in\n'
    '  *"show assoc"*) echo "acct0|normal|normal|0||" ;;\n'
    '  *"show qos"*) echo "normal|||" ;;\n'
    "esac",
    # a submit that waits for room asks squeue: interrupted (as Ctrl-C), so it ends, not hangs
    "squeue": 'echo "$@" >> "$(dirname "$0")/squeue_calls"; kill -INT "$PPID"',
}


def _fake_slurm(tmp_path, monkeypatch):
    return fake_slurm(tmp_path, monkeypatch, **ZERO)


def _study(tmp_path, data_dir, mlflow_server):
    return slurm_study(tmp_path, data_dir, mlflow_server)


def test_submit_refuses_a_cap_of_zero_at_once_and_queues_nothing(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    bin_dir = _fake_slurm(tmp_path, monkeypatch)
    path = _study(tmp_path, data_dir, mlflow_server)
    result = CliRunner().invoke(app, ["submit", str(path)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and REFUSAL in errors[0], result.output
    assert "study.slurm.account" in errors[0]  # what to do
    assert not (bin_dir / "sbatch_calls").exists()  # nothing submitted
    assert not (bin_dir / "squeue_calls").exists()  # nor waited for room
    assert read_records(read_study(path).folder) == {}  # nor recorded


def test_the_executor_refuses_before_any_sbatch(tmp_path, data_dir, mlflow_server, monkeypatch):
    """`SlurmExecutor.submit` itself refuses (a caller that skipped `check_submit` must not
    wait for ever)."""
    bin_dir = _fake_slurm(tmp_path, monkeypatch)
    study = read_study(_study(tmp_path, data_dir, mlflow_server))
    try:
        with pytest.raises(ConfigError, match=re.escape(REFUSAL)):
            executor_for(study).submit(list(study.cells), {})
    except KeyboardInterrupt:  # the fake squeue's: it waited for room
        pytest.fail("SlurmExecutor.submit waited for room under a cap of 0")
    assert not (bin_dir / "sbatch_calls").exists()


def test_plan_says_submit_would_refuse(tmp_path, data_dir, mlflow_server, monkeypatch):
    _fake_slurm(tmp_path, monkeypatch)
    path = _study(tmp_path, data_dir, mlflow_server)
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Slurm:")]
    assert f"`scaling submit` refuses: {REFUSAL}" in line, line
    assert "are queued as jobs leave" not in line
