"""Checkpoints hold one copy of what DP ranks share: model weights from the first DP rank,
optimiser state sharded only where ZeRO shards it; `checkpoint_bytes` predicts the total."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.checkpoints.checkpoint import list_checkpoints
from jobs.engine_specs import engine_spec
from jobs.testing import tiny_run_config, tiny_run_dict
from models.accounting import checkpoint_bytes, num_params, num_stored_params
from models.config import ParallelConfig
from tests.distributed import run_ranks
from tests.jobs.helpers import trained_then_newest_damaged_and_rerun, whole_then_cut_and_resumed

ENGINES = {
    "megatron": {},
    "deepspeed-zero2": {"engine": "deepspeed", "deepspeed": {"zero_stage": 2}},
}


def _files(output_dir: str) -> dict[str, int]:
    """Each rank file's size; the manifest records every rank's file (its checksum's size)."""
    ((_, path),) = list_checkpoints(Path(output_dir) / "checkpoints")
    sizes = {f.name: f.stat().st_size for f in sorted(path.glob("rank_*.pt"))}
    manifest = json.loads((path / "complete.json").read_text())["files"]
    assert {name: entry["bytes"] for name, entry in manifest.items()} == sizes, manifest
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_dp_ranks_write_only_unique_state_and_resume_exactly(tmp_path, data_dir, engine):
    train = {"steps": 3, "checkpoint_interval": 1, "keep_checkpoints": 1}
    over = {**ENGINES[engine], "parallel": {"data_parallel": 2}}
    cfg = tiny_run_dict(tmp_path / "whole", data_dir, train=train, **over)
    cut = tiny_run_dict(tmp_path / "cut", data_dir, train=train, **over)
    ranks = run_ranks(whole_then_cut_and_resumed, 2, cfg, cut)  # the cut stops after step 1
    whole = ranks[0][0]
    sizes = _files(cfg["output_dir"])
    config = tiny_run_config(tmp_path, data_dir, **over)
    zero_stage = engine_spec(config.engine).zero_stage(config)
    expected = checkpoint_bytes(config.model, config.parallel, zero_stage, False)
    assert sum(sizes.values()) == pytest.approx(expected, rel=0.05)
    first, second = sizes["rank_00000.pt"], sizes["rank_00001.pt"]
    if engine == "megatron":
        assert second < 0.02 * first  # RNG and loss history only
    else:  # its half of the fp32 master and moments (12 of 16 bytes per parameter)
        assert second == pytest.approx(0.375 * sum(sizes.values()), rel=0.05)

    for _, result in ranks:
        assert result["train_losses"] == whole["train_losses"]
        assert result["final_val_loss"] == whole["final_val_loss"]


def test_checkpoint_bytes_per_layout_and_engine(tmp_path, data_dir):
    """GPT-3 small in bf16: 14 bytes per parameter whatever the DP degree; TP repeats only the
    replicated gains and position embeddings, PP the tied output layer."""
    config = tiny_run_config(tmp_path, data_dir).model
    big = type(config)(
        vocab_size=50304, seq_length=1024, num_layers=12, hidden_size=768, num_attention_heads=12
    )
    dp8 = ParallelConfig(data_parallel=8)
    assert checkpoint_bytes(big, dp8) == 14 * num_params(big)
    assert checkpoint_bytes(big, dp8) == checkpoint_bytes(big, ParallelConfig())
    assert checkpoint_bytes(big, dp8, bf16=False) == 12 * num_params(big)
    assert checkpoint_bytes(big, dp8, 2, bf16=False) == 16 * num_params(big)
    tp2 = num_stored_params(big, ParallelConfig(tensor_parallel=2)) - num_params(big)
    assert tp2 == 12 * 2 * 768 + 768 + 1024 * 768  # two norm gains per layer, ln_f, wpe
    pp2 = num_stored_params(big, ParallelConfig(pipeline_parallel=2)) - num_params(big)
    assert pp2 == 50304 * 768


# 15-35 s per engine on 2 busy cores: two 2-rank trainings; the real engines' files are the point
@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_damaged_checkpoint_is_resumed_from_the_one_before(tmp_path, data_dir, engine, capfd):
    """Issue 55 #8 in a real run: the newest checkpoint's file damaged in the middle (on a
    ZeRO run, the second rank's own optimiser slice) used to be loaded and trained on (NaN, a
    `diverged` result); the rerun resumes from the checkpoint before it and ends exactly as the
    undamaged run did."""
    train = {"steps": 3, "checkpoint_interval": 1, "keep_checkpoints": 3}
    over = {**ENGINES[engine], "parallel": {"data_parallel": 2}}
    cfg = tiny_run_dict(tmp_path, data_dir, train=train, **over)
    damaged = 1 if engine.startswith("deepspeed") else 0
    ranks = run_ranks(trained_then_newest_damaged_and_rerun, 2, cfg, damaged)
    for first, again in ranks:
        assert again["status"] == first["status"] == "completed"
        assert again["train_losses"] == first["train_losses"]
        assert again["final_val_loss"] == first["final_val_loss"]
    assert "resuming from step 1, the newest intact checkpoint" in capfd.readouterr().out
