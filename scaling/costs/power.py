"""`plan --noise`: what the study's seeds can detect, before anything is trained.

Per size the minimum detectable paired gain (80% power, the verdict's top-size test) and the
seeds a target gain needs, from `analysis.stats.planning.power.power_table`, the function the
report's seed-noise table uses too.
"""

from __future__ import annotations

import math

from foundation.contract import size_key
from scaling.spec.resolved import ResolvedStudy

__all__ = ["power_plan"]


def _pct(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.3g}%"


def power_plan(
    study: ResolvedStudy,
    sd_by_size: dict[str, float],
    target_gain: float | None = None,
    grid_by_size: dict[str, float] | None = None,
) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, note): per size of the study, the seed sd (``analysis.stats.planning.power``'s
    paired-difference sd in % of loss, from ``noise_from_source``), the minimum detectable
    paired gain with the study's seeds and, with ``target_gain`` (%), the seeds it needs. With
    ``grid_by_size`` (the LR grid's term a finished source study shows, %^2 per size,
    ``analysis.stats.analyze.grid_terms``) each size's test carries it, as the verdict's does, and
    a column shows its sd."""
    # lazy: scipy (analysis.stats.planning.power)
    from analysis.stats.planning.power import GRID_CAPS, MAX_SEEDS, power_table, sd_for_sizes

    sizes = sorted(study.spec.sizes, key=size_key)
    num_seeds = len(study.spec.seeds)
    matched = sd_for_sizes(sd_by_size, sizes)
    grid = {s: v for s, (v, _) in sd_for_sizes(grid_by_size, sizes).items()} if grid_by_size else {}
    if not any(v > 0 for v in grid.values()):
        grid = {}  # one LR per cell, or no neighbours: the source shows no grid term
    sds = {s: sd for s, (sd, _) in matched.items()}
    rows = power_table(sds, num_seeds, target_gain, tune_by_size=grid)
    header = ["size", "noise from", "paired sd", "seeds", "detectable gain"]
    if grid:
        header.insert(3, "LR grid sd")
    if target_gain is not None:
        header += [f"seeds for {target_gain:g}%", f"power at {target_gain:g}%"]
    out = []
    for row in rows:
        line = [row["size"], matched[row["size"]][1], _pct(row["sd_pct"]), str(num_seeds)]
        if grid:
            line.insert(3, _pct(math.sqrt(row["tune_var"])))
        line.append(_pct(row["mde_pct"]) or "needs >= 2 seeds")
        if target_gain is not None:
            needed = row["seeds_needed"]
            if needed is not None:
                line.append(str(needed))
            elif row["grid_caps"]:
                line.append(GRID_CAPS)
            else:
                line.append(f"more than {MAX_SEEDS:,}")
            power = row["power_at_target"]
            line.append("" if not math.isfinite(power) else f"{100 * power:.0f}%")
        out.append(line)
    note = (
        "detectable gain: the smallest true paired gain (baseline loss - variant loss, % of "
        "the baseline's loss) the verdict's top-size test (a paired t-test on the study's seeds, "
        "two-sided 4%) detects with 80% power (exact noncentral t, analysis.stats.planning.power)"
    )
    if grid:
        note += (
            "; the test carries the LR grid's resolution the source's runs show (LR grid sd, "
            "docs/statistics.md), which no number of seeds shrinks"
        )
    return header, out, note
