"""The test-only pause point (jobs/loop/pause.py) on the real trainer: it holds after step N (its
`.reached` file appears, the step metric stops there), goes on when released, and a SIGTERM or
SIGUSR2 while held does what it does to a running job: SIGUSR2 saves step N, requeues, and the
resumed attempt finishes without holding again; SIGTERM (a preemption or `scancel`) saves step
N on every rank and ends the job as interrupted, and a rerun resumes there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from foundation.process.proc import children
from jobs.checkpoints.checkpoint import list_checkpoints
from jobs.loop.pause import ENV_FILE, ENV_STEP, PausePoint, pause_point
from jobs.testing import PauseFiles, tiny_run_dict

STEPS, PAUSE_AT = 8, 3
HOLD_CHECK_S = 1.5  # how long a held run is watched for a step it must not take
REPO = Path(__file__).resolve().parents[3]


def _cfg(tmp_path: Path, data_dir: Path, name: str, mlflow_server: str) -> dict:
    tracking = {
        "enabled": True,
        "tracking_uri": mlflow_server,
        "experiment": f"jobs-pause-{uuid.uuid4().hex[:8]}",  # the server may outlive one run
    }
    # no periodic checkpoints: the only one is what a preemption writes
    train = {"steps": STEPS, "checkpoint_interval": 0}
    return tiny_run_dict(tmp_path, data_dir, name=name, train=train, tracking=tracking)


def _spooled(cfg: dict) -> Counter:
    """How often each step's train/loss was spooled (what the tracker logged, in order)."""
    spool = Path(cfg["output_dir"]) / "tracking" / "spool.jsonl"
    counts: Counter = Counter()
    for line in spool.read_text().splitlines() if spool.is_file() else []:
        record = json.loads(line)
        if record.get("t") == "metric" and record.get("k") == "train/loss":
            counts[record["step"]] += 1
    return counts


def _wait(condition, alive, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert alive(), f"the run ended while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _assert_held(cfg: dict, pause: PauseFiles, alive) -> None:
    """Held at PAUSE_AT: `.reached` says so, and no later step is logged while we watch."""
    name = cfg["name"]
    _wait(lambda: pause.reached(name), alive, 300, f"{name} to reach step {PAUSE_AT}")
    assert pause.point(name).reached.read_text().strip() == str(PAUSE_AT)
    assert max(_spooled(cfg)) == PAUSE_AT
    time.sleep(HOLD_CHECK_S)
    assert alive(), "the run ended while held"
    assert max(_spooled(cfg)) == PAUSE_AT, "the step metric advanced while held"
    assert not (Path(cfg["output_dir"]) / "result.json").exists()


def test_pause_point_reads_both_variables_or_neither(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_STEP, raising=False)
    monkeypatch.delenv(ENV_FILE, raising=False)
    assert pause_point("cell") is None
    monkeypatch.setenv(ENV_STEP, "5")
    with pytest.raises(ValueError, match="go together"):
        pause_point("cell")
    monkeypatch.setenv(ENV_FILE, str(tmp_path / "hold-{name}"))
    assert pause_point("cell") == PausePoint(5, tmp_path / "hold-cell")
    assert pause_point("cell").reached == tmp_path / "hold-cell.reached"
    monkeypatch.setenv(ENV_STEP, "0")
    with pytest.raises(ValueError, match=">= 1"):
        pause_point("cell")


@pytest.mark.slow
def test_holds_after_step_n_until_released(tmp_path, data_dir, mlflow_server):
    cfg = _cfg(tmp_path, data_dir, "held", mlflow_server)
    pause = PauseFiles(tmp_path / "pause", PAUSE_AT)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **pause.env())
    env.pop("WORLD_SIZE", None)
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs", str(path)], env=env, stdout=out, stderr=out
        )
    try:
        _assert_held(cfg, pause, lambda: proc.poll() is None)
        pause.release(cfg["name"])
        assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    result = json.loads((Path(cfg["output_dir"]) / "result.json").read_text())
    assert result["status"] == "completed" and result["steps"] == STEPS, result
    spooled = _spooled(cfg)
    assert sorted(spooled) == list(range(1, STEPS + 1)) and set(spooled.values()) == {1}


