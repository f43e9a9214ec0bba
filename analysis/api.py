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
from analysis.stats.axes.downstream import at_chosen_lrs, downstream_verdict
from analysis.stats.core import analyse, check_inputs, grid_terms
from analysis.stats.gains.levels import ALPHA
from analysis.stats.inference import inference_summary
from analysis.stats.looks.sequential import Design, data_seed, paired_top_seeds
from analysis.stats.lr.stability import stability_verdict
from analysis.stats.planning.power import noise_from_table, source_table
from analysis.tables.digests import judged_digests
from analysis.tables.mlflow_io import log_to_parent


def run_analysis(
    table: pd.DataFrame,
    out_dir: str | Path,
    baseline: str,
    parent_run_id: str | None = None,
    tracking_uri: str | None = None,
    num_resamples: int = 1000,
    seed: int = 0,
    detect_gain_pct: float = 0.5,
    curves: dict | Callable[[list[str]], dict] | None = None,
    lr_search: dict | None = None,
    margin_pct: float = 0.5,
    sequential: dict | None = None,
    alpha: float = ALPHA,
    inference: dict | None = None,
    stability: bool = False,
) -> dict:
    """Analyse a run table; write verdict.json, plots and the report; return the verdict.

    ``table`` has the columns of ``analysis.tables.runs.COLUMNS`` (``load_csv`` /
    ``load_study_runs`` make one). ``lr_search``: the study's LR-search summary (``rounds``,
    ``num_added_cells``, ``open_arms``, ``stopped_arms``), shown in the report. With
    ``parent_run_id`` everything written is also logged to that MLflow run under ``analysis/``.
    ``curves`` (run_id -> {key: (steps, values)}) adds the training-curve plot; a function of run
    ids instead (``lambda ids: load_curves(uri, ids)``) is called once the LRs are chosen, with the
    runs the plot draws only (at each arm's chosen LR). ``margin_pct``: the equivalence margin of
    the verdict (``none`` vs ``undetected``; the study's ``verdict.margin_pct``); ``alpha``: its
    family-wise level (the study's ``verdict.alpha``).

    ``sequential``: the study's ``looks.json`` (``{"design": {...}, "looks": [...]}``, see
    docs/interfaces.md). The analysis is then judged as the last look was: at its nominal
    ``level`` instead of 5%, with the bootstrap seeded from the data
    (``analysis.stats.looks.sequential.data_seed``; ``seed`` is not used) and the design's
    ``margin_pct`` (``margin_pct`` is not used), so on the table that look read the verdict is
    that look's. verdict.json gets the looks under ``sequential`` and the report a "Sequential
    looks" section. A dict without looks (none judged yet) is the same as None.

    ``inference``: measured inference figures (``{"device", "rows"}``, `scaling.serving.inference`);
    verdict.json gets each arm's cost ratio to the baseline under ``inference``, the report an
    "Inference cost" section (without it the section says how to measure them).
    ``stability`` (the study ran ``lr.search.find_edge``): verdict.json gets ``stability``
    (``analysis.stats.lr.stability``: each arm's largest stable LR per size, the margin over the
    (first) baseline and its word) and the report a "Stability" section.

    verdict.json's ``code_digests``: the model code each variant's judged runs trained with
    (``analysis.tables.digests``); a variant whose runs carry two digests is refused
    (ValueError) before anything is written.
    """
    if sequential is not None and not sequential.get("looks"):
        sequential = None
    if sequential is not None:
        last = check_looks(sequential)
        alpha = float(last["level"])
        margin_pct = float(sequential["design"]["margin_pct"])
    check_inputs(table, baseline, num_resamples, margin_pct)
    code_digests = judged_digests(table)  # refuses a variant judged on two versions of its code
    if sequential is not None:
        seed = data_seed(table)
    result = analyse(table, baseline, num_resamples, seed, detect_gain_pct, margin_pct, alpha)
    result.add_backtest()  # verdict.json's backtest: the study predicts its own top size
    result.verdict["code_digests"] = code_digests
    runs = at_chosen_lrs(result.usable, result.groups)  # downstream tasks, at the loss's LRs
    downstream = downstream_verdict(runs, baseline, num_resamples, seed, margin_pct, alpha)
    if downstream is not None:
        result.verdict["downstream"] = downstream
    if lr_search is not None:
        result.verdict["lr_search"] = lr_search
    if inference is not None:
        result.verdict["inference"] = inference_summary(inference, baseline)
    if stability:
        result.verdict["stability"] = stability_verdict(table, baseline.split(",")[0].strip())
    if sequential is not None:
        result.verdict["sequential"] = sequential_summary(sequential, result, table, baseline, seed)
        result.verdict["multiple_comparisons"] = _at_look_level(
            result.verdict["multiple_comparisons"], result.verdict["sequential"]
        )
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


LOOK_KEYS = ("look", "num_paired_top", "info_fraction", "z", "level", "verdict", "stop", "reason")
DESIGN_KEYS = ("start", "max", "step", "margin_pct")


def check_looks(sequential: dict) -> dict:
    """The last look of a ``looks.json`` dict, after checking what the report reads from it."""
    design = sequential.get("design")
    missing = [k for k in DESIGN_KEYS if not isinstance(design, dict) or k not in design]
    missing += sorted({k for look in sequential["looks"] for k in LOOK_KEYS if k not in look})
    if missing:
        raise ValueError(
            f"sequential: not a looks.json state (missing {', '.join(missing)}); pass the "
            "study's looks.json as read by scaling.records.look_state.read_looks"
        )
    numbers = [int(look["look"]) for look in sequential["looks"]]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"sequential: looks numbered {numbers}; expected 1, 2, ... in order")
    return sequential["looks"][-1]


def sequential_summary(
    sequential: dict, result, table: pd.DataFrame, baseline: str, seed: int
) -> dict:
    """verdict.json's ``sequential``: the design, every look as looks.json has it, and how the
    final analysis was judged (the last look's level, the bootstrap's seed) and whether its
    verdict is the last look's (it is on the table that look read)."""
    design = sequential["design"]
    alpha = float(design.get("alpha", ALPHA))
    plan = Design(
        int(design["start"]), int(design["max"]), int(design["step"]),
        float(design["margin_pct"]), alpha,
    )  # fmt: skip
    last = sequential["looks"][-1]
    verdicts = {v["variant"]: v["verdict"] for v in result.verdict["variants"]}
    want = last.get("verdicts")
    matches = verdicts == dict(want) if want else _joined(verdicts) == last["verdict"]
    try:
        paired_now = paired_top_seeds(table, baseline.split(",")[0].strip())
    except (KeyError, ValueError):
        paired_now = None
    return {
        "design": dict(design),
        "looks": [dict(look) for look in sequential["looks"]],
        "num_looks_max": plan.num_looks,
        "planned_seeds": plan.planned_seeds(),
        "judged_at": {
            "look": int(last["look"]),
            "level": float(last["level"]),
            "z": float(last["z"]),
            "alpha": alpha,
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
    per size in %^2, ``analysis.stats.core.grid_terms``) from one read of the source; a number
    has no runs, so no grid term ({})."""
    table = source_table(source, mlflow)
    if table is None:
        return {"all": float(source)}, {}  # type: ignore[arg-type]
    return noise_from_table(table, baseline), grid_terms(table, baseline)
