"""A run CSV's measured times: its optional ``tokens_per_s`` column (each run's throughput, a
``device`` column beside it when known) read into the per-run times the gain at matched
GPU-hours rests on (``analysis.stats.gains.time_matched``), in the form the MLflow path gives
(``analysis.tables.step_times.times_of``): each run read as one logged step. Without the column
the CSV is untimed, as before; a value that is not a positive number (or blank) is refused,
naming the column and the row.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analysis.tables.runs import check_positive, csv_table, numbers, read_csv
from analysis.tables.step_times import STEP_KEY, times_of

__all__ = ["CSV_TIMES", "csv_times", "load_csv_runs"]

CSV_TIMES = "the run CSV's tokens_per_s column, one figure per run"


def load_csv_runs(path: str | Path) -> tuple[pd.DataFrame, dict | None]:
    """``analysis.tables.runs.load_csv``'s table and its runs' times (None without the
    column)."""
    raw, source = read_csv(path)
    table = csv_table(raw, source)
    return table, csv_times(raw, table, source)


def csv_times(raw: pd.DataFrame, table: pd.DataFrame, source: str) -> dict | None:
    """Each run's time per token from the CSV's ``STEP_KEY`` column (blank: not timed); rows
    keep their order in ``csv_table``, so row i is run ``table.run_id[i]``."""
    if STEP_KEY not in raw.columns:
        return None
    values = numbers(raw, STEP_KEY, source)
    check_positive(pd.DataFrame({STEP_KEY: values}), STEP_KEY, source, blank_ok=True)
    ids = table["run_id"].astype(str).tolist()
    devices = raw["device"] if "device" in raw.columns else pd.Series("unknown", index=raw.index)
    histories, device_of = {}, {}
    for i, value in enumerate(values.tolist()):
        if math.isfinite(value):
            histories[ids[i]] = {STEP_KEY: ([0], [value])}
            device_of[ids[i]] = "unknown" if pd.isna(devices.iloc[i]) else str(devices.iloc[i])
    times = times_of(table, histories, device_of)
    return None if times is None else {**times, "source": CSV_TIMES}
