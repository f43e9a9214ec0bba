"""Counts, FLOPs, the W2 = 0 identity and the reference import, each checked on a built model.

Models are built in a spawned process (megatron's global state and the CPU adapter stay out of
the pytest process).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models import ModelConfig, accounting
from tests.distributed import run_ranks
from tests.models import _workers as w
from tests.models.reference_gpt import ReferenceGPT, model_args


@pytest.fixture(scope="module")
def counted() -> dict:
    return run_ranks(w.counting_worker, 1)[0]


@pytest.mark.parametrize("case", list(w.COUNT_CASES))
def test_param_counts_match_built_model(case, counted):
    config = w.tiny_config(**w.COUNT_CASES[case])
    total, embedding = counted["counts"][case]
    assert accounting.num_params(config) == total
    assert accounting.num_nonembedding_params(config) == total - embedding


def test_nonlinear_adds_exactly_two_norm_gains_per_layer(counted):
    linear, _ = counted["counts"]["linear"]
    for variant in ("nonlinear", "residual_linear"):
        built, _ = counted["counts"][variant]
        config = w.tiny_config(query_variant=variant)
        assert built - linear == config.num_layers * 2 * config.hidden_size


def test_paper_124m_shape_counts():
    base = ModelConfig(
        vocab_size=50304, seq_length=1024, num_layers=12, hidden_size=768, num_attention_heads=12
    )
    wider = ModelConfig(**{**base.__dict__, "ffn_hidden_size": int(4.75 * 768)})
    nonlinear = ModelConfig(**{**base.__dict__, "query_variant": "nonlinear"})
    n_base = accounting.num_nonembedding_params(base)
    assert round(n_base / 1e6, 2) == 84.95
    extra = accounting.num_nonembedding_params(wider) - n_base
    assert round(extra / 1e6, 1) == 10.6
    assert extra / n_base == pytest.approx(0.125, abs=0.001)
    assert accounting.num_nonembedding_params(nonlinear) - n_base == 12 * 2 * 768
    # GPT-2 small: 124M with tied embeddings and 1024 learned positions.
    assert round(accounting.num_params(base) / 1e6) == 124


@pytest.mark.parametrize("size", list(w.FLOP_SIZES))
@pytest.mark.parametrize("variant", ["linear", "identity", "nonlinear", "residual_linear"])
def test_flops_per_token_matches_torch_flop_counter(size, variant, counted):
    config = w.tiny_config(query_variant=variant, **w.FLOP_SIZES[size])
    measured = counted["flops"][(size, variant)]
    assert accounting.flops_per_token(config) == pytest.approx(measured, rel=0.02)


def test_nonlinear_with_zero_w2_computes_identity():
    result = run_ranks(w.w2_zero_worker, 1)[0]
    assert result["diff"] < 1e-6
    assert result["control"] > 1e-3  # the check can tell the two apart


def test_import_reference_checkpoint_gives_same_logits(tmp_path):
    tokens, _ = w.batch()
    checkpoints = {}
    for i, mode in enumerate(("original", "identity", "residual_gelu")):
        torch.manual_seed(i)
        hd = 8
        args = model_args(mode, scale=(1.0 if mode == "original" else 0.5) / math.sqrt(hd))
        ref = ReferenceGPT(args)
        state = ref.state_dict()
        if mode == "residual_gelu":  # torch.compile'd models save with this prefix
            state = {f"_orig_mod.{k}": v for k, v in state.items()}
        path = tmp_path / f"{mode}.pt"
        torch.save({"model": state, "model_args": args}, path)
        with torch.no_grad():
            torch.save(ref(tokens), f"{path}.logits")
        checkpoints[mode] = str(path)
    result = run_ranks(w.import_worker, 1, checkpoints)[0]
    for mode, variant in (
        ("original", "linear"),
        ("identity", "identity"),
        ("residual_gelu", "nonlinear"),
    ):
        assert result[mode]["config"]["query_variant"] == variant
        assert result[mode]["diff"] < 1e-5, mode
        assert result[mode]["gain_std"] > 0.1  # the norm gains were really imported


def test_initial_weights_follow_seed_and_megatron_distributions():
    result = run_ranks(w.init_worker, 1)[0]
    same, other, different = result["a"], result["b"], result["c"]
    layers, std = 4, 0.02
    for name, weight in same.items():
        np.testing.assert_array_equal(weight, other[name], err_msg=name)  # same seed
        if weight.ndim == 1:  # norm gains
            np.testing.assert_array_equal(weight, np.ones_like(weight), err_msg=name)
            continue
        assert not np.array_equal(weight, different[name]), name  # another seed
        scaled = name.endswith(("self_attention.linear_proj.weight", "mlp.linear_fc2.weight"))
        expected = std / math.sqrt(2 * layers) if scaled else std  # GPT-2 scaled output inits
        assert weight.std() == pytest.approx(expected, rel=0.1), name
        assert abs(weight.mean()) < 0.2 * expected, name
    # Every parameter draws its own stream: no two matrices repeat each other.
    w1 = [v for n, v in same.items() if n.endswith("query.linear_in.weight")]
    assert len(w1) == layers and not np.array_equal(w1[0], w1[1])
    assert "output_layer.weight" in same  # untied: drawn independently of the embedding
    assert not np.array_equal(same["output_layer.weight"], same["embedding.word_embeddings.weight"])
