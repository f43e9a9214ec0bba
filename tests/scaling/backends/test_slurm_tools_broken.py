"""Slurm tools that print bytes that are not UTF-8, or that cannot be executed (a shebang to an
interpreter that does not exist), met by `plan` and `submit`: never a traceback. Odd bytes are
read as replacement characters; a tool that cannot run is one `error:` line naming it, the error
and the fix, exit 2, and nothing submitted (`tests/scaling/backends/fake_slurm.py`)."""

from __future__ import annotations

from typer.testing import CliRunner

import scaling.backends.slurm.submit
from scaling.cli import app
from scaling.spec.loader import read_study
from scaling.state.files.job_records import read_records
from tests.scaling.backends.fake_slurm import fake_slurm, slurm_study

BAD = "\\377\\376\\351t\\351"  # printf's octal: 0xff 0xfe, and Latin-1 "été"
NO_INTERPRETER = b"#!/nonexistent/interpreter/python9\nprint('never')\n"


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_plan_reads_slurm_tools_that_print_bytes_that_are_not_utf8(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    fake_slurm(
        tmp_path,
        monkeypatch,
        sinfo=f'printf "debug*\\n{BAD}\\n"',
        scontrol=f'printf "ClusterName = {BAD}\\nMaxArraySize = 4\\n'
        'AccountingStorageType = accounting_storage/slurmdbd\\n"',
        sacctmgr=f'printf "acct0|{BAD}|normal|6||\\nnormal|||\\n"',
    )
    path = slurm_study(tmp_path, data_dir, mlflow_server)
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Slurm:")]
    assert "MaxArraySize 4" in line and "MaxSubmitJobs 6 (association acct0)" in line, line


def test_submit_refuses_an_sinfo_that_cannot_be_executed(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    bin_dir = fake_slurm(tmp_path, monkeypatch, sinfo=NO_INTERPRETER)
    path = slurm_study(tmp_path, data_dir, mlflow_server)
    result = CliRunner().invoke(app, ["submit", str(path)])
    assert result.exit_code == 2, result.output
    (error,) = _errors(result.output)
    assert f"sinfo at {bin_dir / 'sinfo'} cannot be executed" in error, error
    assert "No such file or directory" in error and "first on PATH" in error, error
    assert not (bin_dir / "sbatch_calls").exists()
    # `plan` warns with the same words, and plans
    planned = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert planned.exit_code == 0, planned.output
    assert "sinfo at" in planned.output and "cannot be executed" in planned.output


def test_submit_refuses_an_squeue_that_cannot_be_executed(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    """The cells' room in the queue cannot be counted: waiting cures nothing, so no sbatch and
    one line, not a wait for ever."""
    bin_dir = fake_slurm(tmp_path, monkeypatch, squeue=NO_INTERPRETER)
    waits: list[float] = []

    def no_wait(_self, seconds: float) -> None:  # a wait here is the bug: end it, as Ctrl-C
        waits.append(seconds)
        raise KeyboardInterrupt

    monkeypatch.setattr(scaling.backends.slurm.submit.ArraySubmitter, "_sleep", no_wait)
    path = slurm_study(tmp_path, data_dir, mlflow_server)
    result = CliRunner().invoke(app, ["submit", str(path)])
    assert result.exit_code == 2, result.output
    (error,) = _errors(result.output)
    assert f"squeue ({bin_dir / 'squeue'}) cannot be executed" in error, error
    assert "first on PATH" in error
    assert waits == []
    assert not (bin_dir / "sbatch_calls").exists()
    assert all(
        r.job_id.startswith("queued-") for r in read_records(read_study(path).folder).values()
    )
