"""FLOPs a bring-your-own variant declares, and the named shapes the analysis extrapolates to.

The analysis imports no model code; ``foundation.shapes`` restates the project's accounting
for a linear-query GPT as plain arithmetic. These tests hold the two together, and check that
a variant's declared ``flops`` reaches ``flops_per_token`` while one without it is marked.
"""

from __future__ import annotations

import pytest

from foundation.shapes import NAMED_SHAPES
from models.accounting import flops_counted, flops_per_token, num_nonembedding_params
from models.catalog.variants import QueryVariant
from models.config import ModelConfig

EXTRA = 3  # a query that runs 3 d^2 more multiply-adds than its weights (e.g. X W X^T-like)


def undeclared() -> QueryVariant:
    """The gated query of tests/variants/gated.py without its FLOPs: it builds (`plan` checks)."""
    from megatron.core.transformer.spec_utils import ModuleSpec  # lazy: megatron-core

    from tests.variants.gated import GatedQuery  # lazy: imports megatron-core

    return QueryVariant(
        name="undeclared", query=ModuleSpec(module=GatedQuery), weights=lambda c: c.hidden_size**2
    )


def declared() -> QueryVariant:
    return QueryVariant(
        name="declared",
        query=None,
        weights=lambda c: c.hidden_size**2,
        flops=lambda c: 2 * c.hidden_size**2 + 2 * EXTRA * c.hidden_size**2,
    )


def _config(variant: str, **shape) -> ModelConfig:
    shape = shape or {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4}
    return ModelConfig(vocab_size=256, seq_length=32, query_variant=variant, **shape)


def test_a_variant_without_declared_flops_is_marked_and_counts_its_weights():
    config = _config(f"{__name__}:undeclared")
    assert flops_counted(config) == "weights_only"
    assert flops_per_token(config) == flops_per_token(_config("linear"))
    assert flops_counted(_config("linear")) == "exact"


def test_declared_flops_reach_the_compute_axis():
    config = _config(f"{__name__}:declared")
    assert flops_counted(config) == "declared"
    extra = 3 * config.num_layers * 2 * EXTRA * config.hidden_size**2  # training = 3 x forward
    assert flops_per_token(config) == flops_per_token(_config("linear")) + extra


@pytest.mark.parametrize("name", list(NAMED_SHAPES))
def test_named_shapes_use_the_projects_accounting(name):
    shape = NAMED_SHAPES[name]
    config = ModelConfig(
        vocab_size=shape.vocab_size,
        seq_length=shape.seq_length,
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        num_attention_heads=shape.num_attention_heads,
    )
    assert shape.flops_per_token() == flops_per_token(config)
    assert shape.num_nonembedding_params() == num_nonembedding_params(config)
    per_param = shape.flops_per_token() / shape.num_nonembedding_params()
    assert 6.0 < per_param < 8.0  # 6 for the weights, plus attention and the output layer
