"""Synthetic studies with known effects: the fits recover the truth and the verdicts are right."""

from __future__ import annotations

import pytest

from analysis.core import analyse
from analysis.synthetic import Effect, Law, make_study

LAW = Law()
REGIMES = {
    "persists": Effect(k0=1.5, gamma=0.0),
    "fades": Effect(k0=1.5, gamma=-0.15),
    "grows": Effect(k0=1.5, gamma=0.15),
    "none": Effect(k0=1.0, gamma=0.0),
}


def _inside(value: float, ci: list[float]) -> bool:
    return ci[0] <= value <= ci[1]


@pytest.mark.parametrize("expected", list(REGIMES))
def test_verdict_and_recovery(expected):
    table = make_study({"linear": Effect(), "nonlinear": REGIMES[expected]}, law=LAW, rng_seed=3)
    result = analyse(table, baseline="linear", num_resamples=200, seed=1)
    (variant,) = result.verdict["variants"]
    assert variant["verdict"] == expected, variant["reason"]
    truth = REGIMES[expected]
    assert _inside(truth.gamma, variant["gamma_ci95"]), variant["gamma_ci95"]
    assert _inside(truth.k0, variant["k0_ci95"]), variant["k0_ci95"]
    (joint,) = [f for f in result.verdict["fits"] if f["law"] == "k(C)"]
    assert _inside(LAW.E, joint["params"]["E"]["ci95"])
    assert _inside(LAW.alpha, joint["params"]["alpha"]["ci95"])
    (base_c,) = [
        f for f in result.verdict["fits"] if f["law"] == "L(C)" and f["variant"] == "linear"
    ]
    assert _inside(LAW.alpha, base_c["params"]["alpha"]["ci95"])
    # every measured size has a paired gain with a real interval (5 paired seeds)
    gains = variant["gain_pct_by_size"]
    assert len(gains) == 6 and all(g["gain_pct"]["ci95"] is not None for g in gains.values())
