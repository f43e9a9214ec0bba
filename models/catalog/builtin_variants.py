"""The four built-in query variants, declared like any user's variant
(`models.catalog.sites.Variant`).

``linear`` is the plain layer (megatron's fused QKV, no site replaced). The others replace the
query site with a module of `models.query` (see its docstring for the maths):

- ``identity``: q = X / 2 (no weights);
- ``nonlinear``: q = (X + LayerNorm(GELU(RMSNorm(X) W1) W2)) / 2, W1 + W2 hold d^2 weights,
  like W_Q, plus two norms (2d gains) — the paper's query;
- ``residual_linear``: the same without the GELU (the control).
"""

from __future__ import annotations

from typing import Any

from models.catalog.sites import QUERY_SITE, Variant

__all__ = ["BUILTINS"]


def _query_site(module: str, **params: Any):
    """A sites function: megatron and `models.query` are imported only when a model is built."""

    def sites(config: Any) -> dict[str, Any]:
        # lazy: megatron-core's modules load only when a model is built, not with the configs
        from megatron.core.transformer.spec_utils import ModuleSpec

        from models import query  # lazy: imports megatron-core

        return {QUERY_SITE: ModuleSpec(module=getattr(query, module), params=params)}

    return sites


def _bottleneck_weights(config: Any) -> int:
    d = config.hidden_size
    return d * (d // 2) + (d // 2) * d  # W1, W2: d^2 in all, like W_Q


def _check_bottleneck(config: Any, tensor_parallel: int) -> None:
    """W1 is d -> d/2, column-parallel: d must be even and TP must divide d/2."""
    if config.hidden_size % 2:
        raise ValueError(
            f"hidden_size: {config.hidden_size} is odd, but query variant "
            f"{config.query_variant!r} has a d/2 bottleneck; use an even hidden_size"
        )
    if (config.hidden_size // 2) % tensor_parallel:
        raise ValueError(
            f"parallel.tensor_parallel: {tensor_parallel} does not divide hidden_size // 2 "
            f"(query bottleneck) ({config.hidden_size // 2}); choose a tensor_parallel that "
            "divides it"
        )


def _bottleneck(name: str, activation: str) -> Variant:
    return Variant(
        name=name,
        sites=_query_site("BottleneckQuery", activation=activation),
        replaces=(QUERY_SITE,),
        weights=_bottleneck_weights,
        gains=lambda config: 2 * config.hidden_size,  # RMSNorm before W1, LayerNorm after W2
        flops=lambda config: 2 * _bottleneck_weights(config),
        check=_check_bottleneck,
        flops_exact=True,
    )


BUILTINS: dict[str, Variant] = {
    "linear": Variant(name="linear", flops=lambda config: 0, flops_exact=True),  # no site
    "identity": Variant(
        name="identity",
        sites=_query_site("IdentityQuery"),
        replaces=(QUERY_SITE,),
        flops=lambda config: 0,
        flops_exact=True,
    ),
    "nonlinear": _bottleneck("nonlinear", "gelu"),
    "residual_linear": _bottleneck("residual_linear", "none"),
}
