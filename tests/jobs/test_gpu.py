"""Checks for the day a GPU is lent: they skip, with the reason, where there is none.

    pytest -m gpu tests/jobs/test_gpu.py

One GPU: both engines train 20 bf16 steps, and a bf16 run preempted after step 1 resumes to
the losses of an uninterrupted one. Two GPUs: a DP=2 run preempted after a checkpoint
resumes to the losses of an uninterrupted one. `benchmarks/gpu_124m.py` runs as one command
within 8 minutes and prints what it promises.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jobs.testing import tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import train_once, train_ranks

REPO = Path(__file__).resolve().parents[2]
NUM_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(NUM_GPUS < 1, reason="needs a CUDA GPU; this machine has none"),
]
two_gpus = pytest.mark.skipif(NUM_GPUS < 2, reason=f"needs 2 CUDA GPUs; {NUM_GPUS} here")

ENGINES = {"megatron": {}, "deepspeed": {"engine": "deepspeed", "deepspeed": {"zero_stage": 1}}}


def _cfg(tmp_path: Path, data_dir: Path, **over) -> dict:
    # 4 layers, d 256, seq 128: bf16 kernels on the GPU, seconds per run
    model = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128}
    train = {"steps": 20, "global_batch_tokens": 16 * 128, "micro_batch_size": 4}
    train.update(over.pop("train", {}))
    return tiny_run_dict(tmp_path, data_dir, model=model, train=train, precision="bf16", **over)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_one_gpu_trains_20_bf16_steps(tmp_path, data_dir, engine):
    cfg = _cfg(tmp_path, data_dir, **ENGINES[engine])
    ((result,),) = run_ranks(train_ranks, 1, [cfg])
    assert result["status"] == "completed" and result["steps"] == 20
    losses = result["train_losses"]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0] - 0.5
    assert math.isfinite(result["final_val_loss"])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_one_gpu_bf16_preempt_and_resume(tmp_path, data_dir, engine):
    """Stopped after step 1 (what SIGUSR2 sets), saved, resumed to the uninterrupted losses."""
    over = {**ENGINES[engine], "train": {"steps": 6, "checkpoint_interval": 3}}
    whole = _cfg(tmp_path / "whole", data_dir, **over)
    reference = run_ranks(train_ranks, 1, [whole])[0][0]
    cut = _cfg(tmp_path / "cut", data_dir, **over)
    (first,) = run_ranks(train_once, 1, cut, True)
    assert first["status"] == "preempted" and first["steps"] == 1
    (resumed,) = run_ranks(train_once, 1, cut, False)
    assert resumed["status"] == "completed" and resumed["steps"] == 6
    assert resumed["train_losses"] == pytest.approx(reference["train_losses"], rel=1e-5)


@two_gpus
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_two_gpu_dp_checkpoint_and_resume(tmp_path, data_dir, engine):
    over = {**ENGINES[engine], "parallel": {"data_parallel": 2}}
    whole = _cfg(tmp_path / "whole", data_dir, train={"checkpoint_interval": 5}, **over)
    reference = run_ranks(train_ranks, 2, [whole])[0][0]
    cut = _cfg(tmp_path / "cut", data_dir, train={"checkpoint_interval": 5}, **over)
    first = run_ranks(train_once, 2, cut, True)
    assert [r["status"] for r in first] == ["preempted", "preempted"]
    resumed = run_ranks(train_once, 2, cut, False)
    for result in resumed:
        assert result["status"] == "completed"
        assert result["train_losses"] == pytest.approx(reference["train_losses"], rel=1e-5)


def test_gpu_124m_benchmark_is_one_command_within_8_minutes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_124m.py"), "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, done.stderr[-3000:]
    for text in ("ms/step", "MFU", "peak GiB", "nonlinear / linear step time"):
        assert text in done.stdout, text
    assert (tmp_path / "gpu_124m.json").is_file()
