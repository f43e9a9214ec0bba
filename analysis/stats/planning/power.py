"""The power planner: how large a paired gain a study's seeds can detect, and how many seeds a
target gain needs. Called by the report's seed-noise table, by `scaling plan --noise` and by the
verdict's "undetected" reason: all three describe the verdict's own top-size test.

That test (``analysis.stats.gains.robust``) rejects "no gain" when both the pooled bootstrap
interval and Student's t on the top size's paired seeds exclude 0, at the level the family-wise
procedure starts the top size at (``analysis.stats.gains.levels.TOP_ALPHA``, 4%). With few seeds the
paired t interval is the wider one, so the verdict's power is that of a paired t-test on ``n``
seeds, two-sided at 4%, of the paired difference ``baseline - variant`` with sd ``sigma`` (% of the
baseline's loss). Its t statistic follows a noncentral t with ``n - 1`` df and noncentrality
``delta sqrt(n) / sigma``:

    power(delta) = P(|T| > t_{1-alpha/2, n-1}),  T ~ t'(n - 1, delta sqrt(n) / sigma)

The minimum detectable gain (MDE) is the ``delta`` with ``power(delta) = 0.8``; the seeds
needed are the smallest ``n >= 2`` with ``power >= 0.8`` at the target. The closed form
``MDE ~ (t_{1-alpha/2, n-1} + t_{1-beta, n-1}) sigma / sqrt(n)`` (Cohen 1988, ch. 2) is within a
few percent for n >= 3 (``mde_closed_form``). A noise measured on a finished study is itself
uncertain (3 seeds: 2 df), so the planner plans on its upper 80% confidence bound
(``sd_upper``): an sd that is too small promises power the study will not have.
Checked against simulations of the verdict itself in tests/analysis/stats/planning/test_power.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

from analysis.stats.gains.levels import TOP_ALPHA  # the verdict's top-size level
from analysis.stats.gains.resolution import effective_df, t_half
from analysis.stats.lr.frontier import lr_frontier
from analysis.stats.variance.cells import build_groups, selected_lrs, usable_cells
from analysis.tables.mlflow_io import load_study_runs
from analysis.tables.runs import load_csv
from analysis.tables.spec import study_source
from foundation.contract import parse_size

POWER = 0.8
UPPER = 0.8  # the noise is planned on at its upper 80% confidence bound
MAX_SEEDS = 10_000  # beyond this a gain is not worth planning for
GRID_CAPS = "none at this LR grid"  # the seeds needed where the grid's term alone caps the power


def power_of(
    gain_pct: float,
    sd_pct: float,
    num_seeds: int,
    alpha: float = TOP_ALPHA,
    tune_var: float = 0.0,
) -> float:
    """Probability the two-sided paired t-test at ``alpha`` rejects "no gain" on ``num_seeds``
    paired seeds when the true gain is ``gain_pct`` and the paired-difference sd ``sd_pct``.
    ``tune_var``: the LR grid's resolution (%^2, ``analysis.stats.gains.resolution``), a variance
    the test adds to the seeds' and no number of seeds shrinks; taken as part of the per-seed
    sd, ``sqrt(sd^2 + n tune_var)``."""
    if num_seeds < 2 or sd_pct <= 0:
        return float("nan")
    own = _t_power(gain_pct, sd_pct, num_seeds, num_seeds - 1, alpha)
    if not tune_var > 0:
        return own
    # the verdict rejects only past both intervals (gains.resolution.t_half): at most either's
    df = effective_df(sd_pct**2 / num_seeds, num_seeds - 1, tune_var)
    return min(
        own, _t_power(gain_pct, _per_seed_sd(sd_pct, num_seeds, tune_var), num_seeds, df, alpha)
    )


def _t_power(gain_pct: float, sd_pct: float, num_seeds: int, df: float, alpha: float) -> float:
    crit = stats.t.ppf(1 - alpha / 2, df)
    ncp = gain_pct * math.sqrt(num_seeds) / sd_pct
    far_tail = stats.nct.cdf(-crit, df, abs(ncp))  # NaN deep in the tail: it is ~0 there
    return float(stats.nct.sf(crit, df, abs(ncp)) + np.nan_to_num(far_tail))


def _per_seed_sd(sd_pct: float, num_seeds: int, tune_var: float) -> float:
    return math.sqrt(sd_pct**2 + num_seeds * tune_var)


def mde(
    sd_pct: float,
    num_seeds: int,
    alpha: float = TOP_ALPHA,
    power: float = POWER,
    tune_var: float = 0.0,
) -> float:
    """Smallest true gain (same unit as ``sd_pct``) detected with ``power``; NaN below 2 seeds."""
    if num_seeds < 2 or not sd_pct > 0:
        return float("nan")
    sd = _per_seed_sd(sd_pct, num_seeds, tune_var)
    hi = 2 * mde_closed_form(sd, num_seeds, alpha, power) + sd
    return float(
        optimize.brentq(lambda d: power_of(d, sd_pct, num_seeds, alpha, tune_var) - power, 0, hi)
    )


def mde_closed_form(
    sd_pct: float, num_seeds: int, alpha: float = TOP_ALPHA, power: float = POWER
) -> float:
    """``(t_{1-alpha/2, n-1} + t_{power, n-1}) sd / sqrt(n)``: the textbook approximation."""
    df = num_seeds - 1
    t_sum = stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)
    return float(t_sum * sd_pct / math.sqrt(num_seeds))


def grid_caps(gain_pct: float, alpha: float, power: float, tune_var: float) -> bool:
    """Whether the LR grid's term alone keeps ``gain_pct`` from ``power``: infinitely many seeds
    leave a normal test with sd ``sqrt(tune_var)``."""
    return bool(
        tune_var > 0
        and stats.norm.sf(stats.norm.isf(alpha / 2) - gain_pct / math.sqrt(tune_var)) < power
    )


def seeds_needed(
    sd_pct: float,
    gain_pct: float,
    alpha: float = TOP_ALPHA,
    power: float = POWER,
    tune_var: float = 0.0,
) -> int | None:
    """Smallest number of paired seeds (>= 2) whose test has ``power`` at ``gain_pct``; None
    when the gain is not positive or would need more than ``MAX_SEEDS``."""
    if not (gain_pct > 0 and sd_pct > 0):
        return None
    if grid_caps(gain_pct, alpha, power, tune_var):
        return None  # even infinitely many seeds leave the grid's resolution
    n = 2
    while power_of(gain_pct, sd_pct, n, alpha, tune_var) < power:  # rises with n: first n is it
        n = n + 1 if n < 64 else int(n * 1.1)
        if n > MAX_SEEDS:
            return None
    if n > 64:  # the coarse steps may have overshot: walk back
        while n > 64 and power_of(gain_pct, sd_pct, n - 1, alpha, tune_var) >= power:
            n -= 1
    return n


def power_table(
    sd_by_size: dict[str, float],
    num_seeds: int,
    target_gain: float | None = None,
    alpha: float = TOP_ALPHA,
    power: float = POWER,
    tune_by_size: dict[str, float] | None = None,
) -> list[dict]:
    """One row per size: ``size, sd_pct, num_seeds, tune_var, mde_pct`` (the gain detected with
    ``power`` on ``num_seeds`` seeds) and, with ``target_gain`` (%), ``target_gain_pct,
    seeds_needed, power_at_target``. ``sd_by_size`` is what ``noise_from_source`` returns;
    ``tune_by_size`` the LR grid's term per size (%^2, ``analysis.stats.analyze.grid_terms``: the
    verdict's test carries it, and no number of seeds shrinks it), 0 where absent."""
    rows = []
    for size, sd in sd_by_size.items():
        tune = (tune_by_size or {}).get(size, 0.0)
        row = {"size": size, "sd_pct": sd, "num_seeds": num_seeds, "tune_var": tune}
        row["mde_pct"] = mde(sd, num_seeds, alpha, power, tune)
        if target_gain is not None:
            row["target_gain_pct"] = target_gain
            row["seeds_needed"] = seeds_needed(sd, target_gain, alpha, power, tune)
            row["grid_caps"] = grid_caps(target_gain, alpha, power, tune)
            row["power_at_target"] = power_of(target_gain, sd, num_seeds, alpha, tune)
        rows.append(row)
    return rows


