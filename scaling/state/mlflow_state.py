"""The study's MLflow side: its parent run, one child run per cell, and each cell's state.

MLflow is the source of truth for results, and the guard against duplicates: `submit` creates a
cell's run itself (status SCHEDULED, tagged with the cell and `mlflow.parentRunId`) and writes its
id into the cell's output dir as `mlflow_run_id`, which `jobs.TrainingJob` reuses (also after a
requeue or a resubmission). A cell therefore never gets a second run: the next submit finds it
by its tags and reuses it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import contract
from foundation.atomic import write_text
from foundation.config import dump_file
from jobs.telemetry.spool import reset_uploaded
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.run_cache import CellRun, poll_runs
from scaling.state.run_search import experiment_id_http, is_http, search_http, search_with_client
from scaling.state.store_check import record_store, store_trouble

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

__all__ = [
    "client_for",
    "find_parent_run",
    "ensure_parent_run",
    "parent_status",
    "end_parent_run",
    "parent_run_state",
    "cell_runs",
    "ensure_cell_run",
    "fail_cell_run",
    "kill_cell_run",
]


def client_for(study: ResolvedStudy) -> MlflowClient:
    return contract.make_client(study.mlflow.tracking_uri)


def find_parent_run(study: ResolvedStudy, client: MlflowClient | None = None) -> str | None:
    """The id of the study's parent run, or None if it was never submitted."""
    client = client or client_for(study)
    exp_id = contract.experiment_id(client, study.mlflow.experiment)
    if exp_id is None:
        return None
    query = (
        f"tags.`{contract.TAG_ROLE}` = '{contract.ROLE_STUDY}' "
        f"and tags.{contract.TAG_STUDY} = '{study.name}'"
    )
    runs = contract.search_runs(client, exp_id, query)
    if not runs:
        return None
    return min(runs, key=lambda r: r.info.start_time).info.run_id  # the first is the parent


def ensure_parent_run(study: ResolvedStudy, client: MlflowClient | None = None) -> str:
    """The study's parent run, RUNNING: a submit is about to run (some of) the study's cells.

    Created on first submit with the spec attached as an artifact; a resubmission sets it back
    to RUNNING. `end_parent_run` gives it its final status when the study ends.
    """
    client = client or client_for(study)
    found = find_parent_run(study, client)
    if found is not None:
        client.update_run(found, status="RUNNING")
        record_store(study)
        return found
    exp_id = contract.ensure_experiment(client, study.mlflow.experiment, study.mlflow.tracking_uri)
    run = client.create_run(
        exp_id,
        run_name=study.name,
        tags={
            contract.TAG_ROLE: contract.ROLE_STUDY,
            contract.TAG_STUDY: study.name,
            "executor": study.executor,
        },
    )
    run_id = run.info.run_id
    client.log_batch(
        run_id,
        params=_params(
            {
                "sizes": ",".join(study.spec.sizes),
                "variants": ",".join(study.spec.variants),
                "seeds": ",".join(map(str, study.spec.seeds)),
                "engine": study.spec.engine,
            }
        ),
    )
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "study.yaml"
        dump_file(study.spec, spec)
        client.log_artifact(run_id, str(spec))
    record_store(study)  # the store this study's runs are in (`scaling.state.store_check`)
    return run_id


def parent_status(states: list[str]) -> str:
    """The MLflow status a study ends with: FINISHED only if every cell has its result."""
    return "FINISHED" if states and all(s in contract.DONE_STATES for s in states) else "FAILED"


def end_parent_run(
    study: ResolvedStudy,
    status: str,
    client: MlflowClient | None = None,
    *,
    if_running: bool = False,
) -> None:
    """Give the study's parent run its final MLflow status (FINISHED, FAILED or KILLED).

    `if_running`: only a parent still RUNNING is ended (`scaling cancel`: an ended study keeps
    its status)."""
    if _store_lost(study):
        return
    client = client or client_for(study)
    parent = find_parent_run(study, client)
    if parent is None:
        return
    if if_running and client.get_run(parent).info.status != "RUNNING":
        return
    client.set_terminated(parent, status)


