"""Parameter and FLOP counts for MFU and the summary metrics, from `models.accounting`.

Stop-gap while `models.accounting` has not landed: the same quantities from the live model
(parameters counted on this rank's shards, summed over model-parallel ranks) and the Kaplan et
al. (2020) estimate of 6 N + 6 L s d training FLOPs per token. Delete the fallback once
`models.accounting` exists.
"""

from __future__ import annotations

from models.config import ModelConfig


def flops_per_token(config: ModelConfig) -> float:
    try:
        from models.accounting import flops_per_token as exact
    except ImportError:
        return 6.0 * num_nonembedding_params(config) + 6.0 * (
            config.num_layers * config.seq_length * config.hidden_size
        )
    return float(exact(config))


def num_params(config: ModelConfig) -> int:
    try:
        from models.accounting import num_params as exact
    except ImportError:
        embed = config.vocab_size * config.hidden_size
        if config.position_embedding == "learned":
            embed += config.seq_length * config.hidden_size
        if not config.tie_embeddings:
            embed += config.vocab_size * config.hidden_size
        return embed + num_nonembedding_params(config)
    return int(exact(config))


def num_nonembedding_params(config: ModelConfig) -> int:
    try:
        from models.accounting import num_nonembedding_params as exact
    except ImportError:
        d = config.hidden_size
        kv = 2 * d * config.query_groups * config.kv_channels
        query = {"linear": d * config.query_width, "identity": 0}.get(config.query_variant, d * d)
        query_norms = 2 * d if config.query_variant in ("nonlinear", "residual_linear") else 0
        attn = query + kv + config.query_width * d + query_norms
        mlp = 2 * d * config.ffn_size
        return config.num_layers * (attn + mlp + 2 * d) + d
    return int(exact(config))
