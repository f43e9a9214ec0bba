"""Bad model/parallel configs fail with a ValueError naming the field, before anything is built."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from foundation.config import ConfigError, from_dict
from models import ModelConfig, ParallelConfig, build_gpt
from models.nanogpt import nanogpt_config
from tests.models.reference_gpt import model_args

GOOD = dict(vocab_size=64, seq_length=16, num_layers=2, hidden_size=32, num_attention_heads=4)

BAD_MODELS = [
    (dict(hidden_size=30), "hidden_size"),
    (dict(num_query_groups=3), "num_query_groups"),
    (dict(query_variant="quadratic"), "query_variant"),
    (dict(query_variant="identity", head_dim=12), "head_dim"),
    (dict(query_variant="nonlinear", head_dim=4), "head_dim"),
    (dict(query_variant="residual_linear", hidden_size=33, num_attention_heads=3), "odd"),
    (dict(position_embedding="alibi"), "position_embedding"),
    (dict(num_layers=0), "num_layers"),
    (dict(init_std=-0.02), "init_std"),
    (dict(position_embedding="rope", hidden_size=36, num_attention_heads=4), "rope"),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD_MODELS)
def test_bad_model_config_names_the_field(overrides, needle):
    config = ModelConfig(**{**GOOD, **overrides})
    with pytest.raises(ValueError, match=needle):
        config.validate()
    with pytest.raises(ValueError, match=needle):
        build_gpt(config)
    assert not dist.is_initialized()  # raised before any process group existed


BAD_LAYOUTS = [
    (dict(num_attention_heads=4), ParallelConfig(tensor_parallel=3), "num_attention_heads"),
    (dict(num_query_groups=2), ParallelConfig(tensor_parallel=4), "num_query_groups"),
    (dict(num_layers=3), ParallelConfig(pipeline_parallel=2), "num_layers"),
    (dict(vocab_size=63, num_attention_heads=2), ParallelConfig(tensor_parallel=2), "vocab_size"),
    (
        dict(query_variant="nonlinear", hidden_size=6, num_attention_heads=2),
        ParallelConfig(tensor_parallel=2, data_parallel=1),
        "bottleneck",
    ),
    (dict(), ParallelConfig(tensor_parallel=0), "tensor_parallel"),
]


@pytest.mark.parametrize(("overrides", "parallel", "needle"), BAD_LAYOUTS)
def test_bad_parallel_layout_names_the_field(overrides, parallel, needle):
    config = ModelConfig(**{**GOOD, **overrides})
    with pytest.raises(ValueError, match=needle):
        config.validate_parallel(parallel)
    with pytest.raises(ValueError, match=needle):
        build_gpt(config, parallel)
    assert not dist.is_initialized()


def test_world_size_mismatch_is_refused_before_any_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    with pytest.raises(ValueError, match="processes were launched"):
        build_gpt(ModelConfig(**GOOD), ParallelConfig(tensor_parallel=2))
    assert not dist.is_initialized()


def test_sequence_parallel_is_not_implemented():
    with pytest.raises(NotImplementedError, match="sequence_parallel"):
        build_gpt(ModelConfig(**GOOD), transformer_overrides={"sequence_parallel": True})


def test_configio_round_trip_and_field_paths():
    data = {**GOOD, "query_variant": "nonlinear", "ffn_hidden_size": 152}
    config = from_dict(ModelConfig, data, "run.model")
    assert from_dict(ModelConfig, {k: v for k, v in config.__dict__.items()}) == config
    with pytest.raises(ConfigError, match=r"run\.model\.query_variant"):
        from_dict(ModelConfig, {**GOOD, "query_variant": "cubic"}, "run.model")
    with pytest.raises(ConfigError, match=r"run\.model.*hidden_size"):
        from_dict(ModelConfig, {**GOOD, "hidden_size": 30}, "run.model")
    with pytest.raises(ConfigError, match=r"run\.parallel.*tensor_parallel"):
        from_dict(ParallelConfig, {"tensor_parallel": 0}, "run.parallel")


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (dict(query_mode="residual"), "query_mode"),
        (dict(bias=True), "bias"),
        (dict(scale=1.0), "scale"),
        (dict(head_size=4), "head_dim"),
    ],
)
def test_bad_reference_checkpoint_args(overrides, needle):
    args = {**model_args("identity"), **overrides}
    with pytest.raises(ValueError, match=needle):
        nanogpt_config(args)
