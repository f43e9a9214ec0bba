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
- norm gains: ones; biases (none in this model today): zeros;
- a variant's own parameters: its declared rules (``models.catalog.init_rules``, any shape), drawn
  the
  same way (full tensor from the parameter's generator, then this rank's slice). Without a rule
  its norm gains and matrices get the defaults above; any other shape is an error naming the
  parameter, the variant's file and the fix.

A tied output layer on the last stage (PP > 1) draws from the embedding's name, so it starts
equal to the first stage's embedding without any communication.
"""

from __future__ import annotations

import difflib
import hashlib
import math

import torch

from models.catalog.init_hints import created_at, misspelt_rule, rule_text, suggested_rule
from models.catalog.init_rules import InitRule
from models.catalog.variants import SiteInit

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


def _site_rule(glob: str, sites: list[SiteInit]) -> tuple[SiteInit, str] | None:
    """(site, parameter name inside it) when ``glob`` lies in a variant-owned site."""
    parts = glob.split(".")
    if parts[:2] != ["decoder", "layers"]:
        return None
    in_layer = ".".join(parts[3:])
    for site in sites:
        if not site.site:  # the whole layer
            return site, in_layer
        if in_layer.startswith(site.site + "."):
            return site, in_layer[len(site.site) + 1 :]
    return None


def _draw(rule: InitRule, shape: list[int], gen: torch.Generator, std: float, scaled: float):
    """The full tensor of ``shape`` that ``rule`` gives (float32)."""
    if rule.kind == "constant":
        return torch.full(shape, rule.value, dtype=torch.float32)
    if rule.kind in ("normal", "scaled_normal"):
        sd = scaled if rule.kind == "scaled_normal" else (std if rule.value is None else rule.value)
        return torch.empty(shape, dtype=torch.float32).normal_(0.0, sd, generator=gen)
    full = torch.as_tensor(rule.draw(tuple(shape), gen), dtype=torch.float32)
    if list(full.shape) != shape:
        raise ValueError(f"custom init returned shape {tuple(full.shape)}, not {tuple(shape)}")
    return full


class MissingInitRule(ValueError):
    """A variant's parameter without an init rule; `where`: (file, line) in the user's code
    where the parameter is created, for the build check to point at instead of this file."""

    def __init__(self, message: str, where: tuple[str, int] | None) -> None:
        super().__init__(message)
        self.where = where


def _no_rule(
    model: torch.nn.Module, name: str, shape: tuple[int, ...], found: tuple[SiteInit, str] | None
) -> ValueError:
    """The error for a parameter without a rule: the rule its role calls for (not `zeros()` for
    a temperature), a misspelt rule's near miss, and the user's line that creates it."""
    if found is None:
        return ValueError(f"{name}: no init rule for shape {shape} (a model parameter)")
    site, local = found
    key = site.key_prefix + local
    owner, _, attr = name.rpartition(".")
    where = created_at(model.get_submodule(owner), attr) if owner else None
    at = f" (created at {where[0]}:{where[1]})" if where else ""
    params = {loc for glob in global_names(model).values() if (f := _site_rule(glob, [site]))
              for loc in [f[1]]}  # fmt: skip
    typo = misspelt_rule(local, site.rules, params)
    if typo is not None:
        return MissingInitRule(
            f"{name}: the parameter {local!r} of shape {shape}{at} has no init rule, and "
            f"{site.owner}'s rule {site.key_prefix + typo!r} names no parameter (did you mean "
            f"{key!r}?); rename the rule",
            where,
        )
    rule, why = suggested_rule(local, shape)
    return MissingInitRule(
        f"{name}: the parameter {local!r} of shape {shape}{at} has no init rule; {site.owner} "
        f"must declare one: add init=lambda config: {{{key!r}: {rule_text(rule)}}} ({why}) to "
        "its variant (docs/variants.md)",
        where,
    )


@torch.no_grad()
def initialize_weights(
    model: torch.nn.Module,
    seed: int,
    init_std: float,
    num_layers: int,
    sites: list[SiteInit] | None = None,
) -> None:
    """Overwrite every parameter of ``model`` (this rank's stage and TP slice) from ``seed``.

    ``num_layers`` is the whole model's depth (for the scaled init), not this stage's.
    ``sites``: the rules variants declare for the modules they own (`models.catalog.variants`).
    """
    sites = sites or []
    norm_params = {
        id(p) for m in model.modules() if isinstance(m, _NORMS) for p in m.parameters(False)
    }
    scaled_std = init_std / math.sqrt(2.0 * num_layers)
    used: set[tuple[str, str]] = set()
    for name, glob in global_names(model).items():
        param = model.get_parameter(name)
        found = _site_rule(glob, sites)
        rule = found[0].rules.get(found[1]) if found else None
        if rule is not None:
            used.add((found[0].site, found[1]))
            full = _draw(rule, _full_shape(param), _generator(seed, glob), init_std, scaled_std)
            param.copy_(_tp_slice(full, param))
        elif glob.endswith(".bias"):
            param.zero_()
        elif id(param) in norm_params and param.dim() == 1:
            param.fill_(1.0)
        elif param.dim() == 2:
            std = scaled_std if glob.endswith(_SCALED) else init_std
            full = torch.empty(_full_shape(param), dtype=torch.float32)
            full.normal_(0.0, std, generator=_generator(seed, glob))
            param.copy_(_tp_slice(full, param))
        else:
            raise _no_rule(model, name, tuple(_full_shape(param)), found)
    _check_rules_used(sites, used, model)


def _check_rules_used(sites: list[SiteInit], used: set[tuple[str, str]], model) -> None:
    """A rule that names no parameter is a typo: say so (only where this stage has layers)."""
    layers = list(getattr(getattr(model, "decoder", None), "layers", []))
    if not layers:
        return
    in_layer = [n for n, _ in layers[0].named_parameters()]
    for site in sites:
        for local in site.rules:
            if (site.site, local) not in used:
                names = [
                    n[len(site.site) + 1 :] if site.site else n
                    for n in in_layer
                    if not site.site or n.startswith(site.site + ".")
                ]
                # near miss and list as keys of the variant's init, as the user writes them
                keys = sorted({site.key_prefix + n for n in names})
                close = difflib.get_close_matches(site.key_prefix + local, keys, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"{site.owner}: init rule {site.key_prefix + local!r} names no parameter of "
                    f"{site.site or 'the layer'}"
                    f"{hint}; its parameters: {', '.join(keys) or 'none'}"
                )
