"""Import checkpoints of the paper's reference implementation (a nanoGPT fork); full logits.

The reference keeps the softmax scale halved (``1 / (2 sqrt(hd))``) for its ``identity`` and
``residual_gelu`` query modes instead of dividing the query by 2; our query modules divide by 2
and keep megatron's ``1 / sqrt(hd)``, the same function, so the weights map over unchanged.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import torch

from models.config import ModelConfig, ParallelConfig

# reference query_mode -> our query_variant
QUERY_MODES = {"original": "linear", "identity": "identity", "residual_gelu": "nonlinear"}
_REQUIRED_ARGS = ("n_layer", "num_heads", "n_embd", "block_size", "vocab_size", "query_mode")


class ImportedModel(NamedTuple):
    """What ``import_nanogpt`` returns: the megatron model and the config it was built from."""

    model: torch.nn.Module
    config: ModelConfig


def nanogpt_config(model_args: dict[str, Any]) -> ModelConfig:
    """Our ``ModelConfig`` for a reference ``model_args``; ValueError names an unsupported field."""
    missing = [k for k in _REQUIRED_ARGS if k not in model_args]
    if missing:
        raise ValueError(f"checkpoint model_args: missing {', '.join(missing)}")
    mode = model_args["query_mode"]
    if mode not in QUERY_MODES:
        raise ValueError(
            f"checkpoint model_args.query_mode: {mode!r} cannot be imported; "
            f"supported: {', '.join(QUERY_MODES)}"
        )
    if model_args.get("bias"):
        raise ValueError("checkpoint model_args.bias: True, but these models have no biases")
    d, heads = int(model_args["n_embd"]), int(model_args["num_heads"])
    head_size = model_args.get("head_size")
    head_dim = None if head_size in (None, d // heads) else int(head_size)
    hd = head_dim or d // heads
    scale = model_args.get("scale")
    if scale is not None and not isinstance(scale, bool):
        # Accept the softmax scale itself or its ratio to 1/sqrt(hd); anything else is a model
        # we do not implement.
        ratio = 1.0 if mode == "original" else 0.5
        expected = ratio / math.sqrt(hd)
        if not (math.isclose(scale, expected, rel_tol=1e-6) or math.isclose(scale, ratio)):
            raise ValueError(
                f"checkpoint model_args.scale: {scale!r}; query_mode {mode!r} needs softmax "
                f"scale {expected:.6g} (= {ratio} / sqrt(head_size))"
            )
    config = ModelConfig(
        vocab_size=int(model_args["vocab_size"]),
        seq_length=int(model_args["block_size"]),
        num_layers=int(model_args["n_layer"]),
        hidden_size=d,
        num_attention_heads=heads,
        ffn_hidden_size=model_args.get("mlp_hidden_size"),
        query_variant=QUERY_MODES[mode],
        tie_embeddings=bool(model_args.get("tie_weights", True)),
        head_dim=head_dim,
    )
    config.validate()
    return config


def _interleave_heads(weight: torch.Tensor, num_heads: int, parts: int) -> torch.Tensor:
    """[parts * H * hn, d] stacked as (Q;K;V) -> megatron's per-head [H, parts, hn, d] layout."""
    d_in = weight.shape[1]
    return weight.view(parts, num_heads, -1, d_in).transpose(0, 1).reshape(-1, d_in)


