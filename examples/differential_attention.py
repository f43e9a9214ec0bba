"""Differential attention (Ye et al. 2024, arXiv 2410.05258) at the `core_attention` site, written
as a user would: nothing in `models` knows of it. Named in a study as
``examples.differential_attention:differential_attention``.

Each head splits its query and key in two halves and subtracts two softmax maps:

    A_i = softmax(q_i k_i^T / sqrt(hn / 2))                   i = 1, 2
    out = (1 - lambda_init) * RMSNorm_head((A_1 - lambda A_2) v)
    lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init

What the site receives (megatron-core 0.16.1's `DotProductAttention` contract; the layer's
`SelfAttention` builds the module with the same keyword arguments and calls it the same way):

- built with ``config`` (megatron's TransformerConfig), ``layer_number`` (global, from 1),
  ``attn_mask_type`` (``AttnMaskType.causal`` for this project's GPT), ``attention_type``,
  ``softmax_scale`` (None: 1 / sqrt(head dim)), ``cp_comm_type`` and ``pg_collection`` (its
  ``tp`` is the tensor-parallel group);
- called with ``query`` ``[sq, b, np, hn]`` (this rank's ``np = heads / tp`` heads, after RoPE),
  ``key`` and ``value`` ``[sk, b, ng, hn]`` (this rank's ``ng = query groups / tp``; with grouped
  queries each K/V head serves ``np / ng`` query heads), ``attention_mask`` and
  ``attn_mask_type``;
- ``attention_mask`` is a boolean tensor broadcastable to ``[b, np, sq, sk]`` where **True means
  "may not attend"** (megatron fills those scores with -10000 before the softmax), or None: the
  project's GPT passes None, and with ``AttnMaskType.causal`` the module builds the causal mask
  itself (position t sees 0..t). A single query row (``sq == 1``, decoding) needs no mask;
- returns the context ``[sq, b, np * hn]``: this rank's heads, side by side, which
  `linear_proj` (row-parallel) turns into the full-width output.

Tensor parallelism: each rank holds its heads only, but the lambda vectors and the head norm's
gain are shared by **all** heads, so they are replicated on every rank and each rank's backward
sees only its own heads' part of their gradient. They are read through megatron's
`copy_to_tensor_model_parallel_region` (forward: identity; backward: all-reduce over the TP
group), so every rank gets the full gradient, the same as one process: the replicas stay equal.
`tests/models/test_parallel.py` checks exactly that (TP = 2 against one process: the same loss,
the same gradient of every replicated parameter on both ranks).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from megatron.core.tensor_parallel import copy_to_tensor_model_parallel_region
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.module import MegatronModule

from models.catalog.init_rules import normal, ones
from models.catalog.variants import Variant

LAMBDA_STD = 0.1  # the paper's init of the lambda vectors
NORM_EPS = 1e-5


def lambda_init(layer_number: int) -> float:
    """The paper's lambda_init(depth) = 0.8 - 0.6 exp(-0.3 depth), depth counted from 0."""
    return 0.8 - 0.6 * math.exp(-0.3 * (layer_number - 1))


def causal_mask(sq: int, sk: int, device: torch.device) -> torch.Tensor:
    """[sq, sk], True where query row t may not see key column s (s > t, keys aligned to the
    end: the last query row is the last key)."""
    rows = torch.arange(sq, device=device).unsqueeze(1) + (sk - sq)
    return torch.arange(sk, device=device).unsqueeze(0) > rows


