"""Variants that `plan` must stop before anything trains (tests/models/test_build_check.py)."""

from __future__ import annotations

from typing import Any

import torch
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec

from models.catalog.variants import QueryVariant
from tests.variants.gated import GatedQuery


class ShapeSlip(MegatronModule):
    """A module whose constructor fails, as a user's typo would."""

    def __init__(self, config: Any, tp_group: Any = None) -> None:
        super().__init__(config=config)
        self.weight = torch.nn.Parameter(torch.empty(config.hidden_size, config.hidden_size))
        self.weight.view(config.hidden_size + 1, -1)  # raises: the line plan must name


def fails_to_build() -> QueryVariant:
    return QueryVariant(
        name="slip", query=ModuleSpec(module=ShapeSlip), weights=lambda c: c.hidden_size**2
    )


def miscounted() -> QueryVariant:
    """The gated query, declaring twice its weights."""
    return QueryVariant(
        name="miscounted",
        query=ModuleSpec(module=GatedQuery),
        weights=lambda c: 2 * c.hidden_size**2,
        flops=lambda c: 2 * c.hidden_size**2,
    )


def overcounted_flops() -> QueryVariant:
    """The gated query, declaring ten times its FLOPs."""
    return QueryVariant(
        name="flops",
        query=ModuleSpec(module=GatedQuery),
        weights=lambda c: c.hidden_size**2,
        flops=lambda c: 20 * c.hidden_size**2,
    )