def seeds_to_resolve(
    sd_pct: float, margin_pct: float, alpha: float = TOP_ALPHA, tune_var: float = 0.0
) -> int | None:
    """Paired seeds that show equivalence (the whole interval within +-``margin_pct``) with
    80% probability when the true gain is 0: ``|mean| + t se <= margin``, ``|mean| ~ N(0, se)``,
    so ``margin >= (t_{1-alpha/2, n-1} + z_{0.9}) sd / sqrt(n)``; with the grid's resolution
    (``tune_var``) the half-width is ``gains.resolution.t_half``'s and ``|mean|`` spreads by
    ``sqrt(sd^2 / n + tune_var)``. None beyond ``MAX_SEEDS`` or when the grid's resolution alone
    keeps the margin out of reach."""
    if not (sd_pct > 0 and margin_pct > 0):
        return None
    z = stats.norm.ppf(0.5 + POWER / 2)
    if not resolvable(margin_pct, alpha, tune_var):
        return None
    n = 2
    while _margin_reach(sd_pct, n, alpha, tune_var, z) > margin_pct:
        n = n + 1 if n < 64 else int(n * 1.1) + 1
        if n > MAX_SEEDS:
            return None
    return n


def _margin_reach(sd_pct: float, n: int, alpha: float, tune_var: float, z: float) -> float:
    """What ``|mean| + half-width`` reaches with 80% probability at a true gain of 0."""
    se = sd_pct / math.sqrt(n)
    return float(t_half(1 - alpha / 2, se, n - 1, tune_var)) + z * math.sqrt(se**2 + tune_var)


