"""Progress a user can read: the live bar in 80 columns, a running cell's step in `status`,
`plan`'s wall-clock on the study's own device."""

from __future__ import annotations

import heapq

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from foundation import contract as C
from jobs.config import TrackingConfig
from jobs.telemetry.spool import last_logged_step
from jobs.telemetry.tracking import Tracker
from scaling.backends.local.executor import LOCAL_ROUND_S
from scaling.cli import app
from scaling.cli.live import LiveProgress
from scaling.cli.status_view import status_tables
from scaling.costs.plan import cell_seconds, plan_study
from scaling.costs.wall import wall_estimate
from scaling.driver.environment import load_study_spec
from scaling.driver.progress import Progress
from scaling.spec.grid import Cell
from scaling.state.status import StatusRow
from tests.scaling.conftest import small_spec


def _row(i: int, state: str, step: int | None = None) -> StatusRow:
    cid = f"100K-nonlinear-s{i}-lr0.024"
    return StatusRow(
        Cell(cid, "100K", "nonlinear", i, 0.024, None),
        state,
        None,
        None,
        None,
        "",
        False,
        step,
        600,
    )


def test_the_live_bar_of_a_large_grid_fits_80_columns():
    rows = [_row(i, C.COMPLETED) for i in range(2)] + [_row(i, C.RUNNING) for i in range(2, 4)]
    rows += [_row(i, C.QUEUED) for i in range(4, 236)] + [_row(236, C.FAILED)]
    progress = Progress({r.cell_id: 1e9 for r in rows}, set())
    display = LiveProgress(progress, len(rows))
    display(rows)
    console = Console(width=80, record=True, force_terminal=False)
    console.print(display.bar.make_tasks_table(display.bar.tasks))
    (line,) = console.export_text().splitlines()
    assert len(line.rstrip()) <= 80
    assert "…" not in line, line  # nothing cut off
    # the bar counts results (a failed cell is resubmitted while it has retries left)
    assert "2/237 2 completed, 2 running, 232 queued, 1 failed; ETA" in line, line


def test_status_shows_the_step_of_a_running_cell_from_its_spool(tmp_path):
    """A real tracker spools metrics; the spool's last metric step is what `status` shows."""
    out = tmp_path / "cell"
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="t", flush_interval_s=60
    )
    assert last_logged_step(out) is None  # nothing spooled yet
    tracker = Tracker(out, tracking, "cell")
    for step in range(1, 121):
        tracker.log_metrics({"train/loss": 5.0 - step / 100, "train/lr": 1e-3}, step=step)
    tracker.set_tags({"outcome": "running"})  # a non-metric record after the last metric
    assert last_logged_step(out) == 120
    tracker.close()
    rows = [_row(0, C.RUNNING, last_logged_step(out)), _row(1, C.COMPLETED)]
    ((_, _, lines, _),) = status_tables("demo", rows)
    assert lines[0][1] == "running (step 120/600)"
    assert lines[1][1] == "completed"


def test_plan_gives_the_wall_clock_of_the_executor_on_the_studys_device(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["cost"] = {"flops_per_gpu_s": 1e8, "startup_s": 5.0}
    spec["local"] = {"max_parallel": 2}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    plan = plan_study(study)
    seconds = [cell_seconds(r, 1e8, 5.0) for r in plan.rows]
    for row, s in zip(plan.rows, seconds, strict=True):
        assert row.eval_flops > 0  # the final evaluation over 4 loss windows at least
        assert s == pytest.approx((row.flops + row.eval_flops) / (row.gpus * 1e8) + 5.0)
    slots = [0.0, 0.0]  # 2 at a time, longest first
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(slots, slots[0] + s)
    wall = wall_estimate(study, plan)
    assert wall.seconds == pytest.approx(LOCAL_ROUND_S + max(slots)) and wall.slots == 2
    assert sum(seconds) / 2 <= wall.seconds - LOCAL_ROUND_S < sum(seconds)

    result = CliRunner().invoke(
        app, ["plan", str(path)], env={"COLUMNS": "200", "CUDA_VISIBLE_DEVICES": ""}
    )
    assert result.exit_code == 0, result.output
    assert "GPU" not in result.output, result.output  # a CPU study costs CPU-hours
    assert "CPU-hours at 1e+08 FLOP/s per CPU" in result.output
    assert "wall-clock on CPU: about 0:" in result.output
    assert "2 cell(s) at a time (local.max_parallel)" in result.output


def test_an_edit_mid_study_never_takes_the_count_back_and_names_the_stale_cells():
    """Finished cells that turned stale (their code edited) stay counted as done, and the
    progress line names them and what changed, not only the final error (issue 54)."""
    note = "model code changed since: /s/src/ncv/helper.py; --rerun-stale or --accept-stale"
    done = [_row(i, C.COMPLETED) for i in range(5)]
    stale = [
        StatusRow(r.cell, C.STALE, 5.0, None, None, note)
        for r in (_row(i, C.COMPLETED) for i in range(5, 8))
    ]
    rows = done + stale + [_row(i, C.RUNNING, 10) for i in range(8, 12)]
    progress = Progress({r.cell_id: 1e9 for r in rows}, set())
    line = progress.summary(rows)
    assert line.startswith("8/12 done (5 completed, 0 diverged, 3 stale), 0 failed or"), line
    assert "3 stale (100K-nonlinear-s5-lr0.024, 100K-nonlinear-s6-lr0.024, " in line, line
    assert "model code changed since: /s/src/ncv/helper.py)" in line, line
    assert "--rerun-stale" in line and "--accept-stale" in line
    assert "3 stale" in progress.brief(rows)
