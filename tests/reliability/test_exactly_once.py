"""Exactly once: SIGKILL the whole `scaling run` process group mid-cell, rerun it, and every
metric step is in MLflow once, although the resumed cells re-executed (and re-spooled) the
steps between their last checkpoint and the kill."""

from __future__ import annotations

import time

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import kill_group, spooled_steps, start_cli, step_counts
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, poll, write_and_load

pytestmark = pytest.mark.slow
STEPS, CHECKPOINT_EVERY = 120, 20


def test_sigkill_of_scaling_run_then_rerun_logs_every_step_once(tmp_path, data_dir, mlflow_server):
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
    cells = [study.folder / "cells" / r.cell_id for r in study_status(study)]
    args = ["run", str(tmp_path / "study.yaml"), "--no-analyze"]
    log = tmp_path / "run.log"
    first = start_cli(args, log, tmp_path)

    def mid_cell() -> bool:
        assert first.poll() is None, log.read_text()[-3000:]
        # past a checkpoint, and a few steps beyond it spooled (those get re-executed)
        return all(
            checkpoint_steps(str(c)) and max(spooled_steps(c), default=0) > CHECKPOINT_EVERY + 2
            for c in cells
        )

    poll(mid_cell, 300, "both cells past their first checkpoint", 0.1)
    kill_group(first)
    assert not any((c / "result.json").exists() for c in cells), "killed too late"
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
        assert sorted(received) == list(range(1, STEPS + 1))  # no gap
        assert set(received.values()) == {1}  # no duplicate
