"""A query variant defined outside the package, as a user would: q = X * sigmoid(X W_g).

Named in a study as ``tests.variants.gated:gated_query``; nothing in `models` knows of it.
"""

from __future__ import annotations

from typing import Any

import torch
from megatron.core import tensor_parallel
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec

from models.catalog.variants import QueryVariant


class GatedQuery(MegatronModule):
    """q = X * sigmoid(X W_g), W_g: d -> d column-parallel; returns this TP rank's slice."""

    def __init__(self, config: Any, tp_group: Any = None) -> None:
        super().__init__(config=config)
        self.tp_group = tp_group
        d = config.hidden_size
        self.gate = tensor_parallel.ColumnParallelLinear(
            d,
            d,
            config=config,
            init_method=config.init_method,
            bias=False,
            gather_output=False,
            tp_group=tp_group,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [s, b, d] (replicated over TP) -> [s, b, d / tp]
        gate, _ = self.gate(x)  # [s, b, d / tp]: this rank's columns of X W_g
        x_local = tensor_parallel.scatter_to_tensor_model_parallel_region(x, group=self.tp_group)
        return x_local * torch.sigmoid(gate)


def gated_query() -> QueryVariant:
    """The variant: its module and its accounting (W_g has d^2 weights, like W_Q; no gains)."""
    return QueryVariant(
        name="gated",
        query=ModuleSpec(module=GatedQuery),
        weights=lambda config: config.hidden_size**2,
        flops=lambda config: 2 * config.hidden_size**2,  # X W_g; sigmoid and product not counted
    )
