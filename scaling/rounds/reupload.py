"""Completed cells whose MLflow runs a lost store took: uploaded again from their folders.

A cell that completed keeps, in its folder, `result.json` and the spool of every record it
logged (`jobs.telemetry.tracking`: metrics, params, tags, dataset, artifacts, end status). If the
study's store is lost (`scaling.state.store_check`) the next submit would find no run for the cell
and train it again, or, as the job returns its result at once, leave a run with nothing in it. So
before each submit, every completed cell with no run in the store gets a new run, tagged as
`submit` tags its cells (from the run config it trained with), and its whole spool is sent to
it: one run per cell, each metric point once (the uploader sends each metric's steps once, in
order), the cell skipped as completed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from foundation import contract
from foundation.atomic import write_text
from jobs import load_run_config
from jobs.telemetry.spool import SPOOL, reset_uploaded
from jobs.telemetry.upload import upload_spool
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.mlflow_state import cell_runs, client_for, ensure_parent_run

__all__ = ["reupload_results"]

_RESULT = "result.json"


def _on_disk(cell: Cell) -> bool:
    out = Path(cell.run.output_dir)
    return all((out / name).is_file() for name in (_RESULT, SPOOL, "run_config.yaml"))


def _first_time_ms(spool: Path) -> int | None:
    """When the cell first logged a metric (its run's start), from the spool's first metric."""
    with open(spool, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("t") == "metric":
                return int(record["ts"])
    return None


def reupload_results(study: ResolvedStudy, say: Callable[[str], None]) -> list[str]:
    """Give every completed cell without a run in the store a new run holding its spool; the
    ids of those cells."""
    done = [cell for cell in study.cells if _on_disk(cell)]
    if not done:
        return []
    client = client_for(study)
    runs = cell_runs(study, client)
    lost = [cell for cell in done if cell.cell_id not in runs]
    if not lost:
        return []
    parent = ensure_parent_run(study, client)
    exp_id = contract.ensure_experiment(client, study.mlflow.experiment, study.mlflow.tracking_uri)
    for cell in lost:
        out = Path(cell.run.output_dir)
        config = load_run_config(out / "run_config.yaml")
        trained = dataclasses.replace(cell, run=config)  # its tags and recipe as it trained
        run = client.create_run(
            exp_id,
            run_name=cell.cell_id,
            start_time=_first_time_ms(out / SPOOL),
            tags={
                contract.TAG_PARENT: parent,
                **trained.tags,
                contract.TAG_CONFIG_HASH: trained.config_hash,
            },
        )
        write_text(out / contract.RUN_ID_FILE, run.info.run_id)
        reset_uploaded(out)
        upload_spool(out, config.tracking, config.name)
        say(f"uploaded {cell.cell_id}'s results from its folder into run {run.info.run_id}")
    cell_runs(study, client, refresh=True)  # the status cache learns the new runs
    return [cell.cell_id for cell in lost]
