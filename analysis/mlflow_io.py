"""Read a study's runs from MLflow and write the analysis back to the study's parent run.

Follows the MLflow contract in docs/interfaces.md: cells are runs tagged ``study=<name>``;
the parent run carries ``scaling.role=study``. Imported lazily: only MLflow users pay for it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analysis.table import normalise

PARENT_ROLE_TAG = "scaling.role"
# MLflow's own run status -> the table's status, unless the cell's `outcome` tag says more.
_MLFLOW_STATUS = {"FAILED": "failed", "KILLED": "failed", "RUNNING": "running"}
_MLFLOW_STATUS.update(SCHEDULED="running")


def _client(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _status(run) -> str:
    """FAILED/KILLED -> failed; RUNNING/SCHEDULED -> running; FINISHED -> the outcome tag."""
    mapped = _MLFLOW_STATUS.get(run.info.status)
    if mapped is not None:
        return mapped
    outcome = run.data.tags.get("outcome", "")
    if outcome in ("diverged", "failed", "cancelled"):
        return outcome
    if outcome in ("running", "pending", "queued"):
        # A FINISHED run whose outcome tag still says running never reported its end.
        return "failed"
    if "final_val_loss" not in run.data.metrics:
        return "failed"
    return "completed"


def _search_all(client, experiment_id: str, filter_string: str) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def load_study(tracking_uri: str, experiment: str, study: str) -> tuple[pd.DataFrame, str | None]:
    """(run table, parent run id or None) for every cell of ``study`` in ``experiment``."""
    client = _client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise ValueError(
            f"experiment {experiment!r} not found at {tracking_uri}; check the study's "
            "mlflow.experiment and mlflow.tracking_uri"
        )
    quoted = study.replace("'", "\\'")
    runs = _search_all(client, exp.experiment_id, f"tags.study = '{quoted}'")
    parents = [r for r in runs if r.data.tags.get(PARENT_ROLE_TAG) == "study"]
    cells = [r for r in runs if r.data.tags.get(PARENT_ROLE_TAG) != "study"]
    if not parents:  # the parent may carry only the role tag and the study name as run name
        role = _search_all(client, exp.experiment_id, f"tags.`{PARENT_ROLE_TAG}` = 'study'")
        parents = [r for r in role if r.info.run_name == study]
    if not cells:
        raise ValueError(
            f"no runs tagged study={study!r} in experiment {experiment!r} at {tracking_uri}; "
            "check the study name (its `name` key) or run `scaling status`"
        )
    rows = []
    for run in cells:
        tags, metrics = run.data.tags, run.data.metrics
        missing = [k for k in ("variant", "seed") if k not in tags]
        n_key = _first(metrics, ("num_nonembedding_params", "n_nonembedding_params"))
        missing += [] if n_key else ["num_nonembedding_params"]
        missing += [] if "tokens" in metrics else ["tokens"]
        if missing:
            raise ValueError(
                f"run {run.info.run_id} of study {study!r} lacks {', '.join(missing)}; "
                "every cell must log the tags and metrics of docs/interfaces.md"
            )
        rows.append(
            {
                "variant": tags["variant"],
                "size": tags.get("size"),
                "num_nonembedding_params": metrics[n_key],
                "num_params_total": metrics.get(
                    _first(metrics, ("num_params_total", "n_params")) or "", math.nan
                ),
                "tokens": metrics["tokens"],
                "flops": metrics.get("flops", math.nan),
                "seed": tags["seed"],
                "lr": tags.get("lr", math.nan),
                "final_val_loss": metrics.get("final_val_loss", math.nan),
                "select_val_loss": metrics.get("final_select_loss", math.nan),
                "status": _status(run),
                "run_id": run.info.run_id,
            }
        )
    # a re-submitted study may have left a second parent; the first created is the study's
    parent_id = min(parents, key=lambda r: r.info.start_time).info.run_id if parents else None
    return normalise(pd.DataFrame(rows), f"study {study!r} in MLflow"), parent_id


def _first(metrics: dict, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` logged (new metric names first, then the old ones)."""
    return next((n for n in names if n in metrics), None)


CURVE_KEYS = ("train/loss", "val/loss")  # per-step metrics of the MLflow contract


def load_curves(
    tracking_uri: str, run_ids: list[str], keys: tuple[str, ...] = CURVE_KEYS, workers: int = 8
) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``run_id -> {key: (steps, values)}`` of per-step metrics, for the training-curve plots.

    ``get_metric_history`` pages through a run's whole history itself (one request per page of
    the server's page size); runs are fetched ``workers`` at a time in threads, so a study of a
    few hundred runs costs seconds, not one round trip after another. Runs or keys with no
    history are left out.
    """
    from concurrent.futures import ThreadPoolExecutor

    client = _client(tracking_uri)

    def one(run_id: str) -> tuple[str, dict]:
        out = {}
        for key in keys:
            history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
            if history:
                out[key] = ([m.step for m in history], [m.value for m in history])
        return run_id, out

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(run_ids)))) as pool:
        return {rid: got for rid, got in pool.map(one, run_ids) if got}


def log_to_parent(tracking_uri: str | None, parent_run_id: str, out_dir: Path) -> None:
    """Attach the report, plots and verdict to the study's parent run under ``analysis/``."""
    import mlflow

    client = _client(tracking_uri or mlflow.get_tracking_uri())
    client.log_artifacts(parent_run_id, str(out_dir), artifact_path="analysis")
