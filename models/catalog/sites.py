"""The sites a variant may replace in a transformer layer, and what a variant declares.

A site is a submodule that megatron-core's layer spec names (``TransformerLayerSubmodules``,
``SelfAttentionSubmodules``), written as its path inside one layer; ``layer`` is the whole layer.
A variant maps sites to megatron ``ModuleSpec``s (or module classes); `models.spec` puts them in
the one layer spec, so no other module knows which variant it builds. ``self_attention.query``
and ``self_attention.linear_kv`` are this project's own sites: the attention then computes Q with
the query module (a plain linear one unless replaced) and K, V with the ``linear_kv`` module (one
fused column-parallel projection unless replaced) (`models.query.SeparateQueryAttention`).

Plain data (no torch here): configs and planners import it cheaply.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.catalog.init_rules import InitRule

__all__ = [
    "SITES",
    "Variant",
    "QueryVariant",
    "as_variant",
    "QUERY_SITE",
    "KV_SITE",
    "SEPARATE_QKV",
]

QUERY_SITE = "self_attention.query"
KV_SITE = "self_attention.linear_kv"
# the sites that split the fused QKV projection (`models.query.SeparateQueryAttention`)
SEPARATE_QKV = (QUERY_SITE, KV_SITE)
# site -> what it is (for errors and docs)
SITES: dict[str, str] = {
    "input_layernorm": "the norm before attention",
    "self_attention": "the whole attention block (q, k, v, core attention, output projection)",
    QUERY_SITE: "the query projection: X [s, b, d] -> this TP rank's q [s, b, d / tp]",
    KV_SITE: (
        "the key and value projection: X [s, b, d] -> (this TP rank's [k_g; v_g] per query "
        "group [s, b, 2 * kv_width / tp], bias), built as megatron builds a ColumnParallelLinear"
    ),
    "self_attention.core_attention": "softmax(q k^T) v (megatron's DotProductAttention)",
    "self_attention.linear_proj": "the attention output projection W_O (a gate goes here)",
    "pre_mlp_layernorm": "the norm before the MLP",
    "mlp": "the MLP",
    "layer": "the whole transformer layer (a megatron TransformerLayer spec)",
}


def _zero(config: Any) -> int:
    return 0


@dataclass(frozen=True)
class Variant:
    """An architecture change: the sites it replaces and its accounting, per layer.

    `sites`: ``{site: ModuleSpec or class}`` (`SITES`), or a function of the `ModelConfig`
    returning one; the function runs once per model build, so it may create one object shared by
    all the layers it builds (cross-layer state, e.g. a value residual from layer 1, passed to
    each layer's module through ``ModuleSpec(params=...)``; it is one per pipeline stage, and
    `models.cross_stage` carries a tensor from the first stage to later ones). A function also
    lists the sites it fills in `replaces`, so configs and accounting know them without building
    anything.
    `weights(config)`, `gains(config)`: weight-matrix entries and norm gains (or other
    parameters replicated over TP) of the modules at its sites, per layer; they replace what the
    plain layer holds there (`models.accounting`). `flops(config)`: forward matmul FLOPs per token
    of those modules in one layer (2 per multiply-add); left out, 2 per weight and the runs are
    tagged ``flops_counted = weights_only``. `init(config)`: ``{parameter path inside the layer
    (e.g. "self_attention.linear_proj.gate"): models.catalog.init_rules rule}``. `check(config,
    tensor_parallel)`: raise ValueError for a shape the variant cannot build.
    `flops_exact`: the FLOPs are checked against torch's counter (the built-ins).
    `model`: `ModelConfig` fields this arm sets on top of the study's ``model:`` (e.g.
    ``{"num_query_groups": 1}``: grouped-query attention), or a function of the study's
    `ModelConfig` at a size returning them; `models.config.arm_model_fields` applies and checks
    them, and accounting, the build and the KV cache then follow the arm's own config.
    """

    name: str
    sites: dict[str, Any] | Callable[[Any], dict[str, Any]] = field(default_factory=dict)
    weights: Callable[[Any], int] = _zero
    gains: Callable[[Any], int] = _zero
    flops: Callable[[Any], int] | None = None
    init: Callable[[Any], dict[str, InitRule]] | None = None
    check: Callable[[Any, int], None] | None = None
    flops_exact: bool = False
    replaces: tuple[str, ...] = ()
    init_relative_to: str = ""  # prefix of `init`'s keys (a QueryVariant's are inside its site)
    model: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None

    def site_specs(self, config: Any) -> dict[str, Any]:
        """The sites and their specs for `config`; ValueError for an unknown site."""
        specs = self.sites(config) if callable(self.sites) else self.sites
        check_site_names(self.name, specs)
        if callable(self.sites) and set(specs) != set(self.replaces):
            raise ValueError(
                f"variant {self.name!r}: its sites function returned {sorted(specs)}, but "
                f"replaces lists {sorted(self.replaces)}; list the same sites"
            )
        return dict(specs)

    def site_names(self) -> list[str]:
        """The replaced sites, known without building anything."""
        names = list(self.sites) if isinstance(self.sites, dict) else list(self.replaces)
        check_site_names(self.name, dict.fromkeys(names))
        return names


def check_site_names(name: str, specs: Any) -> None:
    """Sites must be known, and not nested in one another (each module has one owner)."""
    if not isinstance(specs, dict):
        raise ValueError(f"variant {name!r}: sites must be a dict of site -> ModuleSpec")
    for site in specs:
        if site not in SITES:
            close = difflib.get_close_matches(str(site), list(SITES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"variant {name!r}: unknown site {site!r}{hint}; sites: {', '.join(SITES)}"
            )
    for a in specs:
        for b in specs:
            if a != b and (b.startswith(a + ".") or a == "layer"):
                raise ValueError(
                    f"variant {name!r}: sites {a!r} and {b!r} overlap; replace one of them"
                )


@dataclass(frozen=True)
class QueryVariant:
    """A query projection defined outside the package (the `self_attention.query` site).

    `name` is the arm's name in a study (cell ids, the `variant` tag, the analysis table);
    `query` is a megatron `ModuleSpec` (or module class) of the query; `weights(config)` and
    `gains(config)` count its weight-matrix entries and norm gains in one layer (a linear W_Q
    has ``d * d`` weights and no gains). `flops(config)`: the query's forward FLOPs per token
    in one layer, every matmul it runs at 2 FLOPs per multiply-add (a linear W_Q: ``2 * d *
    d``); the compute axis of the analysis is built on it. Left out, the accounting counts 2
    per weight, the runs are tagged ``flops_counted = weights_only`` and the analysis holds the
    variant's verdict back: a query that multiplies more than its weights (a product of two
    activations, an extra attention) would otherwise buy its gain with uncounted compute.

    `init(config)`: the query module's own initialisation, ``{parameter name inside the query
    module: models.catalog.init_rules rule}``
    (e.g. ``{"alpha": zeros(), "conv.weight": normal()}``).
    The module's constructor init never survives (`models.init` redraws every parameter from
    the seed, layout-independently). Without a rule, a norm gain starts at one and a matrix at
    N(0, init_std), like W_Q; any other shape (a 1-D scale, a 3-D kernel) needs a rule.
    """

    name: str
    query: Any
    weights: Callable[[Any], int]
    gains: Callable[[Any], int] = _zero
    flops: Callable[[Any], int] | None = None
    init: Callable[[Any], dict[str, InitRule]] | None = None
    model: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None  # as `Variant.model`


def as_variant(query: QueryVariant) -> Variant:
    """The `Variant` that a `QueryVariant` describes: its module at the query site."""
    return Variant(
        name=query.name,
        sites={QUERY_SITE: query.query},
        weights=query.weights,
        gains=query.gains,
        flops=query.flops,
        init=query.init,
        init_relative_to=QUERY_SITE,
        model=query.model,
    )
