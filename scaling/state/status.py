"""Each cell's state, in the one vocabulary of `foundation.contract`, and the study's grid.

A cell's state is read from MLflow (what its run recorded) and the scheduler (whether its job is
still live), never from logs. The grid comes from the resolved study: a status poll costs one
MLflow poll and one `squeue`, not a re-expansion of the study; the poll asks MLflow only for
what may have changed since the last one (`scaling.state.run_cache`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from analysis.tables.study_table import run_state
from foundation import contract
from foundation.studypaths import missing_store
from jobs.telemetry.spool import last_logged_step
from scaling.backends.base import backend_class, live_jobs
from scaling.backends.queued import QUEUED
from scaling.spec.grid import Cell, OfCell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.job_records import JobRecord, read_records
from scaling.state.job_errors import last_error_line
from scaling.state.mlflow_state import cell_runs
from scaling.state.run_cache import CellRun
from scaling.state.stale import changed_files, code_digests, today_code

__all__ = ["StatusRow", "cell_state", "study_status", "submitit_folder", "states_in_words"]

# Scheduler states of a job that waits for resources (Slurm's, and "PENDING" for local ones).
_WAITING = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SUSPENDED",
    "STOPPED",
}


@dataclass(frozen=True)
class StatusRow(OfCell):
    """One cell as `scaling status` shows it: the cell itself, and what its run and job say."""

    cell: Cell
    state: str  # one of foundation.contract.STATES
    val_loss: float | None
    job_id: str | None
    run_id: str | None
    note: str = ""  # why, where the state alone does not say (a branch's parent failed)
    given_up: bool = False  # failed more than `study.retries` times: `submit` leaves it failed
    step: int | None = None  # a running cell: the last step it logged (of `num_steps`)
    num_steps: int | None = None
    cause: str = ""  # a failed cell: the last error line of its job's log (`state.job_errors`)

    @property
    def retryable(self) -> bool:
        """A failed job that the next `submit` resubmits (not a branch without its parent)."""
        return self.state == contract.FAILED and self.job_id is not None and not self.given_up


def states_in_words(
    states: Iterable[str],
    order: Iterable[str] = contract.STATES,
    always: Iterable[str] = (),
    words: dict[str, str] | None = None,
) -> str:
    """Cells' states as a sentence: ``"2 completed, 1 failed"``, the count of each state of
    `order` that some cell is in, and of each of `always` even at 0; `words` says a state
    otherwise (``{"pending": "not started"}``). The one way a count of states is written: the
    status table's tally, the live bar, the interrupt line, the exit line."""
    counts = Counter(states)
    words = words or {}
    kept = set(always)
    return ", ".join(f"{counts[s]} {words.get(s, s)}" for s in order if counts[s] or s in kept)


STALE_NOTE = "model code changed since; --rerun-stale or --accept-stale"


def stale_note(files: list[str]) -> str:
    """A stale cell's note: what changed (the files, when its run recorded its code's parts)
    and both fixes."""
    if not files:
        return STALE_NOTE
    return f"model code changed since: {', '.join(files)}; --rerun-stale or --accept-stale"


def cell_state(run: CellRun | None, live: str | None, unstarted: bool = False) -> str:
    """One of `foundation.contract.STATES` from MLflow's `run` and the scheduler's `live` state.
    `unstarted`: the cell's latest submission never got a job (`never_started`)."""
    if run is not None and contract.run_status_state(run.status) is None:  # FINISHED
        # the report's own mapping: a run that finished without its final loss failed
        return run_state(run.status, run.outcome, run.final_val_loss is not None)
    if live is not None:
        return contract.QUEUED if live in _WAITING else contract.RUNNING
    if run is None:
        return contract.PENDING
    state = contract.run_status_state(run.status)
    if state == contract.RUNNING and unstarted:
        # submitted, but its driver died (a SIGKILL) before it gave the cell a job: nothing ran,
        # nothing failed; the next submit starts it, counting no failure against `retries`.
        # (RUNNING too: MLflow makes a new run RUNNING before the submit marks it SCHEDULED.)
        return contract.PENDING
    # A run that says it is running but has no live job: it crashed, or its job died.
    return contract.FAILED if state == contract.RUNNING else state


def never_started(record: JobRecord | None) -> bool:
    """True if no job was ever started for the cell's latest submission: no record (its submit
    was killed before writing one) or a `queued-` one (waiting for a local slot) whose submit
    is gone (a live one is read as queued before this is asked)."""
    return record is None or record.job_id.startswith(QUEUED)


