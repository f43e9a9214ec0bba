"""Layer specs: the one place where a variant's modules enter the model.

Every variant starts from megatron-core's local (non-Transformer-Engine) transformer layer:
pre-LN (LayerNorm gains, no biases), attention with a fused QKV projection, GELU MLP. A variant
(`models.catalog.sites.Variant`) replaces named sites of it: a layer submodule (`input_layernorm`,
`self_attention`, `pre_mlp_layernorm`, `mlp`), an attention submodule
(`self_attention.core_attention`, `self_attention.linear_proj`), the query
(`self_attention.query`: ``SeparateQueryAttention`` with the variant's query module and a fused
K/V projection), the K/V projection (`self_attention.linear_kv`: the same attention with a linear
query), or the whole `layer`.
"""

from __future__ import annotations

from typing import Any

from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
from megatron.core.transformer.dot_product_attention import DotProductAttention
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.identity_op import IdentityOp
from megatron.core.transformer.mlp import MLP, MLPSubmodules
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_block import (
    TransformerBlockSubmodules,
    get_num_layers_to_build,
)
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.transformer.transformer_layer import TransformerLayer, TransformerLayerSubmodules

from models.catalog.sites import KV_SITE, QUERY_SITE, SEPARATE_QKV
from models.catalog.variants import load_variant
from models.config import ModelConfig
from models.query import (
    LayerNormNoBias,
    LinearQuery,
    SeparateQueryAttention,
    SeparateQuerySubmodules,
)


def attention_spec(config: ModelConfig, sites: dict[str, Any] | None = None) -> ModuleSpec:
    """Causal self-attention (optionally with q/k LayerNorm) with the variant's `sites`."""
    sites = load_variant(config.query_variant).site_specs(config) if sites is None else sites
    qk_norm = LayerNormNoBias if config.qk_norm else None
    core = sites.get("self_attention.core_attention", DotProductAttention)
    proj = sites.get("self_attention.linear_proj", RowParallelLinear)
    if any(site in sites for site in SEPARATE_QKV):
        submodules = SeparateQuerySubmodules(
            query=sites.get(QUERY_SITE, LinearQuery),
            linear_kv=sites.get(KV_SITE, ColumnParallelLinear),
            core_attention=core,
            linear_proj=proj,
            q_layernorm=qk_norm,
            k_layernorm=qk_norm,
        )
        module = SeparateQueryAttention
    else:
        submodules = SelfAttentionSubmodules(
            linear_qkv=ColumnParallelLinear,
            core_attention=core,
            linear_proj=proj,
            q_layernorm=qk_norm or IdentityOp,
            k_layernorm=qk_norm or IdentityOp,
        )
        module = SelfAttention
    return ModuleSpec(
        module=module, params={"attn_mask_type": AttnMaskType.causal}, submodules=submodules
    )


def layer_spec(config: ModelConfig) -> ModuleSpec:
    """One pre-LN transformer layer, with the sites the variant replaces."""
    sites = load_variant(config.query_variant).site_specs(config)
    if "layer" in sites:
        return sites["layer"]
    mlp = ModuleSpec(
        module=MLP,
        submodules=MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
    )
    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(
            input_layernorm=sites.get("input_layernorm", LayerNormNoBias),
            self_attention=sites.get("self_attention") or attention_spec(config, sites),
            self_attn_bda=get_bias_dropout_add,
            pre_mlp_layernorm=sites.get("pre_mlp_layernorm", LayerNormNoBias),
            mlp=sites.get("mlp", mlp),
            mlp_bda=get_bias_dropout_add,
        ),
    )


def block_spec(
    config: ModelConfig, transformer_config: TransformerConfig
) -> TransformerBlockSubmodules:
    """This pipeline stage's layers plus the final LayerNorm (bias-free like the others)."""
    num_local_layers = get_num_layers_to_build(transformer_config)
    return TransformerBlockSubmodules(
        layer_specs=[layer_spec(config)] * num_local_layers, layer_norm=LayerNormNoBias
    )
