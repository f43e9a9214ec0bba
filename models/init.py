"""Initial weights that depend only on (seed, model config), not on the TP or PP layout.

megatron-core draws weights from one CPU RNG stream in construction order, so a pipeline stage
that builds only layers 2-3 draws them where a one-stage model draws layers 0-1: the same seed
gave different weights under PP. Here every parameter gets its own generator, seeded from the
run seed and the parameter's *global* name (``decoder.layers.<global index>...``), draws its full
(unpartitioned) tensor, and keeps this rank's tensor-parallel slice exactly as megatron's
``_initialize_affine_weight_cpu`` slices it. So a seed gives the same full weights for any TP and
PP size, with the distributions megatron would use:

- matrices and embeddings: N(0, init_std);
- ``linear_proj`` and ``mlp.linear_fc2`` (megatron's ``output_layer_init_method``):
  GPT-2's scaled N(0, init_std / sqrt(2 * num_layers));
- the query bottleneck's W1/W2 (``query.linear_in``/``linear_out``): unscaled N(0, init_std),
  like the reference (FACTS.md);
- norm gains: ones; biases (none in this model today): zeros.

A tied output layer on the last stage (PP > 1) draws from the embedding's name, so it starts
equal to the first stage's embedding without any communication.
"""

from __future__ import annotations

import hashlib
import math

import torch

_NORMS = (torch.nn.LayerNorm, torch.nn.RMSNorm)
_SCALED = ("self_attention.linear_proj.weight", "mlp.linear_fc2.weight")
_EMBEDDING = "embedding.word_embeddings.weight"


def _generator(seed: int, name: str) -> torch.Generator:
    """A CPU generator for one parameter: same (seed, name) -> same stream in any process."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def global_names(model: torch.nn.Module) -> dict[str, str]:
    """Local parameter name -> name in the one-stage model (layers renumbered globally).

    Uses each ``TransformerLayer``'s ``layer_number`` (global, 1-based), so uneven pipeline
    splits are handled too. A tied ``output_layer.weight`` maps to the embedding's name.
    """
    offsets: dict[str, str] = {}
    decoder = getattr(model, "decoder", None)
    if decoder is not None:
        for local, layer in enumerate(decoder.layers):
            offsets[f"decoder.layers.{local}."] = f"decoder.layers.{layer.layer_number - 1}."
    tied = getattr(model, "share_embeddings_and_output_weights", False)
    out = {}
    for name, _ in model.named_parameters():
        glob = name
        for prefix, replacement in offsets.items():
            if name.startswith(prefix):
                glob = replacement + name[len(prefix) :]
                break
        if tied and name == "output_layer.weight":
            glob = _EMBEDDING
        out[name] = glob
    return out


def _tp_slice(full: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``full``, cut as megatron's CPU init cuts it (strided chunks)."""
    if not getattr(param, "tensor_model_parallel", False):
        return full
    from megatron.core import parallel_state

    rank = parallel_state.get_tensor_model_parallel_rank()
    world = parallel_state.get_tensor_model_parallel_world_size()
    dim, stride = param.partition_dim, getattr(param, "partition_stride", 1)
    chunk = param.shape[dim] // stride
    parts = torch.split(full, chunk, dim=dim)[rank::world]
    return torch.cat(parts, dim=dim)


def _full_shape(param: torch.Tensor) -> list[int]:
    shape = list(param.shape)
    if getattr(param, "tensor_model_parallel", False):
        from megatron.core import parallel_state

        shape[param.partition_dim] *= parallel_state.get_tensor_model_parallel_world_size()
    return shape


@torch.no_grad()
def initialize_weights(model: torch.nn.Module, seed: int, init_std: float, num_layers: int) -> None:
    """Overwrite every parameter of ``model`` (this rank's stage and TP slice) from ``seed``.

    ``num_layers`` is the whole model's depth (for the scaled init), not this stage's.
    """
    norm_params = {
        id(p) for m in model.modules() if isinstance(m, _NORMS) for p in m.parameters(False)
    }
    scaled_std = init_std / math.sqrt(2.0 * num_layers)
    for name, glob in global_names(model).items():
        param = model.get_parameter(name)
        if glob.endswith(".bias"):
            param.zero_()
        elif id(param) in norm_params:
            assert param.dim() == 1, name
            param.fill_(1.0)
        else:
            assert param.dim() == 2, f"{name}: no init rule for shape {tuple(param.shape)}"
            std = scaled_std if glob.endswith(_SCALED) else init_std
            full = torch.empty(_full_shape(param), dtype=torch.float32)
            full.normal_(0.0, std, generator=_generator(seed, glob))
            param.copy_(_tp_slice(full, param))