class DifferentialCoreAttention(MegatronModule):
    """softmax(q1 k1^T) - lambda softmax(q2 k2^T), applied to v, normalised per head."""

    def __init__(
        self,
        config: Any,
        layer_number: int,
        attn_mask_type: AttnMaskType,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection: Any = None,
    ) -> None:
        super().__init__(config=config)
        self.tp_group = pg_collection.tp if pg_collection is not None else None
        tp = self.tp_group.size() if self.tp_group is not None else 1
        self.head_dim = config.kv_channels
        if self.head_dim % 2:
            raise ValueError(
                f"differential attention splits each head in two: head dim {self.head_dim} is odd"
            )
        self.heads_here = config.num_attention_heads // tp  # np
        self.groups_here = config.num_query_groups // tp  # ng
        self.attn_mask_type = attn_mask_type
        self.lambda_init = lambda_init(layer_number)
        half = self.head_dim // 2
        self.scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(half)
        dtype = config.params_dtype
        # shared by every head, so replicated on every TP rank (gradients: see forward)
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            self.register_parameter(name, torch.nn.Parameter(torch.empty(half, dtype=dtype)))
        self.head_norm = torch.nn.Parameter(torch.empty(self.head_dim, dtype=dtype))  # [hn]

    def shared(self, param: torch.nn.Parameter) -> torch.Tensor:
        """`param` as this rank uses it; its gradient is summed over the TP ranks' heads."""
        if self.tp_group is None or self.tp_group.size() == 1:
            return param
        return copy_to_tensor_model_parallel_region(param, group=self.tp_group)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: AttnMaskType | None = None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params: Any = None,
    ) -> torch.Tensor:
        if attention_bias is not None or packed_seq_params is not None:
            raise ValueError("differential attention takes no attention bias or packed sequences")
        sq, b, heads, hn = query.shape  # [sq, b, np, hn]
        sk = key.size(0)
        repeat = heads // key.size(2)  # grouped queries: each K/V head serves `repeat` heads
        key = key.repeat_interleave(repeat, dim=2)  # [sk, b, np, hn]
        value = value.repeat_interleave(repeat, dim=2)  # [sk, b, np, hn]
        q1, q2 = query.float().split(hn // 2, dim=-1)  # [sq, b, np, hn/2] each
        k1, k2 = key.float().split(hn // 2, dim=-1)  # [sk, b, np, hn/2] each

        mask = attention_mask
        if mask is None and (attn_mask_type or self.attn_mask_type) == AttnMaskType.causal:
            mask = causal_mask(sq, sk, query.device) if sq > 1 else None

        def attention_map(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            scores = torch.einsum("sbhd,tbhd->bhst", q, k) * self.scale  # [b, np, sq, sk]
            if mask is not None:
                scores = scores.masked_fill(mask, -10000.0)  # True: may not attend
            return torch.softmax(scores, dim=-1)

        lq1, lk1, lq2, lk2 = (
            self.shared(p).float()
            for p in (self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2)
        )
        lam = torch.exp(lq1 @ lk1) - torch.exp(lq2 @ lk2) + self.lambda_init  # a scalar
        probs = attention_map(q1, k1) - lam * attention_map(q2, k2)  # [b, np, sq, sk]
        context = torch.einsum("bhst,tbhd->sbhd", probs, value.float())  # [sq, b, np, hn]
        rms = context.pow(2).mean(-1, keepdim=True).add(NORM_EPS).rsqrt()
        context = context * rms * self.shared(self.head_norm).float() * (1 - self.lambda_init)
        return context.to(query.dtype).reshape(sq, b, heads * hn)  # [sq, b, np * hn]


def differential_attention() -> Variant:
    """Differential attention at `self_attention.core_attention`: Q, K, V and W_O unchanged."""
    return Variant(
        name="differential_attention",
        sites={"self_attention.core_attention": DifferentialCoreAttention},
        # four lambda vectors of hn / 2 and the head norm's hn gains, shared by all heads
        gains=lambda config: 3 * config.kv_channels,
        # two half-width score maps (= one full QK^T) and one AV, over the full context
        flops=lambda config: 4 * config.seq_length * config.query_width,
        init=lambda config: {
            **{
                f"self_attention.core_attention.{name}": normal(LAMBDA_STD)
                for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")
            },
            "self_attention.core_attention.head_norm": ones(),
        },
        check=_check,
    )


def _check(config: Any, tensor_parallel: int) -> None:
    if config.kv_channels % 2:
        raise ValueError(
            f"differential attention splits each head in two: head dim {config.kv_channels} is "
            "odd; choose hidden_size / num_attention_heads even (or set head_dim)"
        )
