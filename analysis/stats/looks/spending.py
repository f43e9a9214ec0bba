"""Alpha spending for group-sequential looks: each look's critical z and nominal level.

**Spending** (Lan & DeMets 1983, the O'Brien-Fleming-type function): by information fraction
``t`` the design has spent ``alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``; ``alpha(1) =
alpha``. Early looks spend almost nothing (a claim needs overwhelming evidence on few seeds),
the last look is tested at nearly the fixed design's level.

**Boundaries.** The statistics of looks at fractions ``t_1 < ... < t_K`` are jointly those of
a Brownian motion, ``corr(Z_i, Z_j) = sqrt(t_i / t_j)`` (Jennison & Turnbull 2000, *Group
Sequential Methods*, ch. 3). Look k's critical ``z_k`` solves ``P(|Z_1| < z_1, ..., |Z_{k-1}| <
z_{k-1}, |Z_k| >= z_k) = alpha(t_k) - alpha(t_{k-1})``, computed by the numerical recursion of
Armitage, McPherson & Rowe (1969) on the score ``S_k = Z_k sqrt(t_k)`` (independent normal
increments): deterministic, unlike a quasi-Monte-Carlo normal CDF. Its nominal two-sided level
``2 (1 - Phi(z_k))`` replaces the verdict's 5% at that look: the family-wise level of every
claim (weighted Holm over sizes, Holm over variants) and the level of the equivalence interval
(``none``). Intervals at these levels are repeated confidence intervals (Jennison & Turnbull
1989): they hold their coverage jointly over every look, so a claim or an equivalence read off
any look keeps its error rate.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, stats

_GRID = 1001  # Simpson points over each look's continuation interval (odd)


def obf_spending(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending: ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``."""
    if t <= 0:
        return 0.0
    return float(2.0 * stats.norm.sf(stats.norm.isf(alpha / 2) / math.sqrt(min(t, 1.0))))


@dataclasses.dataclass(frozen=True)
class Boundary:
    look: int  # 1-based
    info_fraction: float
    z: float  # reject at this look when |Z| >= z
    level: float  # the nominal two-sided level 2 (1 - Phi(z)) the verdict is run at
    spent: float  # alpha(t): spent by this look, all looks together


def _simpson(num: int, half: float) -> np.ndarray:
    w = np.ones(num)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * (2.0 * half / (num - 1)) / 3.0


def spending_boundaries(info_fractions: Sequence[float], alpha: float) -> list[Boundary]:
    """Each look's critical z and nominal two-sided level under O'Brien-Fleming-type spending,
    for looks at ``info_fractions`` (increasing, in (0, 1]; 1 = the planned maximum).

    Recursion on the score ``S = Z sqrt(t)``: ``dens`` is the density of ``S_{k-1}`` on the
    paths that have not stopped, on a grid over ``[-z sqrt(t), z sqrt(t)]``; the chance of
    stopping at look k is its integral against the normal tails of the increment
    ``N(0, t_k - t_{k-1})``, and ``z_k`` makes that chance the spending's increment."""
    return list(_boundaries(tuple(float(x) for x in info_fractions), float(alpha)))


@functools.lru_cache(maxsize=256)
def _boundaries(t: tuple[float, ...], alpha: float) -> tuple[Boundary, ...]:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha {alpha} must lie in (0, 1)")
    if (
        not t
        or t[0] <= 0
        or t[-1] > 1.0 + 1e-12
        or any(b <= a for a, b in zip(t, t[1:], strict=False))
    ):
        raise ValueError(f"information fractions {t} must increase within (0, 1]")
    out: list[Boundary] = []
    grid = mass = None
    for k, tk in enumerate(t):
        spent = obf_spending(tk, alpha)
        increment = spent - (out[-1].spent if out else 0.0)
        if k == 0:
            z = float(stats.norm.isf(increment / 2))
        else:
            sd = math.sqrt(tk - t[k - 1])

            def stop_chance(z: float, tk=tk, sd=sd, grid=grid, mass=mass) -> float:
                b = z * math.sqrt(tk)
                tails = stats.norm.sf((b - grid) / sd) + stats.norm.cdf((-b - grid) / sd)
                return float(mass @ tails)

            z = float(optimize.brentq(lambda z, i=increment: stop_chance(z) - i, 1e-6, 40.0))
        half = z * math.sqrt(tk)
        new_grid = np.linspace(-half, half, _GRID)
        if k == 0:
            dens = stats.norm.pdf(new_grid, scale=math.sqrt(tk))
        else:
            step = (new_grid[:, None] - grid[None, :]) / sd  # [new, old]
            dens = stats.norm.pdf(step) @ mass / sd
        grid, mass = new_grid, dens * _simpson(_GRID, half)
        out.append(Boundary(k + 1, tk, z, float(2.0 * stats.norm.sf(z)), spent))
    return tuple(out)
