"""Synthetic studies with known laws: for tests, the benchmark and trying the report out.

The baseline follows ``L_b(C) = E + A C^-alpha`` at ``D = 20 N``, ``C = 6 N D``; a variant is
the baseline at effective compute ``k(C) C`` with ``k(C) = k0 (C / c_ref)^gamma``. Seed noise is
mostly shared by both arms at a seed (same seed = same data order), as in a real paired study,
and grows at small sizes as real seed noise does (FACTS: ~0.002 at 124M, more when small).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.tables.runs import normalise, size_label


@dataclasses.dataclass(frozen=True)
class Law:
    E: float = 2.0
    A: float = 79.0
    alpha: float = 0.1  # in compute


@dataclasses.dataclass(frozen=True)
class Effect:
    k0: float = 1.0  # compute multiplier at c_ref
    gamma: float = 0.0  # k(C) = k0 (C / c_ref)^gamma


DEFAULT_SIZES = (2e6, 5e6, 1e7, 2e7, 5e7, 1e8)


def c_ref_of(sizes: tuple[float, ...]) -> float:
    """Geometric mean of the baseline's compute, the same reference the analysis uses."""
    compute = [120.0 * n * n for n in sizes]
    return float(np.exp(np.mean(np.log(compute))))


def seed_sd(n_params: float) -> float:
    return 0.003 * (n_params / 1e8) ** -0.35


def run_row(
    variant: str, n: float, tokens: float, flops: float, seed: int, lr: float, loss: float
) -> dict:
    """One completed run of a synthetic study, in the run table's columns."""
    return {
        "variant": variant,
        "size": size_label(n),
        "num_nonembedding_params": n,
        "tokens": tokens,
        "flops": flops,
        "seed": seed,
        "lr": lr,
        "final_val_loss": loss,
        "status": "completed",
    }


def make_study(
    effects: dict[str, Effect],
    sizes: tuple[float, ...] = DEFAULT_SIZES,
    num_seeds: int = 5,
    lrs: tuple[float, ...] | None = None,
    law: Law = Law(),
    rng_seed: int = 0,
) -> pd.DataFrame:
    """One row per (variant, size, lr, seed); the baseline is the variant with k = 1."""
    rng = np.random.default_rng(rng_seed)
    c_ref = c_ref_of(sizes)
    rows = []
    for n in sizes:
        tokens = 20.0 * n
        compute = 6.0 * n * tokens
        shared = rng.normal(0.0, 0.8 * seed_sd(n), size=num_seeds)  # data order, both arms
        lr_opt = 0.0047 * (n / 108e6) ** (-1 / 3)  # Porian et al. 2024
        for variant, effect in effects.items():
            k = effect.k0 * (compute / c_ref) ** effect.gamma
            clean = law.E + law.A * (k * compute) ** -law.alpha
            for lr in lrs or (None,):
                penalty = 0.0 if lr is None else 0.02 * np.log(lr / lr_opt) ** 2
                own = rng.normal(0.0, 0.6 * seed_sd(n), size=num_seeds)
                for s in range(num_seeds):
                    loss = clean + penalty + shared[s] + own[s]
                    lr_s = np.nan if lr is None else lr
                    rows.append(run_row(variant, n, tokens, compute, s, lr_s, loss))
    return normalise(pd.DataFrame(rows), "synthetic study")


# --- L(N, D) truths for the token axis ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArmLaw:
    """One arm's truth ``L(N, D) = E + A / N^alpha + B / D^beta`` (Chinchilla's form).

    The defaults give losses of about 4.7 at 2M parameters and 2.6 at 100M (20 tokens/param),
    the range of small GPTs; alpha = beta makes ``L`` along ``D = r N`` a pure power law in C,
    so an arm that differs only in ``B`` is the baseline at a constant compute multiplier.
    """

    E: float = 1.7
    A: float = 200.0
    alpha: float = 0.34
    B: float = 300.0
    beta: float = 0.34

    def loss(self, n: float, d: float) -> float:
        return self.E + self.A * n**-self.alpha + self.B * d**-self.beta


ND_SIZES = (2e6, 5e6, 1e7, 3e7, 1e8)
ND_FRACTIONS = (0.125, 0.25, 0.5, 1.0)  # WSD branch points as fractions of the largest budget


def make_nd_study(
    arms: dict[str, ArmLaw],
    sizes: tuple[float, ...] = ND_SIZES,
    fractions: tuple[float, ...] = ND_FRACTIONS,
    tokens_per_param: float = 20.0,
    num_seeds: int = 3,
    lr_grid: tuple[float, ...] | None = (0.5, 1.0, 2.0),
    trunk_share: float = 0.8,
    rng_seed: int = 0,
) -> pd.DataFrame:
    """One row per (arm, size, budget, lr, seed), as a branched (WSD) study logs them.

    Budgets are ``fraction x tokens_per_param x N``. Noise, per size (``seed_sd``): a part
    shared by every run of one (size, seed) (same data order: sd 0.8 x), and a per-run part
    (sd 0.6 x) of which ``trunk_share`` (as a correlation) is shared by every branch of one
    stable run, i.e. one (arm, size, lr, seed): a branch inherits its trunk's luck. ``lr_grid``
    holds LR multiples of each arm's optimum (penalty ``0.05 ln(m)^2``: 0.024 at 2x, about 1% of
    the loss, well above the noise of a 3-seed mean, so the optimum is bracketed); None = no LR.
    """
    rng = np.random.default_rng(rng_seed)
    rows = []
    branch_share = float(np.sqrt(max(0.0, 1.0 - trunk_share**2)))  # per-run sd = 0.6 sd
    for n in sizes:
        sd = seed_sd(n)
        shared = rng.normal(0.0, 0.8 * sd, size=num_seeds)
        lr_opt = 0.0047 * (n / 108e6) ** (-1 / 3)  # Porian et al. 2024
        for arm, law in arms.items():
            for mult in lr_grid or (None,):
                trunk = rng.normal(0.0, 0.6 * sd * trunk_share, size=num_seeds)
                penalty = 0.0 if mult is None else 0.05 * np.log(mult) ** 2
                for fraction in fractions:
                    tokens = fraction * tokens_per_param * n
                    own = rng.normal(0.0, 0.6 * sd * branch_share, size=num_seeds)
                    clean = law.loss(n, tokens) + penalty
                    for s in range(num_seeds):
                        loss = clean + shared[s] + trunk[s] + own[s]
                        lr = np.nan if mult is None else mult * lr_opt
                        rows.append(run_row(arm, n, tokens, 6.0 * n * tokens, s, lr, loss))
    return normalise(pd.DataFrame(rows), "synthetic L(N, D) study")


def true_gain(base: ArmLaw, variant: ArmLaw, n: float, d: float) -> float:
    """Baseline loss minus variant loss at (N, D), each at its optimal LR (no penalty)."""
    return base.loss(n, d) - variant.loss(n, d)
