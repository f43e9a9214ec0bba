"""End to end on a real single-node Slurm cluster and a real MLflow server (CI starts both).

Skipped, with the reason, only where no Slurm controller answers (`.ci/slurm/start.sh`).
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import pytest

from jobs.testing import PauseFiles
from scaling.state.status import study_status
from scaling.study import Study
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import (
    checkpoint_steps,
    logged_steps,
    poll,
    study_runs,
    write_and_load,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
STUDY_TIMEOUT_S = 400
STEPS = 40


def _children(study):
    return [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]


def test_study_runs_as_slurm_job_arrays_and_resubmit_is_a_noop(
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    spec = small_spec(data_dir, tmp_path / "study", mlflow_server, executor="slurm")
    study = write_and_load(spec, tmp_path / "study.yaml")

    result = Study(study).submit(rounds=False)
    assert sorted(result.submitted) == sorted(result.jobs) and len(result.jobs) == 4
    # one array per world size (1-task cells, 2-task cells): ids "ARRAY_INDEX"
    arrays = {job.job_id.split("_")[0] for job in result.jobs.values()}
    assert len(arrays) == 2 and all("_" in job.job_id for job in result.jobs.values())

    rows = Study(study).wait(poll_s=2, timeout_s=STUDY_TIMEOUT_S)
    assert [r.state for r in rows] == ["completed"] * 4, rows
    assert all(r.val_loss is not None and math.isfinite(r.val_loss) for r in rows)

    runs = study_runs(study)
    parents = [r for r in runs if r.data.tags.get("scaling.role") == "study"]
    children = _children(study)
    assert len(parents) == 1 and len(children) == 4
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    for run in children:
        assert run.info.status == "FINISHED" and run.data.tags["outcome"] == "completed"
        assert math.isfinite(run.data.metrics["final_val_loss"])
        expected_world = "2" if run.data.tags["size"] == "60K" else "1"
        assert run.data.tags["world_size"] == expected_world  # the 2-task cell ran 2 gloo ranks
    # submitit's logs live in the study folder, nothing lands where submit ran
    assert list((study.folder / "submitit").rglob("*_log.out"))
    assert not list(Path.cwd().glob("slurm-*.out"))

    again = Study(study).submit(rounds=False)
    assert again.submitted == [] and set(again.skipped.values()) == {"completed"}
    assert len(study_runs(study)) == 5  # no new run, not even a second parent


def _job_log(study, job_id: str) -> str:
    return "\n".join(p.read_text() for p in (study.folder / "submitit").rglob(f"{job_id}_*.out"))


def test_interrupted_cell_resumes_and_killed_cell_is_retried(
    tmp_path, data_dir, mlflow_server, slurm_cluster, monkeypatch
):
    # two 1-rank cells of STEPS steps, checkpointing every 10; each holds after step 10 (its
    # checkpoint written) until let go, so both are acted on mid-run on any machine speed
    pause = PauseFiles(tmp_path / "pause", 10)
    for name, value in pause.env().items():
        monkeypatch.setenv(name, value)  # sbatch hands the submitting environment to the job
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        executor="slurm",
        sizes=["30K"],
        seeds=[0],
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256}},
        train={"checkpoint_interval": 10},
    )
    study = write_and_load(spec, tmp_path / "study.yaml")
    result = Study(study).submit(rounds=False)
    (interrupted, job_a), (killed, job_b) = sorted(result.jobs.items())
    out = {cid: study.folder / "cells" / cid for cid in result.jobs}
    # each as soon as its first checkpoint exists (step 10, where it holds), polled every 0.1 s
    actions = {
        interrupted: job_a._interrupt,  # preemption: USR2, the job checkpoints, submitit requeues
        # a crash: the training process dies at once (SIGHUP; Slurm turns a KILL into a graceful
        # cancel), no checkpoint, no requeue, its MLflow run left RUNNING
        killed: lambda: subprocess.run(
            ["scancel", "--signal=HUP", job_b.job_id], check=True, timeout=30
        ),
    }

    def act_on_checkpoints() -> bool:
        for cid in [c for c in actions if checkpoint_steps(out[c])]:
            actions.pop(cid)()
        return not actions

    poll(act_on_checkpoints, 180, lambda: f"a first checkpoint of {sorted(actions)}", 0.1)

    seen: list[dict] = []

    def killed_is_failed() -> dict | None:
        seen.append({r.cell_id: r.state for r in study_status(study)})
        return seen[-1] if seen[-1][killed] == "failed" else None

    states = poll(killed_is_failed, 60, lambda: f"the killed cell to show as failed: {seen[-3:]}")
    pause.release_all()  # a resumed attempt starts after step 10 and never holds again
    assert states[interrupted] in ("queued", "running", "completed")
    run_ids = {r.data.tags["cell_id"]: r.info.run_id for r in _children(study)}

    again = Study(study).submit(rounds=False)
    assert again.submitted == [killed]  # the failed cell is retried, the requeued one left alone
    rows = Study(study).wait(poll_s=2, timeout_s=STUDY_TIMEOUT_S)
    assert [r.state for r in rows] == ["completed", "completed"], rows

    children = _children(study)
    assert {r.data.tags["cell_id"]: r.info.run_id for r in children} == run_ids  # one run each
    logs = _job_log(study, job_a.job_id.split("_")[0]) + _job_log(study, again.jobs[killed].job_id)
    resumed = dict(re.findall(r"\[jobs\] (\S+): resumed at step (\d+)", logs))
    assert 10 <= int(resumed[interrupted]) < STEPS and 10 <= int(resumed[killed]) < STEPS, resumed
    steps = logged_steps(study, run_ids[interrupted])
    assert steps == list(range(1, STEPS + 1))  # resumed where it stopped: no gap, no repeat
    assert logged_steps(study, run_ids[killed])[-1] == STEPS
