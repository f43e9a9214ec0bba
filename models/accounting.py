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


def _declared_query_flops(config: ModelConfig) -> int:
    """A bring-your-own query's declared forward FLOPs per layer beyond 2 per weight (0 when
    it declared none, or for a built-in: their FLOPs are their weights')."""
    if is_builtin(config.query_variant):
        return 0
    variant = load_variant(config.query_variant)
    if variant.flops is None:
        return 0
    return variant.flops(config) - 2 * variant.weights(config)


def flops_counted(config: ModelConfig) -> str:
    """How ``flops_per_token`` counts this model: ``exact`` (built-in), ``declared`` (a
    variant's own ``flops``), or ``weights_only`` (a variant that declared none)."""
    if is_builtin(config.query_variant):
        return "exact"
    return "weights_only" if load_variant(config.query_variant).flops is None else "declared"


def forward_flops_per_token(config: ModelConfig) -> int:
    """Matmul FLOPs of one forward pass, per token."""
    weights = config.num_layers * _layer_weights(config) + config.hidden_size * config.vocab_size
    # QK^T and AV: each 2 * seq_length * (head width) per query head.
    attention = config.num_layers * 2 * 2 * config.seq_length * config.query_width
    return 2 * weights + attention + config.num_layers * _declared_query_flops(config)


def flops_per_token(config: ModelConfig) -> int:
    """Training FLOPs per token (forward + backward = 3 x forward): C = this x tokens."""
    return 3 * forward_flops_per_token(config)


def num_stored_params(config: ModelConfig, parallel: ParallelConfig) -> int:
    """Parameters summed over the shards of one TP x PP grid (one DP replica): matrices are
    split over TP, while norm gains and learned position embeddings are replicated on every TP
    rank, and with PP > 1 the last stage holds its own copy of a tied output layer."""
    replicated = config.num_layers * _layer_gains(config) + config.hidden_size
    if config.position_embedding == "learned":
        replicated += config.seq_length * config.hidden_size
    count = num_params(config) + (parallel.tensor_parallel - 1) * replicated
    if config.tie_embeddings and parallel.pipeline_parallel > 1:
        count += config.vocab_size * config.hidden_size
    return count


def checkpoint_bytes(
    config: ModelConfig,
    parallel: ParallelConfig,
    engine: str = "megatron",
    zero_stage: int = 1,
    bf16: bool = True,
) -> int:
    """Bytes of one checkpoint of a cell, all ranks' files together, as `jobs.checkpoint` writes
    it: weights and optimiser state once, whatever the data parallelism (a DP rank writes only
    what it alone holds: its ZeRO slice of the optimiser state). Per parameter: the weights
    (2 bytes in bf16, else 4), Adam's two fp32 moments (8), and an fp32 master copy (4) when
    the weights are bf16 or DeepSpeed's ZeRO keeps one (stages 1 and 2 do, even in fp32).
    Small per-rank state (RNG, loss history; a few KB each) is not counted.
    """
    weight_bytes = 2 if bf16 else 4
    master = bf16 or (engine == "deepspeed" and zero_stage >= 1)
    optimizer_bytes = 8 + (4 if master else 0)
    return num_stored_params(config, parallel) * (weight_bytes + optimizer_bytes)
