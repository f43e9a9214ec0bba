"""Submit, wait for and cancel a study; how cells run is `scaling.executors`' job.

`submit_study` is idempotent. Each cell's state is read from MLflow and the scheduler first
(`scaling.state`): completed and diverged cells are skipped, queued and running ones left
alone, and only pending, failed or cancelled cells are (re)submitted, reusing their MLflow run
and output dir (so a retried cell resumes from its newest checkpoint and stays one run). One
submit per study at a time (a lock file in the study folder).
"""

from __future__ import annotations

import dataclasses
import fcntl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from foundation import contract as C
from scaling.grid import Cell
from scaling.mlflow_state import (
    CellRun,
    cell_runs,
    client_for,
    end_parent_run,
    ensure_cell_run,
    ensure_parent_run,
    fail_cell_run,
    find_parent_run,
    parent_status,
)
from scaling.resolved import ResolvedStudy, resolve
from scaling.scheduler import QUEUED, JobRecord, cancel_jobs, live_jobs, read_records, write_records
from scaling.stale import StaleChoice, settle_stale
from scaling.state import StatusRow, cell_state, gave_up_note, study_status, submitit_folder
from scaling.study import Study

__all__ = [
    "Submitted",
    "submit_study",
    "submit_rounds",
    "wait_study",
    "cancel_study",
    "study_parent_run_id",
    "prepare_data",
    "fail_parent_run",
    "end_given_up_runs",
]

RESUBMIT_STATES = (C.PENDING, C.FAILED, C.CANCELLED)


@dataclass(frozen=True)
class Submitted:
    """What one `submit_study` call did."""

    parent_run_id: str
    submitted: list[str]  # cell ids (re)submitted now
    skipped: dict[str, str]  # cell id → the state that made it skip (completed, running, ...)
    jobs: dict[str, Any]  # cell id → submitit Job


def study_parent_run_id(study: ResolvedStudy | Study) -> str | None:
    """The MLflow run id of the study's parent run (None before the first submit)."""
    return find_parent_run(resolve(study))


def prepare_data(study: ResolvedStudy | Study, progress: bool = False) -> None:
    """Prepare the study's dataset if the spec gives `data.prepare` and it is not there yet.

    `progress`: show a live bar of the documents tokenised (for a terminal).
    """
    from data_prep.manifest import MANIFEST_NAME

    spec = study.spec if isinstance(study, ResolvedStudy) else study
    prep = spec.prepare_config()
    if prep is None or (spec.dataset_path / MANIFEST_NAME).is_file():
        return
    from data_prep import prepare

    prepare(prep, progress=progress)


@contextmanager
def _submit_lock(study: ResolvedStudy) -> Iterator[None]:
    study.folder.mkdir(parents=True, exist_ok=True)
    with open(study.folder / ".submit.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{study.folder}: another `scaling submit` of study {study.name} is running; "
                "wait for it (or check `scaling status`)"
            ) from None
        yield


def submit_study(
    study: ResolvedStudy | Study,
    on_progress: Callable[[str], None] | None = None,
    end_parent: bool = True,
    retry_failed: bool = False,
    stale: StaleChoice = None,
    stop: threading.Event | None = None,
) -> Submitted:
    """Submit every cell that is pending, failed or cancelled; skip the others.

    A cell that failed more than `study.retries` times stays failed (skipped as "failed")
    unless `retry_failed`, which also starts its count again. Finished cells of changed model
    code are refused unless `stale` says to rerun or accept them (`scaling.stale`).

    Slurm: one job array per world size, returns once submitted. Local: runs the cells as
    subprocesses, at most `local.max_parallel` at once, and returns when all have ended.
    The parent run is RUNNING meanwhile; with the local executor and `end_parent` it ends
    FINISHED or FAILED with the study (`scaling run` passes False: it ends it after analysis).
    An exception ends it FAILED (KILLED on Ctrl-C) with either executor.

    Ctrl-C (KeyboardInterrupt, or `stop` set by the thread that watches a local submit): the
    started cells are cancelled (`scaling.executors.run_local`), and those never started are
    left as they were before this submit (pending, or their earlier state and failure count),
    so an interrupt never counts against `retries`.
    """
    from scaling.executors import run_local, submit_slurm

    say = on_progress or (lambda _msg: None)
    study = resolve(study)
    prepare_data(study)
    with _submit_lock(study):
        client = client_for(study)
        # a full search: what to train must not trust the status cache (a run deleted in MLflow)
        runs = cell_runs(study, client, refresh=True)
        _check_unchanged(study, runs)
        if settle_stale(study, stale, client, runs, say):  # refuses while cells are stale
            runs = cell_runs(study, client, refresh=True)
        parent = ensure_parent_run(study, client)  # before any child: each one points at it
        exp_id = C.experiment_id(client, study.mlflow.experiment)
        records = read_records(study.folder)
        before = dict(records)  # what an interrupt restores for the cells it never started
        live = live_jobs(records, submitit_folder(study))
        todo: list[Cell] = []
        skipped: dict[str, str] = {}
        for cell in study.cells:
            state = cell_state(runs.get(cell.cell_id), live.get(cell.cell_id))
            record = records.get(cell.cell_id)
            if state == C.FAILED and record is not None:  # its job failed: count it
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
                todo.append(cell.with_parent(parent))
            else:
                skipped[cell.cell_id] = state
        counted = dict(records)
        run_ids = {
            cell.cell_id: ensure_cell_run(client, exp_id, parent, cell, runs.get(cell.cell_id))
            for cell in todo
        }
        say(f"{len(todo)} cell(s) to submit, {len(skipped)} skipped")
        try:
            if study.executor == "slurm":
                jobs = submit_slurm(study, todo, records, states=skipped)
            else:
                jobs = run_local(study, todo, records, say, states=skipped, stop=stop)
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):
                _restore_unstarted(study, client, todo, runs, run_ids, (before, counted), records)
            fail_parent_run(study, err)
            raise
        if study.executor == "local" and end_parent:
            end_parent_run(study, parent_status([r.state for r in study_status(study)]), client)
        return Submitted(parent, [c.cell_id for c in todo], skipped, jobs)


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