@pytest.mark.slow
def test_sigusr2_while_held_preempts_at_step_n(tmp_path, data_dir, mlflow_server, monkeypatch):
    """A submitit job held at step N: SIGUSR2 ends the hold, the loop saves step N and submitit
    requeues; the resumed attempt starts at step N, so it never reaches the pause point again,
    and finishes although never released."""
    import submitit

    from foundation.config import from_dict
    from jobs import TrainingJob
    from jobs.config import RunConfig

    cfg = _cfg(tmp_path, data_dir, "preempted", mlflow_server)
    pause = PauseFiles(tmp_path / "pause", PAUSE_AT)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for key, value in pause.env().items():
        monkeypatch.setenv(key, value)  # the local controller passes them on to the task
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit")
    executor.update_parameters(timeout_min=10)
    job = executor.submit(TrainingJob(from_dict(RunConfig, cfg, where="run")))
    try:
        _wait(lambda: children(int(job.job_id)), lambda: not job.done(), 60, "the task")
        (task,) = children(int(job.job_id))
        _assert_held(cfg, pause, lambda: not job.done())
        os.kill(task, signal.SIGUSR2)  # what Slurm sends before a time-out
        result = job.result()
    finally:
        if not job.done():
            job.cancel()
    out = job.stdout() or ""
    assert result.status == "completed" and result.steps == STEPS, out[-3000:]
    ckpts = Path(cfg["output_dir"]) / "checkpoints"
    assert PAUSE_AT in [step for step, _ in list_checkpoints(ckpts)]  # the preemption's save
    assert f"resumed at step {PAUSE_AT}" in out, out[-3000:]
    assert not pause.released(cfg["name"])  # the resumed attempt finished on its own
    spooled = _spooled(cfg)
    assert sorted(spooled) == list(range(1, STEPS + 1)) and set(spooled.values()) == {1}


@pytest.mark.slow
def test_sigterm_saves_step_n_on_both_ranks_and_the_rerun_ends_bitwise_equal(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    """A real preemption (or `scancel`) sends SIGTERM to every task. A two-task job (DP=2) held
    at step N saves step N, ends as interrupted (MLflow run KILLED, not failed) and is not
    requeued by the job itself; submitting it again resumes at step N and ends bitwise where an
    uninterrupted two-task run ends."""
    import submitit
    from mlflow.tracking import MlflowClient

    from foundation.config import from_dict
    from jobs import TrainingJob
    from jobs.config import RunConfig
    from scaling.warmstart.server import warm_python

    cfg = _cfg(tmp_path, data_dir, "sigterm", mlflow_server)
    cfg["parallel"] = {"data_parallel": 2}
    ref = _cfg(tmp_path / "ref", data_dir, "reference", mlflow_server)
    ref["parallel"] = {"data_parallel": 2}
    pause = PauseFiles(tmp_path / "pause", PAUSE_AT)
    pause.release(ref["name"])  # the reference runs through
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for key, value in pause.env().items():
        monkeypatch.setenv(key, value)
    job_fn = TrainingJob(from_dict(RunConfig, cfg, where="run"))
    with warm_python(tmp_path / "warm") as python:  # the ranks forked from one warm server
        executor = submitit.LocalExecutor(folder=tmp_path / "submitit", python=python)
        executor.update_parameters(timeout_min=10, tasks_per_node=2)
        job = executor.submit(job_fn)
        try:
            _wait(lambda: len(children(int(job.job_id))) == 2, lambda: not job.done(), 60, "tasks")
            _assert_held(cfg, pause, lambda: not job.done())
            for task in children(int(job.job_id)):
                os.kill(task, signal.SIGTERM)  # as Slurm signals every task of the step
            _wait(job.done, lambda: True, 60, "the job to end on SIGTERM")
        finally:
            if not job.done():
                job.cancel()
        first = job.results()
        assert [r.status for r in first] == ["interrupted"] * 2, job.stdout()
        assert [r.steps for r in first] == [PAUSE_AT] * 2
        ckpts = Path(cfg["output_dir"]) / "checkpoints"
        assert [step for step, _ in list_checkpoints(ckpts)] == [PAUSE_AT]
        assert MlflowClient(mlflow_server).get_run(first[0].run_id).info.status == "KILLED"

        rerun = executor.submit(job_fn)  # what the next `scaling submit` does
        reference = executor.submit(TrainingJob(from_dict(RunConfig, ref, where="run")))
        second, expected = rerun.results(), reference.results()
    assert f"resumed at step {PAUSE_AT}" in rerun.stdout(), rerun.stdout()[-3000:]
    assert [r.status for r in second] == ["completed"] * 2
    assert second[0].train_losses == expected[0].train_losses  # bitwise
    assert second[0].final_val_loss == expected[0].final_val_loss
    assert second[0].run_id == first[0].run_id  # the same MLflow run, continued
    assert MlflowClient(mlflow_server).get_run(first[0].run_id).info.status == "FINISHED"
