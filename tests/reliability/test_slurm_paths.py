"""The Slurm paths a cluster user hits first, on the CI cluster, through the `scaling` CLI:
`scaling run` end to end, `scaling cancel` of a running array, a time limit that expires
mid-cell (submitit's USR2 before the limit, checkpoint, requeue), and USR2 preemption of a
2-task cell. (tests/scaling/test_slurm_e2e.py covers `submit` and a 1-task preemption.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import SCALING, cli_env, step_counts
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, poll, study_runs, write_and_load

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1800)]


def _scaling(*args: str, timeout: float = 300) -> str:
    out = subprocess.run(
        [SCALING, *args], env=cli_env(), capture_output=True, text=True, timeout=timeout
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


def test_scaling_cancel_of_a_running_array(tmp_path, data_dir, mlflow_server, slurm_cluster):
    study = write_and_load(_spec(tmp_path, data_dir, mlflow_server, 5000), tmp_path / "s.yaml")
    _scaling("submit", str(tmp_path / "s.yaml"))
    cells = [study.folder / "cells" / r.cell_id for r in study_status(study)]
    poll(lambda: all(checkpoint_steps(str(c)) for c in cells), 300, "both cells training", 0.5)
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
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    # a 2-minute limit: submitit asks Slurm for USR2 90 s before it, so the signal comes about
    # 30 s into each attempt; the cell needs longer than that, and so one or more requeues.
    # (1,200 steps once trained in under 30 s and finished without a requeue; in a slow CI run
    # these 4,000 took 4 attempts, past submitit's default of 3 time-outs: slurm.max_timeouts.)
    steps = 4000
    spec = _spec(
        tmp_path,
        data_dir,
        mlflow_server,
        steps,
        variants=["linear"],
        train={"checkpoint_interval": 100},
        slurm={"time_limit_min": 2, "array_parallelism": 1, "cpus_per_task": 1},
    )
    study = write_and_load(spec, tmp_path / "s.yaml")
    _scaling("submit", str(tmp_path / "s.yaml"))
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
    assert len(_children(study)) == 1
    total = _assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-timeout] requeued {len(resumed)} time(s), resumed at {resumed}; points {total}")


def test_usr2_preemption_of_a_two_task_cell(tmp_path, data_dir, mlflow_server, slurm_cluster):
    steps = 300
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
    _scaling("submit", str(tmp_path / "s.yaml"))
    (cell,) = [study.folder / "cells" / r.cell_id for r in study_status(study)]
    poll(lambda: checkpoint_steps(str(cell)), 300, "a first checkpoint", 0.2)
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
    (run,) = _children(study)
    assert run.data.tags["world_size"] == "2"
    total = _assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-usr2] 2-task cell preempted, resumed at step {resumed[0]}; points {total}")
