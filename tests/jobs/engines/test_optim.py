"""Schedules and parameter groups."""

from __future__ import annotations

import math

import pytest
import torch

from jobs.config import OptimizerConfig, ScheduleConfig
from jobs.engines.optim import build_adamw, lr_at, param_groups


def test_cosine_warms_up_linearly_and_ends_at_the_floor():
    sched = ScheduleConfig(kind="cosine", warmup_steps=10, min_lr_ratio=0.1)
    lrs = [lr_at(s, 100, 1e-3, sched) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10], strict=True))
    assert all(a >= b for a, b in zip(lrs[10:-1], lrs[11:], strict=True))
    assert lrs[-1] == pytest.approx(1e-4)
    mid = 10 + (99 - 10) / 2  # halfway through the decay: halfway between peak and floor
    assert lr_at(math.floor(mid), 100, 1e-3, sched) == pytest.approx(5.5e-4, rel=0.03)


@pytest.mark.parametrize("shape", ["linear", "cosine", "sqrt"])
def test_wsd_is_flat_then_decays_over_the_last_fraction(shape):
    sched = ScheduleConfig(
        kind="wsd", warmup_steps=5, decay_fraction=0.2, decay_shape=shape, min_lr_ratio=0.0
    )
    lrs = [lr_at(s, 100, 2e-3, sched) for s in range(100)]
    assert lrs[4] == pytest.approx(2e-3)
    assert all(lr == pytest.approx(2e-3) for lr in lrs[5:80])
    assert lrs[80] < 2e-3 and lrs[-1] == pytest.approx(0.0)
    assert all(a >= b for a, b in zip(lrs[80:-1], lrs[81:], strict=True))
    if shape == "sqrt":  # 1 - sqrt(t) drops fastest at the start of the cooldown
        assert lrs[80] < lr_at(80, 100, 2e-3, ScheduleConfig("wsd", 5, 0.0, 0.2, "linear"))


def test_weight_decay_only_on_two_dimensional_weights():
    model = torch.nn.Sequential(
        torch.nn.Embedding(10, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 4, bias=True)
    )
    decay, no_decay = param_groups(model, 0.1)
    assert {p.dim() for p in decay["params"]} == {2} and len(decay["params"]) == 2
    assert {p.dim() for p in no_decay["params"]} == {1} and len(no_decay["params"]) == 3
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    opt = build_adamw(model, OptimizerConfig(lr=1e-3, beta2=0.99))
    assert opt.param_groups[0]["betas"] == (0.9, 0.99)
