"""``run_analysis(table, judgement, out)``: the one call `scaling analyze` and `run` make."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.judgement import REANALYSIS, Judgement, table_judgement
from analysis.report.document import write_report
from analysis.report.plots import all_plots
from analysis.report.training_curves import chosen_runs
from analysis.stats.analyze import analyse, grid_terms
from analysis.stats.axes.downstream import at_chosen_lrs, downstream_verdict
from analysis.stats.gains import intervals
from analysis.stats.gains.time_matched import time_matched
from analysis.stats.inference import inference_summary
from analysis.stats.looks.sequential import paired_top_seeds
from analysis.stats.lr.stability import stability_verdict
from analysis.stats.planning.power import noise_from_table, source_table
from analysis.stats.resolve.summary import resolve_summary
from analysis.tables.arm_costs import arm_matching
from analysis.tables.mlflow_io import log_to_parent
from analysis.tables.runs import is_eval_column
from foundation import atomic


def run_analysis(
    table: pd.DataFrame,
    judgement: Judgement,
    out_dir: str | Path,
    *,
    curves: dict | Callable[[list[str]], dict] | None = None,
    parent: tuple[str | None, str] | None = None,
    times: dict | Callable[[pd.DataFrame], dict | None] | None = None,
    extra: dict | None = None,
    price: tuple | None = None,
) -> dict:
    """Judge a run table as ``judgement`` says; write verdict.json, plots and the report into
    ``out_dir``; return the verdict.

    ``table`` has the columns of ``analysis.tables.runs.COLUMNS`` (``load_csv`` /
    ``load_study_runs`` make one). ``judgement`` (``analysis.judgement``): the baseline(s), the
    margin, the level, the bootstrap's seed and draws, and what the study adds (its sequential
    looks, LR search, stability, inference figures), built once by ``table_judgement`` or, for
    a study, ``scaling.driver.run.study_judgement``.

    A sequential judgement (``judgement.looks``) is judged as its last look was: at its nominal
    level, with the bootstrap seeded from the runs, so on the table that look read the verdict
    is that look's. verdict.json gets the looks under ``sequential`` and the report a
    "Sequential looks" section. ``lr_search`` is shown in the report; ``inference`` gives each
    arm's cost ratio to the (first) baseline under ``inference`` and an "Inference cost"
    section; ``stability`` (the study ran ``lr.search.find_edge``) a ``stability`` part and a
    "Stability" section. A user's re-analysis of a study (``by == "reanalysis"``) gets
    ``reanalysis`` in verdict.json and a note under the report's lead: not the study's verdict.

    ``curves`` (run_id -> {key: (steps, values)}) adds the training-curve plot; a function of
    run ids instead (``lambda ids: load_curves(uri, ids)``) is called once the LRs are chosen,
    with the runs the plot draws only. ``parent`` (tracking URI, run id): everything written is
    also logged to that MLflow run under ``analysis/``; only the study's own judgement may be.

    ``times``: each run's measured time per token (``analysis.tables.step_times``: ``{"source",
    "device", "rows"}``), or a function of the run table that reads them (``lambda t:
    load_step_times(uri, t)``); verdict.json's ``time_matched`` gives the gain at matched
    GPU-hours beside the FLOP-matched one (``analysis.stats.gains.time_matched``). None: the
    verdict says there was no time measurement and states no time-matched number.
    verdict.json's ``arm_matching`` (``analysis.tables.arm_costs``): per size and arm its N,
    FLOPs per token and measured time per token, and how the arms were compared.

    ``price``: (``cost(variant, N, tokens)``, one run's device-hours; its unit, "GPU-hours" or
    "CPU-hours"; optionally the study's next size, ``options.Grow``): what verdict.json's
    ``resolve`` prices an unresolved variant's options by (a study's:
    ``scaling.driver.run.study_price``, from its plan, pilot and ladder). None (a run table of
    no study, ``scaling analyze --runs-csv``): priced by their FLOPs, in PFLOPs, and the unit
    says so.

    verdict.json's ``code_digests``: the model code each variant's judged runs trained with
    (``analysis.tables.digests``); a variant whose runs carry two digests is refused
    (ValueError) before anything is written.
    """
    j = judgement
    if parent is not None and not j.own_verdict():
        raise ValueError(
            "only the study's own judgement is logged to its parent run; this one is a "
            f"{j.by} (write it to --out)"
        )
    seed = j.bootstrap_seed(table)
    result = analyse(table, j, seed)  # checks the inputs and the code digests first
    result.add_backtest()  # verdict.json's backtest: the study predicts its own top size
    result.verdict["code_digests"] = result.code_digests
    if callable(times):
        times = times(table)
    timed = time_matched(result, times, seed)  # the verdict's words stay on FLOPs
    result.verdict["time_matched"] = timed if available(result) else intervals.strip(timed)
    matched = result.verdict["compute_axis"]["matched_compute"]  # the moved budgets
    result.verdict["arm_matching"] = arm_matching(table, times, j.primary, matched)
    runs = at_chosen_lrs(result.usable, result.groups)  # downstream tasks, at the loss's LRs
    if j.downstream_tasks is not None:
        runs = runs.drop(columns=[c for c in runs.columns if _other_task(c, j.downstream_tasks)])
    downstream = downstream_verdict(runs, j, seed)
    if downstream is not None:
        result.verdict["downstream"] = downstream
    if j.lr_search is not None:
        result.verdict["lr_search"] = j.lr_search
    if j.inference is not None:
        result.verdict["inference"] = inference_summary(j.inference, j.primary)
    if j.stability:
        result.verdict["stability"] = stability_verdict(table, j.primary)
    if j.sequential:
        result.verdict["sequential"] = sequential_summary(j, result, table, seed)
        result.verdict["multiple_comparisons"] = _at_look_level(
            result.verdict["multiple_comparisons"], result.verdict["sequential"]
        )
    cost, unit, grow = (*price, None)[:3] if price else (None, "GPU-hours", None)
    resolve = resolve_summary(result.verdict, table, cost, unit, grow=grow)  # the options
    if resolve is not None:
        result.verdict["resolve"] = resolve
    if j.by == REANALYSIS:
        result.verdict["reanalysis"] = {"changed": list(j.changed)}
    result.verdict.update(extra or {})  # the caller's keys (a study's `resolve_path`)
    if callable(curves):  # read before anything is written: a failed read leaves the old files
        curves = curves(list(chosen_runs(result)["run_id"]))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(  # a link planted at its name is refused, not written through
        out / "verdict.json", json.dumps(json_safe(result.verdict), indent=2, allow_nan=False)
    )
    figures = all_plots(result, out, curves)
    write_report(result.verdict, figures, out, "csv" if curves is None else "mlflow")
    if parent is not None:
        log_to_parent(parent[0], parent[1], out)
    return result.verdict


def available(result) -> bool:
    """Whether the study carries intervals (``analysis.stats.gains.intervals``)."""
    return bool(result.verdict["intervals"]["available"])


def _other_task(column: str, tasks: tuple[str, ...]) -> bool:
    """A downstream task's column (``eval/<task>/...``) of a task the judgement does not judge."""
    return is_eval_column(column) and column.split("/")[1] not in tasks


