"""Variants at sites other than the query, written as a user would (nothing in `models` knows
of them): a sigmoid gate on the attention output, a value residual from layer 1, a SwiGLU
MLP at (nearly) equal parameters, and keys shared with the values; and grouped-query
attention, which replaces no module at all: it changes the arm's model config (`Variant.model`).

Named in a study as ``examples.site_examples:output_gate`` (``value_residual``,
``swiglu``, ``shared_kv``, ``gqa``).
"""

from __future__ import annotations

from typing import Any

import torch
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
from megatron.core.transformer.dot_product_attention import DotProductAttention
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.identity_op import IdentityOp
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

from models import cross_stage
from models.catalog.init_rules import constant, scaled_normal
from models.catalog.variants import Variant

GATE_START = 2.0  # sigmoid(2) ~ 0.88: the gate starts nearly open


class GatedOutputProjection(RowParallelLinear):
    """W_O applied to ``context * sigmoid(gate)``: one learned gate per channel of the attention
    output, split over TP like the context itself (each rank gates its own heads)."""

    def __init__(self, input_size: int, output_size: int, **kwargs: Any) -> None:
        super().__init__(input_size, output_size, **kwargs)
        # [d / tp]: this rank's channels (megatron's attributes say how it is split)
        self.gate = torch.nn.Parameter(
            torch.empty(self.input_size_per_partition, dtype=kwargs["config"].params_dtype)
        )
        self.gate.tensor_model_parallel = True
        self.gate.partition_dim = 0
        self.gate.partition_stride = 1

    def forward(self, input_: torch.Tensor, *args: Any, **kwargs: Any):
        # input_: [s, b, d / tp] -> (W_O output [s, b, d], bias)
        return super().forward(input_ * torch.sigmoid(self.gate), *args, **kwargs)


def output_gate() -> Variant:
    """A per-channel sigmoid gate on the attention output (the `linear_proj` site)."""
    return Variant(
        name="output_gate",
        sites={"self_attention.linear_proj": GatedOutputProjection},
        weights=lambda config: config.query_width * config.hidden_size + config.query_width,
        flops=lambda config: 2 * config.query_width * config.hidden_size,  # W_O; gate elementwise
        init=lambda config: {"self_attention.linear_proj.gate": constant(GATE_START)},
    )


