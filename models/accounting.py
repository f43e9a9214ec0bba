"""Parameter and FLOP counts of a ``ModelConfig``: the N and C of the scaling-law analysis.

Computed from the config alone (no torch), so the analysis and planners can call them freely;
the tests check them against the built megatron model and against torch's FLOP counter.

Conventions (Kaplan et al. 2020; Hoffmann et al. 2022):
- "embedding" parameters are the token and position embeddings (and an untied output layer);
  everything else (attention, query MLP, MLP, norm gains) is "non-embedding".
- Training FLOPs per token = 3 x forward (the backward pass costs twice the forward) and count
  matrix multiplies only, at 2 FLOPs per multiply-add: the weight matmuls, the output logits,
  and attention's QK^T and AV over the full ``seq_length`` context (the local attention kernel
  computes the whole score matrix, then masks). Norms, softmax and GELU are not counted.
"""

from __future__ import annotations

from models.config import BOTTLENECK_QUERY_VARIANTS, ModelConfig, ParallelConfig
from models.variants import is_builtin, load_variant


def _attention_weights(config: ModelConfig) -> int:
    """Weight-matrix entries of one attention block (query MLP included)."""
    d = config.hidden_size
    q_width = config.query_width
    kv_width = config.query_groups * config.kv_channels
    weights = 2 * d * kv_width + q_width * d  # W_K, W_V, W_O
    if config.query_variant == "linear":
        weights += d * q_width  # W_Q
    elif config.query_variant in BOTTLENECK_QUERY_VARIANTS:
        weights += d * (d // 2) + (d // 2) * d  # W1, W2: d^2 in all, like W_Q
    elif not is_builtin(config.query_variant):
        weights += load_variant(config.query_variant).weights(config)  # the user's accounting
    return weights


def _layer_weights(config: ModelConfig) -> int:
    """Weight-matrix entries of one transformer layer (attention + MLP)."""
    return _attention_weights(config) + 2 * config.hidden_size * config.ffn_size


def _layer_gains(config: ModelConfig) -> int:
    """Norm gains of one layer: two pre-norms, optional q/k norms, the query MLP's two norms."""
    d = config.hidden_size
    gains = 2 * d
    if config.qk_norm:
        gains += 2 * config.kv_channels
    if config.query_variant in BOTTLENECK_QUERY_VARIANTS:
        gains += 2 * d  # RMSNorm before W1, LayerNorm after W2
    elif not is_builtin(config.query_variant):
        gains += load_variant(config.query_variant).gains(config)
    return gains


def num_embedding_params(config: ModelConfig) -> int:
    """Token (+ position, + untied output) embedding parameters."""
    d = config.hidden_size
    count = config.vocab_size * d
    if config.position_embedding == "learned":
        count += config.seq_length * d
    if not config.tie_embeddings:
        count += config.vocab_size * d
    return count


def num_nonembedding_params(config: ModelConfig) -> int:
    """Parameters outside the embeddings: the N of a scaling law."""
    per_layer = _layer_weights(config) + _layer_gains(config)
    return config.num_layers * per_layer + config.hidden_size  # + final norm gain


def num_params(config: ModelConfig) -> int:
    """All parameters (a tied output layer counted once)."""
    return num_embedding_params(config) + num_nonembedding_params(config)


def forward_flops_per_token(config: ModelConfig) -> int:
    """Matmul FLOPs of one forward pass, per token."""
    weights = config.num_layers * _layer_weights(config) + config.hidden_size * config.vocab_size
    # QK^T and AV: each 2 * seq_length * (head width) per query head.
    attention = config.num_layers * 2 * 2 * config.seq_length * config.query_width
    return 2 * weights + attention


def flops_per_token(config: ModelConfig) -> int:
    """Training FLOPs per token (forward + backward = 3 x forward): C = this x tokens."""
    return 3 * forward_flops_per_token(config)


_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
_ADAM_MOMENT_BYTES = 8  # exp_avg + exp_avg_sq, fp32


def checkpoint_bytes(
    num_params: int,
    parallel: ParallelConfig,
    dtype: str,
    engine: str = "megatron",
    sharded_optimizer: bool = False,
) -> int:
    """Bytes of one checkpoint of the whole job (every rank's files), AdamW, from N alone.

    Weights (in `dtype`) are written once per model-parallel shard: the TP x PP shards hold N
    between them, whatever the DP width. The optimizer state is fp32: the two Adam moments,
    plus fp32 master weights when the model trains in 16 bits (bf16: 2 + 4 + 8 = 14 bytes a
    parameter; fp32: 4 + 8 = 12). It is written by every DP rank, each holding a full copy,
    unless the engine shards it over DP: DeepSpeed ZeRO >= 1, megatron's distributed
    optimizer (`sharded_optimizer`), when the DP ranks together hold one copy. `engine` only
    names whose options `sharded_optimizer` came from. Replicated norm gains and tied
    embeddings stored twice by PP are left out (< 1% at any size worth planning).
    """
    if dtype not in _DTYPE_BYTES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(_DTYPE_BYTES)}")
    if engine not in ("megatron", "deepspeed"):
        raise ValueError(f"engine: {engine!r} is not 'megatron' or 'deepspeed'")
    weights = _DTYPE_BYTES[dtype] * num_params
    master = 4 * num_params if _DTYPE_BYTES[dtype] < 4 else 0
    optimizer = master + _ADAM_MOMENT_BYTES * num_params
    copies = 1 if sharded_optimizer else parallel.data_parallel
    return weights + optimizer * copies
