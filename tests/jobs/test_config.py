"""Run-config validation: bad configs fail with the field named, before any process group."""

from __future__ import annotations

import pytest
import torch.distributed as dist
import yaml

from foundation.config import ConfigError
from jobs.config import load_run_config
from jobs.testing import tiny_run_config, tiny_run_dict


def test_tiny_config_derives_batch_arithmetic(tmp_path, data_dir):
    cfg = tiny_run_config(tmp_path, data_dir, parallel={"data_parallel": 2})
    # 256 tokens / 32 per sequence = 8 sequences; 8 / (DP 2 x micro-batch 2) = 2 micro-batches
    assert cfg.global_batch_sequences == 8
    assert cfg.num_microbatches == 2
    assert cfg.tokens_per_step == 256


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (
            {"train": {"global_batch_tokens": 100}},
            "train.global_batch_tokens=100 is not a multiple",
        ),
        ({"train": {"global_batch_tokens": 96}}, "not divisible by parallel.data_parallel"),
        (
            {"engine": "deepspeed", "parallel": {"pipeline_parallel": 2}},
            "engine 'deepspeed' does not support parallel.pipeline_parallel > 1",
        ),
        ({"parallel": {"tensor_parallel": 3}}, "parallel.tensor_parallel: 3 does not divide"),
        ({"deepspeed": {"zero_stage": 3}}, "deepspeed.zero_stage must be 0, 1 or 2"),
        ({"schedule": {"warmup_steps": 99}}, "schedule.warmup_steps=99 exceeds train.steps"),
        ({"schedule": {"kind": "linear"}}, "run.schedule.kind"),
        ({"optimizer": {"lr": -1.0}}, "optimizer.lr must be > 0"),
        ({"data": {"num_val_windows": 1}, "parallel": {"data_parallel": 2}}, "num_val_windows"),
        ({"bogus": 1}, "unknown field(s) bogus"),
    ],
)
def test_bad_configs_name_the_field(tmp_path, data_dir, overrides, fragment):
    with pytest.raises(ConfigError) as err:
        tiny_run_config(tmp_path, data_dir, **overrides)
    assert fragment in str(err.value)


def test_load_run_config_names_the_file(tmp_path, data_dir):
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, data_dir, train={"steps": 0})))
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    assert str(path) in str(err.value) and "train.steps must be >= 1" in str(err.value)
    path.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, data_dir)))
    assert load_run_config(path).model.hidden_size == 64


def test_world_size_mismatch_fails_before_any_process_group(tmp_path, data_dir, monkeypatch):
    from jobs import train

    cfg = tiny_run_config(tmp_path, data_dir, parallel={"tensor_parallel": 2})
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(ConfigError, match="TP 2 x PP 1 x DP 1 = 2 processes, but the launcher"):
        train(cfg)
    assert not dist.is_initialized()
    assert not (tmp_path / "run").exists()


def test_cli_rejects_bad_file_with_exit_code_2(tmp_path, data_dir):
    from typer.testing import CliRunner

    from scaling.cli import app

    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, data_dir, engine="fairscale")))
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 2
    assert "run.engine: 'fairscale' is not one of" in result.output
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, data_dir)))
    result = CliRunner().invoke(app, ["train", str(ok), "--dry-run"])
    assert result.exit_code == 0 and "global_batch_tokens: 256" in result.output


def test_training_job_pickles_and_resubmits_itself(tmp_path, data_dir):
    import pickle

    from jobs import TrainingJob

    cfg = tiny_run_config(tmp_path, data_dir)
    job = pickle.loads(pickle.dumps(TrainingJob(cfg, preempt_wait_s=5)))
    assert job.config == cfg and job.preempt_wait_s == 5
    again = job.checkpoint()  # not running: nothing to stop, just the resubmission
    assert isinstance(again.function, TrainingJob) and again.function.config == cfg
