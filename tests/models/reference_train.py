"""The paper's training step (its nanoGPT-fork `train.py`) written from its recipe in plain PyTorch.

Only for tests: the independent loop the project's trainer must follow step for step from the
same weights and batches (FACTS.md, "The research question"):
- AdamW groups by `p.dim() >= 2` (matrices and embeddings decayed, the tied wte = lm_head once;
  norm gains not), default eps, non-fused on CPU;
- warmup `lr * (it + 1) / (warmup_iters + 1)`, then cosine from `warmup_iters` to
  `lr_decay_iters` down to `min_lr`, `min_lr` after;
- each micro-batch's mean token loss divided by the accumulation steps, backward per micro-batch;
- the gradient clipped to `grad_clip` once, after the last micro-batch, then one step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Recipe:
    """The train.py settings a trajectory depends on (its names)."""

    learning_rate: float
    min_lr: float
    warmup_iters: int
    lr_decay_iters: int
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0


def get_lr(it: int, recipe: Recipe) -> float:
    """train.py's schedule: linear warmup over warmup_iters + 1, cosine to min_lr, then min_lr."""
    if it < recipe.warmup_iters:
        return recipe.learning_rate * (it + 1) / (recipe.warmup_iters + 1)
    if it > recipe.lr_decay_iters:
        return recipe.min_lr
    ratio = (it - recipe.warmup_iters) / (recipe.lr_decay_iters - recipe.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return recipe.min_lr + coeff * (recipe.learning_rate - recipe.min_lr)


def configure_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.AdamW:
    """Decay every parameter of 2 or more dimensions, none of the rest (named parameters are
    de-duplicated, so the tied embedding is one tensor)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": recipe.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=recipe.learning_rate, betas=(recipe.beta1, recipe.beta2), foreach=False
    )


def train_steps(
    model: nn.Module, steps: list[list[torch.Tensor]], recipe: Recipe
) -> tuple[list[float], list[float]]:
    """Train `model` in place on `steps` (each a list of micro-batches [b, seq + 1] in order);
    (mean loss of each step over its micro-batches, grad norm before clipping)."""
    optimizer = configure_optimizer(model, recipe)
    losses, norms = [], []
    for it, micro_batches in enumerate(steps):
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it, recipe)
        accum = len(micro_batches)
        total = 0.0
        for window in micro_batches:
            x, y = window[:, :-1], window[:, 1:]
            logits = model(x)  # (B, T, vocab)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            (loss / accum).backward()
            total += loss.item() / accum
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        norms.append(float(norm))
    return losses, norms