def end_given_up_runs(study: ResolvedStudy | Study, rows: list[StatusRow] | None = None) -> None:
    """End FAILED the MLflow run of each cell `submit` has given up on (`study.retries`), so
    MLflow and the analysis see a failed cell, not one still scheduled or running. Called where
    a round or a study ends (`submit`, `run`, `status --watch`); `rows`: a poll just made."""
    study = resolve(study)
    given_up = [r for r in (study_status(study) if rows is None else rows) if r.given_up]
    if not given_up:
        return
    runs = cell_runs(study)
    cells = {c.cell_id: c for c in study.cells}
    for row in given_up:
        run = runs.get(row.cell_id)
        if run is not None and run.status != "FAILED":
            why = f"{row.note}. `scaling submit --retry-failed` tries again"
            fail_cell_run(study, cells[row.cell_id], why)


def submit_rounds(
    study: ResolvedStudy | Study,
    on_progress: Callable[[str], None] | None = None,
    end_parent: bool = True,
    retry_failed: bool = False,
) -> Submitted:
    """`scaling submit` with LR search (`scaling.refine`): submit the current round.

    If the last round has ended, the next one is written and submitted. Slurm: returns once a
    round is queued (a later `submit`, `status --watch` or `run` advances the search). Local:
    runs round after round until the search has ended, then ends the parent run (`end_parent`);
    a failed cell is resubmitted up to `study.retries` times before its round is judged with it
    failed. Without `lr.search` this is `submit_study`. `retry_failed`: see `submit_study`.
    """
    from scaling.refine import advance

    say = on_progress or (lambda _msg: None)
    study = resolve(study)
    prepare_data(study)
    submitted: list[str] = []
    while True:  # failed cells are resubmitted before their round is judged
        result = submit_study(study, on_progress, end_parent=False, retry_failed=retry_failed)
        retry_failed = False  # once: the counts start again from this submission
        submitted += result.submitted
        if study.executor != "local" and result.submitted:
            break  # Slurm: this round is queued
        rows = study_status(study)
        following = advance(study, rows, say=say)
        if following is not None:
            study = following
        elif study.executor != "local" or not any(r.retryable for r in rows):
            break
    rows = study_status(study)
    end_given_up_runs(study, rows)
    if study.executor == "local" and end_parent:
        end_parent_run(study, parent_status([r.state for r in rows]))
    return Submitted(result.parent_run_id, submitted, result.skipped, result.jobs)


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


def wait_study(
    study: ResolvedStudy | Study,
    callback: Callable[[list[StatusRow]], None] | None = None,
    poll_s: float = 10.0,
    timeout_s: float | None = None,
    busy: Callable[[], bool] | None = None,
    on_error: Callable[[Exception], None] | None = None,
) -> list[StatusRow]:
    """Poll the grid until no cell is queued or running (and `busy()`, if given, is False).

    The one wait loop of `status --watch` and `run`; `callback` sees every poll's rows.
    With `on_error`, a failed status query (MLflow or its database restarting) is passed to it
    and the loop keeps polling: the cells keep training and spool their metrics meanwhile.
    TimeoutError after `timeout_s`.
    """
    study = resolve(study)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            rows = study_status(study)
        except Exception as err:  # noqa: BLE001 - any tracking-server failure
            if on_error is None:
                raise
            on_error(err)
            time.sleep(poll_s)
            continue
        if callback is not None:
            callback(rows)
        active = [r.cell_id for r in rows if r.state in C.ACTIVE_STATES]
        if not active and (busy is None or not busy()):
            return rows
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"study {study.name}: still active after {timeout_s} s: {active}")
        time.sleep(poll_s)


def cancel_study(study: ResolvedStudy | Study) -> list[str]:
    """Cancel the study's live jobs and mark their MLflow runs KILLED; returns their cell ids."""
    study = resolve(study)
    records = read_records(study.folder)
    cancelled = cancel_jobs(records, submitit_folder(study))
    if not cancelled:  # nothing to mark; a SQLite store not made yet stays unmade
        return cancelled
    runs = cell_runs(study)
    client = client_for(study)
    for cid in cancelled:
        run = runs.get(cid)
        if run is not None and run.status in ("SCHEDULED", "RUNNING"):
            client.set_terminated(run.run_id, "KILLED")
    return cancelled
