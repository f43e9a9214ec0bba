"""Imperfect synthetic studies whose truth is known: the cases where a naive verdict goes wrong.

Each ``scenario(name, rng_seed)`` builds a run table as ``scaling analyze --runs-csv`` reads it:
5 sizes 1.2M-100M at 20 tokens/param, an LR sweep per (arm, size), seed noise with a component
shared by every run of one size and seed (same data order; sd 0.006) and one per run (sd
0.004), the realistic setup of FACTS. The loss is Chinchilla's L(N, D) (Epoch AI's fit) plus a
penalty for an LR away from the arm's optimum. ``EXPECTED`` says which outcomes are right.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.tables.runs import normalise

SIZES = tuple(float(x) for x in np.geomspace(1.2e6, 1e8, 5))
SHARED_SD, RUN_SD = 0.006, 0.004
GRID = (0.5, 1.0, 2.0)  # LR multiples of the optimum: brackets it
LR_PENALTY = 0.02  # loss added at an LR m x the optimum: LR_PENALTY ln(m)^2
ARMS = ("linear", "nonlinear")
LossFn = Callable[[float, float], float]  # (N, D) -> loss


def chinchilla(n: float, d: float) -> float:
    """Epoch AI's replication of Chinchilla's L(N, D) (Besiroglu et al. 2024)."""
    return 1.817 + 482.0 / n**0.348 + 2085.0 / d**0.366


def at_compute_multiplier(k_of_c: Callable[[float], float]) -> LossFn:
    """The baseline at effective compute k(C) C, spent at the same tokens/param (N, D x sqrt k)."""

    def loss(n: float, d: float) -> float:
        k = k_of_c(6.0 * n * d)
        return chinchilla(n * np.sqrt(k), d * np.sqrt(k))

    return loss


def lr_opt(n: float) -> float:
    """Porian et al. 2024's LR law, the optimum every synthetic arm has."""
    return 0.0047 * (n / 108e6) ** (-1 / 3)


@dataclasses.dataclass(frozen=True)
class Noise:
    """Seed noise of a synthetic study. The defaults are the analysis's own model (a part
    shared by every run of one (size, seed), one per run, both the same at every size); each
    other field adds one way real noise breaks that model, so a misspecification is a
    parameter, not a copy of the generator."""

    shared_sd: float = SHARED_SD
    run_sd: float = RUN_SD
    arm_seed_sd: float = 0.0  # arm x (size, seed): one arm's LRs share a seed's luck (same init)
    arm_all_sizes_sd: float = 0.0  # arm x seed, shared by every size and LR of the arm
    top_run_factor: float = 1.0  # run sd x this at the largest size only
    size_slope: float = 0.0  # both sds x (N / largest N)^-size_slope: noisier small models


# the null and coverage studies' noise: the model's own and the three it does not assume
NOISES = {
    "model": Noise(),
    "arm_seed_across_lrs": Noise(arm_seed_sd=RUN_SD),
    "top_size_3x": Noise(top_run_factor=3.0),
    "arm_seed_across_sizes": Noise(arm_all_sizes_sd=RUN_SD),
}


