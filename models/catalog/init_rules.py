"""How a variant initialises its own parameters: rules that `models.init` applies per parameter.

A rule says how to draw a parameter's *full* (unpartitioned) tensor; `models.init` gives it the
parameter's own generator (seeded from the run seed and the parameter's global name) and keeps
this rank's tensor-parallel slice, so a seed gives the same full weights for any TP and PP size,
whatever the shape (1-D, 2-D, 3-D ...). A module's constructor init is always replaced: a rule
is the only way a variant's init reaches its step-0 weights.

Plain data (no torch here): `models.config` and the planners import this module cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["InitRule", "normal", "scaled_normal", "constant", "zeros", "ones", "custom"]


@dataclass(frozen=True)
class InitRule:
    """One parameter's initialisation.

    ``normal``: N(0, value), value None meaning the model's ``init_std``; ``scaled_normal``:
    GPT-2's N(0, init_std / sqrt(2 * num_layers)) of output projections; ``constant``: every
    entry ``value``; ``custom``: ``draw(shape, generator)`` returns the full tensor of that shape
    (a ``torch.Tensor``), drawing any randomness from ``generator`` only.
    """

    kind: Literal["normal", "scaled_normal", "constant", "custom"]
    value: float | None = None
    draw: Callable[[tuple[int, ...], Any], Any] | None = None


def normal(std: float | None = None) -> InitRule:
    """N(0, std); std None: the model's ``init_std`` (what a linear W_Q gets)."""
    return InitRule("normal", std)


def scaled_normal() -> InitRule:
    """GPT-2's scaled init of a projection that writes into the residual stream."""
    return InitRule("scaled_normal")


def constant(value: float) -> InitRule:
    return InitRule("constant", float(value))


def zeros() -> InitRule:
    return constant(0.0)


def ones() -> InitRule:
    return constant(1.0)


def custom(draw: Callable[[tuple[int, ...], Any], Any]) -> InitRule:
    """``draw(shape, generator) -> torch.Tensor`` of the full shape; use only ``generator``."""
    return InitRule("custom", draw=draw)
