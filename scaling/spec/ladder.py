"""The size ladder and the hyper-parameter laws: one dial (the size) sets everything else.

A size is a string like ``"2M"``, ``"124M"`` or ``"1.3B"``: the *nominal* number of non-embedding
weights of the linear GPT-2 block stack, ``12 * num_layers * hidden_size**2`` (attention 4d², MLP
8d² per layer; norms and embeddings left out, as in Kaplan et al. 2020). The rule that maps it to
a shape (`shape_for_size`):

- heads have a fixed width (`head_dim`, 64 like GPT-2/3), so ``hidden = head_dim * num_heads``;
- depth and width keep a fixed aspect ratio ``hidden / layers ≈ aspect_ratio`` (64: GPT-3 small is
  768/12) within a factor of 1.5 either way;
- among those shapes, take the one whose ``12 L d²`` is closest to the size in log space, ties
  broken by the aspect ratio closest to the target.

Explicit shapes in the study spec override the rule for a size. The exact parameter count of each
arm (identity has no W_Q, wider_mlp more MLP, ...) comes from `models.accounting`; the nominal
count here only names the rung and sets the shared token budget, batch size and learning rate.

The laws are Porian et al. 2024 ("Resolving discrepancies in compute-optimal scaling"):
``lr = 0.0047 (N / 108e6)^(-1/3)``, batch ``160 (N / 108e6)^(2/3)`` sequences of 2048 tokens,
AdamW beta2 0.99 below 0.5M tokens per batch else 0.95, warmup = N tokens.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from foundation.contract import parse_size
from models.catalog.variants import did_you_mean, entry_point_names, load_variant

ANY = "*"  # key in per-size / per-variant tables that applies to every size / variant

__all__ = [
    "ARMS",
    "Shape",
    "parse_size",
    "nominal_params",
    "shape_for_size",
    "arm_overrides",
    "resolve_arm",
    "porian_lr",
    "porian_batch_tokens",
    "porian_beta2",
    "porian_warmup_tokens",
]

ASPECT_TOLERANCE = 1.5  # allowed factor between hidden/layers and the target aspect ratio

# The arms of a study, each a set of ModelConfig overrides on the shared shape: one table, so the
# intervention of every arm is visible in one place. `wider_mlp` is the paper's parameter-matched
# control: the linear model with an MLP of 4.75 d (+12.5% non-embedding weights, as many as the
# nonlinear query's extra capacity would buy).
ARMS: dict[str, dict] = {
    "linear": {"query_variant": "linear"},
    "nonlinear": {"query_variant": "nonlinear"},  # Q = (X + f(X)) / 2, arXiv 2603.13381
    "identity": {"query_variant": "identity"},  # Q = X
    "residual_linear": {"query_variant": "residual_linear"},  # nonlinear without the GELU
    "linear_qknorm": {"query_variant": "linear", "qk_norm": True},
    "wider_mlp": {"query_variant": "linear", "ffn_multiplier": 4.75},
}


@dataclass(frozen=True)
class Shape:
    """A transformer block stack's shape."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int


def nominal_params(shape: Shape) -> int:
    """Non-embedding weights of the linear GPT-2 block stack: 12 L d² (4d² attention, 8d² MLP)."""
    return 12 * shape.num_layers * shape.hidden_size**2


@functools.lru_cache(maxsize=256)
def shape_for_size(size: str, aspect_ratio: float = 64.0, head_dim: int = 64) -> Shape:
    """The ladder rule (module docstring): closest 12 L d² with d = head_dim·h, d/L ≈ aspect."""
    target = parse_size(size)
    best: tuple[float, float, Shape] | None = None
    for layers in range(1, 257):
        for heads in range(1, 513):
            hidden = heads * head_dim
            ratio = hidden / layers
            if not aspect_ratio / ASPECT_TOLERANCE <= ratio <= aspect_ratio * ASPECT_TOLERANCE:
                continue
            shape = Shape(layers, hidden, heads)
            key = (
                round(abs(math.log(nominal_params(shape) / target)), 9),
                abs(math.log(ratio / aspect_ratio)),
                shape,
            )
            if best is None or key[:2] < best[:2]:
                best = key
    if best is None:
        raise ValueError(
            f"no shape with head_dim {head_dim} and aspect ratio {aspect_ratio} fits size {size}; "
            "give an explicit shape for it under ladder.shapes"
        )
    return best[2]


def resolve_arm(entry: str) -> tuple[str, dict]:
    """(arm name, ModelConfig overrides) of one entry of a study's `variants`.

    An entry is a built-in arm (`ARMS`) or the user's own query variant: ``"module:function"``
    or an entry-point name (`models.catalog.variants`), whose arm name is the variant's `name`.
    Raises ValueError naming the choices.
    """
    if entry in ARMS:
        return entry, dict(ARMS[entry])

    registered = entry_point_names()
    if ":" not in entry and entry not in registered:
        known = [*ARMS, *registered]
        raise ValueError(
            f"unknown variant {entry!r}{did_you_mean(entry, known)}; valid: {', '.join(known)}, "
            "or a query variant of your own as 'module:function' (docs/variants.md)"
        )
    variant = load_variant(entry)  # an import failure is reported as itself
    return variant.name, {"query_variant": entry}


def arm_overrides(arm: str, hidden_size: int, tensor_parallel: int = 1) -> dict:
    """ModelConfig fields for `arm` at width `hidden_size` (ffn rounded to a multiple of TP)."""
    overrides = resolve_arm(arm)[1]
    multiplier = overrides.pop("ffn_multiplier", None)
    if multiplier is not None:
        ffn = round(multiplier * hidden_size / tensor_parallel) * tensor_parallel
        overrides["ffn_hidden_size"] = ffn
    return overrides


def porian_lr(num_params: float) -> float:
    """Peak AdamW learning rate for N non-embedding weights (Porian et al. 2024)."""
    return 0.0047 * (num_params / 108e6) ** (-1 / 3)


def porian_batch_tokens(num_params: float) -> float:
    """Tokens per optimiser step: 160 (N/108e6)^(2/3) sequences of 2048 (Porian et al. 2024)."""
    return 160 * 2048 * (num_params / 108e6) ** (2 / 3)


def porian_beta2(tokens_per_step: int) -> float:
    """AdamW beta2: 0.99 for small batches (< 0.5M tokens), else 0.95 (Porian et al. 2024)."""
    return 0.99 if tokens_per_step < 500_000 else 0.95


def porian_warmup_tokens(num_params: float) -> float:
    """Warmup length in tokens: as many tokens as parameters (Porian et al. 2024)."""
    return num_params