def ladder(
    arms: dict[str, LossFn],
    rng_seed: int,
    num_seeds: int = 3,
    grids: dict[str, tuple[float, ...]] | None = None,
    budgets: dict[str, tuple[float, ...]] | None = None,
    noise: Noise = Noise(),
    sizes: tuple[float, ...] = SIZES,
    lr_penalty: float = LR_PENALTY,
    lr_skew: float = 1.0,
    shifts: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Rows of a study: every arm x size x budget x LR x seed, all completed. The model's own
    noise comes from ``rng_seed``'s stream; the misspecified parts from a second stream of the
    same seed, so adding one leaves the rest of the draw as it was. ``shifts``: per arm, one
    factor per size (in 2x steps) that moves that size's grid off the optimum."""
    rng = np.random.default_rng(rng_seed)
    extra = np.random.default_rng([rng_seed, 1])
    across = {arm: extra.normal(0.0, noise.arm_all_sizes_sd, num_seeds) for arm in arms}
    rows = []
    for j, n in enumerate(sizes):
        scale = (n / max(sizes)) ** -noise.size_slope
        shared = rng.normal(0.0, scale * noise.shared_sd, size=num_seeds)  # [seeds], all runs
        run_sd = scale * noise.run_sd * (noise.top_run_factor if n == max(sizes) else 1.0)
        for arm, loss_fn in arms.items():
            arm_seed = extra.normal(0.0, noise.arm_seed_sd, num_seeds) + across[arm]  # [seeds]
            for tpp in (budgets or {}).get(arm, (20.0,)):
                d = tpp * n
                step = 0.0 if shifts is None else float(shifts[arm][j])
                for mult in (m * 2.0**step for m in (grids or {}).get(arm, GRID)):
                    lr = mult * lr_opt(n)
                    # above the optimum the loss rises lr_skew times as fast (real LR curves
                    # are steeper towards divergence)
                    slope = lr_penalty * (lr_skew if mult > 1 else 1.0)
                    clean = loss_fn(n, d) + slope * np.log(mult) ** 2
                    own = rng.normal(0.0, run_sd, size=num_seeds)
                    for s in range(num_seeds):
                        rows.append(
                            {
                                "variant": arm,
                                "size": _label(n),
                                "num_nonembedding_params": n,
                                "tokens": d,
                                "flops": 6.0 * n * d,
                                "seed": s,
                                "lr": lr,
                                "final_val_loss": clean + shared[s] + own[s] + arm_seed[s],
                                "status": "completed",
                            }
                        )
    return rows


def noisy_study(
    k0: float,
    noise: Noise,
    rng_seed: int,
    num_seeds: int = 3,
    sizes: tuple[float, ...] = SIZES,
    lr_penalty: float = LR_PENALTY,
) -> pd.DataFrame:
    """linear (Chinchilla) against the same at a constant compute multiplier ``k0`` (1 =
    identical arms), LRs 0.5x/1x/2x the optimum, with ``noise``."""
    arms = {"linear": chinchilla, "nonlinear": at_compute_multiplier(lambda c: k0)}
    rows = ladder(arms, rng_seed, num_seeds, noise=noise, sizes=sizes, lr_penalty=lr_penalty)
    return normalise(pd.DataFrame(rows), "synthetic study")


def off_grid_study(
    k0: float,
    rng_seed: int,
    num_seeds: int = 6,
    lr_penalty: float = 0.08,
    noise: Noise = Noise(),
    lr_skew: float = 1.0,
    per_size: bool = False,
) -> pd.DataFrame:
    """``noisy_study`` whose LR grids miss each arm's optimum: each arm's grid (0.5x/1x/2x) is
    moved by its own factor 2^u, u uniform in (-1/2, 1/2) step (drawn once per study from a
    third stream of ``rng_seed``), so the best grid LR sits up to half a step from the optimum
    and the grid alone moves the gain by up to ``lr_penalty`` ln(2)^2 / 4 in either direction.
    ``lr_skew``: the loss rises that many times faster above the optimum than below (real LR
    curves are steeper towards divergence). ``per_size``: one u per (arm, size) instead (grids
    set per size, or an LR law whose exponent is off). With one u per arm the grid's error in
    the gain is one loss gap at every size, which a k(C) fit reads as a trend."""
    u = np.random.default_rng([rng_seed, 3]).uniform(-0.5, 0.5, size=2)[:, None]
    if per_size:
        u = np.random.default_rng([rng_seed, 4]).uniform(-0.5, 0.5, size=(2, len(SIZES)))
    shifts = {arm: np.broadcast_to(u[a], len(SIZES)) for a, arm in enumerate(ARMS)}
    arms = {"linear": chinchilla, "nonlinear": at_compute_multiplier(lambda c: k0)}
    rows = ladder(
        arms, rng_seed, num_seeds, noise=noise, lr_penalty=lr_penalty, lr_skew=lr_skew,
        shifts=shifts,
    )  # fmt: skip
    return normalise(pd.DataFrame(rows), "synthetic study, LR grids off the optimum")


def true_gain_pct(k0: float, n: float) -> float:
    """The true top gain of ``noisy_study`` at size ``n`` (20 tokens/param), in %."""
    base = chinchilla(n, 20.0 * n)
    return 100.0 * (base - at_compute_multiplier(lambda c: k0)(n, 20.0 * n)) / base


def _label(n: float) -> str:
    return f"{n / 1e6:.3g}M"


def _diverge_above_optimum(rows: list[dict], rng: np.random.Generator) -> list[dict]:
    """The baseline at 2x its optimal LR: 3 of 4 seeds diverge; the survivor is lucky (its loss
    below every other run of that size), so choosing on survivors would pick it."""
    out = []
    for row in rows:
        if row["variant"] == "linear" and np.isclose(
            row["lr"], 2.0 * lr_opt(row["num_nonembedding_params"])
        ):
            if row["seed"] != 0:
                row = {**row, "status": "diverged", "final_val_loss": float("nan")}
            else:
                row = {**row, "final_val_loss": row["final_val_loss"] - 0.08 - rng.uniform(0, 0.02)}
        out.append(row)
    return out


def scenario(name: str, rng_seed: int) -> pd.DataFrame:
    """One of the imperfect studies (see ``EXPECTED``), with its own noise draw."""
    base = {"linear": chinchilla}
    if name == "smaller_variant":  # = baseline at 0.67x parameters: worse everywhere
        rows = ladder({**base, "nonlinear": lambda n, d: chinchilla(0.67 * n, d)}, rng_seed)
    elif name == "worse_but_steeper":  # k < 1 at every measured size, gamma = +0.15
        c_top = 6.0 * 20.0 * SIZES[-1] ** 2
        k = at_compute_multiplier(lambda c: 0.5 * (c / c_top) ** 0.15)
        rows = ladder({**base, "nonlinear": k}, rng_seed)
    elif name == "baseline_lr_edge":  # identical arms; the baseline's grid stops below its best
        grids = {"linear": (0.125, 0.25, 0.5), "nonlinear": GRID}
        rows = ladder({**base, "nonlinear": chinchilla}, rng_seed, grids=grids)
    elif name == "lucky_survivor":  # a real constant gain (k = 1.5); the baseline's 2x LR
        gain = at_compute_multiplier(lambda c: 1.5)
        grids = {"linear": (0.25, 0.5, 1.0, 2.0, 4.0), "nonlinear": (0.25, 0.5, 1.0, 2.0, 4.0)}
        rows = ladder({**base, "nonlinear": gain}, rng_seed, num_seeds=4, grids=grids)
        rows = _diverge_above_optimum(rows, np.random.default_rng(rng_seed + 1))
        # above 2x the baseline diverges on every seed
        rows = [
            {**r, "status": "diverged", "final_val_loss": float("nan")}
            if r["variant"] == "linear" and r["lr"] > 3.0 * lr_opt(r["num_nonembedding_params"])
            else r
            for r in rows
        ]
    elif name == "unmatched_budget":  # identical arms at 20 tokens/param; variant also at 40
        budgets = {"nonlinear": (20.0, 40.0)}
        rows = ladder({**base, "nonlinear": chinchilla}, rng_seed, budgets=budgets)
    else:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(EXPECTED)}")
    return normalise(pd.DataFrame(rows), f"scenario {name}")


