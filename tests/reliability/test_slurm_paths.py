"""The Slurm paths a cluster user hits first, on the CI cluster, through the `scaling` CLI:
`scaling run` end to end, `scaling cancel` of a running array, and a time limit that expires
mid-cell (submitit's USR2 before the limit, checkpoint, requeue). USR2 preemption of a cell whose
ranks span two nodes: tests/reliability/test_node_failure.py; `submit` and a 1-task preemption:
tests/scaling/e2e/test_slurm_e2e.py.

The cancel, the time limit and the preemption each come while the cells hold at a known step
(the test-only pause point, jobs/loop/pause.py), so they land mid-cell on any machine, and a
requeued cell resumes at exactly the step it held at (its stop saved that step)."""

from __future__ import annotations

import re
import subprocess

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import (
    assert_each_step_once,
    child_runs,
    ended_rows,
    job_logs,
    scaling_cli,
    slurm_spec,
    wait_held,
)
from tests.scaling.helpers import checkpoint_steps, poll, write_and_load

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1800)]


def test_scaling_run_with_the_slurm_executor(tmp_path, data_dir, mlflow_server, slurm_cluster):
    steps = 60
    spec = slurm_spec(tmp_path, data_dir, mlflow_server, steps)
    study = write_and_load(spec, tmp_path / "s.yaml")
    out = scaling_cli("run", str(tmp_path / "s.yaml"), "--no-analyze", timeout=600)
    rows = study_status(study)
    assert [r.state for r in rows] == ["completed", "completed"], out[-2000:]
    assert all(r.job_id and "_" in r.job_id for r in rows)  # ran as a Slurm array
    assert len(child_runs(study)) == 2
    total = assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-run] 2 cells via `scaling run` on Slurm: points {total} of {2 * steps}")


def test_scaling_cancel_of_a_running_array(
    tmp_path, data_dir, mlflow_server, slurm_cluster, hold_at
):
    study = write_and_load(slurm_spec(tmp_path, data_dir, mlflow_server, 40), tmp_path / "s.yaml")
    pause = hold_at(20)  # both cells held past their first checkpoint when the cancel comes
    scaling_cli("submit", str(tmp_path / "s.yaml"), env=pause.env())
    names = [r.cell_id for r in study_status(study)]
    wait_held(pause, names, timeout_s=300)
    assert all(checkpoint_steps(str(study.folder / "cells" / n)) == [20] for n in names)
    job_ids = [r.job_id for r in study_status(study)]

    out = scaling_cli("cancel", str(tmp_path / "s.yaml"))
    assert "cancelled 2 job(s)" in out, out

    def gone() -> bool:
        queue = subprocess.run(
            ["squeue", "-h", "-j", ",".join(job_ids)], capture_output=True, text=True
        )
        return not queue.stdout.strip()

    poll(gone, 60, "the array to leave the queue")
    rows = poll(
        lambda: (
            (rows := study_status(study)) and all(r.state == "cancelled" for r in rows) and rows
        ),
        60,
        "both cells to show as cancelled",
    )
    statuses = poll(
        lambda: (s := {r.info.status for r in child_runs(study)}) == {"KILLED"} and s,
        60,
        lambda: f"KILLED runs, not {[r.info.status for r in child_runs(study)]}",
    )
    print(f"[slurm-cancel] cancelled {job_ids}; cells {[r.state for r in rows]}; runs {statuses}")


def test_time_limit_expiring_mid_cell_requeues_and_resumes(
    tmp_path, data_dir, mlflow_server, slurm_cluster, hold_at
):
    # a 2-minute limit: submitit asks Slurm for USR2 90 s before it, so the signal comes about
    # 30 s into each attempt. The first attempt holds at step 30 (never released) until the
    # USR2 ends the hold: it saves step 30 and is requeued; the next attempt resumes there and
    # never reaches the hold again. (A slow later attempt may time out too: slurm.max_timeouts.)
    steps, hold = 60, 30
    spec = slurm_spec(
        tmp_path,
        data_dir,
        mlflow_server,
        steps,
        variants=["linear"],
        train={"checkpoint_interval": 20},
        slurm={"time_limit_min": 2, "array_parallelism": 1, "cpus_per_task": 1},
    )
    study = write_and_load(spec, tmp_path / "s.yaml")
    pause = hold_at(hold)
    scaling_cli("submit", str(tmp_path / "s.yaml"), env=pause.env())
    (name,) = [r.cell_id for r in study_status(study)]
    wait_held(pause, [name], timeout_s=300)
    rows = poll(
        lambda: ended_rows(study),
        900,
        "the cell to end",
        5,
    )
    logs = job_logs(study)
    assert [r.state for r in rows] == ["completed"], logs[-3000:]
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", logs)]
    assert resumed and all(0 < s < steps for s in resumed), logs[-3000:]
    # the held attempt saved step `hold` when the USR2 ended its hold, and the next resumed there
    assert hold in resumed and not pause.released(name), logs[-3000:]
    assert len(child_runs(study)) == 1
    total = assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-timeout] requeued {len(resumed)} time(s), resumed at {resumed}; points {total}")
