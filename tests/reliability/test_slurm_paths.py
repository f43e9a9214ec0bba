"""The Slurm paths a cluster user hits first, on the CI cluster, through the `scaling` CLI:
`scaling run` end to end, `scaling cancel` of a running array, a time limit that expires
mid-cell (submitit's USR2 before the limit, checkpoint, requeue), and USR2 preemption of a
2-task cell. (tests/scaling/test_slurm_e2e.py covers `submit` and a 1-task preemption.)

The cancel, the time limit and the preemption each come while the cells hold at a known step
(the test-only pause point, jobs/pause.py), so they land mid-cell on any machine, and a requeued
cell resumes at exactly the step it held at (its stop saved that step)."""

from __future__ import annotations

import re
import subprocess

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import SCALING, cli_env, step_counts, wait_held
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, poll, study_runs, write_and_load

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1800)]


def _scaling(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [SCALING, *args],
        env=cli_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _spec(tmp_path, data_dir, uri, steps: int, **overrides) -> dict:
    base = {
        "executor": "slurm",
        "sizes": ["30K"],
        "variants": ["linear", "nonlinear"],
        "parallel": {},
        "tokens": {"per_size": {"30K": steps * 256}},
        "train": {"checkpoint_interval": 20},
        "slurm": {"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1},
    }
    return small_spec(data_dir, tmp_path / "study", uri, **{**base, **overrides})


def _children(study) -> list:
    return [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]


def _logs(study) -> str:
    return "".join(p.read_text() for p in (study.folder / "submitit").rglob("*_log.out"))


def _ended(study) -> list | None:
    """The status rows once no cell is pending or running (None before)."""
    rows = study_status(study)
    return rows if all(r.state not in ("queued", "running") for r in rows) else None


def _assert_each_step_once(uri: str, rows, steps: int) -> int:
    total = 0
    for row in rows:
        received = step_counts(uri, row.run_id)
        assert sorted(received) == list(range(1, steps + 1)), row.cell_id
        assert set(received.values()) == {1}, row.cell_id
        total += sum(received.values())
    return total


def test_scaling_run_with_the_slurm_executor(tmp_path, data_dir, mlflow_server, slurm_cluster):
    steps = 60
    study = write_and_load(_spec(tmp_path, data_dir, mlflow_server, steps), tmp_path / "s.yaml")
    out = _scaling("run", str(tmp_path / "s.yaml"), "--no-analyze", timeout=600)
    rows = study_status(study)
    assert [r.state for r in rows] == ["completed", "completed"], out[-2000:]
    assert all(r.job_id and "_" in r.job_id for r in rows)  # ran as a Slurm array
    assert len(_children(study)) == 2
    total = _assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-run] 2 cells via `scaling run` on Slurm: points {total} of {2 * steps}")


def test_scaling_cancel_of_a_running_array(
    tmp_path, data_dir, mlflow_server, slurm_cluster, hold_at
):
    study = write_and_load(_spec(tmp_path, data_dir, mlflow_server, 40), tmp_path / "s.yaml")
    pause = hold_at(20)  # both cells held past their first checkpoint when the cancel comes
    _scaling("submit", str(tmp_path / "s.yaml"), env=pause.env())
    names = [r.cell_id for r in study_status(study)]
    wait_held(pause, names, timeout_s=300)
    assert all(checkpoint_steps(str(study.folder / "cells" / n)) == [20] for n in names)
    job_ids = [r.job_id for r in study_status(study)]

    out = _scaling("cancel", str(tmp_path / "s.yaml"))
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
        lambda: (s := {r.info.status for r in _children(study)}) == {"KILLED"} and s,
        60,
        lambda: f"KILLED runs, not {[r.info.status for r in _children(study)]}",
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
    spec = _spec(
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
    _scaling("submit", str(tmp_path / "s.yaml"), env=pause.env())
    (name,) = [r.cell_id for r in study_status(study)]
    wait_held(pause, [name], timeout_s=300)
    rows = poll(
        lambda: _ended(study),
        900,
        "the cell to end",
        5,
    )
    logs = _logs(study)
    assert [r.state for r in rows] == ["completed"], logs[-3000:]
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", logs)]
    assert resumed and all(0 < s < steps for s in resumed), logs[-3000:]
    # the held attempt saved step `hold` when the USR2 ended its hold, and the next resumed there
    assert hold in resumed and not pause.released(name), logs[-3000:]
    assert len(_children(study)) == 1
    total = _assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-timeout] requeued {len(resumed)} time(s), resumed at {resumed}; points {total}")


def test_usr2_preemption_of_a_two_task_cell(
    tmp_path, data_dir, mlflow_server, slurm_cluster, hold_at
):
    steps, hold = 50, 25  # held past the checkpoint of step 20 when the USR2 comes
    spec = _spec(
        tmp_path,
        data_dir,
        mlflow_server,
        steps,
        sizes=["60K"],
        variants=["nonlinear"],
        tokens={"per_size": {"60K": steps * 256}},
        parallel={"60K": {"data_parallel": 2}},
    )
    study = write_and_load(spec, tmp_path / "s.yaml")
    pause = hold_at(hold)
    _scaling("submit", str(tmp_path / "s.yaml"), env=pause.env())
    (row,) = study_status(study)
    wait_held(pause, [row.cell_id], timeout_s=300)
    (row,) = study_status(study)
    # what a preemption sends to every task of the job (submitit's job._interrupt() does this)
    subprocess.run(["scancel", "--signal=USR2", row.job_id], check=True, timeout=30)
    rows = poll(
        lambda: _ended(study),
        600,
        "the cell to end",
        2,
    )
    logs = _logs(study)
    assert [r.state for r in rows] == ["completed"], logs[-3000:]
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", logs)]
    assert len(resumed) == 1 and 0 < resumed[0] < steps, logs[-3000:]
    assert resumed == [hold] and not pause.released(row.cell_id), logs[-3000:]  # its stop saved it
    (run,) = _children(study)
    assert run.data.tags["world_size"] == "2"
    total = _assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-usr2] 2-task cell preempted, resumed at step {resumed[0]}; points {total}")
