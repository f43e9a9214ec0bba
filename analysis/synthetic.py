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

from analysis.table import normalise, size_label


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
                    rows.append(
                        {
                            "variant": variant,
                            "size": size_label(n),
                            "num_nonembedding_params": n,
                            "tokens": tokens,
                            "flops": compute,
                            "seed": s,
                            "lr": np.nan if lr is None else lr,
                            "final_val_loss": clean + penalty + shared[s] + own[s],
                            "status": "completed",
                        }
                    )
    return normalise(pd.DataFrame(rows), "synthetic study")
