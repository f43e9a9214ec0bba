"""The round driver: a study's rounds, from its first submission to its parent run's end.

A round: submit what is due (`scaling.driver.submission.submit_due`), wait until no cell is queued
or running, upload what cells left in their spools during a tracking outage, then decide what comes
next (`StudyRun.next_cells`): the failed cells again (each up to `study.retries` times), the LR
search's next round (`scaling.lr_search.extend_grid`), or nothing, and the study is over. The
parent run ends with the study. `scaling.study.Study`'s `run`, `submit` and `watch` (so `scaling
run`, `scaling submit` and `scaling status --watch`) are thin calls on `StudyRun`; which executor
runs the cells is the executor's business (`scaling.backends.executors`). The waiting (polls,
tracking outages, progress and ETA) is its `RoundWatcher`'s (`scaling.driver.watcher`);
`StudyRun` decides.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from foundation import contract
from jobs import load_run_config
from jobs.telemetry.upload import upload_spool
from scaling.backends.executors import Executor, executor_for
from scaling.driver.reupload import reupload_results
from scaling.driver.submission import Submitted, submit_due
from scaling.driver.watcher import RoundWatcher, Rows, View
from scaling.looks.sequential_seeds import look_due, take_look
from scaling.lr_search.extend_grid import advance, search_over
from scaling.spec.grid import Cell
from scaling.spec.loader import looks_over
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.cancel_mark import (
    cancel_line,
    clear_cancel_mark,
    mark_cancelled,
    read_cancel_mark,
)
from scaling.state.files.job_records import JobRecord, read_records
from scaling.state.mlflow_state import (
    cell_runs,
    client_for,
    end_parent_run,
    fail_cell_run,
    parent_run_state,
    parent_status,
)
from scaling.state.stale import StaleChoice, stop_if_stale
from scaling.state.store_check import StoreLost
from scaling.state.tracking_refusal import TrackingRefused

__all__ = ["StudyRun", "View", "Cancelled"]

UPLOAD_WAIT_S = 600.0  # how long a round waits for MLflow to take leftover spools
STOP_WAIT_S = 120.0  # how long Ctrl-C waits for the local submit to cancel its cells


@dataclass(frozen=True)
class Cancelled:
    """What one `StudyRun.cancel` did."""

    cells: list[str]  # the cell ids whose live job it cancelled
    # the study had ended (its parent run's FINISHED, FAILED or KILLED, no job live): left as it
    # was, with no mark
    ended_as: str | None = None


class StudyRun:
    """A study's rounds on its executor: submit, wait, judge, retry or give up, end the parent.

    `say` gets every line meant for a person; `view` shows the progress of a round waited for
    (default: a `Reporter` line per change); `poll_s` is the wait between status polls (default:
    `scaling.driver.watcher.poll_seconds`, `SCALING_POLL_S` or 5 s).
    `study` grows as the LR search adds rounds (`next_cells`). `refused_give_up_s`: how long a
    tracking server refusing the login is retried before `TrackingRefused` (default:
    `scaling.state.tracking_refusal.refusal_give_up_s`); other failures are retried for good.
    """

    def __init__(
        self,
        study: ResolvedStudy,
        executor: Executor | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        view: View | None = None,
        poll_s: float | None = None,
        refused_give_up_s: float | None = None,
    ) -> None:
        self.executor = executor or executor_for(study)
        self.say = say
        # polls, outages and progress: the watcher's (it is told the study as it grows)
        self.watcher = RoundWatcher(study, self.executor, say, view, poll_s, refused_give_up_s)
        self.submitted: list[str] = []  # cell ids submitted by this object, every round
        self.last: Submitted | None = None  # the latest submission
        self._said_cancelled = False

    @property
    def study(self) -> ResolvedStudy:
        """The study as it is now: it grows as the LR search and the looks add rounds."""
        return self.watcher.study

    @study.setter
    def study(self, study: ResolvedStudy) -> None:
        self.watcher.study = study

    def status(self) -> Rows:
        return self.watcher.status()

    def submit(
        self,
        retry_failed: bool = False,
        stale: StaleChoice = None,
        stop: threading.Event | None = None,
    ) -> Submitted:
        """Submit every cell that is due now (`submit_due`); on Slurm it returns once queued,
        on the local executor once the cells have ended. Completed cells whose runs a lost
        store took are uploaded again from their folders first (`scaling.driver.reupload`).
        A cluster that lets nothing be queued is refused first, nothing written
        (`Executor.check_submit`)."""
        self.executor.check_submit()
        reupload_results(self.study, self.say)
        result = submit_due(self.study, self.executor, self.say, retry_failed, stale, stop)
        self.submitted += result.submitted
        self.last = result
        return result

    def drive(
        self, wait: bool = True, retry_failed: bool = False, submit_first: bool = True
    ) -> Rows:
        """Round after round until `next_cells` says the study is over; the last rows.

        Without `wait`, it returns once a round is queued on an executor that does not run the
        cells itself (Slurm `submit`: a later `submit`, `status --watch` or `run` goes on).
        `submit_first=False` waits for what is already queued first (`status --watch`).
        `retry_failed`: the first submission also resubmits cells given up on, counting anew.
        A study `scaling cancel` stopped goes on when this submits (`submit_first`); a watch
        (`submit_first=False`) of one only watches, and a cancel meanwhile ends the loop
        (`next_cells`).
        """
        due = submit_first
        if submit_first:
            self.resume_cancelled()
        while True:
            if not due:
                rows = self.watcher.watched(self.watcher.progress(set()))
            elif wait:
                rows = self._submit_and_wait(retry_failed)
            else:
                result = self.submit(retry_failed)
                if result.submitted and not self.executor.runs_cells_in_submit:
                    return self.status()  # queued
                rows = self.status()
            retry_failed, due = False, True
            rows = self.upload_leftover_spools(rows)
            if not self.next_cells(rows):
                return rows

    def next_cells(self, rows: Rows) -> list[Cell]:
        """What the study runs after a round, decided from its runs alone; [] when it is over.

        Cells gone stale meanwhile (their model code changed while they trained) stop it
        first (`scaling.state.stale.StaleCode`): no round, look or report judges them with
        runs of the new code. Else the failed cells again, while each has `study.retries` left;
        else the LR search's next
        round (a round whose only unfinished cells were given up on is judged with them
        failed; one held by cancelled cells too); else, with sequential seeds, the next look's
        seeds (`scaling.looks.sequential_seeds`); else nothing. Like `lr_search.json` and
        `looks.json`, a
        pure function of MLflow's state: a crash between rounds decides the same again.
        """
        if any(r.state in contract.ACTIVE_STATES for r in rows):
            return []  # the round has not ended
        if self.cancelled():
            return []  # `scaling cancel`: no round is judged with its cells, none submitted
        # code changed mid-study: StaleCode, nothing judged (an undone acceptance is dropped)
        stop_if_stale(self.study)
        following = advance(self.study, rows, self.say)
        self.watcher.remember_search()  # the state it just wrote is this driver's
        if following is None and any(r.retryable for r in rows):
            self.say(f"retrying the failed cells (study.retries: {self.study.spec.retries})")
            return [self.study.cell(r.cell_id) for r in rows if r.retryable]
        if following is None and not search_over(self.study):
            # cancelled cells hold the round: judge it with them
            following = advance(self.study, rows, self.say, allow_failed=True)
            self.watcher.remember_search()
        if following is None and look_due(self.study, rows):
            following = take_look(self.study, rows, self.say)
        if following is None:
            return []
        known = {r.cell_id for r in rows}
        self.study = following
        return [c for c in following.cells if c.cell_id not in known]

    def finish(self, rows: Rows, end_parent: bool = True) -> None:
        """Where a round or the study ends: the runs of cells given up on end FAILED, and (with
        `end_parent`) the parent run ends once every cell has ended, the search is over and the
        last look (with sequential seeds) stopped the study."""
        self._end_given_up_runs(rows)
        if self.cancelled():  # `scaling cancel` ended the parent KILLED; a submission goes on
            return
        ended = rows and all(r.state in contract.ENDED_STATES for r in rows)
        if end_parent and ended and search_over(self.study) and looks_over(self.study.spec):
            self.end_parent(rows)

    def end_parent(self, rows: Rows) -> None:
        """The parent run's final status: FINISHED if every cell has a result, else FAILED."""
        end_parent_run(self.study, parent_status([r.state for r in rows]))

    def cancelled(self) -> dict | None:
        """The mark `scaling cancel` left (`scaling.state.files.cancel_mark`), said once; None if
        the
        study was not cancelled."""
        mark = read_cancel_mark(self.study.folder)
        if mark is not None and not self._said_cancelled:
            self.say(cancel_line(mark))
            self._said_cancelled = True
        return mark

    def resume_cancelled(self) -> None:
        """A submission goes on with a study `scaling cancel` stopped: remove its mark."""
        mark = clear_cancel_mark(self.study.folder)
        if mark is not None:
            self.say(f"going on with the study cancelled at {mark.get('at', '?')}")

    def _ended_as(self, records: dict[str, JobRecord]) -> str | None:
        """The parent run's FINISHED, FAILED or KILLED if the study has ended and none of its
        jobs is live; None while it runs, between rounds or before its first submit."""
        if not records:
            return None
        status = parent_run_state(self.study)
        if status in (None, "RUNNING") or self.executor.poll(records):
            return None
        return status

    def cancel(self) -> Cancelled:
        """Stop the study: mark it cancelled (no driver starts new cells until a submission goes
        on), cancel its live jobs and mark their MLflow runs KILLED. A study that has ended is
        left as it is: no mark, nothing cancelled (`Cancelled.ended_as`)."""
        records = read_records(self.study.folder)
        ended = self._ended_as(records)
        if ended is not None:
            return Cancelled([], ended)
        mark_cancelled(self.study.folder, [])  # first: a watcher that sees the jobs end sees it
        cancelled = self.executor.cancel(records)
        mark_cancelled(self.study.folder, cancelled)
        if not records:  # never submitted: a SQLite store not made yet stays unmade
            return Cancelled(cancelled)
        runs = cell_runs(self.study)
        client = client_for(self.study)
        for cid in cancelled:
            run = runs.get(cid)
            if run is not None and run.status in ("SCHEDULED", "RUNNING"):
                client.set_terminated(run.run_id, "KILLED")
        end_parent_run(self.study, "KILLED", client, if_running=True)
        return Cancelled(cancelled)

    def upload_leftover_spools(self, rows: Rows, wait_s: float = UPLOAD_WAIT_S) -> Rows:
        """Upload what cells that completed during a tracking outage left in their spools.

        A cell whose server stayed down past its own final upload attempt ends with a result on
        disk but a run MLflow still shows as unfinished (so `failed`); its spool holds the rest
        of its metrics and its end status. Retry until the server answers or `wait_s` passes.
        """
        cells = self.study.folder / "cells"
        done = [
            cells / r.cell_id
            for r in rows
            if r.state == contract.FAILED and (cells / r.cell_id / "result.json").is_file()
        ]
        if not done:
            return rows
        deadline = time.monotonic() + wait_s
        while done:
            out = done[0]
            config = load_run_config(out / "run_config.yaml")
            try:
                upload_spool(out, config.tracking, config.name)
                self.say(f"uploaded the spool {out.name} left during a tracking outage")
                done.pop(0)
            except Exception as err:  # noqa: BLE001 - still down: retry until the deadline
                if time.monotonic() > deadline:
                    self.say(
                        f"MLflow still unreachable ({err}); `scaling run` again uploads the rest"
                    )
                    return rows
                time.sleep(self.watcher.poll_s)
        try:
            return self.status()
        except Exception:  # noqa: BLE001 - a flapping server: keep the rows we have
            return rows

    def _submit_and_wait(self, retry_failed: bool) -> Rows:
        """Submit the due cells and wait until none is queued or running, showing progress."""
        before = {r.cell_id for r in self.status() if r.state in contract.DONE_STATES}
        progress = self.watcher.progress(before)
        self.say(
            f"study {self.study.name}: {len(self.study.cells)} cells, {len(before)} already done"
        )
        if not self.executor.runs_cells_in_submit:
            submitted = self.submit(retry_failed)
            self.say(f"submitted {len(submitted.submitted)} cell(s) to {self.executor.label}")
            return self.watcher.watched(progress)
        # The cells run while `submit` blocks; watch from this thread.
        errors: list[BaseException] = []
        stop = threading.Event()  # Ctrl-C here: the submitting thread cancels what it started

        def submit() -> None:
            try:
                self.submit(retry_failed, stop=stop)
            except BaseException as err:  # noqa: BLE001 - re-raised below in this thread
                errors.append(err)

        submitting = threading.Thread(target=submit, name="scaling-submit", daemon=True)

        def busy() -> bool:
            if errors:  # it died: its queued cells will never start, so stop watching them
                raise errors[0]
            return submitting.is_alive()

        submitting.start()
        try:
            rows = self.watcher.watched(progress, busy=busy)
        except (KeyboardInterrupt, TrackingRefused, StoreLost) as err:
            with _interrupts_held(self.say):  # a second Ctrl-C must not cut the cleanup short
                stop.set()
                submitting.join(timeout=STOP_WAIT_S)
            if not (isinstance(err, KeyboardInterrupt) and self.cancelled()):
                raise
            # `scaling cancel` interrupts the driver whose submit holds cells (their `queued-`
            # records name it): the study was cancelled, not interrupted; its cells have ended
            return self.watcher.wait(on_error=self.watcher.unavailable)
        if errors:
            raise errors[0]
        return rows

    def _end_given_up_runs(self, rows: Rows) -> None:
        """End FAILED the MLflow run of each cell given up on (`study.retries`), so MLflow and
        the analysis see a failed cell, not one still scheduled or running."""
        given_up = [r for r in rows if r.given_up]
        if not given_up:
            return
        runs = cell_runs(self.study)
        for row in given_up:
            run = runs.get(row.cell_id)
            if run is not None and run.status != "FAILED":
                cause = f": {row.cause}" if row.cause else ""  # the job's last error line
                why = f"{row.note}{cause}. `scaling submit --retry-failed` tries again"
                fail_cell_run(self.study, self.study.cell(row.cell_id), why)


@contextlib.contextmanager
def _interrupts_held(say: Callable[[str], None]) -> Iterator[None]:
    """While the cells are being stopped after a Ctrl-C: further SIGINTs are said to wait, not
    raised (a second quick Ctrl-C used to abandon the cleanup: the running cells trained on and
    the queued ones read as failed). In the main thread only (where Python takes signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    said = []

    def held(_signum: int, _frame: object) -> None:
        if not said:
            said.append(True)
            say(f"stopping the cells first (at most {STOP_WAIT_S:.0f} s)")

    before = signal.signal(signal.SIGINT, held)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
