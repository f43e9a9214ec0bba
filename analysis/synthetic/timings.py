"""Synthetic time measurements with a known per-arm time ratio, for the time-matched gain's tests.

Each run of a run table gets a time per token (what ``analysis.tables.step_times`` reads from a
real run: the median over its logged steps): the arm's true time per token at its size, times
a log-normal run-to-run factor (the machine's load, a neighbour's job), and with probability
``slow_share`` a further ``slow_factor`` (a run that shared its core for its whole life): noise
the ratio's estimate (a geometric mean with a t interval) does not assume. Both arms draw from
the same noise, so the true ratio of their typical times is exactly ``ratio``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["run_times", "true_time_gain_pct"]


def run_times(
    table: pd.DataFrame,
    ratio: dict[str, float],
    rng_seed: int,
    run_sd: float = 0.05,
    slow_share: float = 0.0,
    slow_factor: float = 1.5,
    device: str = "synthetic device",
) -> dict:
    """``{"source", "device", "rows"}`` as ``analysis.tables.step_times`` builds it: one row per
    run of ``table``; ``ratio``: each arm's true time per token over the baseline's (1 when not
    named); the baseline's time per token is 1e-9 s x its non-embedding parameters."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for run in table.itertuples(index=False):
        truth = 1e-9 * float(run.num_nonembedding_params) * ratio.get(run.variant, 1.0)
        noise = float(np.exp(rng.normal(0.0, run_sd)))
        slow = slow_factor if rng.random() < slow_share else 1.0
        rows.append(
            {
                "run_id": str(run.run_id),
                "variant": run.variant,
                "size": str(run.size),
                "time_per_token_s": truth * noise * slow,
            }
        )
    return {"source": "synthetic step times", "device": device, "rows": rows}


def true_time_gain_pct(base_loss: Callable[[float], float], k0: float, c: float, r: float) -> float:
    """The true gain (%) at matched GPU-hours at the baseline's compute ``c``: a variant worth
    ``k0`` x compute, ``r`` x slower per token at equal FLOPs per token, gets ``c / r``."""
    return 100.0 * (base_loss(c) - base_loss(k0 * c / r)) / base_loss(c)
