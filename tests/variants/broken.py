"""Variants the build check stops (`plan`, `run`, `pilot`), or that fail once training starts."""

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


class _FailsBackward(torch.autograd.Function):
    """Identity forward; its backward raises, as a user's slip in a custom gradient would."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the gradient of this query is not written yet")  # the line to name


class BackwardSlip(GatedQuery):
    """The gated query, whose gradient fails: it builds and runs forward (`plan`'s build check
    passes it), and fails at its first training step."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FailsBackward.apply(super().forward(x))


def fails_in_backward() -> QueryVariant:
    """Passes the build check (its counts are the gated query's); every training step fails."""
    return QueryVariant(
        name="backslip",
        query=ModuleSpec(module=BackwardSlip),
        weights=lambda c: c.hidden_size**2,
        flops=lambda c: 2 * c.hidden_size**2,
    )
