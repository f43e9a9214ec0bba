"""verdict.json's ``arm_matching``: what each arm of each size is, in the numbers a comparison
rests on (N, FLOPs per token, measured time per token), and how the arms were compared.

`scaling plan` prints N and the cost per cell before a study runs; the verdict needs the same
after it, from the runs themselves: a gain between arms of one size is a fair comparison only
when their compute per token matches, or when the analysis moved one arm to the other's compute
(``analysis.stats.gains.matched``, whose records it is given as ``compute_axis.matched_compute``).
Per size and arm: N (``num_nonembedding_params``, the N of every fit, and
``num_params_total``), FLOPs per token (``flops / tokens`` of its runs, the compute axis's own
accounting) and the measured time per token (the geometric mean over its timed runs, as
``analysis.stats.gains.time_matched`` takes it; None where no run was timed). Per size
``matched_within_pct``: the largest gap in FLOPs per token between an arm and the baseline, in
% of the baseline's; ``compared_at``: at matched FLOPs, or at whose compute after a move.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["MATCHED", "arm_matching", "compared_at"]

MATCHED = "matched FLOPs: equal size and tokens are equal compute"
_MOVED = {
    "baseline": "the variant's compute: the baseline's loss moved there along its own curve",
    "variant": "the baseline's compute: the variant's loss moved there along its own curve",
    None: "each arm's own compute: one measured point, nothing to move along (no gain read)",
}


def compared_at(records: list[dict], size: str) -> str:
    """How a variant was compared at ``size``: at matched FLOPs (no record: its FLOPs per token
    within the tolerance of the baseline's), or at the compute one arm was moved to."""
    here = [r for r in records if str(r["size"]) == size]
    if not here:
        return MATCHED
    return _MOVED[max(here, key=lambda r: r["tokens"]).get("moved")]


def _time_per_token(
    times: pd.DataFrame | None, variant: str, size: str
) -> tuple[float | None, int]:
    """Geometric mean time per token (s) of an arm's timed runs at ``size``, and how many."""
    if times is None:
        return None, 0
    here = times[(times["variant"] == variant) & (times["size"] == size)]
    values = here["time_per_token_s"].to_numpy(float)
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return None, 0
    return float(np.exp(np.log(values).mean())), int(values.size)


def _median(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.median()) if len(values) else None


def _arm(runs: pd.DataFrame, times: pd.DataFrame | None, variant: str, size: str) -> dict:
    per_token = runs["flops"] / runs["tokens"]
    time, num_timed = _time_per_token(times, variant, size)
    return {
        "num_nonembedding_params": _median(runs["num_nonembedding_params"]),
        "num_params_total": _median(runs["num_params_total"]),
        "flops_per_token": _median(per_token),
        "flops_from_6nd": bool(runs["flops_estimated"].all()),
        "time_per_token_s": time,
        "num_timed_runs": num_timed,
    }


def arm_matching(
    table: pd.DataFrame, times: dict | None, baseline: str, matched: dict[str, list[dict]]
) -> dict:
    """``{"baseline", "time_source", "by_size": {size: {"arms": {arm: {...}},
    "matched_within_pct", "compared_at", "compared_at_by_variant"}}}`` from the run table,
    the per-run times (``analysis.tables.step_times``; None: not measured) and the verdict's
    ``compute_axis.matched_compute`` (variant -> moved budgets). ``baseline``: the arm the
    gaps are measured against (of ``A,B``, arm A)."""
    rows = (times or {}).get("rows") or []
    frame = pd.DataFrame(rows) if rows else None
    if frame is not None:
        frame["size"] = frame["size"].astype(str)
    order = table.groupby("size")["num_nonembedding_params"].min().sort_values().index
    by_size = {}
    for size in order:
        here = table[table["size"] == size]
        arms = {
            str(v): _arm(runs, frame, str(v), str(size))
            for v, runs in here.groupby("variant", sort=True)
        }
        base = (arms.get(baseline) or {}).get("flops_per_token")
        gaps = [
            100.0 * abs(a["flops_per_token"] / base - 1.0)
            for name, a in arms.items()
            if name != baseline and base and a["flops_per_token"] is not None
        ]
        variants = {
            name: compared_at(matched.get(name, []), str(size)) for name in arms if name != baseline
        }
        ways = sorted(set(variants.values()))
        by_size[str(size)] = {
            "arms": arms,
            "matched_within_pct": max(gaps) if gaps else None,
            "compared_at": ways[0] if len(ways) == 1 else ("per variant" if ways else None),
            "compared_at_by_variant": variants,
        }
    return {
        "baseline": baseline,
        "time_source": (times or {}).get("source") if rows else None,
        "basis": (
            "per size and arm: N and FLOPs per token (flops / tokens) of its runs (the median), "
            "time per token the geometric mean over its timed runs; matched_within_pct: the "
            "largest gap in FLOPs per token between an arm and the baseline, % of the baseline's"
        ),
        "by_size": by_size,
    }
