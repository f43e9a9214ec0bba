"""Query projections other than megatron's fused linear QKV, and the attention that uses them.

``SeparateQueryAttention`` is megatron's ``Attention`` with the query computed by a pluggable
module (chosen in the layer spec) and K, V by one fused column-parallel ``linear_kv``.

Under tensor parallelism (TP) X is replicated and each rank owns a contiguous slice of heads.
A query module returns only this rank's slice, ``[s, b, np_local * hn]``, of a full-width query:

- ``IdentityQuery``: ``X / 2``: W_Q = I with the reference's halved softmax scale.
- ``BottleneckQuery``: ``(X + f(X)) / 2`` with ``f(X) = LayerNorm(act(RMSNorm(X) W1) W2)``,
  ``W1: d -> d/2`` column-parallel and ``W2: d/2 -> d`` row-parallel, so the matmuls are split
  over TP and the all-reduce of ``W2`` gives every rank the full ``f(X)``. ``act`` is the exact
  GELU (``nonlinear``, the paper) or none (``residual_linear``, the control).

The slice is taken with megatron's ``scatter_to_tensor_model_parallel_region``, whose backward
all-gathers, so the replicated norm gains get identical gradients on every TP rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from megatron.core import tensor_parallel
from megatron.core.transformer.attention import Attention
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec, build_module
from megatron.core.transformer.transformer_config import TransformerConfig
from torch import Tensor

NORM_EPS = 1e-5  # the reference's RMSNorm and LayerNorm eps


class LayerNormNoBias:
    """Builds ``torch.nn.LayerNorm`` without a bias, with megatron's norm-builder signature.

    The reference GPT (and its 84.95M non-embedding count at 124M) has LayerNorm gains only.
    """

    def __new__(cls, config: TransformerConfig, hidden_size: int, eps: float = NORM_EPS, **_: Any):
        return torch.nn.LayerNorm(hidden_size, eps=eps, bias=False, dtype=config.params_dtype)


class LinearQuery(MegatronModule):
    """q = X W_Q, column-parallel: the plain query, when a variant replaces only K/V."""

    def __init__(self, config: TransformerConfig, tp_group: Any = None):
        super().__init__(config=config)
        self.linear = tensor_parallel.ColumnParallelLinear(
            config.hidden_size,
            config.hidden_size,
            config=config,
            init_method=config.init_method,
            gather_output=False,
            bias=False,
            skip_bias_add=False,
            is_expert=False,
            tp_group=tp_group,
        )

    def forward(self, x: Tensor) -> Tensor:
        # x: [s, b, d] (replicated over TP) -> [s, b, d / tp]
        q, _ = self.linear(x)
        return q


class IdentityQuery(MegatronModule):
    """q = X / 2 (W_Q = I; the /2 is the reference's halved softmax scale, moved into q)."""

    def __init__(self, config: TransformerConfig, tp_group: Any = None):
        super().__init__(config=config)
        self.tp_group = tp_group

    def forward(self, x: Tensor) -> Tensor:
        # x: [s, b, d] (replicated over TP) -> [s, b, d / tp]
        return tensor_parallel.scatter_to_tensor_model_parallel_region(x * 0.5, group=self.tp_group)


class BottleneckQuery(MegatronModule):
    """q = (X + LayerNorm(act(RMSNorm(X) W1) W2)) / 2, W1: d -> d/2, W2: d/2 -> d, no biases."""

    def __init__(self, config: TransformerConfig, activation: str = "gelu", tp_group: Any = None):
        super().__init__(config=config)
        if activation not in ("gelu", "none"):
            raise ValueError(f"activation: {activation!r} is not 'gelu' or 'none'")
        d = config.hidden_size
        self.activation = activation
        self.tp_group = tp_group
        self.rmsnorm_in = torch.nn.RMSNorm(d, eps=NORM_EPS, dtype=config.params_dtype)
        # Both W1 and W2 use the plain N(0, init_std) init, like the reference (no scaled init).
        self.linear_in = tensor_parallel.ColumnParallelLinear(
            d,
            d // 2,
            config=config,
            init_method=config.init_method,
            bias=False,
            gather_output=False,
            tp_group=tp_group,
        )
        self.linear_out = tensor_parallel.RowParallelLinear(
            d // 2,
            d,
            config=config,
            init_method=config.init_method,
            bias=False,
            input_is_parallel=True,
            skip_bias_add=True,
            tp_group=tp_group,
        )
        self.layernorm_out = torch.nn.LayerNorm(
            d, eps=NORM_EPS, bias=False, dtype=config.params_dtype
        )

    def bottleneck(self, x: Tensor) -> Tensor:
        """f(X), full width on every TP rank: [s, b, d] -> [s, b, d]."""
        h, _ = self.linear_in(self.rmsnorm_in(x))  # [s, b, d/2/tp]
        if self.activation == "gelu":
            h = F.gelu(h)  # exact (erf) GELU, as in the reference
        f, _ = self.linear_out(h)  # [s, b, d], all-reduced over TP
        return self.layernorm_out(f)

    def forward(self, x: Tensor) -> Tensor:
        # x: [s, b, d] (replicated over TP) -> [s, b, d / tp]
        q = (x + self.bottleneck(x)) * 0.5
        return tensor_parallel.scatter_to_tensor_model_parallel_region(q, group=self.tp_group)


@dataclass
class SeparateQuerySubmodules:
    """What ``SeparateQueryAttention`` is built from (filled in by the layer spec)."""

    query: ModuleSpec | type
    linear_kv: ModuleSpec | type
    core_attention: ModuleSpec | type
    linear_proj: ModuleSpec | type
    q_layernorm: ModuleSpec | type | None = None
    k_layernorm: ModuleSpec | type | None = None


class SeparateQueryAttention(Attention):
    """Causal self-attention whose query comes from ``submodules.query``; K, V stay linear."""

    def __init__(
        self,
        config: TransformerConfig,
        submodules: SeparateQuerySubmodules,
        layer_number: int,
        attn_mask_type: AttnMaskType = AttnMaskType.causal,
        cp_comm_type: str | None = None,
        pg_collection: Any = None,
    ):
        super().__init__(
            config=config,
            submodules=submodules,
            layer_number=layer_number,
            attn_mask_type=attn_mask_type,
            attention_type="self",
            cp_comm_type=cp_comm_type,
            pg_collection=pg_collection,
        )
        assert self.query_projection_size == config.hidden_size  # checked by ModelConfig
        self.query = build_module(submodules.query, config=config, tp_group=self.tp_group)
        # Per query group: [k_g; v_g], so TP ranks own whole groups.
        self.linear_kv = build_module(
            submodules.linear_kv,
            config.hidden_size,
            2 * self.kv_projection_size,
            config=config,
            init_method=config.init_method,
            gather_output=False,
            bias=False,
            skip_bias_add=False,
            is_expert=False,
            tp_group=self.tp_group,
        )
        hn = self.hidden_size_per_attention_head
        self.q_layernorm = self._maybe_norm(submodules.q_layernorm, hn)
        self.k_layernorm = self._maybe_norm(submodules.k_layernorm, hn)

    def _maybe_norm(self, spec: ModuleSpec | type | None, width: int) -> torch.nn.Module | None:
        if spec is None:
            return None
        return build_module(spec, hidden_size=width, config=self.config, eps=NORM_EPS)

    def get_query_key_value_tensors(
        self,
        hidden_states: Tensor,
        key_value_states: Tensor | None = None,
        output_gate: bool = False,
        split_qkv: bool = True,
    ) -> tuple[Tensor, Tensor, Tensor]:
        assert split_qkv and not output_gate, "only split q/k/v without an output gate"
        hn = self.hidden_size_per_attention_head
        # [s, b, d] -> [s, b, ng_local * 2 * hn] -> [s, b, ng_local, 2 * hn]
        mixed_kv, _ = self.linear_kv(hidden_states)
        mixed_kv = mixed_kv.view(*mixed_kv.shape[:2], self.num_query_groups_per_partition, 2 * hn)
        key, value = torch.split(mixed_kv, hn, dim=3)  # 2 x [s, b, ng_local, hn]
        query = self.query(hidden_states)  # [s, b, np_local * hn]
        query = query.view(*query.shape[:2], self.num_attention_heads_per_partition, hn)
        if self.q_layernorm is not None:
            query = self.q_layernorm(query)
        if self.k_layernorm is not None:
            key = self.k_layernorm(key)
        return query, key, value
