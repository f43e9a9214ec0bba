"""Each run's measured time per token, from its own logged steps: what the gain at matched
GPU-hours rests on (``analysis.stats.gains.time_matched``).

The trainer logs ``tokens_per_s`` (and ``step_time_s``) at every logged step
(``jobs.loop.trainer``); a run's time per token is the median of ``1 / tokens_per_s`` over its
logged steps (a step slowed by a checkpoint, an eval or a neighbour's burst moves a median
little), and its device is its ``device`` tag (``foundation.provenance.device_name``: the GPU's
name, or the CPU's cores and threads). Runs on different devices cannot share a time ratio: only
the runs of the most common device are kept, and the rest are counted in ``other_devices``.

At most ``MAX_RUNS_PER_CELL`` runs per (variant, size) are read (completed first): the ratio's
spread is the runs', and a dozen pin it down; reading every run of a large study would cost a
request per run for nothing.

The pilot (``scaling pilot``) times one mean step per probe, one number per arm and size with no
repeats: it cannot carry the ratio's spread, so the study's own runs are the measurement.
"""

from __future__ import annotations

import statistics
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

__all__ = [
    "SOURCE",
    "STEP_KEY",
    "MAX_RUNS_PER_CELL",
    "run_time_per_token",
    "timed_runs",
    "times_of",
]

STEP_KEY = "tokens_per_s"  # logged by the trainer at every logged step
SOURCE = "cell step times (each run's logged tokens_per_s, MLflow)"
MAX_RUNS_PER_CELL = 12


def run_time_per_token(tokens_per_s: list[float]) -> float | None:
    """Median seconds per token over a run's logged steps, or None without a positive value."""
    per_token = [1.0 / x for x in tokens_per_s if x and x > 0]
    return statistics.median(per_token) if per_token else None


def timed_runs(table: pd.DataFrame, limit: int = MAX_RUNS_PER_CELL) -> list[str]:
    """The run ids to read: per (variant, size) at most ``limit``, completed runs first."""
    runs = table[table["run_id"].notna()].copy()
    runs["_rank"] = (runs["status"] != "completed").astype(int)
    runs = runs.sort_values(["_rank", "run_id"], kind="stable")
    picked = runs.groupby(["variant", "size"], sort=False).head(limit)
    return [str(r) for r in picked["run_id"]]


def times_of(table: pd.DataFrame, histories: dict, devices: dict[str, str]) -> dict | None:
    """``{"source", "device", "other_devices", "rows": [{"run_id", "variant", "size",
    "time_per_token_s"}]}`` from ``run_id -> {STEP_KEY: (steps, values)}`` and ``run_id ->
    device``; None when no run logged a step time."""
    by_id = table.set_index(table["run_id"].astype(str))
    rows = []
    for run_id, keys in histories.items():
        t = run_time_per_token(list(keys.get(STEP_KEY, ((), ()))[1]))
        if t is None or run_id not in by_id.index:
            continue
        run = by_id.loc[run_id]
        rows.append({"run_id": run_id, "variant": str(run["variant"]), "size": str(run["size"]),
                     "time_per_token_s": t, "device": devices.get(run_id, "unknown")})  # fmt: skip
    if not rows:
        return None
    count = Counter(r["device"] for r in rows)
    device = count.most_common(1)[0][0]
    kept = [{k: v for k, v in r.items() if k != "device"} for r in rows if r["device"] == device]
    return {"source": SOURCE, "device": device, "other_devices": len(rows) - len(kept),
            "rows": kept}  # fmt: skip


def load_step_times(tracking_uri: str, table: pd.DataFrame, workers: int = 8) -> dict | None:
    """``times_of`` for the study's runs in MLflow (``timed_runs`` of ``table``)."""
    from analysis.tables.mlflow_io import load_curves  # lazy: mlflow only when read
    from foundation import contract  # lazy: its client imports mlflow

    ids = timed_runs(table)
    if not ids:
        return None
    histories = load_curves(tracking_uri, ids, keys=(STEP_KEY,))
    client = contract.make_client(tracking_uri)

    def device(run_id: str) -> tuple[str, str]:
        return run_id, client.get_run(run_id).data.tags.get("device", "unknown")

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(histories) or 1))) as pool:
        devices = dict(pool.map(device, list(histories)))
    return times_of(table, histories, devices)