# name -> the outcomes that are right for it
EXPECTED = {
    "smaller_variant": {"hurts"},
    "worse_but_steeper": {"hurts", "undetected", "inconclusive"},  # never grows / persists
    "baseline_lr_edge": {"inconclusive"},
    "lucky_survivor": {"persists"},
    "unmatched_budget": {"none", "undetected"},  # identical arms: equivalence, or unresolved
}


def compute_law_study(
    k0: float,
    gamma: float,
    rng_seed: int,
    num_seeds: int = 3,
    sizes: tuple[float, ...] = SIZES,
    run_sd: float = RUN_SD,
) -> pd.DataFrame:
    """The coverage setup (FACTS): ``L_b(C) = 2 + 79 C^-0.1`` at D = 20 N, the variant at
    ``k(C) C`` with ``k = k0 (C / c_ref)^gamma`` (c_ref = geometric mean of the baseline's C,
    as the analysis defines it), one LR per cell, shared sd 0.006 and per-run sd ``run_sd``."""
    c_ref = float(np.exp(np.log([120.0 * n * n for n in sizes]).mean()))
    k_of = lambda n, c: k0 * (c / c_ref) ** gamma  # noqa: E731 - the variant's k(C)
    return law_study(k_of, rng_seed, num_seeds, sizes, run_sd, "coverage study")


def law_study(
    k_of: Callable[[float, float], float],
    rng_seed: int,
    num_seeds: int,
    sizes: tuple[float, ...],
    run_sd: float = RUN_SD,
    what: str = "synthetic study",
) -> pd.DataFrame:
    """``L_b(C) = 2 + 79 C^-0.1`` at D = 20 N (C = 120 N^2) and the variant at ``k_of(n, c) C``,
    one LR per cell, a part shared by every run of one (size, seed) (sd 0.006) and one per run
    (sd ``run_sd``). Draws per size: the shared parts, then each arm's own (baseline first)."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for n in sizes:
        c = 120.0 * n * n  # 6 N D at D = 20 N
        shared = rng.normal(0.0, SHARED_SD, size=num_seeds)  # [seeds], both arms
        for arm, k in (("linear", 1.0), ("nonlinear", k_of(n, c))):
            own = rng.normal(0.0, run_sd, size=num_seeds)  # [seeds]
            clean = 2.0 + 79.0 * (k * c) ** -0.1
            for s in range(num_seeds):
                rows.append(
                    {
                        "variant": arm,
                        "size": _label(n),
                        "num_nonembedding_params": n,
                        "tokens": 20.0 * n,
                        "flops": c,
                        "seed": s,
                        "final_val_loss": clean + shared[s] + own[s],
                    }
                )
    return normalise(pd.DataFrame(rows), what)
