"""One submission of a study's due cells, and cancelling them; how cells run is the executor's.

`submit_due` is idempotent. Each cell's state is read from MLflow and the scheduler first
(`scaling.state.status`): completed and diverged cells are skipped, queued and running ones left
alone, and only pending, failed or cancelled cells are (re)submitted, reusing their MLflow run
and output dir (so a retried cell resumes from its newest checkpoint and stays one run). One
submit per study at a time (a lock file in the study folder).
"""

from __future__ import annotations

import dataclasses
import fcntl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from data_prep import prepare
from data_prep.manifest import MANIFEST_NAME
from foundation import contract
from scaling.backends.base import live_jobs
from scaling.backends.executors import Executor
from scaling.backends.queued import QUEUED
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.job_records import JobRecord, read_records, write_records
from scaling.state.files.regular import open_lock
from scaling.state.mlflow_state import (
    cell_runs,
    client_for,
    end_parent_run,
    ensure_cell_run,
    ensure_parent_run,
    find_parent_run,
)
from scaling.state.run_cache import CellRun
from scaling.state.stale import StaleChoice, settle_stale
from scaling.state.status import cell_state, gave_up_note, never_started, submitit_folder

__all__ = [
    "Submitted",
    "submit_due",
    "study_parent_run_id",
    "prepare_study_data",
    "fail_parent_run",
]

RESUBMIT_STATES = (contract.PENDING, contract.FAILED, contract.CANCELLED)


@dataclass(frozen=True)
class Submitted:
    """What one submission (`StudyRun.submit`) did."""

    parent_run_id: str
    submitted: list[str]  # cell ids (re)submitted now
    skipped: dict[str, str]  # cell id → the state that made it skip (completed, running, ...)
    jobs: dict[str, Any]  # cell id → its submitit job, of the cells submitted (local: that ran)


def study_parent_run_id(study: ResolvedStudy) -> str | None:
    """The MLflow run id of the study's parent run (None before the first submit)."""
    return find_parent_run(study)


def prepare_study_data(study: ResolvedStudy, progress: bool = False) -> None:
    """Prepare the study's dataset if the spec gives `data.prepare` and it is not there yet.

    `progress`: show a live bar of the documents tokenised (for a terminal).
    """
    spec = study.spec
    prep = spec.prepare_config()
    if prep is None or (spec.dataset_path / MANIFEST_NAME).is_file():
        return
    prepare(prep, progress=progress)


@contextmanager
def _submit_lock(study: ResolvedStudy) -> Iterator[None]:
    study.folder.mkdir(parents=True, exist_ok=True)
    with open_lock(study.folder / ".submit.lock") as lock:  # never truncated, nor through a link
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{study.folder}: another `scaling submit` of study {study.name} is running; "
                "wait for it (or check `scaling status`)"
            ) from None
        yield


def submit_due(
    study: ResolvedStudy,
    executor: Executor,
    say: Callable[[str], None],
    retry_failed: bool = False,
    stale: StaleChoice = None,
    stop: threading.Event | None = None,
) -> Submitted:
    """Submit every cell that is pending, failed or cancelled; skip the others.

    A cell that failed more than `study.retries` times stays failed (skipped as "failed")
    unless `retry_failed`, which also starts its count again. Finished cells of changed model
    code are refused unless `stale` says to rerun or accept them (`scaling.state.stale`).
    The parent run is made RUNNING first; an exception ends it FAILED (KILLED on Ctrl-C).

    Ctrl-C (KeyboardInterrupt, or `stop` set by the thread that watches a local submit): the
    started cells are cancelled (`LocalExecutor`), and those never started are left as they
    were before this submit (pending, or their earlier state and failure count), so an
    interrupt never counts against `retries`.
    """
    prepare_study_data(study)
    with _submit_lock(study):
        client = client_for(study)
        records = read_records(study.folder)
        # the scheduler before MLflow (`study_status`): a cell that ends meanwhile is not taken
        # for a crash and trained again
        live = live_jobs(records, submitit_folder(study))
        # a full search: what to train must not trust the status cache (a run deleted in MLflow)
        runs = cell_runs(study, client, refresh=True)
        _check_unchanged(study, runs)
        if settle_stale(study, stale, client, runs, say):  # refuses while cells are stale
            runs = cell_runs(study, client, refresh=True)
        parent = ensure_parent_run(study, client)  # before any child: each one points at it
        exp_id = contract.experiment_id(client, study.mlflow.experiment)
        before = dict(records)  # what an interrupt restores for the cells it never started
        todo, skipped = _due_cells(study, runs, records, live, retry_failed, say)
        todo = [cell.with_parent(parent) for cell in todo]
        counted = dict(records)
        run_ids = {
            cell.cell_id: ensure_cell_run(client, exp_id, parent, cell, runs.get(cell.cell_id))
            for cell in todo
        }
        say(f"{len(todo)} cell(s) to submit, {len(skipped)} skipped")
        try:
            jobs = executor.submit(todo, records, states=skipped, say=say, stop=stop)
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):
                _restore_unstarted(study, client, todo, runs, run_ids, (before, counted), records)
            fail_parent_run(study, err)
            raise
        return Submitted(parent, [c.cell_id for c in todo], skipped, jobs)


