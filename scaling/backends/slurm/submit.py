"""Queueing a round's cells within the cluster's limits: arrays split, the rest held back.

`ArraySubmitter.run` submits the round's groups (one per world size, then each parent's
branches, as `SlurmExecutor.submit` makes them) as job arrays of at most `max_array` cells, and
keeps the user's jobs in the queue at or below the cap (`scaling.backends.slurm.limits`).
Cells that do not fit yet wait in this process: each has a `queued-<pid>` job record (so
`scaling status` anywhere shows it queued, with the reason in `WAITING`), and is submitted as
jobs leave the queue, found by one `squeue` per poll. An sbatch refusal over a limit is waited
out with a doubling backoff (never a tight loop); a chunk is recorded the moment sbatch queued
it, and one that sbatch refused queued nothing, so no cell is lost or submitted twice. Ctrl-C
leaves the waiting cells' records for `scaling.driver.submission` to restore.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.config import ConfigError
from scaling.backends.queued import queued_id
from scaling.backends.slurm.limits import ARRAY_REFUSAL, SlurmLimits, limit_refusal
from scaling.backends.slurm.queue import SQUEUE_TIMEOUT_S, WAITING
from scaling.spec.grid import Cell
from scaling.state.files.job_records import JobRecord, new_record, write_records

__all__ = ["ArraySubmitter", "Group", "MAX_BACKOFF_S"]

MAX_BACKOFF_S = 600.0  # the longest wait between two tries after refusals


@dataclass
class Group:
    """Cells submitted with the same sbatch options; `parent`: the cell whose job they wait
    for (`afterok`), submitted first."""

    cells: list[Cell]
    params: Callable[[], dict[str, Any]]  # sbatch options, asked when a chunk is submitted
    parent: str | None = None


class ArraySubmitter:
    """One round's submission within `limits` (see the module).

    `submit_chunk(cells, params)` queues one array and returns its jobs; `poll_s` is the wait
    between tries (backing off to `MAX_BACKOFF_S` while sbatch refuses or squeue fails).
    """

    def __init__(
        self,
        folder: Path,
        executor_name: str,
        limits: SlurmLimits,
        submit_chunk: Callable[[list[Cell], dict[str, Any]], list[Any]],
        poll_s: float,
        say: Callable[[str], None],
        stop: threading.Event | None = None,
        on_interrupt: str = "they stay pending, and the next `scaling submit` goes on",
    ) -> None:
        self.folder, self.name, self.limits = folder, executor_name, limits
        self.on_interrupt = on_interrupt  # what Ctrl-C leaves, for the wait line
        self.submit_chunk, self.poll_s, self.say, self.stop = submit_chunk, poll_s, say, stop
        self.max_array = limits.max_array
        self.squeue_calls = 0  # for the benchmark and the tests: one per try
        self.arrays = 0

    def run(
        self, groups: list[Group], records: dict[str, JobRecord], submitted: dict[str, Any]
    ) -> None:
        """Submit every group's cells, waiting while the limits hold them back."""
        pending = [g for g in groups if g.cells]
        waiting = {c.cell_id for g in pending for c in g.cells}
        if sum(len(g.cells) for g in pending) > min(self.max_array, self.limits.cap or 1 << 62):
            self._hold(waiting, records)  # shown queued while they wait
            self.say(f"Slurm limits: {self.limits.describe()}")
        backoff, said = self.poll_s, ""
        try:
            while pending:
                refused, reason = self._one_pass(pending, waiting, records, submitted)
                pending = [g for g in pending if g.cells]
                if not pending:
                    break
                reason = reason or "waiting for a branch's parent"
                self._note(reason, len(waiting))
                if reason != said:
                    self.say(
                        f"{len(waiting)} cell(s) wait: {reason}; submitting more as jobs leave "
                        f"the queue (Ctrl-C: {self.on_interrupt})"
                    )
                    said = reason
                backoff = min(MAX_BACKOFF_S, backoff * 2) if refused else self.poll_s
                self._sleep(backoff)
        finally:  # done, interrupted or failed: no cell of this process waits any more
            (self.folder / WAITING).unlink(missing_ok=True)

    def _one_pass(
        self,
        pending: list[Group],
        waiting: set[str],
        records: dict[str, JobRecord],
        submitted: dict[str, Any],
    ) -> tuple[bool, str]:
        """Submit what fits now; (refused by sbatch, why the rest waits)."""
        room = self._room()
        if room is None:
            return True, "squeue did not answer"
        for group in pending:
            if group.parent is not None and group.parent in waiting:
                continue  # its parent's job id is not known yet
            while group.cells:
                n = min(len(group.cells), self.max_array, room)
                if n <= 0:
                    return False, self.limits.cap_reason
                chunk = group.cells[:n]
                try:
                    jobs = self.submit_chunk(chunk, group.params())
                except Exception as err:  # noqa: BLE001 - submitit's FailedJobError and others
                    why = limit_refusal(str(err))
                    if why is None:
                        raise
                    if why == ARRAY_REFUSAL and n > 1:
                        self.max_array = max(1, n // 2)  # the site lowered MaxArraySize
                    return True, f"sbatch refused: {why}"
                self.arrays += 1
                for cell, job in zip(chunk, jobs, strict=True):
                    records[cell.cell_id] = new_record(records, cell.cell_id, self.name, job.job_id)
                    submitted[cell.cell_id] = job
                    waiting.discard(cell.cell_id)
                write_records(self.folder, records)  # at once: a crash now loses no job
                group.cells = group.cells[n:]
                room -= n
        return False, ""

    def _room(self) -> int | None:
        """How many more jobs the cap lets this user queue now; None if squeue failed."""
        if self.limits.cap is None:
            return 1 << 62
        self.squeue_calls += 1
        try:
            proc = subprocess.run(
                ["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i"],
                capture_output=True,
                text=True,
                errors="replace",  # bytes that are not UTF-8: still one job a word
                timeout=SQUEUE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return None
        except OSError as err:  # missing, or a broken interpreter: waiting cures neither
            raise ConfigError(_not_runnable(err.strerror or str(err))) from None
        if proc.returncode in (126, 127):  # the shell's "cannot execute" and "not found"
            lines = proc.stderr.strip().splitlines()
            raise ConfigError(
                _not_runnable(f"exit {proc.returncode}: {lines[-1] if lines else ''}")
            )
        if proc.returncode != 0:
            return None
        return self.limits.cap - len(proc.stdout.split())

    def _hold(self, cell_ids: set[str], records: dict[str, JobRecord]) -> None:
        """Record the cells as waiting in this process (`queued-<pid>`)."""
        for cid in cell_ids:
            records[cid] = new_record(records, cid, self.name, queued_id())
        write_records(self.folder, records)

    def _note(self, reason: str, num_waiting: int) -> None:
        note = {"reason": reason, "cells": num_waiting, "pid": os.getpid(), "since": time.time()}
        tmp = self.folder / f".{WAITING}.tmp"
        tmp.write_text(json.dumps(note))
        tmp.replace(self.folder / WAITING)

    def _sleep(self, seconds: float) -> None:
        """Wait `seconds`; `stop` set meanwhile is an interrupt."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stop is not None and self.stop.is_set():
                raise KeyboardInterrupt
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _not_runnable(error: str) -> str:
    """Why squeue cannot count this user's jobs, and the fix."""
    return (
        f"squeue ({shutil.which('squeue') or 'not on PATH'}) cannot be executed "
        f"({error.strip()}): the cells' room in the queue cannot be counted; reinstall the "
        "Slurm client or put a working one first on PATH"
    )
