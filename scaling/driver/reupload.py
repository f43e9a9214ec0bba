"""Completed cells whose MLflow runs a lost store took: uploaded again from their folders.

A cell that completed keeps, in its folder, `result.json` and the spool of every record it
logged (`jobs.telemetry.tracking`: metrics, params, tags, dataset, artifacts, end status). If the
study's store is lost (`scaling.state.store_check`) the next submit would find no run for the cell
and train it again, or, as the job returns its result at once, leave a run with nothing in it. So
before each submit, every completed cell with no run in the store gets a new run, tagged as
`submit` tags its cells (from the run config it trained with), and its whole spool is sent to
it: one run per cell, each metric point once (the uploader sends each metric's steps once, in
order), the cell skipped as completed.

Exactly once or reported, never half-uploaded: a spool is replayed only if it is whole
(`jobs.telemetry.spool.check_spool`: sealed when its training ended, unchanged since). One cut
short or damaged is reported (its file, and the line where that can be told) and no run is made
for it; the cell's outputs (result, spool, checkpoints, run id) are moved to
`<cell folder>/set_aside/<time>/` so that the submit that follows trains it again, which rebuilds
its whole record. A replay that fails midway (the server) deletes the run it made, so the next
`scaling run --new-store` sends the spool again; no run is left RUNNING.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foundation import contract
from foundation.atomic import write_text
from jobs import load_run_config
from jobs.telemetry.spool import SPOOL, check_spool, parse_line, reset_uploaded
from jobs.telemetry.upload import upload_spool
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.mlflow_state import cell_runs, client_for, ensure_parent_run

__all__ = ["reupload_results"]

_RESULT = "result.json"
# what a cell's training left that a retrain must not find: it would return the result at once,
# resume from the last step, or append to the damaged spool
_TRAINED = (_RESULT, "tracking", "checkpoints", contract.RUN_ID_FILE, "artifacts")


def _on_disk(cell: Cell) -> bool:
    out = Path(cell.run.output_dir)
    return all((out / name).is_file() for name in (_RESULT, SPOOL, "run_config.yaml"))


def _first_time_ms(spool: Path) -> int | None:
    """When the cell first logged a metric (its run's start), from the spool's first metric."""
    with open(spool, "rb") as f:
        for line in f:
            record, _ = parse_line(line)  # a damaged line: reported by the upload
            if record is not None and record["t"] == "metric":
                return int(record["ts"])
    return None


def _set_aside(out: Path) -> Path:
    """Move what the cell's training left into `out/set_aside/<time>/`: the next submit trains it
    afresh. Moved, not deleted: the damaged spool stays for whoever wants to look."""
    aside = out / "set_aside" / time.strftime("%Y%m%dT%H%M%S")
    aside.mkdir(parents=True, exist_ok=True)
    for name in _TRAINED:
        if (out / name).exists():
            shutil.move(out / name, aside / name)
    return aside


def reupload_results(study: ResolvedStudy, say: Callable[[str], None]) -> list[str]:
    """Give every completed cell without a run in the store, and with a whole spool, a new run
    holding that spool; the ids of those cells. A cell whose spool is not whole is said and set
    aside to train again."""
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
    uploaded = []
    for cell in lost:
        out = Path(cell.run.output_dir)
        problem = check_spool(out)
        if problem is not None:
            aside = _set_aside(out)
            say(
                f"not uploaded {cell.cell_id}: {problem}. A run cannot be rebuilt from it, so "
                f"the cell trains again (what it left is in {aside})"
            )
            continue
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
        try:
            pending = upload_spool(out, config.tracking, config.name)
            if pending:
                raise RuntimeError(f"{pending} bytes of its spool were not sent")
        except Exception as err:  # noqa: BLE001 - the server: no half-uploaded run stays
            _drop(client, run.info.run_id)
            say(
                f"could not upload {cell.cell_id}'s results ({type(err).__name__}: {err}); its "
                "run was removed, and `scaling run --new-store` again sends them"
            )
            continue
        say(f"uploaded {cell.cell_id}'s results from its folder into run {run.info.run_id}")
        uploaded.append(cell.cell_id)
    cell_runs(study, client, refresh=True)  # the status cache learns the new runs
    return uploaded


def _drop(client: Any, run_id: str) -> None:
    """Delete a run whose replay failed (else mark it FAILED): never one left RUNNING."""
    try:
        client.delete_run(run_id)
    except Exception:  # noqa: BLE001 - the server is down: the next best thing, if it answers
        try:
            client.set_terminated(run_id, "FAILED")
        except Exception:  # noqa: BLE001
            pass