def resolvable(margin_pct: float, alpha: float = TOP_ALPHA, tune_var: float = 0.0) -> bool:
    """Whether seeds enough could show equivalence within +-``margin_pct`` with 80%
    probability at a true gain of 0, given the grid's resolution ``tune_var`` (%^2) that no
    seed shrinks: ``(z_{1-alpha/2} + z_{0.9}) sqrt(tune_var) < margin``."""
    z = stats.norm.ppf(0.5 + POWER / 2)
    return bool((stats.norm.isf(alpha / 2) + z) * math.sqrt(tune_var) < margin_pct)


def sd_upper(sd: float, df: float, confidence: float = UPPER) -> float:
    """One-sided upper confidence bound on an sd estimated on ``df`` df (chi-square)."""
    if not df >= 1:
        return float("nan")
    return float(sd * math.sqrt(df / stats.chi2.ppf(1 - confidence, df)))


def paired_sd_pct(base: np.ndarray, variant: np.ndarray) -> float | None:
    """sd of ``100 (base - variant) / mean(base)`` over the seeds both have (``[seeds]`` each,
    NaN = missing); None with fewer than 2 such seeds."""
    both = np.isfinite(base) & np.isfinite(variant)
    if both.sum() < 2:
        return None
    diff = 100.0 * (base[both] - variant[both]) / base[both].mean()
    return float(np.std(diff, ddof=1))


def noise_from_table(table: pd.DataFrame, baseline: str) -> dict[str, float]:
    """Per size (by N): the upper 80% confidence bound (``sd_upper``) on the paired-difference
    sd in % of the baseline's loss.

    Each arm at its best usable LR (``analysis.lr_frontier``'s rules: every seed completed);
    the difference is baseline minus each other arm, paired by seed; with several other arms
    the largest sd (the plan must hold for all). A size with no second arm, or with fewer than
    2 paired seeds, falls back to the noise model: a paired difference keeps only the per-run
    component, so its sd is ``sqrt(2) * sd_run``; with one arm per size that component cannot
    be split from the shared one, and ``sqrt(2)`` times the whole seed sd is used (an upper
    bound: pairing can only remove noise).
    """
    frontiers = lr_frontier(table)
    groups = build_groups(
        usable_cells(table, frontiers), 0, chosen_lr=selected_lrs(table, frontiers)
    )
    info = groups.info[groups.info["on_curve"]].sort_values("num_nonembedding_params")
    out: dict[str, float] = {}
    for size, frame in info.groupby("size", sort=False):
        base = frame.index[frame["variant"] == baseline]
        sds = []
        if len(base):
            for g in frame.index.drop(base):
                b, v = groups.seed_loss[base[0]], groups.seed_loss[g]
                sd = paired_sd_pct(b, v)
                if sd is not None:  # planned on its upper bound (n - 1 df)
                    sds.append(sd_upper(sd, int((np.isfinite(b) & np.isfinite(v)).sum()) - 1))
        if sds:
            out[str(size)] = max(sds)
        elif groups.noise is not None and groups.noise.sd_run.size:
            i = groups.noise.sizes.index(size)
            loss = float(np.nanmean(groups.seed_loss[frame.index]))
            sd = float(groups.noise.sd_run[i])
            if not sd > 0:  # one arm: the shared part cannot be split off; count all of it
                sd = float(np.hypot(groups.noise.sd_run[i], groups.noise.sd_seed[i]))
            df = groups.noise.df_run if groups.noise.sd_run[i] > 0 else groups.noise.df_seed
            if np.isfinite(sd) and sd > 0:
                out[str(size)] = sd_upper(100.0 * math.sqrt(2.0) * sd / loss, df)
    if not out:
        raise ValueError(
            "no size has two paired seeds of two arms or a fitted noise model; a noise "
            "estimate needs at least 2 seeds per size"
        )
    return out


