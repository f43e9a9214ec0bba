"""The study's job records, `<study folder>/jobs.json`: every submitted cell's executor and job id.

Its name, format, reader and writer. What the scheduler says about the jobs (live or not) and how
to stop them is the backends' (`scaling.backends.base`: `live_jobs`, `cancel_jobs`); the
submissions are `scaling.driver.submission`'s.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from foundation import contract
from scaling.state.files.io_retry import written
from scaling.state.files.regular import BadStateFile, read_json, write_text

__all__ = ["RECORDS", "JobRecord", "new_record", "read_records", "write_records"]

RECORDS = "jobs.json"
_FIX = (
    "restore it, or delete it if none of the study's jobs is queued or running (each cell's "
    "state is then read from MLflow alone)"
)
_TYPES = {"cell_id": str, "executor": str, "job_id": str, "submitted_at": (int, float)}


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
    data = read_json(path, "the study's job records", _FIX)
    if data is None:
        return {}
    try:
        return _records(data)
    except TypeError as err:  # not ours
        raise BadStateFile(f"{path}: not the study's job records ({err}); {_FIX}") from None


def _records(data: object) -> dict[str, JobRecord]:
    """The records in `data` (parsed JSON); TypeError naming the first thing not written by
    `write_records`."""
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an object")
    out = {}
    for cid, rec in data.items():
        if not isinstance(rec, dict):
            raise TypeError(f"cell {cid!r}: a JSON {type(rec).__name__}, not an object")
        failures = rec.get("failures", 0)
        if set(rec) - {"failures"} != set(_TYPES):
            raise TypeError(f"cell {cid!r}: fields {sorted(rec)}")
        for name, kind in {**_TYPES, "failures": int}.items():
            value = failures if name == "failures" else rec[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TypeError(f"cell {cid!r}: {name} is {value!r}")
        if rec["cell_id"] != cid or failures < 0:
            raise TypeError(f"cell {cid!r}: cell_id {rec['cell_id']!r}, failures {failures}")
        out[cid] = JobRecord(**{**rec, "submitted_at": float(rec["submitted_at"])})
    return out


def write_records(folder: Path, records: dict[str, JobRecord]) -> None:
    """Write the records atomically, through a transient I/O error (`written`)."""
    path = Path(folder) / RECORDS
    text = json.dumps({cid: asdict(r) for cid, r in sorted(records.items())}, indent=1)

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text, _FIX)

    written(write, path)
