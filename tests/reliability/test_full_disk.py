"""A full disk during a checkpoint: one clear error line (`jobs.faults`), the previous checkpoint
intact and loadable, and the next attempt resumes from it once space is freed.

The run's output lives on a small tmpfs mounted for this test (root only). The run holds right
after its first checkpoint (the test-only pause point, jobs/loop/pause.py); the test fills the disk,
then releases it, so the second checkpoint is the one that cannot be written, on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from jobs.checkpoints.checkpoint import list_checkpoints
from jobs.faults import EXIT_KNOWN_FAULT
from jobs.testing import tiny_run_dict
from scaling.state.job_errors import last_error_line
from tests.conftest import skip_unless_required
from tests.reliability.helpers import cli_env, wait_held

pytestmark = pytest.mark.slow
STEPS, CHECKPOINT_EVERY = 30, 10


@pytest.fixture
def small_volume(tmp_path) -> Iterator[Path]:
    """A 32 MiB tmpfs: room for a couple of tiny checkpoints, filled on demand."""
    if os.geteuid() != 0:
        skip_unless_required("mounting a tmpfs needs root")
    mount = tmp_path / "volume"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(volume: Path) -> Path:
    """Write zeros until the filesystem refuses: ENOSPC for everyone after this."""
    filler = volume / "filler"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
    return filler


def _train(cfg_path: Path, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jobs", str(cfg_path)],
            env=cli_env(**(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_checkpoint_on_a_full_disk_fails_clearly_and_resumes_after_space_is_freed(
    tmp_path, data_dir, small_volume, hold_at
):
    cfg = tiny_run_dict(
        tmp_path,
        data_dir,
        output_dir=str(small_volume / "run"),
        train={"steps": STEPS, "checkpoint_interval": CHECKPOINT_EVERY},
    )
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    ckpts = small_volume / "run" / "checkpoints"
    log = tmp_path / "train.log"

    # held after the first checkpoint; the pause files live off the volume that fills
    pause = hold_at(CHECKPOINT_EVERY)
    proc = _train(cfg_path, log, pause.env())
    wait_held(pause, [cfg["name"]], proc, log, timeout_s=300)
    assert [step for step, _ in list_checkpoints(ckpts)] == [CHECKPOINT_EVERY]
    filler = _fill(small_volume)
    pause.release(cfg["name"])
    assert proc.wait(timeout=300) == EXIT_KNOWN_FAULT, log.read_text()[-3000:]
    # one line, written whole (never a traceback wrapped at the terminal's width), last: the
    # line `scaling status` shows for the cell
    lines = log.read_text().splitlines()
    (error,) = [line for line in lines if line.startswith("error: ")]
    assert last_error_line(log) == error
    step, newest = 2 * CHECKPOINT_EVERY, CHECKPOINT_EVERY
    assert error.startswith(f"error: disk full (ENOSPC): {ckpts} ("), error
    assert f"bytes free): the checkpoint of step {step} was not written; free space" in error
    assert error.endswith(f"then rerun the job: it resumes from step {newest}"), error
    # its traceback is in a file beside the log, named on the line before; none in the log
    assert "Traceback" not in log.read_text()
    traceback_file = log.with_suffix(".traceback")
    assert (
        lines[lines.index(error) - 1]
        == f"[jobs] the traceback of the error below: {traceback_file}"
    )
    assert "CheckpointWriteError" in traceback_file.read_text()
    # the failed save left nothing behind, and the previous checkpoint still loads
    assert [step for step, _ in list_checkpoints(ckpts)] == [CHECKPOINT_EVERY]
    assert not list(ckpts.glob("*.tmp"))
    (_, path), *_ = list_checkpoints(ckpts)
    payload = torch.load(path / "rank_00000.pt", map_location="cpu", weights_only=True)
    assert payload  # a whole, readable payload

    filler.unlink()
    proc = _train(cfg_path, log)
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    out = log.read_text()
    assert f"resumed at step {CHECKPOINT_EVERY}" in out
    result = yaml.safe_load((small_volume / "run" / "result.json").read_text())
    assert result["status"] == "completed" and result["steps"] == STEPS, result
    print(f"[full-disk] error: {error[:400]}")
    print(
        f"[full-disk] failed save at step {2 * CHECKPOINT_EVERY} on a full 32 MiB tmpfs; "
        f"resumed at step {CHECKPOINT_EVERY}; completed {result['steps']} steps"
    )
