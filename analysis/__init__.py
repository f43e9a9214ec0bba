"""Scaling-law fits per variant and a verdict on whether a gain persists with scale.

- ``analysis.tables``: run tables in (CSV, a study's MLflow runs, the spec's few keys) and out.
- ``analysis.stats``: the analysis itself: fits, noise, LR frontier, gain tests, verdict, power.
- ``analysis.report``: what a person reads: numbers, headline, report, figures, terminal lines.
- ``analysis.synthetic``: studies whose truth is known, for tests and the benchmark.
- ``analysis.judgement`` (``Judgement``, ``table_judgement``: how a table is judged, built once),
  then ``analysis.api`` (``run_analysis(table, judgement, out)``: table in, files out) and
  ``analysis.cli`` (``scaling analyze --runs-csv``) on top. Arrows point one way: tables <-
  stats <- report, judgement <- api <- cli.

Reads a run table (MLflow or CSV); imports no torch or model code. Names are loaded on first
use so that importing the CLI stays cheap. ``lr_frontier`` is the LR contract scaling's
refinement builds on (docs/interfaces.md).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["run_analysis", "Judgement", "table_judgement"]
__all__ += ["load_csv", "load_study_runs", "lr_frontier", "LRFrontier"]
__all__ += ["noise_from_source", "noise_and_grid_from_source", "power_table"]

_WHERE = {
    "run_analysis": "analysis.api",
    "Judgement": "analysis.judgement",
    "table_judgement": "analysis.judgement",
    "load_csv": "analysis.tables.runs",
    "load_study_runs": "analysis.tables.mlflow_io",
    "lr_frontier": "analysis.stats.lr.frontier",
    "LRFrontier": "analysis.stats.lr.frontier",
    "noise_from_source": "analysis.stats.planning.power",  # `scaling plan --noise`
    "noise_and_grid_from_source": "analysis.api",  # the same, with the LR grid's term
    "power_table": "analysis.stats.planning.power",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
