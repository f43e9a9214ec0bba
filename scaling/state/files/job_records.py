"""The study's job records, `<study folder>/jobs.json`: every submitted cell's executor and job id.

Its name, format, reader and writer. What the scheduler says about the jobs (live or not) and how
to stop them is `scaling.state.scheduler`'s; the submissions are `scaling.driver.submission`'s.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from foundation import contract
from scaling.state.files.io_retry import written

__all__ = ["RECORDS", "JobRecord", "new_record", "read_records", "write_records"]

RECORDS = "jobs.json"


@dataclass(frozen=True)
class JobRecord:
    """One submission of one cell."""

    cell_id: str
    executor: str  # local | slurm
    job_id: str  # Slurm "ARRAYID_INDEX" or a job id; local: the controller's pid
    submitted_at: float
    failures: int = 0  # the cell's failed jobs before this one (reset by --retry-failed)

    def given_up(self, state: str, retries: int) -> bool:
        """True if this job `state` is the cell's failure past `retries` resubmissions."""
        return state == contract.FAILED and self.failures >= retries


def new_record(
    records: dict[str, JobRecord], cell_id: str, executor: str, job_id: str
) -> JobRecord:
    """The record of a new job of `cell_id`, carrying the failure count of its last one."""
    last = records.get(cell_id)
    return JobRecord(cell_id, executor, job_id, time.time(), last.failures if last else 0)


def read_records(folder: Path) -> dict[str, JobRecord]:
    """cell_id → its latest submission (empty if the study was never submitted)."""
    path = Path(folder) / RECORDS
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {cid: JobRecord(**rec) for cid, rec in data.items()}


def write_records(folder: Path, records: dict[str, JobRecord]) -> None:
    """Write the records atomically, through a transient I/O error (`written`)."""
    path = Path(folder) / RECORDS
    text = json.dumps({cid: asdict(r) for cid, r in sorted(records.items())}, indent=1)

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{RECORDS}.tmp")
        tmp.write_text(text)
        tmp.replace(path)

    written(write, path)