SOURCE_FORMS = (
    "a number (the seed sd as % of loss, e.g. 0.3), a run CSV (e.g. runs.csv), or a finished "
    "study (its spec, e.g. studies/demo.yaml, or its name in this study's MLflow experiment)"
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a study name (scaling.spec.checks' rule)


def noise_source_kind(source: str | float | Path) -> str:
    """``"number" | "csv" | "spec" | "name"`` of a ``--noise`` source, or ValueError naming it
    and the three accepted forms. Checks only its form (a file exists, a number is positive),
    so a bad source is refused before any study is read."""
    try:
        sd = float(source)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    else:
        if not (math.isfinite(sd) and sd > 0):
            raise ValueError(f"--noise {source}: a seed sd (% of loss) must be a positive number")
        return "number"
    path = Path(source)
    kind = {".csv": "csv", ".yaml": "spec", ".yml": "spec", ".json": "spec"}.get(path.suffix)
    if kind is not None:
        if not path.is_file():
            raise ValueError(f"--noise {source}: no such file; give {SOURCE_FORMS}")
        return kind
    if _NAME.match(str(source)) and not path.exists():
        return "name"
    raise ValueError(f"--noise {source}: not a number, a run CSV or a study; give {SOURCE_FORMS}")


def source_table(source: str | float | Path, mlflow: tuple[str, str] | None):
    """The runs of a ``--noise`` source (``noise_from_source``'s forms); None for a number."""
    kind = noise_source_kind(source)
    if kind == "number":
        return None
    if kind == "csv":
        return load_csv(source)
    if kind == "spec":
        return load_study_runs(*study_source(Path(source))[:3])[0]
    if mlflow is None:
        raise ValueError(
            f"--noise {source}: a study name needs an MLflow store; give {SOURCE_FORMS}"
        )
    return load_study_runs(mlflow[0], mlflow[1], str(source))[0]


def noise_from_source(
    source: str | float | Path,
    baseline: str,
    mlflow: tuple[str, str] | None = None,
) -> dict[str, float]:
    """``{size: paired-difference sd in % of loss}`` from a finished study (its spec, a
    ``.yaml``/``.yml``/``.json`` path: the runs are read from its MLflow; or its name, read from
    ``mlflow = (tracking_uri, experiment)``), a run CSV path, or a number (the sd as % of loss,
    the same at every size: key ``"all"``)."""
    table = source_table(source, mlflow)
    return {"all": float(source)} if table is None else noise_from_table(table, baseline)  # type: ignore[arg-type]


def sd_for_sizes(sd_by_size: dict[str, float], sizes: list[str]) -> dict[str, tuple[float, str]]:
    """``{size: (sd, source size)}`` for the sizes of a planned study: the source's own size
    when it has it, ``"all"`` for a number, else the source size nearest in log N (seed noise
    shrinks with size, so this is a guess: the plan prints which size each sd came from)."""
    if "all" in sd_by_size:
        return {s: (sd_by_size["all"], "all") for s in sizes}
    known = {k: math.log(parse_size(k)) for k in sd_by_size}
    out = {}
    for size in sizes:
        if size in sd_by_size:
            out[size] = (sd_by_size[size], size)
            continue
        near = min(known, key=lambda k: abs(known[k] - math.log(parse_size(size))))
        out[size] = (sd_by_size[near], near)
    return out
