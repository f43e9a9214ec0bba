"""Scaling-law fits per variant and a verdict on whether a gain persists with scale.

Reads a run table (MLflow or CSV); imports no torch or model code. Names are loaded on first
use so that importing the CLI stays cheap. ``lr_frontier`` is the LR contract scaling's
refinement builds on (docs/interfaces.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_analysis", "load_csv", "load_study", "lr_frontier", "LRFrontier"]
__all__ += ["noise_from_source", "power_table"]

_WHERE = {
    "run_analysis": "analysis.api",
    "load_csv": "analysis.tables.runs",
    "load_study": "analysis.tables.mlflow_io",
    "lr_frontier": "analysis.stats.frontier",
    "LRFrontier": "analysis.stats.frontier",
    "noise_from_source": "analysis.stats.power",  # `scaling plan --noise`
    "power_table": "analysis.stats.power",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
