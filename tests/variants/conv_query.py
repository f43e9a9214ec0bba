"""A query that starts as the plain linear query: q = X W_Q + alpha * conv3(X).

``conv3`` is a causal depthwise convolution of width 3 over the sequence (a 3-D kernel
``[d, 1, 3]``), ``alpha`` a 1-D per-channel scale that starts at zero, so at step 0 the query is
exactly X W_Q. Both shapes need the variant's own init rules (`models.catalog.init_rules`); the
module's
constructor values never survive the project's layout-independent init. Named in a study as
``tests.variants.conv_query:conv_query``; nothing in `models` knows of it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from megatron.core import tensor_parallel
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec

from models.catalog.init_rules import normal, zeros
from models.catalog.variants import QueryVariant

KERNEL = 3
CONV_STD = 0.5  # large on purpose: the step-0 weights show that this rule, not N(0, 0.02), ran


class ConvQuery(MegatronModule):
    """q = X W_Q + alpha * causal_depthwise_conv(X); returns this TP rank's slice of q."""

    def __init__(self, config: Any, tp_group: Any = None) -> None:
        super().__init__(config=config)
        self.tp_group = tp_group
        d = config.hidden_size
        self.linear_q = tensor_parallel.ColumnParallelLinear(
            d,
            d,
            config=config,
            init_method=config.init_method,
            bias=False,
            gather_output=False,
            tp_group=tp_group,
        )
        # replicated over TP (the slice is taken after the product, see forward)
        self.conv = torch.nn.Parameter(torch.empty(d, 1, KERNEL, dtype=config.params_dtype))
        self.alpha = torch.nn.Parameter(torch.empty(d, dtype=config.params_dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [s, b, d] (replicated over TP) -> [s, b, d / tp]
        q, _ = self.linear_q(x)  # [s, b, d / tp]
        h = F.pad(x.permute(1, 2, 0), (KERNEL - 1, 0))  # [b, d, s + 2]: causal, left pad
        h = F.conv1d(h, self.conv, groups=x.shape[-1]).permute(2, 0, 1)  # [s, b, d]
        extra = tensor_parallel.scatter_to_tensor_model_parallel_region(
            self.alpha * h, group=self.tp_group
        )
        return q + extra


def conv_query() -> QueryVariant:
    """The variant: W_Q (d^2), the kernel (3d) and alpha (d); alpha starts at zero."""
    return QueryVariant(
        name="conv",
        query=ModuleSpec(module=ConvQuery),
        weights=lambda config: config.hidden_size**2 + KERNEL * config.hidden_size,
        gains=lambda config: config.hidden_size,
        flops=lambda config: 2 * config.hidden_size**2 + 2 * KERNEL * config.hidden_size,
        init=lambda config: {"alpha": zeros(), "conv": normal(CONV_STD)},
    )


def conv_query_without_rules() -> QueryVariant:
    """The same module with no init rules: its 1-D and 3-D parameters cannot be initialised."""
    return QueryVariant(
        name="conv_bare",
        query=ModuleSpec(module=ConvQuery),
        weights=lambda config: config.hidden_size**2 + KERNEL * config.hidden_size,
        gains=lambda config: config.hidden_size,
    )


def conv_query_misspelt() -> QueryVariant:
    """A rule whose name matches no parameter (``alhpa``)."""
    return QueryVariant(
        name="conv_typo",
        query=ModuleSpec(module=ConvQuery),
        weights=lambda config: config.hidden_size**2 + KERNEL * config.hidden_size,
        init=lambda config: {"alhpa": zeros(), "alpha": zeros(), "conv": normal()},
    )


def conv_query_rule_typo() -> QueryVariant:
    """A misspelt rule (``alpah``) leaves ``alpha`` without one: the error names the typo."""
    return QueryVariant(
        name="conv_rule_typo",
        query=ModuleSpec(module=ConvQuery),
        weights=lambda config: config.hidden_size**2 + KERNEL * config.hidden_size,
        init=lambda config: {"alpah": zeros(), "conv": normal()},
    )
