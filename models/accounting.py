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

from models.catalog.sites import KV_SITE, QUERY_SITE
from models.catalog.variants import load_variant
from models.config import ModelConfig, ParallelConfig


def _plain_sites(config: ModelConfig) -> dict[str, tuple[int, int, int]]:
    """Per site of the plain layer (linear query): (weight entries, norm gains, forward FLOPs
    per token). A variant's own counts replace those of the sites it replaces."""
    d, seq = config.hidden_size, config.seq_length
    q_width = config.query_width
    kv_width = config.query_groups * config.kv_channels
    qk_gains = 2 * config.kv_channels if config.qk_norm else 0
    query = d * q_width  # W_Q
    kv = 2 * d * kv_width  # W_K, W_V
    proj = q_width * d  # W_O
    core = 2 * 2 * seq * q_width  # QK^T and AV: 2 * seq_length * (head width) per query head
    mlp = 2 * d * config.ffn_size
    attention = (query + kv + proj, qk_gains, 2 * (query + kv + proj) + core)
    sites = {
        "input_layernorm": (0, d, 0),
        "self_attention": attention,
        QUERY_SITE: (query, 0, 2 * query),
        KV_SITE: (kv, 0, 2 * kv),
        "self_attention.core_attention": (0, 0, core),
        "self_attention.linear_proj": (proj, 0, 2 * proj),
        "pre_mlp_layernorm": (0, d, 0),
        "mlp": (mlp, 0, 2 * mlp),
    }
    sites["layer"] = (attention[0] + mlp, 2 * d + qk_gains, attention[2] + 2 * mlp)
    return sites


def _layer_counts(config: ModelConfig) -> tuple[int, int, int]:
    """(weight entries, norm gains, forward FLOPs per token) of one layer of this variant: the
    plain layer's, with each replaced site's counts swapped for the variant's declared ones."""
    variant = load_variant(config.query_variant)
    plain = _plain_sites(config)
    weights, gains, flops = plain["layer"]
    for site in variant.site_names():
        site_weights, site_gains, site_flops = plain[site]
        weights, gains, flops = weights - site_weights, gains - site_gains, flops - site_flops
    own_weights = variant.weights(config)
    own_flops = variant.flops(config) if variant.flops is not None else 2 * own_weights
    return weights + own_weights, gains + variant.gains(config), flops + own_flops


def _layer_weights(config: ModelConfig) -> int:
    """Weight-matrix entries of one transformer layer (attention + MLP)."""
    return _layer_counts(config)[0]


def _layer_gains(config: ModelConfig) -> int:
    """Norm gains of one layer (and other parameters replicated over TP)."""
    return _layer_counts(config)[1]


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


def flops_counted(config: ModelConfig) -> str:
    """How ``flops_per_token`` counts this model: ``exact`` (checked against torch's counter:
    the built-ins), ``declared`` (a variant's own ``flops``), or ``weights_only`` (a variant
    that declared none)."""
    variant = load_variant(config.query_variant)
    if variant.flops is None:
        return "weights_only"
    return "exact" if variant.flops_exact else "declared"


def forward_flops_per_token(config: ModelConfig) -> int:
    """Matmul FLOPs of one forward pass, per token: every layer's, and the output logits."""
    return config.num_layers * _layer_counts(config)[2] + 2 * config.hidden_size * config.vocab_size


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
    zero_stage: int = 0,
    bf16: bool = True,
) -> int:
    """Bytes of one checkpoint of a cell, all ranks' files together, as
    `jobs.checkpoints.checkpoint` writes
    it: weights and optimiser state once, whatever the data parallelism (a DP rank writes only
    what it alone holds: its ZeRO slice of the optimiser state). Per parameter: the weights
    (2 bytes in bf16, else 4), Adam's two fp32 moments (8), and an fp32 master copy (4) when
    the weights are bf16 or ZeRO keeps one (stages 1 and 2 do, even in fp32). `zero_stage`:
    the stage the run's engine shards with (`jobs.engine_specs.EngineSpec.zero_stage`; 0 for an
    engine without ZeRO).
    Small per-rank state (RNG, loss history; a few KB each) is not counted.
    """
    weight_bytes = 2 if bf16 else 4
    master = bf16 or zero_stage >= 1
    optimizer_bytes = 8 + (4 if master else 0)
    return num_stored_params(config, parallel) * (weight_bytes + optimizer_bytes)
