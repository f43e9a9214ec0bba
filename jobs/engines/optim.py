"""AdamW parameter groups and the learning-rate schedules (cosine-to-floor and WSD).

The schedule is a pure function of the step, so resuming needs only the step number and the
same config: there is no scheduler object whose state could drift from the checkpoint.
"""

from __future__ import annotations

import math

import torch

from jobs.config import OptimizerConfig, ScheduleConfig

__all__ = ["param_groups", "build_adamw", "apply_wd_mult", "lr_at"]


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decay on 2-D (and higher) weights, none on gains, biases, 1-D params.

    The paper's recipe (nanoGPT): `weight_decay` on matrices and embeddings only.
    """
    decay, no_decay = [], []
    for param in model.parameters():
        if not param.requires_grad:
            continue
        (decay if param.dim() >= 2 else no_decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def apply_wd_mult(groups: list[dict], weight_decay: float) -> None:
    """Give each of megatron's optimizer groups the decay `weight_decay x wd_mult`, in place.

    megatron-core marks gains and biases (1-D) `wd_mult=0` but builds AdamW with the full
    `weight_decay` in every group; only its `OptimizerParamScheduler`, not used here (the
    schedule is `lr_at`), applies `wd_mult`. Afterwards the GPU path decays exactly the
    parameters `param_groups` decays on the CPU path.
    """
    for group in groups:
        group["weight_decay"] = weight_decay * group.get("wd_mult", 1.0)


def build_adamw(model: torch.nn.Module, config: OptimizerConfig) -> torch.optim.AdamW:
    """torch AdamW (non-fused, deterministic on CPU) over this rank's parameters."""
    return torch.optim.AdamW(
        param_groups(model, config.weight_decay),
        lr=config.lr,
        betas=(config.beta1, config.beta2),
        eps=config.eps,
        foreach=False,
    )


def _decay(progress: float, shape: str) -> float:
    """Multiplier going 1 -> 0 as progress goes 0 -> 1."""
    progress = min(max(progress, 0.0), 1.0)
    if shape == "linear":
        return 1.0 - progress
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if shape == "sqrt":  # 1 - sqrt: the cooldown Hägele et al. found best
        return 1.0 - math.sqrt(progress)
    raise AssertionError(f"unknown decay shape {shape}")


def lr_at(step: int, total_steps: int, peak_lr: float, schedule: ScheduleConfig) -> float:
    """Learning rate for optimiser step `step` (0-based) of `total_steps`.

    Warmup: `peak * (step + 1) / warmup` so step 0 does not waste a step at lr 0 (the reference
    train.py divides by `warmup + 1` instead: `schedule.warmup_divisor: steps_plus_one`).
    Then cosine or WSD down to `min_lr_ratio * peak`, reached at the last step.
    """
    floor = schedule.min_lr_ratio * peak_lr
    warmup = schedule.warmup_steps
    if step < warmup:
        return peak_lr * (step + 1) / (warmup + schedule.warmup_offset)
    if schedule.kind == "constant":
        return peak_lr
    last = max(total_steps - 1, 1)
    if schedule.kind == "cosine":
        progress = (step - warmup) / max(last - warmup, 1)
        return floor + (peak_lr - floor) * _decay(progress, "cosine")
    decay_start = schedule.decay_start(total_steps)
    if step < decay_start:
        return peak_lr
    progress = (step - decay_start + 1) / max(total_steps - decay_start, 1)
    return floor + (peak_lr - floor) * _decay(progress, schedule.decay_shape)
