"""Query variants a user brings: a layer-spec piece and its accounting, found by name.

The four built-in variants (`linear`, `identity`, `nonlinear`, `residual_linear`) are wired in
`models.spec` and `models.accounting`. Any other `ModelConfig.query_variant` names a
`QueryVariant` defined outside this package, either as

- ``"package.module:function"``: the function is imported and called with no arguments, or
- a name registered in the entry-point group ``nonlinear_query_scaling.variants`` (the entry
  point is that function).

The function returns a `QueryVariant`: the query module's spec and how many weights and norm
gains it adds per layer, so the scaling law's N and the FLOPs of a plan stay exact. The query
module is built by `models.query.SeparateQueryAttention` like the built-in ones: it receives
`config` (megatron's TransformerConfig) and `tp_group`, maps X ``[s, b, d]`` (replicated over
TP) to this rank's slice of a full-width query ``[s, b, d / tp]`` (see `models.query`), and K, V
stay linear. docs/variants.md walks through writing one.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

__all__ = ["BUILTIN_VARIANTS", "ENTRY_POINT_GROUP", "QueryVariant", "load_variant", "is_builtin"]

BUILTIN_VARIANTS: tuple[str, ...] = ("linear", "identity", "nonlinear", "residual_linear")
ENTRY_POINT_GROUP = "nonlinear_query_scaling.variants"


def _no_gains(config: Any) -> int:
    return 0


@dataclass(frozen=True)
class QueryVariant:
    """A query projection defined outside the package.

    `name` is the arm's name in a study (cell ids, the `variant` tag, the analysis table);
    `query` is a megatron `ModuleSpec` (or module class) of the query; `weights(config)` and
    `gains(config)` count its weight-matrix entries and norm gains in one layer (a linear W_Q
    has ``d * d`` weights and no gains). `flops(config)`: the query's forward FLOPs per token
    in one layer, every matmul it runs at 2 FLOPs per multiply-add (a linear W_Q: ``2 * d *
    d``); the compute axis of the analysis is built on it. Left out, the accounting counts 2
    per weight, the runs are tagged ``flops_counted = weights_only`` and the analysis holds the
    variant's verdict back: a query that multiplies more than its weights (a product of two
    activations, an extra attention) would otherwise buy its gain with uncounted compute.
    """

    name: str
    query: Any
    weights: Callable[[Any], int]
    gains: Callable[[Any], int] = _no_gains
    flops: Callable[[Any], int] | None = None


def is_builtin(name: str) -> bool:
    return name in BUILTIN_VARIANTS


@functools.cache
def load_variant(name: str) -> QueryVariant:
    """The `QueryVariant` that `name` ("module:function" or an entry-point name) refers to.

    Raises ValueError naming what was tried and how to fix it.
    """
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(
                f"query variant {name!r}: cannot import {attr} from {module_name} ({err}); "
                "check the module is on PYTHONPATH and spelled module.path:function"
            ) from err
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            raise ValueError(
                f"query variant {name!r} is unknown; use one of {', '.join(BUILTIN_VARIANTS)}, "
                f"a 'module:function' returning a models.variants.QueryVariant, or a name "
                f"registered in the entry-point group {ENTRY_POINT_GROUP}"
            )
        factory = found[0].load()
    variant = factory()
    if not isinstance(variant, QueryVariant):
        raise ValueError(
            f"query variant {name!r}: the function returned {type(variant).__name__}, not a "
            "models.variants.QueryVariant"
        )
    return variant
