"""The study's MLflow side: its parent run, one child run per cell, and each cell's state.

MLflow is the source of truth for results, and the guard against duplicates: `submit` creates a
cell's run itself (status SCHEDULED, tagged with the cell and `mlflow.parentRunId`) and writes its
id into the cell's output dir as `mlflow_run_id`, which `jobs.TrainingJob` reuses (also after a
requeue or a resubmission). A cell therefore never gets a second run: the next submit finds it
by its tags and reuses it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation.config import dump_file

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from scaling.cells import Cell
    from scaling.study import Study

__all__ = [
    "CellRun",
    "client_for",
    "experiment_id",
    "find_parent_run",
    "ensure_parent_run",
    "cell_runs",
    "ensure_cell_run",
    "RUN_ID_FILE",
]

RUN_ID_FILE = "mlflow_run_id"  # jobs.tracking reads the cell's run id from OUTPUT/<this>
ROLE_TAG = "scaling.role"
HASH_TAG = "scaling.config_hash"
# MLflow's default HTTP retries last minutes; a status command must answer in seconds.
_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


@dataclass(frozen=True)
class CellRun:
    """What MLflow knows about one cell's run."""

    run_id: str
    status: str  # MLflow: SCHEDULED, RUNNING, FINISHED, FAILED, KILLED
    outcome: str | None  # tag written by the job: running, completed, diverged
    final_val_loss: float | None
    last_val_loss: float | None
    start_time: int
    config_hash: str | None  # tag: the resolved run config this run trains (cells.config_hash)


def client_for(study: Study) -> MlflowClient:
    from mlflow.tracking import MlflowClient

    for key, value in _HTTP_ENV.items():
        os.environ.setdefault(key, value)
    uri = study.mlflow.tracking_uri
    if uri.startswith("sqlite:///"):  # a local store's folder is made on first use
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def experiment_id(client: MlflowClient, name: str, create: bool = False) -> str | None:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    if not create:
        return None
    try:
        return client.create_experiment(name)
    except Exception:  # noqa: BLE001 - a concurrent job created it first
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def _search(client: MlflowClient, exp_id: str, filter_string: str) -> list[Any]:
    runs, token = [], None
    while True:
        page = client.search_runs(
            [exp_id], filter_string=filter_string, max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def find_parent_run(study: Study, client: MlflowClient | None = None) -> str | None:
    """The id of the study's parent run, or None if it was never submitted."""
    client = client or client_for(study)
    exp_id = experiment_id(client, study.mlflow.experiment)
    if exp_id is None:
        return None
    runs = _search(client, exp_id, f"tags.`{ROLE_TAG}` = 'study' and tags.study = '{study.name}'")
    if not runs:
        return None
    return min(runs, key=lambda r: r.info.start_time).info.run_id  # the first is the parent


def ensure_parent_run(study: Study, client: MlflowClient | None = None) -> str:
    """The study's parent run, created on first submit with the spec attached as an artifact."""
    client = client or client_for(study)
    found = find_parent_run(study, client)
    if found is not None:
        return found
    exp_id = experiment_id(client, study.mlflow.experiment, create=True)
    run = client.create_run(
        exp_id,
        run_name=study.name,
        tags={ROLE_TAG: "study", "study": study.name, "executor": study.executor},
    )
    run_id = run.info.run_id
    client.log_batch(
        run_id,
        params=_params(
            {
                "sizes": ",".join(study.sizes),
                "variants": ",".join(study.variants),
                "seeds": ",".join(map(str, study.seeds)),
                "engine": study.engine,
            }
        ),
    )
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "study.yaml"
        dump_file(study, spec)
        client.log_artifact(run_id, str(spec))
    # The parent is a container: it holds the spec and groups the children in the UI.
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _params(values: dict[str, str]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, str(v)[:6000]) for k, v in values.items()]


def _val_loss(run: Any, name: str) -> float | None:
    value = run.data.metrics.get(name)
    return float(value) if value is not None else None


def cell_runs(study: Study, client: MlflowClient | None = None) -> dict[str, CellRun]:
    """cell_id → its run, for every cell of the study that has one."""
    client = client or client_for(study)
    exp_id = experiment_id(client, study.mlflow.experiment)
    if exp_id is None:
        return {}
    found: dict[str, CellRun] = {}
    for run in _search(client, exp_id, f"tags.study = '{study.name}'"):
        tags = run.data.tags
        cid = tags.get("cell_id")
        if not cid or tags.get(ROLE_TAG) == "study":
            continue
        cell_run = CellRun(
            run_id=run.info.run_id,
            status=run.info.status,
            outcome=tags.get("outcome"),
            final_val_loss=_val_loss(run, "final_val_loss"),
            last_val_loss=_val_loss(run, "val/loss"),
            start_time=run.info.start_time,
            config_hash=tags.get(HASH_TAG),
        )
        previous = found.get(cid)
        # Two runs for one cell should not exist; if one does, the oldest is the cell's run.
        if previous is None or cell_run.start_time < previous.start_time:
            found[cid] = cell_run
    return found


def ensure_cell_run(
    client: MlflowClient, exp_id: str, parent_run_id: str, cell: Cell, existing: CellRun | None
) -> str:
    """Create (or reuse) the cell's run, mark it SCHEDULED, and write its id for the job."""
    if existing is None:
        run = client.create_run(
            exp_id,
            run_name=cell.cell_id,
            tags={"mlflow.parentRunId": parent_run_id, **cell.tags, HASH_TAG: cell.config_hash},
        )
        run_id = run.info.run_id
    else:
        run_id = existing.run_id
        client.set_tag(run_id, HASH_TAG, cell.config_hash)
    client.update_run(run_id, status="SCHEDULED")
    out = Path(cell.run.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{RUN_ID_FILE}.tmp"
    tmp.write_text(run_id)
    tmp.replace(out / RUN_ID_FILE)
    dump_file(cell.run, out / "run_config.yaml")
    return run_id
