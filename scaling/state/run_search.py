"""The study's runs from an MLflow server's REST API, without importing mlflow.

`scaling status` on a 2,000-cell study spent more time in the client than on the server:
importing mlflow (~1.4 s of CPU) and turning the response into protobuf entities (seconds for
2,000 runs with their ~60 params each) only to read a few tags and metrics. Against an HTTP(S)
server this module posts the same `runs/search` request MLflow's client does
(`foundation.mlflow_rest`, in pages of 1,000 runs) and keeps only each run's id, status,
start time, tags and metrics. Other stores (SQLite, a database URI) go through the MLflow
client as before (`search_with_client`). Both read the pages as one consistent view
(`foundation.run_pages`): a run created or deleted between two pages (a cell starting deletes
its SCHEDULED run and creates another) once gave a finished cell a second run in `submit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from foundation import mlflow_rest
from foundation.mlflow_rest import is_http
from foundation.run_pages import client_pages

__all__ = [
    "FoundRun",
    "is_http",
    "experiment_id_http",
    "search_http",
    "search_with_client",
]

PAGE_SIZE = mlflow_rest.SEARCH_PAGE  # the page the server answers fastest per run


@dataclass(frozen=True)
class FoundRun:
    """The parts of an MLflow run that status reads."""

    run_id: str
    status: str
    start_time: int
    tags: dict[str, str]
    metrics: dict[str, float]


def experiment_id_http(uri: str, experiment: str) -> str | None:
    """The id of the experiment named `experiment` on an HTTP(S) server (`is_http`); None if it
    does not exist."""
    return mlflow_rest.experiment_id(uri, experiment)


def search_http(uri: str, exp_id: str, filter_string: str) -> list[FoundRun]:
    """Every active run of experiment `exp_id` matching `filter_string`, in pages."""
    return [_found(run) for run in mlflow_rest.search_runs(uri, exp_id, filter_string, PAGE_SIZE)]


def search_with_client(client: Any, exp_id: str, filter_string: str) -> list[FoundRun]:
    """The same records through an MlflowClient (any store MLflow supports), each run once:
    read as one consistent view (`foundation.run_pages`), as the REST search is."""
    return [
        FoundRun(
            run.info.run_id,
            run.info.status,
            run.info.start_time,
            dict(run.data.tags),
            dict(run.data.metrics),
        )
        for run in client_pages(client, exp_id, filter_string, PAGE_SIZE)
    ]


def _found(run: dict[str, Any]) -> FoundRun:
    info, data = run["info"], run.get("data", {})
    return FoundRun(
        run_id=info["run_id"],
        status=info.get("status", "RUNNING"),
        start_time=int(info.get("start_time", 0)),
        tags={t["key"]: t.get("value", "") for t in data.get("tags", [])},
        metrics={m["key"]: float(m["value"]) for m in data.get("metrics", [])},
    )
