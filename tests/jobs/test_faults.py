"""A job that meets a known fault ends with one line naming it, the file and the fix
(`jobs.faults`): each fault raised for real where the job meets it (a checkpoint's write, the
tracking server, the prepared data), told by what was raised; the line is the last error line
`scaling status` reads; the traceback only with `--verbose`. Any other error keeps its traceback.
(The full disk for real, on a tmpfs: tests/reliability/test_full_disk.py; the line in `scaling
status` from a real job: tests/reliability/test_job_faults.py.)
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import jobs.checkpoints.checkpoint as ckpt
from jobs import faults
from jobs.testing import tiny_run_config
from scaling.state.job_errors import last_error_in
from tests.distributed import free_port


def _ended(capsys, fault: Callable[[], object], config=None, verbose: bool = False) -> str:
    """Run `fault` as an entry point runs the job; its exit code checked; its stderr."""
    with pytest.raises(SystemExit) as ended, faults.reporting_known_faults(config, verbose):
        fault()
    assert ended.value.code == faults.EXIT_KNOWN_FAULT
    return capsys.readouterr().err


def _one_line(stderr: str) -> str:
    """The fault's one line: the only `error:` line, last, and the one `scaling status` shows
    (`job_errors.last_error_in`); no traceback beside it."""
    lines = stderr.splitlines()
    (line,) = [x for x in lines if x.startswith("error: ")]
    assert lines[-1] == line and last_error_in(stderr) == line, stderr
    assert "Traceback" not in stderr, stderr
    return line


def _checkpoint_write_fails(root: Path, monkeypatch, code: int) -> Callable[[], object]:
    """Step 1 saved; step 2's write (the bytes torch.save hands the file) fails with `code`."""
    ckpt.save_checkpoint(root, 1, {"w": torch.zeros(4)}, keep=2)

    def refuse(self, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(ckpt._HashingWriter, "write", refuse)
    return lambda: ckpt.save_checkpoint(root, 2, {"w": torch.zeros(4)}, keep=2)


def test_a_read_only_file_system_at_a_checkpoint_write(tmp_path, monkeypatch, capsys):
    root = tmp_path / "checkpoints"
    line = _one_line(_ended(capsys, _checkpoint_write_fails(root, monkeypatch, errno.EROFS)))
    assert line == (
        f"error: read-only file system (EROFS): {root}: the checkpoint of step 2 was not "
        "written; remount it read-write or set output_dir to a writable folder, then rerun the "
        "job: it resumes from step 1"
    )
    assert [step for step, _ in ckpt.list_checkpoints(root)] == [1]


def test_a_full_disk_at_a_checkpoint_write(tmp_path, monkeypatch, capsys):
    root = tmp_path / "checkpoints"
    line = _one_line(_ended(capsys, _checkpoint_write_fails(root, monkeypatch, errno.ENOSPC)))
    assert line.startswith(f"error: disk full (ENOSPC): {root} (") and " bytes free): " in line
    assert line.endswith(
        ": the checkpoint of step 2 was not written; free space there, then rerun the job: it "
        "resumes from step 1"
    )


def test_an_unreachable_tracking_server(tmp_path, data_dir, capsys):
    from jobs.telemetry.upload import SpoolUploader

    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = tiny_run_config(tmp_path, data_dir, tracking={"enabled": True, "tracking_uri": uri})
    # where the job first calls the server: its run is made (a real MLflow client's error)
    uploader = SpoolUploader(Path(config.output_dir), config.tracking, config.name)
    line = _one_line(_ended(capsys, uploader.ensure_run, config))
    assert line == (
        f"error: tracking server unreachable: {uri}: start it, or point tracking.tracking_uri "
        "(MLFLOW_TRACKING_URI) at one that answers, then rerun the job"
    )


def _garbled_copy(data_dir: Path, tmp_path: Path) -> Path:
    data = Path(shutil.copytree(data_dir, tmp_path / "data"))
    with open(data / "train.idx", "r+b") as idx:
        idx.write(b"garbage!")  # over the index's magic header
    return data


def test_a_corrupted_data_file(tmp_path, data_dir, capsys):
    from data_prep import validation_windows

    data = _garbled_copy(data_dir, tmp_path)
    config = tiny_run_config(tmp_path, data)
    read = lambda: validation_windows(config.data, config.model.seq_length)  # noqa: E731
    line = _one_line(_ended(capsys, read, config))
    assert line == (
        f"error: corrupted or missing data: {data / 'train.idx'}: not a megatron index (bad "
        "header); rebuild it with `scaling prepare-data ... --force`"
    )
    fault = faults.known_fault(_raised(read), config)
    assert (fault.kind, fault.where) == (faults.DATA, str(data))


def test_verbose_adds_the_traceback_before_the_line(tmp_path, monkeypatch, capsys):
    root = tmp_path / "checkpoints"
    fault = _checkpoint_write_fails(root, monkeypatch, errno.EROFS)
    stderr = _ended(capsys, fault, verbose=True)
    assert "Traceback (most recent call last)" in stderr and "CheckpointWriteError" in stderr
    assert last_error_in(stderr) == stderr.splitlines()[-1]
    assert stderr.splitlines()[-1].startswith("error: read-only file system (EROFS): ")
    monkeypatch.setenv(faults.VERBOSE_ENV, "1")  # a submitit job's switch: no command line
    assert faults.verbose_requested()


def test_any_other_error_keeps_its_traceback(tmp_path, capsys):
    def refused_rendezvous():  # a connection refused, but not MLflow's: not the tracking fault
        raise ConnectionRefusedError(errno.ECONNREFUSED, "gloo rendezvous refused")

    for error in (KeyError("lr"), ValueError("seq_length must be > 0"), refused_rendezvous):
        raise_it = error if callable(error) else lambda e=error: _throw(e)
        with pytest.raises(Exception) as raised, faults.reporting_known_faults():
            raise_it()
        assert faults.known_fault(raised.value) is None, raised.value
    assert capsys.readouterr().err == ""


def _throw(err: BaseException) -> None:
    raise err


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the test's own fault, returned for a look
        return err
    raise AssertionError("no error raised")
