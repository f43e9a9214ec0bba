"""LR transfer by a law the study fits itself: each arm's best LR against N, checked per size.

Why: the LR scan at the largest sizes is most of a ladder's cost (3 LRs at 350M and 680M are
~85% of its FLOPs), and the field's evidence says the optimal LR follows a smooth power law in
N (Porian et al. 2024; DeepSeek LLM 2024). A lab cannot take that on trust per architecture: a
variant may shift or bend its own law. So each arm fits its own law from the sizes it has
finished, and every new size tests it.

**The law** (`fit_lr_law`): ``log lr* = a + b log N`` by least squares over the finished sizes'
optima (`estimate_optimum`: the vertex of a parabola in log LR through the winner and its
neighbours; a bare best grid LR is known only to its cell, half a step either side). The
interval at a new N (`LRLaw.interval`) is a percentile bootstrap: each resample moves every
point uniformly within its `resolution`, refits, and adds a normal draw with the residual
scatter of the fit (0 with 2 sizes), itself drawn from its scaled inverse chi-square (a
scatter on 1-3 df is barely known).

**The scan** (`scan_lrs`): the grid LRs whose cell the interval reaches, never fewer than two
(the nearer neighbour of the point prediction joins a lone LR): two LRs and the arm's loss
curvature (`curvature`, from its fully scanned sizes) place the optimum (`two_point_optimum`).
A law whose interval reaches more than `MAX_SCAN` LRs saves nothing: the full grid runs.

**The check** (`check_transfer`): the size's optimum, estimated from its losses, must fall in
a grid cell the law scanned (inside the interval, at grid resolution). Outside, the law is
*broken* for that arm (`plan_arm`): this size's edge is extended as the LR search extends any
edge, every later size gets the full grid, and the report says so. A falsely broken law only
costs the scan the law saved; a law kept when broken would mis-tune.

**Diverged LRs** are censoring, not gaps (`censor`): a size whose LR above the winner diverged
has its optimum below that LR. Its usable losses alone would extrapolate the winner upwards
(`two_point_optimum`) and could place the optimum past an LR the arm cannot train at, pulling
the law up; so `estimate_optimum` takes that LR as a ceiling, and `plan_arm` reads it as the
third item of a finished size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "LRLaw",
    "TransferCheck",
    "fit_lr_law",
    "grid_step_lrs",
    "scan_lrs",
    "curvature",
    "two_point_optimum",
    "check_transfer",
    "estimate_optimum",
    "censor",
    "ArmPlan",
    "plan_arm",
]

LEVEL = 0.9  # a 90% interval: a wider one scans a third LR at every size and saves nothing
NUM_RESAMPLES = 2000
# an optimum placed by a parabola through the winner and its neighbours is known to better than
# its grid cell (half a step); a quarter step either side still covers its seed noise (tests)
RESOLUTION = 0.25
MAX_SCAN = 2  # a law that cannot narrow the scan below the full grid's three LRs is not used


@dataclasses.dataclass(frozen=True)
class LRLaw:
    """One arm's fitted ``log lr* = intercept + slope log N`` with its bootstrap draws."""

    variant: str
    num_params: tuple[float, ...]  # N of the sizes fitted
    best_lrs: tuple[float, ...]  # their best grid LRs
    slope: float
    intercept: float
    scatter: float  # residual sd of log lr* about the law (0 with two sizes)
    step: float  # the grid step (a factor > 1)
    draws: np.ndarray = dataclasses.field(repr=False, compare=False)  # (R, 2) intercept, slope
    level: float = LEVEL
    seed: int = 0

    def predict(self, num_params: float) -> float:
        """The law's point prediction of the best LR at N."""
        return math.exp(self.intercept + self.slope * math.log(num_params))

    def interval(self, num_params: float) -> tuple[float, float]:
        """The `level` prediction interval of the best LR at N (where the optimum should be)."""
        a, b = self.draws.T
        rng = np.random.default_rng(self.seed + 1)
        df = len(self.num_params) - 2  # the scatter is estimated on few df: draw it too
        sd = self.scatter * np.sqrt(df / rng.chisquare(df, a.size)) if df > 0 else 0.0
        pred = a + b * math.log(num_params) + rng.normal(0.0, 1.0, a.size) * sd
        lo, hi = np.quantile(pred, [(1 - self.level) / 2, (1 + self.level) / 2])
        return float(math.exp(lo)), float(math.exp(hi))


