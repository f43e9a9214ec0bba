"""Loss spikes (`jobs.loop.spikes`): counted on a real tiny cell whose LR makes the loss jump,
logged to its MLflow run, and counted once across a preemption and resume."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from foundation import contract as C
from jobs.loop.spikes import EMA_BETA, is_spike, next_ema
from jobs.testing import tiny_run_config, tiny_run_dict
from tests.distributed import run_ranks

STEPS = 6


class StopAfter(threading.Event):
    """A stop flag that reads as set from the `n`-th check on (the trainer checks once a step)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.checks = n, 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.n


def preempted_and_resumed(rank: int, world_size: int, config: dict) -> list[dict[str, Any]]:
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop.trainer import train

    cfg = from_dict(RunConfig, config, where="run")
    first = train(cfg, stop=StopAfter(3))  # stops and saves after step 3
    return [dict(first.__dict__), dict(train(cfg).__dict__)]


def _expected_spikes(losses: list[float], factor: float) -> list[int]:
    """The rule, written out: a loss above factor x the EMA (beta 0.9) of the losses before it."""
    ema, steps = math.nan, []
    for step, loss in enumerate(losses, start=1):
        if not math.isnan(ema) and loss > factor * ema:
            steps.append(step)
        ema = loss if math.isnan(ema) else 0.9 * ema + 0.1 * loss
    return steps


def test_the_rule_on_numbers():
    assert EMA_BETA == 0.9
    assert not is_spike(100.0, math.nan, 3.0)  # no running loss on the first step
    assert is_spike(31.0, 10.0, 3.0) and not is_spike(30.0, 10.0, 3.0)
    assert not is_spike(math.inf, 10.0, 3.0) and not is_spike(math.nan, 10.0, 3.0)
    assert next_ema(math.nan, 5.0) == 5.0 and next_ema(10.0, math.nan) == 10.0
    assert next_ema(10.0, 20.0) == pytest.approx(11.0)


def test_spike_factor_is_validated_at_load(tmp_path):
    with pytest.raises(ValueError, match="train.spike_factor must be > 1"):
        tiny_run_config(tmp_path, tmp_path / "no-data", train={"spike_factor": 1.0})


@pytest.mark.slow  # one spawned process, two short trainings, MLflow: 24-34 s on 2 busy cores
def test_spikes_are_logged_and_survive_a_resume_once(tmp_path, data_dir, mlflow_server):
    # LR 10 warming up over every step, clipped: the loss jumps from 7.6 to ~44 at step 2 and
    # keeps climbing, but the run never diverges (divergence is judged only after warmup)
    cfg = tiny_run_dict(
        tmp_path,
        data_dir,
        name="spiky",
        train={"steps": STEPS, "spike_factor": 3.0},
        optimizer={"lr": 10.0},
        schedule={"warmup_steps": STEPS},
        tracking={"enabled": True, "tracking_uri": mlflow_server, "experiment": "spikes"},
    )
    first, second = run_ranks(preempted_and_resumed, 1, cfg)[0]
    assert first["status"] == "preempted" and first["steps"] == 3
    assert second["status"] == "completed" and second["run_id"] == first["run_id"]
    # exact resume (tests/jobs/checkpoints/test_resume.py): the losses are an uninterrupted run's
    expected = _expected_spikes(second["train_losses"], 3.0)
    assert expected[0] == 2 and any(s > 3 for s in expected)  # spikes on both sides of the stop
    client = MlflowClient(mlflow_server)
    run = client.get_run(second["run_id"])
    assert run.data.metrics[C.TRAIN_SPIKES] == len(expected)  # the count went on from step 3
    history = client.get_metric_history(second["run_id"], C.TRAIN_SPIKE_STEP)
    assert sorted(m.value for m in history) == expected  # each spike once
    counts = client.get_metric_history(second["run_id"], C.TRAIN_SPIKES)
    assert sorted(m.step for m in counts) == list(range(1, STEPS + 1))