def _due_cells(
    study: ResolvedStudy,
    runs: dict[str, CellRun],
    records: dict[str, JobRecord],
    live: dict[str, str],
    retry_failed: bool,
    say: Callable[[str], None],
) -> tuple[list[Cell], dict[str, str]]:
    """The cells to (re)submit, and the others with the state that skips them.

    A failed cell's job counts against `study.retries` here (its record's `failures`, in
    `records`), once per submit; past them it is skipped, unless `retry_failed` (count anew).
    """
    todo: list[Cell] = []
    skipped: dict[str, str] = {}
    for cell in study.cells:
        record = records.get(cell.cell_id)
        state = cell_state(runs.get(cell.cell_id), live.get(cell.cell_id), never_started(record))
        if state == contract.FAILED and record is not None:  # its job failed: count it
            if record.given_up(state, study.spec.retries) and not retry_failed:
                skipped[cell.cell_id] = state
                why = gave_up_note(record.failures + 1, study.spec.retries)
                say(
                    f"not resubmitted {cell.cell_id}: {why}. See its log in "
                    f"{submitit_folder(study)}, then `scaling submit --retry-failed`"
                )
                continue
            failures = 0 if retry_failed else record.failures + 1
            records[cell.cell_id] = dataclasses.replace(record, failures=failures)
        if state in RESUBMIT_STATES:
            todo.append(cell)
        else:
            skipped[cell.cell_id] = state
    return todo, skipped


def _restore_unstarted(
    study: ResolvedStudy,
    client: Any,
    todo: list[Cell],
    runs: dict[str, CellRun],
    run_ids: dict[str, str],
    earlier: tuple[dict[str, JobRecord], dict[str, JobRecord]],
    records: dict[str, JobRecord],
) -> None:
    """Undo an interrupted submit for the cells it never started: their job records as they
    were, a run made by this submit deleted (it holds nothing), an older run's status back.

    `earlier`: the records before this submit, and after it counted failures; a cell whose
    record is still the counted one, or a `queued-` one, never got a job.
    """
    before, counted = earlier
    cell_ids = [
        c.cell_id
        for c in todo
        if records.get(c.cell_id) is counted.get(c.cell_id)
        or records[c.cell_id].job_id.startswith(QUEUED)
    ]
    for cid in cell_ids:
        if cid in before:
            records[cid] = before[cid]
        else:
            records.pop(cid, None)
    write_records(study.folder, records)
    for cid in cell_ids:
        try:
            if runs.get(cid) is None:
                client.delete_run(run_ids[cid])
            else:
                client.update_run(run_ids[cid], status=runs[cid].status)
        except Exception:  # noqa: BLE001, S110 - MLflow down: `status` shows it failed instead
            pass


def fail_parent_run(study: ResolvedStudy, err: BaseException) -> None:
    """Mark the parent run KILLED (Ctrl-C) or FAILED (any other exception), if MLflow answers.

    Best effort: the exception being handled is the one the user must see, not a second one
    from a tracking server that is down.
    """
    status = "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED"
    try:
        end_parent_run(study, status)
    except Exception:  # noqa: BLE001, S110 - see the docstring
        pass


def _check_unchanged(study: ResolvedStudy, runs: dict[str, CellRun]) -> None:
    """Refuse to mix recipes: a cell's existing run must train the same resolved run config."""
    changed = [
        c.cell_id
        for c in study.cells
        if c.cell_id in runs and runs[c.cell_id].config_hash not in (None, c.config_hash)
    ]
    if changed:
        raise ValueError(
            f"study {study.name}: {len(changed)} cell(s) already have MLflow runs trained with a "
            f"different run config ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})"
            "; the spec's recipe changed since they were submitted. Restore it, or give the "
            "study a new name (or mlflow.experiment) to start a separate grid"
        )
