"""Scaling-law fits per variant and a verdict on whether a gain persists with scale.

Reads a run table (MLflow or CSV); imports no torch or model code. ``run_analysis`` is loaded
on first use so that importing the CLI stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_analysis", "load_csv", "load_study"]


def __getattr__(name: str) -> Any:
    if name == "run_analysis":
        from analysis.api import run_analysis

        return run_analysis
    if name == "load_csv":
        from analysis.table import load_csv

        return load_csv
    if name == "load_study":
        from analysis.mlflow_io import load_study

        return load_study
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
