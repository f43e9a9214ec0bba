"""Exact resume: a SIGKILLed run and a USR2-preempted submitit job end bitwise where an
uninterrupted run ends, and keep logging to the same MLflow run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation.process.proc import children
from jobs.checkpoints.checkpoint import list_checkpoints
from jobs.testing import tiny_run_dict
from scaling.warmstart.server import warm_python

STEPS = 40
REPO = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    env.pop("WORLD_SIZE", None)
    return env


def _cfg(tmp_path: Path, data_dir: Path, train: dict | None = None, **overrides) -> dict:
    train = {"steps": STEPS, **(train or {})}
    return tiny_run_dict(tmp_path, data_dir, train=train, **overrides)


def _start(cfg: dict, tmp_path: Path, tag: str) -> tuple[subprocess.Popen, Path]:
    path = tmp_path / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = tmp_path / f"{tag}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs", str(path)],
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    return proc, log


@contextmanager
def _python(start: str, tmp_path: Path) -> Iterator[str | None]:
    """submitit's `python` for a cold task (None) or one forked by a warm server."""
    if start == "cold":
        yield None
        return
    with warm_python(tmp_path / "warm") as python:
        assert python is not None
        yield python


def _result(cfg: dict) -> dict:
    return json.loads((Path(cfg["output_dir"]) / "result.json").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_dir) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    cfg = _cfg(tmp, data_dir)
    proc, log = _start(cfg, tmp, "ref")
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    return _result(cfg)


def _all_steps_logged(uri: str, run_id: str) -> list[int]:
    history = MlflowClient(uri).get_metric_history(run_id, "train/loss")
    return sorted({m.step for m in history})


@pytest.mark.slow
def test_sigkill_then_rerun_ends_bitwise_equal(tmp_path, data_dir, reference, mlflow_server):
    experiment = f"jobs-kill-{uuid.uuid4().hex[:8]}"  # the server may outlive one test run
    tracking = {"enabled": True, "tracking_uri": mlflow_server, "experiment": experiment}
    cfg = _cfg(tmp_path, data_dir, train={"checkpoint_interval": 5}, tracking=tracking)
    proc, log = _start(cfg, tmp_path, "first")
    ckpts = Path(cfg["output_dir"]) / "checkpoints"
    deadline = time.monotonic() + 300
    while not any(step >= 10 for step, _ in list_checkpoints(ckpts)):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (Path(cfg["output_dir"]) / "result.json").exists(), "killed too late"

    proc, log = _start(cfg, tmp_path, "second")
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    assert "resumed at step" in log.read_text()
    result = _result(cfg)
    assert result["train_losses"] == reference["train_losses"]  # bitwise
    assert result["final_val_loss"] == reference["final_val_loss"]
    client = MlflowClient(mlflow_server)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert [r.info.run_id for r in runs] == [result["run_id"]]  # one run, continued
    assert _all_steps_logged(mlflow_server, result["run_id"]) == list(range(1, STEPS + 1))


@pytest.mark.slow
@pytest.mark.parametrize("start", ["cold", "warm"])
def test_usr2_preemption_saves_requeues_and_continues_the_run(
    tmp_path, data_dir, reference, mlflow_server, monkeypatch, start
):
    """Also with the task forked by `scaling.warmstart.server` (as `scaling run` starts local
    cells): the USR2 sent to the controller's task reaches the training process through the
    client."""
    import submitit

    from foundation.config import from_dict
    from jobs import TrainingJob
    from jobs.config import RunConfig

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    experiment = f"jobs-usr2-{uuid.uuid4().hex[:8]}"  # the server may outlive one test run
    tracking = {"enabled": True, "tracking_uri": mlflow_server, "experiment": experiment}
    # no periodic checkpoints: the only checkpoint is the one the preemption writes
    cfg = _cfg(tmp_path, data_dir, name="usr2", tracking=tracking)
    config = from_dict(RunConfig, cfg, where="run")
    with _python(start, tmp_path) as python:
        executor = submitit.LocalExecutor(folder=tmp_path / "submitit", python=python)
        executor.update_parameters(timeout_min=10)
        job = executor.submit(TrainingJob(config))
        deadline = time.monotonic() + 300
        while "step 5/" not in (job.stdout() or ""):
            assert not job.done(), job.stderr()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # USR2, as Slurm sends before a preemption or timeout. (LocalJob._interrupt signals the
        # local controller, which forwards only SIGTERM, so signal the task process directly.)
        (task,) = children(int(job.job_id))
        os.kill(task, signal.SIGUSR2)
        result = job.result()
    out = job.stdout()
    assert result.status == "completed", out
    resumed_at = int(out.split("resumed at step ")[1].split()[0])
    assert 5 <= resumed_at < STEPS
    assert result.train_losses == reference["train_losses"]
    assert result.final_val_loss == reference["final_val_loss"]
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [result.run_id]  # one run, continued
    assert _all_steps_logged(mlflow_server, result.run_id) == list(range(1, STEPS + 1))


@pytest.mark.slow
def test_usr2_on_a_two_task_job_stops_both_ranks_at_the_same_step(
    tmp_path, data_dir, reference, monkeypatch
):
    """Under Slurm each task is one rank and every task gets USR2, but only global rank 0 runs
    `checkpoint()`; the stop must still reach rank 1 (DP=2 here) so both save the same step."""
    import submitit

    from foundation.config import from_dict
    from jobs import TrainingJob
    from jobs.config import RunConfig
    from tests.jobs.helpers import usr2_at_step_5

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = _cfg(tmp_path, data_dir, name="usr2dp", parallel={"data_parallel": 2})
    with _python("warm", tmp_path) as python:  # the two ranks forked from one warm server
        executor = submitit.LocalExecutor(folder=tmp_path / "submitit", python=python)
        executor.update_parameters(timeout_min=10, tasks_per_node=2)
        results, out = usr2_at_step_5(executor, TrainingJob(from_dict(RunConfig, cfg, where="run")))
    assert [r.status for r in results] == ["completed", "completed"], out
    resumed_at = int(out.split("resumed at step ")[1].split()[0])
    assert 5 <= resumed_at < STEPS
    result = results[0]
    assert results[1].train_losses == result.train_losses
    # DP=2 reduces in another order than one process: equal to float32 rounding, not bitwise
    assert result.train_losses == pytest.approx(reference["train_losses"], rel=2e-5)