def _store_lost(study: ResolvedStudy) -> bool:
    """The study's SQLite store is gone or broken (`scaling.state.store_check`): a run's end
    cannot be written, and trying would log MLflow's database traceback. The runs are made
    anew from the cells' folders by `--new-store`."""
    uri, experiment = study.mlflow.tracking_uri, study.mlflow.experiment
    return store_trouble(uri, experiment, study.folder) is not None


def parent_run_state(study: ResolvedStudy, client: MlflowClient | None = None) -> str | None:
    """The MLflow status of the study's parent run (None before the first submit)."""
    client = client or client_for(study)
    parent = find_parent_run(study, client)
    return None if parent is None else client.get_run(parent).info.status


def _params(values: dict[str, str]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, str(v)[:6000]) for k, v in values.items()]


def cell_runs(
    study: ResolvedStudy, client: MlflowClient | None = None, refresh: bool = False
) -> dict[str, CellRun]:
    """cell_id → its run, for every cell of the study that has one.

    Through the study folder's cache of FINISHED runs (`scaling.state.run_cache`): a poll asks the
    server only for what may have changed. `refresh`: a full search that rewrites the cache
    (`scaling status --refresh`, and every `submit`). Without a `client`, an HTTP(S) server is
    searched through its REST API directly (`scaling.state.run_search`: no mlflow import, no
    protobuf), which keeps `scaling status` fast.
    """
    uri = study.mlflow.tracking_uri
    if client is None and is_http(uri):
        exp_id = experiment_id_http(uri, study.mlflow.experiment)

        def search(filter_string: str) -> list:
            return search_http(uri, exp_id, filter_string)
    else:
        mlflow_client = client or client_for(study)
        exp_id = contract.experiment_id(mlflow_client, study.mlflow.experiment)

        def search(filter_string: str) -> list:
            return search_with_client(mlflow_client, exp_id, filter_string)

    if exp_id is None:
        return {}
    found: dict[str, CellRun] = {}
    for entry in poll_runs(study, exp_id, search, refresh).values():
        previous = found.get(entry.cell_id)
        # Two runs for one cell should not exist; if one does, the oldest is the cell's run.
        if previous is None or entry.run.start_time < previous.start_time:
            found[entry.cell_id] = entry.run
    return found


def ensure_cell_run(
    client: MlflowClient, exp_id: str, parent_run_id: str, cell: Cell, existing: CellRun | None
) -> str:
    """Create (or reuse) the cell's run, mark it SCHEDULED, and write its id for the job.

    A cell with no run in the store whose folder names one (its store was lost, or its run
    deleted) gets a new run, and its whole spool is sent to it again (`reset_uploaded`): what
    went to the old run is not in the new one.
    """
    out = Path(cell.run.output_dir)
    if existing is None:
        if (out / contract.RUN_ID_FILE).is_file():
            reset_uploaded(out)
        run = client.create_run(
            exp_id,
            run_name=cell.cell_id,
            tags={
                contract.TAG_PARENT: parent_run_id,
                **cell.tags,
                contract.TAG_CONFIG_HASH: cell.config_hash,
            },
        )
        run_id = run.info.run_id
    else:
        run_id = existing.run_id
        client.set_tag(run_id, contract.TAG_CONFIG_HASH, cell.config_hash)
    client.update_run(run_id, status="SCHEDULED")
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / contract.RUN_ID_FILE, run_id)
    dump_file(cell.run, out / "run_config.yaml")
    return run_id


def fail_cell_run(study: ResolvedStudy, cell: Cell, reason: str) -> None:
    """End a cell's run FAILED with `reason` (tag `error`) without it ever having started.

    For a branch whose parent failed: `status` then shows it failed, not pending forever.
    """
    path = Path(cell.run.output_dir) / contract.RUN_ID_FILE
    if not path.is_file() or _store_lost(study):
        return
    client = client_for(study)
    run_id = path.read_text().strip()
    client.set_tag(run_id, contract.TAG_ERROR, reason)
    client.set_terminated(run_id, "FAILED")


def kill_cell_run(study: ResolvedStudy, cell: Cell) -> None:
    """End a cell's run KILLED (its job was cancelled), unless it finished meanwhile."""
    path = Path(cell.run.output_dir) / contract.RUN_ID_FILE
    if not path.is_file() or _store_lost(study):
        return
    client = client_for(study)
    run_id = path.read_text().strip()
    if client.get_run(run_id).info.status != "FINISHED":
        client.set_terminated(run_id, "KILLED")
