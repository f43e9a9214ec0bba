"""What the training loop needs from an engine: the one interface both engines implement.

The loop (`jobs.loop.trainer`) owns the schedule, data position, evaluation, checkpoints and
divergence; an engine owns forward/backward/update over its parallel layout. Losses and grad
norms come back as plain floats, equal on every rank.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from jobs.engine_specs import engine_spec

__all__ = ["Engine"]


class Engine(Protocol):
    """Implemented by `engine_megatron.MegatronEngine` and `engine_deepspeed.DeepSpeedEngine`."""

    def set_lr(self, lr: float) -> None:
        """Set the peak-scaled learning rate of the next step (the schedule lives in the loop)."""

    def train_step(self, microbatches: list[torch.Tensor]) -> tuple[float, float]:
        """One optimiser step over this rank's micro-batches; (mean loss, grad norm)."""

    def eval_loss(self, windows: torch.Tensor) -> float:
        """Mean loss over validation windows `[num_windows, seq_length + 1]` (no update)."""

    def state_dict(self) -> dict[str, Any]:
        """Model and optimiser state of this rank, for `jobs.checkpoints.checkpoint`."""

    def replicated_over_dp(self) -> tuple[str, ...]:
        """Keys of `state_dict()` equal on every DP rank (written once, by the first)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned on this rank."""


def build_engine(config: Any, model: torch.nn.Module, bf16: bool) -> Engine:
    """The engine `config.engine` names, wrapping `model` (bf16 params and fp32 gradient
    accumulation when `bf16`): built by its registered spec (`jobs.engine_specs`), which
    imports only the chosen engine."""
    return engine_spec(config.engine).build(config, model, bf16)
