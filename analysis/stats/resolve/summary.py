"""verdict.json's ``resolve``: for each unresolved variant, what would resolve it.

``resolve_summary(verdict, table, cost)`` reads each variant's deciding interval with the
analysis's own figures (``evidence.from_verdict``: the top gain, its seeds' se and the LR grid's
term) and prices the options (``options.price``) at the level the first extension would be
judged at under the default resolve plan (``loop.Plan``: 4 extensions after the study as it
stands, so look 1 at ``alpha(2/5) - alpha(1/5)``). ``cost(variant, N, tokens)`` is one run's
device-hours from the plan or the pilot; without one, runs are priced by their FLOPs
(``6 N D``, in PFLOPs) and the unit says so. An ``inconclusive`` variant carries its verdict's
reason beside the options: a design defect (an LR not bracketed, a divergence) is fixed by the
edit that reason names, and the options price the interval once it is. ``grow``: the study's
next size (``options.Grow``); without it one more size is priced as a hand edit. Each
unresolved downstream task gets its own entry under ``tasks`` (``resolve.tasks``: the seeds that
would resolve it at its own test level).
"""

from __future__ import annotations

import pandas as pd

from analysis.stats.resolve.evidence import UNRESOLVED, from_verdict
from analysis.stats.resolve.loop import Plan
from analysis.stats.resolve.options import Cost, Grow, price
from analysis.stats.resolve.tasks import task_evidence, task_options

NUM_SHOWN = 4  # options kept per variant, best P(resolve) per hour first
FLOPS_UNIT = "PFLOPs"


def flops_cost(variant: str, n_params: float, tokens: float) -> float:
    return 6.0 * n_params * tokens / 1e15


def resolve_summary(
    verdict: dict,
    table: pd.DataFrame,
    cost: Cost | None = None,
    unit: str = "GPU-hours",
    plan: Plan | None = None,
    grow: Grow | None = None,
) -> dict | None:
    """None when every variant is resolved (or none can be read); else the options per
    unresolved variant (``Option.as_dict``), the level they are priced at and the unit."""
    if cost is None:
        cost, unit = flops_cost, FLOPS_UNIT
    plan = plan or Plan(budget=float("inf"), alpha=float(verdict.get("alpha", 0.05) or 0.05))
    level = plan.levels()[1]
    try:
        found = from_verdict(verdict, table)
    except (KeyError, ValueError):
        return None
    out = {}
    for v in verdict.get("variants", []):
        ev = found.get(v.get("variant"))
        if ev is None or v.get("verdict") not in UNRESOLVED:
            continue
        options = price(ev, level, cost, start_seeds=plan.start_seeds, grow=grow)
        out[ev.variant] = {
            "word": v["verdict"],
            "size": ev.size,
            "estimate_pct": ev.estimate_pct,
            "half_width_pct": ev.half_width_pct,
            "seeds_sd_pct": ev.seed_sd_pct,
            "num_seeds": ev.num_seeds,
            "grid_sd_pct": ev.grid_var**0.5,
            "options": [o.as_dict() for o in options[:NUM_SHOWN]],
        }
        if v["verdict"] == "inconclusive":
            out[ev.variant]["first"] = str(v.get("reason", ""))
    tasks = _tasks(verdict, table, cost, plan)
    if not out and not tasks:
        return None
    found = {"unit": unit, "level": level, "max_looks": plan.max_looks, "variants": out}
    return found | ({"tasks": tasks} if tasks else {})


def _tasks(verdict: dict, table: pd.DataFrame, cost: Cost, plan: Plan) -> dict:
    """task -> variant -> its unresolved interval and the seeds that would resolve it."""
    out: dict = {}
    for (task, variant), ev in task_evidence(verdict, table).items():
        options = task_options(ev, cost, plan.max_seeds)
        out.setdefault(task, {})[variant] = {
            "word": ev.word,
            "size": ev.size,
            "level": ev.level,
            "estimate_pct": ev.estimate_pct,
            "half_width_pct": ev.half_width_pct,
            "seeds_sd_pct": ev.seed_sd_pct,
            "num_seeds": ev.num_seeds,
            "options": [o.as_dict() for o in options[:NUM_SHOWN]],
        }
    return out