def fit_lr_law(
    variant: str,
    points: Sequence[tuple[float, float]],
    step: float,
    *,
    level: float = LEVEL,
    num_resamples: int = NUM_RESAMPLES,
    seed: int = 0,
    resolution: float = 0.5,
    ceilings: Sequence[float | None] | None = None,
) -> LRLaw:
    """The law of one arm from its finished sizes: `points` are (N, best LR), N distinct.

    `step`: the grid's factor between neighbouring LRs. `resolution`: how far, in grid steps,
    each point's optimum may lie from it either side (0.5: a best grid LR, known to its cell).
    `ceilings`: per point, the lowest LR above its winner that diverged (None: none); a
    resample never moves a point's optimum past its ceiling (censored there).
    """
    if len(points) < 2 or len({n for n, _ in points}) < 2:
        raise ValueError(f"{variant}: an LR law needs the best LR at >= 2 sizes, got {points}")
    if not step > 1:
        raise ValueError(f"step must be > 1 (the grid's LR factor), got {step}")
    x = np.log([n for n, _ in points])
    y = np.log([lr for _, lr in points])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    scatter = float(np.sqrt(resid @ resid / (x.size - 2))) if x.size > 2 else 0.0
    rng = np.random.default_rng(seed)
    reach = resolution * math.log(step)  # e.g. the optimum is somewhere in its LR's grid cell
    jittered = y + rng.uniform(-reach, reach, (num_resamples, x.size))
    if ceilings is not None:  # a diverged LR bounds its size's optimum: no draw past it
        top = np.log([math.inf if c is None else c for c in ceilings])
        jittered = np.minimum(jittered, top)
    design = np.stack([np.ones_like(x), x], axis=1)  # (k, 2)
    coef, *_ = np.linalg.lstsq(design, jittered.T, rcond=None)  # (2, R): one fit per resample
    return LRLaw(
        variant=variant,
        num_params=tuple(float(n) for n, _ in points),
        best_lrs=tuple(float(lr) for _, lr in points),
        slope=float(slope),
        intercept=float(intercept),
        scatter=scatter,
        step=float(step),
        draws=coef.T,
        level=level,
        seed=seed,
    )


def grid_step_lrs(anchor: float, step: float, lo: float, hi: float) -> list[float]:
    """The LRs ``anchor * step**k`` whose grid cell (half a step either side) meets [lo, hi]."""
    k_lo = math.ceil(math.log(lo / anchor) / math.log(step) - 0.5 - 1e-9)
    k_hi = math.floor(math.log(hi / anchor) / math.log(step) + 0.5 + 1e-9)
    return [anchor * step**k for k in range(k_lo, k_hi + 1)]


def scan_lrs(law: LRLaw, num_params: float, anchor: float) -> list[float]:
    """The grid LRs to scan at a new size: those the interval cannot exclude, at least two.

    `anchor`: one LR of that size's grid (e.g. its Porian LR); the grid is ``anchor * step**k``.
    """
    lo, hi = law.interval(num_params)
    lrs = grid_step_lrs(anchor, law.step, lo, hi)
    if len(lrs) < 2:  # a lone LR says nothing of where the optimum is: add the nearer side
        (only,) = lrs
        up = law.predict(num_params) >= only
        lrs = sorted([only, only * law.step if up else only / law.step])
    return [float(f"{lr:.10g}") for lr in lrs]