def submitit_folder(study: ResolvedStudy) -> Path:
    """Where submitit keeps the study's job logs and pickles."""
    return study.folder / "submitit"


def study_status(study: ResolvedStudy, refresh: bool = False) -> list[StatusRow]:
    """The grid's state, from MLflow (results) and the scheduler (live jobs); bounded in time.

    `refresh`: search every run of the study again instead of trusting the cache of finished
    runs (which then is rewritten): for a run deleted in MLflow (`scaling.state.run_cache`).
    """
    # The scheduler first, then MLflow: a job ends its run before it leaves the queue, so a job
    # that ends between the two reads is seen live, or finished. Read the other way round, it
    # would be a RUNNING run without a live job: a crash ("failed") that never happened.
    records = read_records(study.folder)
    live = live_jobs(records, submitit_folder(study))
    # a SQLite store not made yet holds no runs; opening it would create it (read-only here)
    no_store = missing_store(study.mlflow.tracking_uri) is not None
    runs = {} if no_store else cell_runs(study, refresh=refresh)
    parts = today_code(study)
    digests = code_digests(study, parts)
    waiting = ""  # why cells wait in a submit for room under the limits: read once, if one does
    held = next((r for r in records.values() if _waits_for_room(r)), None)
    if held is not None:
        reason = backend_class(held.executor).waiting_reason(study.folder)
        waiting = f"waiting: {reason or 'room under the limits'}"
    rows = []
    for cell in study.cells:
        run = runs.get(cell.cell_id)
        record = records.get(cell.cell_id)
        val = None
        if run is not None:
            val = run.final_val_loss if run.final_val_loss is not None else run.last_val_loss
        state = cell_state(run, live.get(cell.cell_id), never_started(record))
        if state in contract.DONE_STATES and run.stale(digests[cell.run.model.query_variant]):
            state = contract.STALE  # its model code changed since (`scaling.state.stale`)
        given_up = record is not None and record.given_up(state, study.spec.retries)
        step = last_logged_step(cell.run.output_dir) if state == contract.RUNNING else None
        cause = None
        if state == contract.FAILED and record is not None:
            backend = backend_class(record.executor)
            log = backend.error_log(submitit_folder(study), record.job_id)
            cause = last_error_line(log)
        rows.append(
            StatusRow(
                cell=cell,
                state=state,
                val_loss=val,
                job_id=record.job_id if record else None,
                run_id=run.run_id if run else None,
                note=gave_up_note(record.failures + 1, study.spec.retries)
                if given_up
                else (
                    stale_note(changed_files(run, parts[cell.run.model.query_variant]))
                    if state == contract.STALE
                    else _held(record, state, waiting)
                ),
                given_up=given_up,
                step=step,
                num_steps=cell.run.train.steps,
                cause=cause or "",
            )
        )
    return _parent_notes(study, rows)


def _held(record, state: str, waiting: str) -> str:
    """A cell queued in its submit, not yet in its scheduler's queue (Slurm): why it waits."""
    held = record is not None and _waits_for_room(record)
    return waiting if held and state == contract.QUEUED else ""


def _waits_for_room(record: JobRecord) -> bool:
    """A cell queued in its submit for room under the cluster's limits (not yet a job)."""
    backend = backend_class(record.executor)
    return backend.waits_for_cluster_room and record.job_id.startswith(QUEUED)


def gave_up_note(failures: int, retries: int) -> str:
    """Why `submit` no longer resubmits a cell."""
    return f"gave up after {failures} failure{'s' if failures > 1 else ''}; retries: {retries}"


def _parent_notes(study: ResolvedStudy, rows: list[StatusRow]) -> list[StatusRow]:
    """A branch without its result whose parent ended without one says so: "parent X failed"."""
    state = {r.cell_id: r.state for r in rows}
    parents = {c.cell_id: c.depends_on for c in study.cells if c.depends_on}
    out = []
    for row in rows:
        parent = parents.get(row.cell_id)
        bad = (contract.FAILED, contract.CANCELLED, contract.DIVERGED)
        if parent and row.state in (contract.FAILED, contract.PENDING) and state.get(parent) in bad:
            row = dataclasses.replace(row, note=f"parent {parent} {state[parent]}")
        out.append(row)
    return out
