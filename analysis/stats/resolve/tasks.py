"""What would resolve each unresolved downstream task: verdict.json's ``resolve.tasks``.

A task's verdict (``analysis.stats.axes.downstream``) is the paired gain in its bits per byte
at the top size, on the runs at each arm's LR chosen on the loss, tested at its Holm level (the
top size's share of it, ``levels.size_weights``). What narrows it is more paired seeds there:
the LR is never chosen on a task, so a task has no LR grid's term and a finer grid or the LRs
past an edge move it only through the loss's choice. ``task_evidence`` reads each unresolved
(task, variant) into an ``Evidence`` (``evidence.read_table`` on the task's bpb in place of the
loss, the runs cut to the loss's chosen LRs, the task's own word and level), and
``task_options`` prices the seeds it would take (``options.seed_options``: the predictive
P(resolve) at the top's test level; the same seeds narrow the loss's interval too).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from analysis.stats.gains.levels import size_weights
from analysis.stats.resolve.evidence import UNRESOLVED, Evidence, read_table
from analysis.stats.resolve.options import Cost, Option, price
from foundation import contract

__all__ = ["task_evidence", "task_options"]


def _at_chosen_lrs(table: pd.DataFrame, verdict: dict) -> pd.DataFrame:
    """The runs at the LR the loss chose for their (variant, size, tokens); a cell the
    verdict's ``lr_selection`` does not name keeps its runs."""
    chosen = {
        (str(r["variant"]), str(r["size"]), float(r["tokens"])): r.get("best_lr")
        for r in verdict.get("lr_selection") or []
    }
    keys = zip(table["variant"], table["size"], table["tokens"], table["lr"], strict=True)
    keep = []
    for variant, size, tokens, lr in keys:
        best = chosen.get((str(variant), str(size), float(tokens)))
        unnamed = best is None or not math.isfinite(float(best))
        keep.append(unnamed or math.isclose(float(lr), float(best), rel_tol=1e-6))
    return table[np.asarray(keep, dtype=bool)]


def task_evidence(verdict: dict, table: pd.DataFrame) -> dict[tuple[str, str], Evidence]:
    """(task, variant) -> its deciding interval, for each task the verdict left unresolved."""
    found = verdict.get("downstream") or {}
    baseline_of = {v["variant"]: v.get("baseline") for v in verdict.get("variants", [])}
    if "status" in table:
        table = table[table["status"] == "completed"]
    runs = _at_chosen_lrs(table, verdict)
    runs = runs.assign(lr=runs["lr"].astype(float).fillna(1.0))  # no LRs (a CSV): one a cell
    out = {}
    for task, rows in (found.get("tasks") or {}).items():
        column = contract.eval_metric(task, "bpb")
        if column not in runs:
            continue
        scored = runs[np.isfinite(runs[column].to_numpy(float))].assign(final_val_loss=runs[column])
        for variant, row in rows.items():
            baseline = baseline_of.get(variant)
            if row.get("verdict") not in UNRESOLVED or baseline is None:
                continue
            sizes = len(row.get("gain_pct_by_size") or {})
            level = row.get("level") or float(found["alpha"]) / max(1, int(found["family"]))
            level = float(level) * size_weights(max(1, sizes))[-1]  # the top size's share
            ev = read_table(scored, baseline, level, float(found["margin_pct"]))
            if variant in ev and ev[variant].num_seeds >= 2:
                out[(task, variant)] = dataclasses.replace(ev[variant], word=row["verdict"])
    return out


def task_options(ev: Evidence, cost: Cost, max_seeds: int | None = None) -> list[Option]:
    """More paired seeds at the top, priced at the task's own test level."""
    return price(ev, ev.level, cost, max_seeds=max_seeds, kinds=("seeds",))
