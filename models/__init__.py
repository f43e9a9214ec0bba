"""Megatron-core GPT models with a choice of query projection (linear, identity, nonlinear, ...).

Public API: ``ModelConfig``, ``ParallelConfig``, ``build_gpt``, ``import_nanogpt``, ``logits``;
``models.accounting`` for parameter and FLOP counts; ``models.runtime`` for process groups;
``models.cross_stage`` for a tensor a variant hands from the first pipeline stage to later ones.
Sub-packages:
  catalog  the variant registry, built-in variants, their sites and init rules
Heavy imports (torch, megatron) happen on first use of ``build_gpt``/``import_nanogpt``/``logits``.
"""

from __future__ import annotations

from typing import Any

from foundation.process.megatron_jit import defer_megatron_compile
from models.config import ModelConfig, ParallelConfig  # imports no megatron

defer_megatron_compile()  # before any megatron import: its fused kernels compile on first use

__all__ = ["ModelConfig", "ParallelConfig", "build_gpt", "import_nanogpt", "logits"]

_LAZY = {
    "build_gpt": "models.build",
    "import_nanogpt": "models.nanogpt",
    "logits": "models.nanogpt",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")