def _megatron_state(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Reference state dict -> our parameter names and layouts."""
    out: dict[str, torch.Tensor] = {}
    heads = config.num_attention_heads
    for key, value in state.items():
        parts = key.split(".")
        if key == "transformer.wte.weight":
            out["embedding.word_embeddings.weight"] = value
        elif key == "transformer.wpe.weight":
            out["embedding.position_embeddings.weight"] = value
        elif key == "transformer.ln_f.weight":
            out["decoder.final_layernorm.weight"] = value
        elif key == "lm_head.weight":
            if not config.tie_embeddings:
                out["output_layer.weight"] = value
            elif not torch.equal(value, state.get("transformer.wte.weight", value)):
                raise ValueError("checkpoint: tie_weights is set but lm_head != wte")
        elif parts[:2] == ["transformer", "h"] and len(parts) >= 4:
            prefix = f"decoder.layers.{parts[2]}."
            local = ".".join(parts[3:])
            if local == "attn.c_attn.weight":
                if value.shape[0] == 3 * config.hidden_size:  # Q;K;V fused, else K;V
                    out[prefix + "self_attention.linear_qkv.weight"] = _interleave_heads(
                        value, heads, 3
                    )
                else:
                    out[prefix + "self_attention.linear_kv.weight"] = _interleave_heads(
                        value, heads, 2
                    )
            elif local in _LAYER_KEYS:
                out[prefix + _LAYER_KEYS[local]] = value
            else:
                raise ValueError(f"checkpoint model: unexpected key {key!r}")
        else:
            raise ValueError(f"checkpoint model: unexpected key {key!r}")
    return out


_LAYER_KEYS = {
    "ln_1.weight": "input_layernorm.weight",
    "attn.c_proj.weight": "self_attention.linear_proj.weight",
    "attn.residual_rmsnorm_input.weight": "self_attention.query.rmsnorm_in.weight",
    "attn.residual_in.weight": "self_attention.query.linear_in.weight",
    "attn.residual_out.weight": "self_attention.query.linear_out.weight",
    "attn.residual_layernorm_output.weight": "self_attention.query.layernorm_out.weight",
    "ln_2.weight": "pre_mlp_layernorm.weight",
    "mlp.c_fc.weight": "mlp.linear_fc1.weight",
    "mlp.c_proj.weight": "mlp.linear_fc2.weight",
}


def _load_checkpoint(checkpoint: dict | str | Path) -> dict:
    if isinstance(checkpoint, str | Path):
        path = Path(checkpoint)
        if not path.is_file():
            raise ValueError(f"checkpoint: {path} is not a file; pass a reference .pt checkpoint")
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(checkpoint, dict) or not {"model", "model_args"} <= set(checkpoint):
        raise ValueError("checkpoint: expected a dict with 'model' and 'model_args'")
    return checkpoint


def import_nanogpt(checkpoint: dict | str | Path) -> ImportedModel:
    """A single-process megatron model holding a reference checkpoint's weights, + its config.

    ``checkpoint`` is the reference's saved dict (``model``: state dict, keys possibly prefixed
    ``_orig_mod.`` by torch.compile; ``model_args``: its config) or a path to it.
    """
    # lazy: megatron-core loads only when a reference checkpoint is imported
    from models import runtime
    from models.build import build_gpt  # lazy, as above

    checkpoint = _load_checkpoint(checkpoint)
    config = nanogpt_config(checkpoint["model_args"])
    parallel = runtime.ensure_parallel(None)
    if parallel.tensor_parallel != 1 or parallel.pipeline_parallel != 1:
        raise ValueError("import_nanogpt: needs tensor_parallel = pipeline_parallel = 1")
    model = build_gpt(config, ParallelConfig(data_parallel=parallel.data_parallel))
    _copy_weights(model, checkpoint, config)
    return ImportedModel(model, config)


# The fields a run's model must share with a reference checkpoint it starts from.
_SAME_SHAPE = (
    "vocab_size", "seq_length", "num_layers", "hidden_size", "num_attention_heads",
    "ffn_size", "query_variant", "tie_embeddings", "kv_channels",
)  # fmt: skip


def load_weights(model: torch.nn.Module, checkpoint: str | Path, config: ModelConfig) -> None:
    """Copy a reference checkpoint's weights into ``model`` (built from ``config``, one stage,
    unsharded) in place: a run's `init_weights`, starting where the reference's train.py starts.
    ValueError names the first model field the checkpoint's ``model_args`` disagree on."""
    loaded = _load_checkpoint(checkpoint)
    theirs = nanogpt_config(loaded["model_args"])
    for name in _SAME_SHAPE:
        mine, other = getattr(config, name), getattr(theirs, name)
        if mine != other:
            raise ValueError(
                f"init_weights: {checkpoint} has model.{name} {other!r}, the run's model "
                f"{mine!r}; train the shape the checkpoint holds"
            )
    _copy_weights(model, loaded, config)


def _copy_weights(model: torch.nn.Module, checkpoint: dict, config: ModelConfig) -> None:
    """The reference state dict, renamed and re-laid out, copied into every parameter."""
    state = {k.removeprefix("_orig_mod."): v for k, v in checkpoint["model"].items()}
    mapped = _megatron_state(state, config)
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(mapped))
    unexpected = sorted(set(mapped) - set(params))
    if missing or unexpected:
        raise ValueError(
            f"checkpoint model: does not match model_args.query_mode "
            f"{checkpoint['model_args']['query_mode']!r} "
            f"(missing {missing[:4]}, unexpected {unexpected[:4]})"
        )
    with torch.no_grad():
        for name, param in params.items():
            value = mapped[name]
            if value.shape != param.shape:
                raise ValueError(
                    f"checkpoint model: {name} has shape {tuple(value.shape)}, "
                    f"expected {tuple(param.shape)} from model_args"
                )
            param.copy_(value.to(param.dtype))


def logits(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Full-vocabulary logits ``[batch, seq, vocab]`` (float32) of ``tokens`` ``[batch, seq]``.

    Runs the model in eval mode without gradients; needs the whole model in this process
    (pipeline_parallel = 1); with tensor parallelism the vocab slices are gathered.
    """
    from megatron.core import tensor_parallel

    if not (getattr(model, "pre_process", True) and getattr(model, "post_process", True)):
        raise ValueError("logits: model is one pipeline stage; needs pipeline_parallel = 1")
    if tokens.dim() != 2:
        raise ValueError(f"tokens: expected [batch, seq], got shape {tuple(tokens.shape)}")
    device = next(model.parameters()).device
    tokens = tokens.to(device=device, dtype=torch.long)
    positions = torch.arange(tokens.shape[1], device=device).unsqueeze(0).expand_as(tokens)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(tokens, positions, None)  # [b, s, vocab / tp]
            out = tensor_parallel.gather_from_tensor_model_parallel_region(out)
    finally:
        model.train(was_training)
    return out.float()
