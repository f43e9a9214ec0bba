"""``ModelConfig`` -> megatron-core ``GPTModel`` for this rank's pipeline stage."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from models import runtime
from models.catalog.variants import site_inits
from models.config import ModelConfig, ParallelConfig


def transformer_config(config: ModelConfig, parallel: ParallelConfig, **overrides: Any):
    """megatron ``TransformerConfig`` for the reference GPT: no biases, no dropout, exact GELU.

    ``use_cpu_initialization`` keeps megatron's own (overwritten, see ``models.init``) draws off
    the GPU. ``overrides`` (e.g.
    ``bf16=True``, ``recompute_granularity="selective"``) pass straight to megatron.
    """
    from megatron.core.transformer.transformer_config import TransformerConfig

    kwargs: dict[str, Any] = dict(
        num_layers=config.num_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        num_query_groups=config.query_groups,
        kv_channels=config.kv_channels,
        ffn_hidden_size=config.ffn_size,
        tensor_model_parallel_size=parallel.tensor_parallel,
        pipeline_model_parallel_size=parallel.pipeline_parallel,
        pipeline_dtype=torch.float32,
        params_dtype=torch.float32,
        use_cpu_initialization=True,
        init_method_std=config.init_std,
        add_bias_linear=False,
        add_qkv_bias=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        normalization="LayerNorm",
        layernorm_epsilon=1e-5,
        qk_layernorm=config.qk_norm,
        gated_linear_unit=False,
        activation_func=F.gelu,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
    )
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


def build_gpt(
    config: ModelConfig,
    parallel: ParallelConfig | None = None,
    *,
    seed: int | None = None,
    transformer_overrides: dict[str, Any] | None = None,
):
    """The megatron-core ``GPTModel`` holding this rank's pipeline stage of ``config``.

    Validates first (ValueError before any group or tensor exists), then joins or creates the
    process groups (a 1-rank gloo group in a plain CPU process). ``seed`` seeds torch and
    megatron's RNG tracker, and the weights are drawn by ``models.init.initialize_weights``:
    one generator per parameter, seeded from ``seed`` and the parameter's global name, so they
    are the same full weights for any tensor- and pipeline-parallel size. Without ``seed`` the
    weight seed is drawn from the current torch RNG (so it depends on each rank's RNG state;
    pass ``seed`` for reproducible, layout-independent weights). Building leaves torch's CPU RNG
    where it was before megatron's (discarded) draws, so it too is the same for any layout.
    Every floating parameter is in ``params_dtype`` (bf16 runs: all of them bf16). On a GPU
    machine the model is moved to the current CUDA device.

    Under PP the stage is ``parallel_state.get_pipeline_model_parallel_rank()``: the first stage
    has the embeddings (``pre_process``), the last the final norm and output layer
    (``post_process``). ``forward(input_ids, position_ids, attention_mask, labels=...)`` returns
    the per-token loss ``[b, s]`` on the last stage when ``labels`` is given, otherwise logits
    ``[b, s, vocab/tp]``; other stages return hidden states ``[s, b, d]``. Drive PP through
    ``get_forward_backward_func()``, which calls ``set_input_tensor`` on later stages.
    """
    if (transformer_overrides or {}).get("sequence_parallel"):
        raise NotImplementedError(
            "transformer_overrides.sequence_parallel: not supported (the query modules and "
            "bias-free norms assume activations replicated over tensor-parallel ranks)"
        )
    parallel_given = parallel
    config.validate()
    if parallel is not None:
        config.validate_parallel(parallel)
    parallel = runtime.ensure_parallel(parallel_given)
    if parallel_given is None:
        config.validate_parallel(parallel)

    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel

    # lazy, like megatron above: importing `models` stays cheap until a model is built
    from models.init import initialize_weights
    from models.spec import block_spec  # lazy: megatron-core's modules

    if seed is not None:
        runtime.set_seed(seed)
    else:
        runtime.ensure_rng_tracker()
        seed = int(torch.randint(0, 2**62, ()).item())
    # megatron still runs its own init (with perform_initialization=False it would also skip
    # setting the tensor-parallel attributes); initialize_weights then overwrites every weight.
    tconfig = transformer_config(config, parallel, **(transformer_overrides or {}))
    rng_state = torch.get_rng_state()  # restored below: what megatron drew depends on the layout
    model = GPTModel(
        config=tconfig,
        transformer_layer_spec=block_spec(config, tconfig),
        vocab_size=config.vocab_size,
        max_sequence_length=config.seq_length,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        parallel_output=True,
        share_embeddings_and_output_weights=config.tie_embeddings,
        position_embedding_type=(
            "learned_absolute" if config.position_embedding == "learned" else "rope"
        ),
    )
    sites = site_inits(config.query_variant, config)
    initialize_weights(model, seed, config.init_std, config.num_layers, sites)
    torch.set_rng_state(rng_state)
    _cast_floating_params(model, tconfig.params_dtype)
    if torch.cuda.is_available():
        model.cuda(torch.cuda.current_device())
    return model


def _cast_floating_params(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Every floating parameter in `dtype` (megatron's `params_dtype`).

    megatron-core 0.16.1 builds the learned position table as a plain ``torch.nn.Embedding``
    without a dtype, so under ``params_dtype=bf16`` it stayed fp32: word + position embeddings
    then gave fp32 hidden states that met bf16 LayerNorm weights, which CPU and CUDA kernels
    both refuse. Casting in place keeps the parameter objects (and their megatron attributes).
    """
    for param in model.parameters():
        if param.is_floating_point() and param.dtype != dtype:
            param.data = param.data.to(dtype)
