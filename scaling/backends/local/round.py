"""The machinery of one local round: a queue of cells run as local submitit jobs, a few at once.

`LocalExecutor.submit` (`scaling.backends.local.executor`) makes one `LocalRound` per call and
runs it to its end: cells start longest first in free slots, a WSD branch once its parent has a
result, and an interrupt cancels the running jobs and ends their runs KILLED. Cells that a killed
driver left running (their controllers outlive it) are adopted: they hold their slots and GPUs
until they end, so a rerun never runs more than `local.max_parallel` cells at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from foundation import contract
from scaling.backends.base import live_jobs
from scaling.backends.local.devices import (
    DeviceSlots,
    gpu_params,
    job_gpus,
    local_gpus,
    visible_gpu_indices,
)
from scaling.backends.queued import QUEUED, queued_id
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.job_records import JobRecord, new_record, read_records, write_records
from scaling.state.job_errors import last_error_in, last_error_line
from scaling.state.mlflow_state import cell_runs, fail_cell_run, kill_cell_run
from scaling.state.status import cell_state, never_started, submitit_folder

__all__ = ["LocalRound"]

LOCAL_POLL_S = 0.25  # how soon a free slot gets its next cell
CANCEL_WAIT_S = 30.0  # how long an interrupted `submit` waits for its cancelled jobs to end


class LocalRound:
    """One `LocalExecutor.submit`: a queue, the running jobs, and the cells ended."""

    def __init__(
        self,
        study: ResolvedStudy,
        executor_name: str,
        folder: Path,
        job: Callable[[Cell], Any],
        cells: list[Cell],
        records: dict[str, JobRecord],
        say: Callable[[str], None],
        states: dict[str, str] | None,
        python: str | None,
        stop: threading.Event | None,
    ) -> None:
        self.study, self.name, self.folder, self.job = study, executor_name, folder, job
        self.cells, self.records, self.say = cells, records, say
        self.python, self.stop = python, stop
        # longest first: the last cells of a round (which the next round waits for) are short
        self.queue = sorted(cells, key=_cost, reverse=True)
        self.running: dict[str, Any] = {}
        self.finished: dict[str, Any] = {}  # cell id → its submitit job, ended
        self.ended = dict(states or {})  # cell id → state, for parents not running here
        self.devices = DeviceSlots(visible_gpu_indices())
        self.held: dict[str, tuple[int, ...]] = {}  # cell id → the GPUs its job was given
        # cells still running from a driver that was killed: adopted, they hold their slots
        # (and GPUs) until they end, so this round never runs more than `max_parallel` at once
        self.orphans = {
            cid: records[cid]
            for cid, state in self.ended.items()
            if state in contract.ACTIVE_STATES
            and cid in records
            and records[cid].executor == executor_name
            and not records[cid].job_id.startswith(QUEUED)
        }
        for cid, record in self.orphans.items():
            self.held[cid] = self.devices.take_these(job_gpus(record.job_id))

    def run(self) -> dict[str, Any]:
        waiting_id = queued_id()
        for cell in self.queue:  # visible to `scaling status` from another shell as pending
            self.records[cell.cell_id] = new_record(
                self.records, cell.cell_id, self.name, waiting_id
            )
        write_records(self.study.folder, self.records)
        try:
            while self.queue or self.running:
                if self.stop is not None and self.stop.is_set():
                    raise KeyboardInterrupt
                self._drop_blocked()
                self._start_ready()
                time.sleep(LOCAL_POLL_S)
                self._collect_ended()
        except BaseException:
            _cancel_running(self.study, self.cells, self.running)
            raise
        return self.finished

    def _drop_blocked(self) -> None:
        for cell, reason in _blocked(self.study, self.queue, self.running, self.ended):
            self.queue.remove(cell)
            self.records.pop(cell.cell_id, None)  # no job: status reads the FAILED run
            write_records(self.study.folder, self.records)
            fail_cell_run(self.study, cell, reason)
            self.ended[cell.cell_id] = contract.FAILED
            self.say(f"not started {cell.cell_id}: {reason}")

    def _start_ready(self) -> None:
        # lazy: submitit's import is paid by a local round only, not by `scaling plan` or `status`
        from scaling.backends.local.session import SessionLocalExecutor

        max_parallel = self.study.spec.local.max_parallel
        self._forget_ended_orphans()
        while len(self.running) + len(self.orphans) < max_parallel:
            cell = _next_ready(self.queue, self.running, self.ended)
            if cell is None:
                return
            gpus = self.devices.take(cell.world_size) if self.devices.total else ()
            if gpus is None:
                return  # its GPUs are held by running cells: start it when one ends
            self.queue.remove(cell)
            self.held[cell.cell_id] = gpus
            executor = SessionLocalExecutor(folder=self.folder, python=self.python)
            threads = max(1, (os.cpu_count() or 1) // (max_parallel * cell.world_size))
            executor.update_parameters(
                tasks_per_node=cell.world_size,
                timeout_min=self.study.spec.local.timeout_min,
                **(gpu_params(gpus) if self.devices.total else local_gpus(cell.world_size)),
            )
            with _env(OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads))):
                job = executor.submit(self.job(cell))  # the controller copies this environment
            self.running[cell.cell_id] = job
            self.records[cell.cell_id] = new_record(
                self.records, cell.cell_id, self.name, job.job_id
            )
            write_records(self.study.folder, self.records)
            self.say(f"started {cell.cell_id} (pid {job.job_id})")

    def _forget_ended_orphans(self) -> None:
        """Give back the slots of adopted cells (`orphans`) whose jobs have ended."""
        if not self.orphans:
            return
        live = live_jobs(self.orphans, submitit_folder(self.study))
        for cid in [c for c in self.orphans if c not in live]:
            del self.orphans[cid]
            self.devices.give_back(self.held.pop(cid, ()))

    def _collect_ended(self) -> None:
        for cid, job in list(self.running.items()):
            if job.done():
                del self.running[cid]
                self.devices.give_back(self.held.pop(cid, ()))
                self.finished[cid] = job
                self.ended[cid] = _job_state(job)
                # the cell's end, not submitit's (FINISHED whenever its controller exits)
                self.say(f"ended {cid}: {self.ended[cid]}{_failure(job, self.ended[cid])}")


@contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cancel_running(study: ResolvedStudy, cells: list[Cell], running: dict[str, Any]) -> None:
    """Cancel the running jobs, wait (bounded) for them to end, and end their runs KILLED, so
    the cells read `cancelled` (resubmitted, not counted as failures) and not `failed`."""
    for job in running.values():
        job.cancel()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline and not all(job.done() for job in running.values()):
        time.sleep(LOCAL_POLL_S)
    by_id = {cell.cell_id: cell for cell in cells}
    for cid in running:
        try:
            kill_cell_run(study, by_id[cid])
        except Exception:  # noqa: BLE001, S110 - MLflow down: `status` shows it failed instead
            pass


def _cost(cell: Cell) -> float:
    """A cell's training FLOPs, to order the queue (sorted() keeps the grid order on ties)."""
    from models.accounting import flops_per_token  # lazy: torch, imported by a run only

    train = cell.run.train
    return float(flops_per_token(cell.run.model)) * train.steps * train.global_batch_tokens


