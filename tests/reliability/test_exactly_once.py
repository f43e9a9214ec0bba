"""Exactly once: SIGKILL the whole `scaling run` process group mid-cell, rerun it, and every
metric step is in MLflow once, although the resumed cells re-executed (and re-spooled) the
steps between their last checkpoint and the kill.

Both cells are held a few steps past their first checkpoint (the test-only pause point,
jobs/loop/pause.py) when the kill comes, so the re-executed steps are known exactly."""

from __future__ import annotations

import time

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import kill_group, spooled_steps, start_cli, step_counts, wait_held
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, write_and_load

pytestmark = pytest.mark.slow
STEPS, CHECKPOINT_EVERY = 40, 20
KILL_AT = CHECKPOINT_EVERY + 3  # steps 21-23 are spooled, then lost with the kill


def test_sigkill_of_scaling_run_then_rerun_logs_every_step_once(
    tmp_path, data_dir, mlflow_server, hold_at
):
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        sizes=["30K"],
        variants=["linear", "nonlinear"],
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256}},
        train={"checkpoint_interval": CHECKPOINT_EVERY},
    )
    study = write_and_load(spec, tmp_path / "study.yaml")
    names = [r.cell_id for r in study_status(study)]
    cells = [study.folder / "cells" / name for name in names]
    args = ["run", str(tmp_path / "study.yaml"), "--no-analyze"]
    log = tmp_path / "run.log"
    pause = hold_at(KILL_AT)
    first = start_cli(args, log, tmp_path, env=pause.env())
    wait_held(pause, names, first, log, timeout_s=300)
    for cell in cells:  # past a checkpoint, and a few steps beyond it spooled
        assert checkpoint_steps(str(cell)) == [CHECKPOINT_EVERY]
        assert max(spooled_steps(cell)) == KILL_AT
    kill_group(first)
    assert not any((c / "result.json").exists() for c in cells), "killed too late"
    for name in names:  # released for good: the rerun re-executes step KILL_AT without a hold
        pause.release(name)
    time.sleep(1)

    second = start_cli(args, log, tmp_path)
    assert second.wait(timeout=600) == 0, log.read_text()[-3000:]
    rows = study_status(study)
    assert [r.state for r in rows] == ["completed", "completed"], rows
    for row, cell in zip(rows, cells, strict=True):
        spooled = spooled_steps(cell)
        reexecuted = sorted(s for s, n in spooled.items() if n > 1)
        received = step_counts(mlflow_server, row.run_id)
        print(
            f"[exactly-once] {row.cell_id}: points expected {STEPS}, received "
            f"{sum(received.values())}, distinct steps {len(received)}, re-executed steps "
            f"spooled twice {len(reexecuted)} ({reexecuted[:1]}..{reexecuted[-1:]})"
        )
        assert reexecuted, "the kill came after the last checkpoint: nothing was re-executed"
        assert reexecuted == list(range(CHECKPOINT_EVERY + 1, KILL_AT + 1))
        assert sorted(received) == list(range(1, STEPS + 1))  # no gap
        assert set(received.values()) == {1}  # no duplicate