def curvature(mean_loss: Mapping[float, float]) -> float | None:
    """The loss curvature ``c`` in ``L = L* + c (log lr - log lr*)^2`` about an interior winner.

    From the winner and its two tried neighbours (a parabola in log LR); None when the winner is
    at an edge, or the three do not curve upward.
    """
    lrs = sorted(mean_loss)
    i = min(range(len(lrs)), key=lambda j: mean_loss[lrs[j]])
    if i == 0 or i == len(lrs) - 1:
        return None
    x = np.log(lrs[i - 1 : i + 2])
    a, _, _ = np.polyfit(x, [mean_loss[lr] for lr in lrs[i - 1 : i + 2]], 2)
    return float(a) if a > 0 else None


def two_point_optimum(lr1: float, loss1: float, lr2: float, loss2: float, c: float) -> float:
    """The optimum LR of a parabola of curvature `c` (in log LR) through two points."""
    x1, x2 = math.log(lr1), math.log(lr2)
    # L1 - L2 = c (x1 - x2)(x1 + x2 - 2 x*)  =>  x* = (x1 + x2)/2 - (L1 - L2) / (2 c (x1 - x2))
    return math.exp((x1 + x2) / 2 - (loss1 - loss2) / (2 * c * (x1 - x2)))


def censor(optimum: float, best: float, ceiling: float | None) -> float:
    """The censoring step: an optimum at or past the lowest diverged LR above the best
    (``ceiling``) becomes the geometric middle of [best, ceiling): the data say the loss still
    falls at the best LR and that the arm cannot train at the ceiling, no more."""
    if ceiling is None or optimum < ceiling:
        return optimum
    return math.sqrt(best * ceiling)


def estimate_optimum(
    mean_loss: Mapping[float, float], c: float | None, ceiling: float | None = None
) -> float:
    """Where a size's optimum LR lies, from its tried LRs' losses (tried LR -> loss).

    An interior winner: the vertex of the parabola (in log LR) through it and its neighbours.
    A winner at an edge: the winner and its one neighbour with the arm's curvature `c`; with no
    curvature (or one LR), the winner itself. ``ceiling``: the lowest LR above the winner that
    diverged (None: none did); the optimum lies below it (`censor`).
    """
    best = min(mean_loss, key=mean_loss.get)
    return censor(_uncensored_optimum(mean_loss, c), best, ceiling)


def _uncensored_optimum(mean_loss: Mapping[float, float], c: float | None) -> float:
    lrs = sorted(mean_loss)
    i = min(range(len(lrs)), key=lambda j: mean_loss[lrs[j]])
    best = lrs[i]
    if 0 < i < len(lrs) - 1:
        x = np.log(lrs[i - 1 : i + 2])
        a, b, _ = np.polyfit(x, [mean_loss[lr] for lr in lrs[i - 1 : i + 2]], 2)
        return math.exp(-b / (2 * a)) if a > 0 else best
    if c is None or len(lrs) < 2:
        return best
    j = 1 if i == 0 else i - 1
    return two_point_optimum(best, mean_loss[best], lrs[j], mean_loss[lrs[j]], c)


@dataclasses.dataclass(frozen=True)
class TransferCheck:
    """A transferred size judged against its arm's law."""

    holds: bool
    optimum: float  # the estimated optimum LR at this size
    interval: tuple[float, float]
    best_lr: float  # the tried LR with the lowest loss
    why: str


