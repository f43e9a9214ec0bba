"""Layer specs: the one place where the query variant picks its module.

All variants share megatron-core's local (non-Transformer-Engine) transformer layer: pre-LN
(LayerNorm gains, no biases), attention, GELU MLP. Only the attention's ``self_attention`` spec
differs: ``linear`` is megatron's ``SelfAttention`` with its fused QKV projection; the others are
``SeparateQueryAttention`` with the variant's query module and a fused K/V projection.
"""

from __future__ import annotations

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

from models.config import ModelConfig
from models.query import (
    BottleneckQuery,
    IdentityQuery,
    LayerNormNoBias,
    SeparateQueryAttention,
    SeparateQuerySubmodules,
)
from models.variants import is_builtin, load_variant

_QUERY_MODULES: dict[str, ModuleSpec] = {
    "identity": ModuleSpec(module=IdentityQuery),
    "nonlinear": ModuleSpec(module=BottleneckQuery, params={"activation": "gelu"}),
    "residual_linear": ModuleSpec(module=BottleneckQuery, params={"activation": "none"}),
}


def attention_spec(config: ModelConfig) -> ModuleSpec:
    """Causal self-attention for ``config.query_variant`` (optionally with q/k LayerNorm)."""
    qk_norm = LayerNormNoBias if config.qk_norm else None
    if config.query_variant == "linear":
        submodules = SelfAttentionSubmodules(
            linear_qkv=ColumnParallelLinear,
            core_attention=DotProductAttention,
            linear_proj=RowParallelLinear,
            q_layernorm=qk_norm or IdentityOp,
            k_layernorm=qk_norm or IdentityOp,
        )
        module = SelfAttention
    else:
        if is_builtin(config.query_variant):
            query = _QUERY_MODULES[config.query_variant]
        else:  # the user's own (models.variants)
            query = load_variant(config.query_variant).query
        submodules = SeparateQuerySubmodules(
            query=query,
            linear_kv=ColumnParallelLinear,
            core_attention=DotProductAttention,
            linear_proj=RowParallelLinear,
            q_layernorm=qk_norm,
            k_layernorm=qk_norm,
        )
        module = SeparateQueryAttention
    return ModuleSpec(
        module=module, params={"attn_mask_type": AttnMaskType.causal}, submodules=submodules
    )


def layer_spec(config: ModelConfig) -> ModuleSpec:
    """One pre-LN transformer layer."""
    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(
            input_layernorm=LayerNormNoBias,
            self_attention=attention_spec(config),
            self_attn_bda=get_bias_dropout_add,
            pre_mlp_layernorm=LayerNormNoBias,
            mlp=ModuleSpec(
                module=MLP,
                submodules=MLPSubmodules(
                    linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear
                ),
            ),
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