class ValueResidualAttention(SelfAttention):
    """Layers after the first mix their values with layer 1's: v = (v + v_1) / 2.

    `state` is one dict shared by the layers of one model build (the variant's sites function
    makes a fresh one per build); on every forward layer 1 writes its values there, and the
    later layers of the same stage read them. Under pipeline parallelism layer 1 lives on the
    first stage only: it also sends its values to the later stages (`models.cross_stage`), where
    the stage's first layer receives them into its own dict; their gradients flow back to layer 1.
    ``layer_number`` is global in megatron-core (1 is the model's first layer on every layout).
    """

    def __init__(self, *args: Any, state: dict, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cross_stage.check_config(self.config)
        self.state = state
        # this stage's first layer (1 on the first stage): megatron numbers layers globally
        self.first_layer_here = get_transformer_layer_offset(self.config) + 1

    def get_query_key_value_tensors(self, *args: Any, **kwargs: Any):
        query, key, value = super().get_query_key_value_tensors(*args, **kwargs)
        # value: [s, b, ng_local, hn]
        if self.layer_number == 1:
            value = cross_stage.send_to_later_stages(value)  # value itself with one stage
            self.state["value"] = value
            return query, key, value
        if self.layer_number == self.first_layer_here:  # a later stage: layer 1 is elsewhere
            self.state["value"] = cross_stage.receive_from_first_stage(like=value)
        return query, key, (value + self.state["value"]) * 0.5


def _value_residual_sites(config: Any) -> dict[str, Any]:
    state: dict = {}  # cross-layer: one per built model, seen by all its layers
    attention = ModuleSpec(
        module=ValueResidualAttention,
        params={"attn_mask_type": AttnMaskType.causal, "state": state},
        submodules=SelfAttentionSubmodules(
            linear_qkv=ColumnParallelLinear,
            core_attention=DotProductAttention,
            linear_proj=RowParallelLinear,
            q_layernorm=IdentityOp,
            k_layernorm=IdentityOp,
        ),
    )
    return {"self_attention": attention}


def _attention_weights(config: Any) -> int:
    kv_width = config.query_groups * config.kv_channels
    return 2 * config.hidden_size * config.query_width + 2 * config.hidden_size * kv_width


def value_residual() -> Variant:
    """Value residual from layer 1 (the whole `self_attention` site; no new parameters)."""
    return Variant(
        name="value_residual",
        sites=_value_residual_sites,
        replaces=("self_attention",),
        weights=_attention_weights,
        flops=lambda config: (
            2 * _attention_weights(config) + 4 * config.seq_length * config.query_width
        ),  # QK^T and AV
    )


def swiglu_width(ffn: int) -> int:
    """Hidden width h of the SwiGLU MLP: 3 d h ~ the GELU MLP's 2 d ffn, rounded down to a
    multiple of 8 (so TP up to 8 splits it)."""
    return (2 * ffn // 3) // 8 * 8


class SwiGLUMLP(MegatronModule):
    """out = W_down(silu(X W_gate) * (X W_up)); W_gate, W_up column-, W_down row-parallel."""

    def __init__(self, config: Any, **_: Any) -> None:
        super().__init__(config=config)
        d, h = config.hidden_size, swiglu_width(config.ffn_hidden_size)  # megatron's config
        column = dict(config=config, init_method=config.init_method, bias=False)
        self.w_gate = ColumnParallelLinear(d, h, gather_output=False, **column)
        self.w_up = ColumnParallelLinear(d, h, gather_output=False, **column)
        self.w_down = RowParallelLinear(
            h,
            d,
            config=config,
            init_method=config.output_layer_init_method,
            bias=False,
            input_is_parallel=True,
            skip_bias_add=True,
        )

    def forward(self, hidden_states: torch.Tensor, **_: Any):
        # [s, b, d] -> [s, b, h / tp] -> ([s, b, d] all-reduced over TP, bias None)
        gate, _ = self.w_gate(hidden_states)
        up, _ = self.w_up(hidden_states)
        return self.w_down(torch.nn.functional.silu(gate) * up)


def swiglu() -> Variant:
    """SwiGLU in place of the GELU MLP, at 3 d h ~ 2 d ffn weights."""
    return Variant(
        name="swiglu",
        sites={"mlp": SwiGLUMLP},
        weights=lambda config: 3 * config.hidden_size * swiglu_width(config.ffn_size),
        flops=lambda config: 2 * 3 * config.hidden_size * swiglu_width(config.ffn_size),
        # W_down writes into the residual stream: GPT-2's scaled init, like linear_fc2
        init=lambda config: {"mlp.w_down.weight": scaled_normal()},
    )


class SharedKeyValue(ColumnParallelLinear):
    """One projection serves as both key and value (k = v = X W): half of W_K, W_V's weights.

    Built where megatron builds the fused K/V projection, with its arguments; this rank's output
    keeps that projection's layout, ``[k_g; v_g]`` per query group, so TP ranks own whole groups.
    """

    def __init__(self, input_size: int, output_size: int, **kwargs: Any) -> None:
        super().__init__(input_size, output_size // 2, **kwargs)  # [W_K; W_V] -> one W

    def forward(self, input_: torch.Tensor, *args: Any, **kwargs: Any):
        # input_: [s, b, d] -> one [s, b, ng * hn / tp] -> [s, b, ng_local, 2 * hn] flattened
        shared, bias = super().forward(input_, *args, **kwargs)
        width = self.config.kv_channels
        groups = shared.view(*shared.shape[:2], -1, width)
        return torch.cat([groups, groups], dim=-1).flatten(2), bias


def _kv_width(config: Any) -> int:
    return config.query_groups * config.kv_channels


def shared_kv() -> Variant:
    """Keys and values from one projection (the `linear_kv` site)."""
    return Variant(
        name="shared_kv",
        sites={"self_attention.linear_kv": SharedKeyValue},
        weights=lambda config: config.hidden_size * _kv_width(config),
        flops=lambda config: 2 * config.hidden_size * _kv_width(config),
    )


QUERY_HEADS_PER_KV_HEAD = 4


def gqa() -> Variant:
    """Grouped-query attention: one key/value head per 4 query heads (`num_query_groups`).

    No module is replaced: megatron's own attention shares each K/V head among its group's
    query heads. The arm's model config says so (`model`, applied on top of the study's
    `model:` for this arm only), so N, the FLOPs, the build check and the KV cache of the
    inference measurement all follow it: W_K and W_V shrink to d x (heads / 4) x head_dim,
    and so does the cache (0.25x the baseline's).
    """
    return Variant(
        name="gqa",
        model=lambda config: {
            "num_query_groups": max(1, config.num_attention_heads // QUERY_HEADS_PER_KV_HEAD)
        },
        flops=lambda config: 0,  # nothing beyond the plain layer of the arm's own config
    )