def check_transfer(
    law: LRLaw,
    num_params: float,
    mean_loss: Mapping[float, float],
    c: float,
    ceiling: float | None = None,
) -> TransferCheck:
    """Whether a size scanned on the law's LRs keeps the law; `mean_loss`: tried LR -> loss.

    `c`: the arm's loss curvature (`curvature` of its fully scanned sizes, e.g. their median);
    `ceiling`: the lowest LR above the winner that diverged at this size (None: none).
    """
    if len(mean_loss) < 2 or not c > 0:
        raise ValueError("a transfer check needs >= 2 tried LRs and a curvature > 0")
    optimum = estimate_optimum(mean_loss, c, ceiling)
    best = min(mean_loss, key=mean_loss.get)
    lo, hi = law.interval(num_params)
    # the law chose which grid cells to scan: every cell (half a step either side of its LR) the
    # interval reaches. It holds while the optimum lies in one of them: at grid resolution, inside
    # the interval. LRs an edge added after the scan do not count: they are the fallback.
    reach = math.sqrt(law.step)
    holds = lo / reach <= optimum <= hi * reach
    where = f"optimum ~{optimum:.3g}, law {lo:.3g}-{hi:.3g}"
    why = f"law holds ({where})" if holds else f"law broken ({where}): full scan resumes"
    return TransferCheck(holds, optimum, (lo, hi), best, why)


@dataclasses.dataclass(frozen=True)
class ArmPlan:
    """What one arm scans at its next size: `lrs` under the law, or None for the full grid."""

    lrs: list[float] | None
    law: LRLaw | None
    broken: str | None  # why the law was declared broken (at which size), or None
    checks: tuple[TransferCheck, ...] = ()


def plan_arm(
    variant: str,
    done: Sequence[tuple],
    num_params: float,
    anchor: float,
    step: float,
    *,
    min_sizes: int = 3,
    level: float = LEVEL,
    seed: int = 0,
    resolution: float = RESOLUTION,
) -> ArmPlan:
    """The LRs one arm scans at N, from its finished sizes smallest first: (N, tried LR -> loss)
    or (N, tried LR -> loss, the lowest diverged LR above its winner or None: the censoring).

    The first `min_sizes` sizes are scanned in full, and so is a size whose interval reaches
    more than `MAX_SCAN` grid LRs; each later one was scanned on the law of the
    sizes before it and is checked against that law here, in order: the first check that fails
    breaks the law for the arm, and every size from then on gets the full grid (None).
    `anchor`: an LR of the new size's grid (its Porian LR); `step`: the grid's LR factor.
    """
    if min_sizes < 2:
        raise ValueError(f"min_sizes must be >= 2 (a law needs two sizes), got {min_sizes}")
    done = sorted(((*d, None)[:3] for d in done), key=lambda d: d[0])
    curves = [c for _, loss, _ in done[:min_sizes] if (c := curvature(loss)) is not None]
    if len(done) < min_sizes or not curves:
        return ArmPlan(None, None, None)
    c = float(np.median(curves))
    best = [(n, estimate_optimum(loss, c, ceiling)) for n, loss, ceiling in done]
    ceilings = [ceiling for _, _, ceiling in done]
    checks = []
    for k in range(min_sizes, len(done)):
        if len(done[k][1]) < 2:  # e.g. the other LR diverged: nothing to check the law with
            why = f"{variant} at N={done[k][0]:.3g}: under 2 usable LRs, the law is unchecked"
            return ArmPlan(None, None, why, tuple(checks))
        law = fit_lr_law(
            variant, best[:k], step, level=level, seed=seed, resolution=resolution,
            ceilings=ceilings[:k],
        )  # fmt: skip
        check = check_transfer(law, done[k][0], done[k][1], c, done[k][2])
        checks.append(check)
        if not check.holds:
            why = f"{variant} at N={done[k][0]:.3g}: {check.why}"
            return ArmPlan(None, law, why, tuple(checks))
    law = fit_lr_law(
        variant, best, step, level=level, seed=seed, resolution=resolution, ceilings=ceilings
    )
    lrs = scan_lrs(law, num_params, anchor)
    if len(lrs) > MAX_SCAN:  # too uncertain to save anything: the full grid, edges as ever
        return ArmPlan(None, law, None, tuple(checks))
    return ArmPlan(lrs, law, None, tuple(checks))