def _job_state(job: Any) -> str:
    """completed / diverged from the job's RunResult; cancelled if SIGTERM stopped it (its step
    saved, its run KILLED: the next submit resumes it); failed if it raised or died."""
    try:
        status = job.results()[0].status
    except Exception:  # noqa: BLE001 - any failure of the job is the cell's failure
        return contract.FAILED
    if status == "interrupted":  # jobs.loop.trainer: SIGTERM, a cancel or a preemption
        return contract.CANCELLED
    return status if status in contract.DONE_STATES else contract.FAILED


def _failure(job: Any, state: str) -> str:
    """` (why)` for a failed job: its log's last error line (as `scaling status` gives it), else
    `killed` if it left no result; nothing for a cell that did not fail."""
    if state != contract.FAILED:
        return ""
    from submitit.core.utils import UncompletedJobError

    why = last_error_line(Path(job.paths.stderr))
    if why is not None:
        return f" ({why})"
    try:
        error = job.exception()
    except Exception as err:  # noqa: BLE001 - its error could not even be read
        error = err
    if isinstance(error, UncompletedJobError):
        return " (killed: its job ended without a result)"
    # a job that raised (a variant's file that no longer imports) is "FINISHED" to submitit
    line = last_error_in(str(error)) if error is not None else None
    return f" ({line})" if line else ""


def _next_ready(queue: list[Cell], running: dict[str, Any], ended: dict[str, str]) -> Cell | None:
    """The first queued cell whose parent (if any) has ended with a result."""
    for cell in queue:
        if cell.depends_on is None or ended.get(cell.depends_on) in contract.DONE_STATES:
            if cell.depends_on is None or cell.depends_on not in running:
                return cell
    return None


def _blocked(
    study: ResolvedStudy, queue: list[Cell], running: dict[str, Any], ended: dict[str, str]
) -> list[tuple[Cell, str]]:
    """Queued cells whose parent ended without a result (failed, cancelled): never startable.

    A parent neither queued here nor ended is live in another submit: its state is re-read.
    """
    waiting = {c.cell_id for c in queue} | set(running)
    out = []
    for cell in queue:
        parent = cell.depends_on
        if parent is None or parent in waiting:
            continue
        state = ended.get(parent)
        if state in contract.ACTIVE_STATES or state is None:
            state = ended[parent] = _current_state(study, parent)
        if state in (contract.FAILED, contract.CANCELLED, contract.PENDING):
            out.append((cell, f"parent {parent} {state}"))
    return out


def _current_state(study: ResolvedStudy, cell_id: str) -> str:
    records = read_records(study.folder)
    live = live_jobs(records, submitit_folder(study))
    unstarted = never_started(records.get(cell_id))
    return cell_state(cell_runs(study).get(cell_id), live.get(cell_id), unstarted)