def sequential_summary(j: Judgement, result, table: pd.DataFrame, seed: int) -> dict:
    """verdict.json's ``sequential``: the design, every look as looks.json has it, and how the
    final analysis was judged (the last look's level, the bootstrap's seed) and whether its
    verdict is the last look's (it is on the table that look read)."""
    assert j.looks is not None and j.design is not None, "a sequential judgement"
    last = j.looks["looks"][-1]
    verdicts = {v["variant"]: v["verdict"] for v in result.verdict["variants"]}
    want = last.get("verdicts")
    matches = verdicts == dict(want) if want else _joined(verdicts) == last["verdict"]
    try:
        paired_now = paired_top_seeds(table, j.primary)
    except (KeyError, ValueError):
        paired_now = None
    return {
        "design": dict(j.looks["design"]),
        "looks": [dict(look) for look in j.looks["looks"]],
        "num_looks_max": j.design.num_looks,
        "planned_seeds": j.design.planned_seeds(),
        "judged_at": {
            "look": int(last["look"]),
            "level": j.level,
            "z": float(last["z"]),
            "alpha": j.alpha,
            "bootstrap_seed": int(seed),
        },
        "finished": bool(last["stop"]),
        "matches_last_look": matches,
        "num_paired_top_now": paired_now,
    }


def _joined(verdicts: dict[str, str]) -> str:
    """A look's one word, as ``decide_look`` writes it (variants joined when several)."""
    if len(verdicts) == 1:
        return next(iter(verdicts.values()))
    return "; ".join(f"{k}: {w}" for k, w in verdicts.items())


def _at_look_level(text: str, seq: dict) -> str:
    """The multiple-comparisons sentence (already at the look's level) naming the look and the
    design's level over all looks."""
    at = seq["judged_at"]
    head, rest = text.split(": ", 1)
    over = f"{100 * at['alpha']:.3g}% over all looks"
    return f"{head} (look {at['look']}'s nominal level; {over}): {rest}"


def json_safe(value):
    """Plain JSON data: numpy scalars to Python, non-finite floats to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def noise_and_grid_from_source(
    source: str | float | Path, baseline: str, mlflow: tuple[str, str] | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """`scaling plan --noise`: (``noise_from_source``'s paired sd per size, the LR grid's term
    per size in %^2, ``analysis.stats.analyze.grid_terms``) from one read of the source; a number
    has no runs, so no grid term ({})."""
    table = source_table(source, mlflow)
    if table is None:
        return {"all": float(source)}, {}  # type: ignore[arg-type]
    noise = noise_from_table(table, baseline)
    judgement = table_judgement(baseline)  # the baseline parsed once, by the builder
    return noise, grid_terms(table, judgement)
