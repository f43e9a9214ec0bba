"""End-to-end training on CPU: one process, both engines, divergence, MLflow contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from jobs.testing import tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import train_ranks


def test_single_process_run_follows_the_mlflow_contract(tmp_path, data_dir, mlflow_server):
    cell_tags = {"variant": "nonlinear", "size": "0.1M", "cell_id": "c0", "lr": "0.003"}
    cfg = tiny_run_dict(
        tmp_path,
        data_dir,
        name="c0",
        train={"steps": 6, "eval_interval": 3, "checkpoint_interval": 3},
        data={"num_select_windows": 8},  # the LR-selection windows beside the 8 reported ones
        tracking={
            "enabled": True,
            "tracking_uri": mlflow_server,
            "experiment": "jobs-contract",
            "tags": cell_tags,
        },
    )
    (result,) = run_ranks(train_ranks, 1, [cfg])[0]
    assert result["status"] == "completed" and result["steps"] == 6
    losses = result["train_losses"]
    assert losses[0] > 7.0 and losses[-1] < losses[0] - 0.2  # ln(2048) = 7.62 at init
    assert (tmp_path / "run" / "result.json").is_file()

    client = MlflowClient(mlflow_server)
    run = client.get_run(result["run_id"])
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert run.info.status == "FINISHED"
    for key, value in {
        **cell_tags,
        "study": "tests",
        "seed": "1",
        "engine": "megatron",
        "outcome": "completed",
        "flops_counted": "exact",  # a built-in query: its FLOPs are the accounting's
    }.items():
        assert tags[key] == value, key
    for key in ("git_commit", "host", "device", "version.torch", "version.megatron-core"):
        assert tags[key], key
    # the MFU denominator is the device's own peak, logged with its source
    assert tags["mfu_peak_source"] == "cpu nominal"
    peak = float(tags["mfu_peak_flops_per_device"])
    assert metrics["mfu"] == pytest.approx(metrics["tokens_per_s"] * metrics["flops"] / 1536 / peak)
    assert params["model.hidden_size"] == "64" and params["train.global_batch_tokens"] == "256"
    assert metrics["final_val_loss"] == result["final_val_loss"]
    assert metrics["tokens"] == 6 * 256 and metrics["flops"] > 0 and metrics["num_params_total"] > 0
    per_step = [
        "train/loss",
        "lr",
        "grad_norm",
        "tokens_seen",
        "tokens_per_s",
        "mfu",
        "step_time_s",
    ]
    for key in per_step:
        history = client.get_metric_history(result["run_id"], key)
        assert sorted(m.step for m in history) == [1, 2, 3, 4, 5, 6], key
    logged = sorted(client.get_metric_history(result["run_id"], "train/loss"), key=lambda m: m.step)
    assert [m.value for m in logged] == losses
    val_steps = sorted(m.step for m in client.get_metric_history(result["run_id"], "val/loss"))
    assert val_steps == [3, 6]
    # the LR-selection windows are evaluated beside the reported ones and summarised apart
    select = sorted(client.get_metric_history(result["run_id"], "val/select"), key=lambda m: m.step)
    assert [m.step for m in select] == [3, 6]
    assert metrics["final_select_loss"] == select[-1].value == result["final_select_loss"]
    assert math.isfinite(metrics["final_select_loss"])
    assert metrics["final_select_loss"] != metrics["final_val_loss"]  # other windows, other loss
    artifacts = {a.path for a in client.list_artifacts(result["run_id"])}
    assert {"run_config.yaml", "loss_curve.csv", "loss_curve.png"} <= artifacts


def test_engines_agree_and_divergence_is_a_result(tmp_path, data_dir, mlflow_server):
    steps = {"steps": 4}
    megatron = tiny_run_dict(tmp_path / "m", data_dir, train=steps)
    deepspeed = tiny_run_dict(
        tmp_path / "d", data_dir, train=steps, engine="deepspeed", deepspeed={"zero_stage": 1}
    )
    # lr 100 without clipping: Adam moves every weight by ~100 in one step; the loss explodes
    exploding = tiny_run_dict(
        tmp_path / "x",
        data_dir,
        name="boom",
        train={"steps": 6},
        optimizer={"lr": 100.0, "grad_clip": 0.0},
        schedule={"warmup_steps": 0},
        tracking={"enabled": True, "tracking_uri": mlflow_server, "experiment": "jobs-diverge"},
    )
    ref, ds, boom = run_ranks(train_ranks, 1, [megatron, deepspeed, exploding])[0]
    np.testing.assert_allclose(ds["train_losses"], ref["train_losses"], rtol=1e-5)
    assert abs(ds["final_val_loss"] - ref["final_val_loss"]) < 1e-4

    assert boom["status"] == "diverged" and boom["steps"] < 6
    assert math.isnan(boom["final_val_loss"])
    client = MlflowClient(mlflow_server)
    run = client.get_run(boom["run_id"])
    assert run.data.tags["outcome"] == "diverged" and run.data.tags["divergence_reason"]
    history = client.get_metric_history(boom["run_id"], "train/loss")
    assert max(m.step for m in history) == boom["steps"]  # the diverging step is recorded


def test_deepspeed_zero2_resumes_bitwise_from_its_weights_only_checkpoint(tmp_path, data_dir):
    from tests.jobs.helpers import preempt_then_resume

    ds = {"engine": "deepspeed", "deepspeed": {"zero_stage": 2}, "train": {"steps": 4}}
    straight = tiny_run_dict(tmp_path / "a", data_dir, **ds)
    resumed = tiny_run_dict(tmp_path / "b", data_dir, **ds)
    (ref,) = run_ranks(train_ranks, 1, [straight])[0]
    first, second = run_ranks(preempt_then_resume, 1, resumed)[0]
    assert first["status"] == "preempted" and first["steps"] == 1
    assert second["status"] == "completed"
    assert second["train_losses"] == ref["train_losses"]
    assert second["final_val_loss"] == ref["final_val_loss"]
