"""``run_analysis``: the one call `scaling analyze` and `scaling run` make."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report.document import write_report
from analysis.report.plots import all_plots
from analysis.report.training_curves import chosen_runs
from analysis.stats.core import analyse, check_inputs
from analysis.tables.mlflow_io import log_to_parent


def run_analysis(
    table: pd.DataFrame,
    out_dir: str | Path,
    baseline: str = "linear",
    parent_run_id: str | None = None,
    tracking_uri: str | None = None,
    num_resamples: int = 1000,
    seed: int = 0,
    detect_gain_pct: float = 0.5,
    curves: dict | Callable[[list[str]], dict] | None = None,
    lr_search: dict | None = None,
    margin_pct: float = 0.5,
) -> dict:
    """Analyse a run table; write verdict.json, plots and the report; return the verdict.

    ``table`` has the columns of ``analysis.tables.runs.COLUMNS`` (``load_csv`` /
    ``load_study_runs`` make one). ``lr_search``: the study's LR-search summary (``rounds``,
    ``num_added_cells``, ``open_arms``, ``stopped_arms``), shown in the report. With
    ``parent_run_id`` everything written is also logged to that MLflow run under ``analysis/``.
    ``curves`` (run_id -> {key: (steps, values)}) adds the training-curve plot; a function of run
    ids instead (``lambda ids: load_curves(uri, ids)``) is called once the LRs are chosen, with the
    runs the plot draws only (at each arm's chosen LR). ``margin_pct``: the equivalence margin of
    the verdict (``none`` vs ``undetected``; the study's ``verdict.margin_pct``).
    """
    check_inputs(table, baseline, num_resamples, margin_pct)
    result = analyse(table, baseline, num_resamples, seed, detect_gain_pct, margin_pct)
    if lr_search is not None:
        result.verdict["lr_search"] = lr_search
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(
        json.dumps(json_safe(result.verdict), indent=2, allow_nan=False)
    )
    if callable(curves):
        curves = curves(list(chosen_runs(result)["run_id"]))
    figures = all_plots(result, out, curves)
    write_report(result.verdict, figures, out, "csv" if curves is None else "mlflow")
    if parent_run_id is not None:
        log_to_parent(tracking_uri, parent_run_id, out)
    return result.verdict


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
