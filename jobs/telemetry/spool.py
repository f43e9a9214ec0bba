"""Where a run's tracking spool lives, how its lines are read, and whether it is whole.

`jobs.telemetry.tracking.Tracker` appends every record to the spool before MLflow sees it, so the
spool is the freshest word on how far a run is: `scaling status` reads its last metric's step.

Damage. A line that is not UTF-8, not JSON, or not a record of a known kind with its fields
(`parse_line`) is damaged: readers report it (file and line number) and skip it, never raise. A
killed writer leaves such a line too (a torn last line, ended by the next attempt's tracker).

Whole. When a run's training ends (completed or diverged) the tracker ends the spool with an
`end` record holding the size and sha256 of every byte before it (`Tracker.seal`). A replay into
a new run (`scaling.driver.reupload`) checks that first (`check_spool`): a spool cut short, or
changed after its run ended, is reported rather than half-uploaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "SPOOL",
    "UPLOADED_OFFSET",
    "END",
    "last_logged_step",
    "reset_uploaded",
    "parse_line",
    "line_number",
    "end_record",
    "check_spool",
]

SPOOL = Path("tracking") / "spool.jsonl"  # in the run's output dir
UPLOADED_OFFSET = Path("tracking") / "uploaded_offset"  # how far MLflow has the spool
_TAIL_BYTES = 16384  # the end of a spool that holds its last metric lines
END = "end"  # the kind of the record that seals a spool whose run ended
_TERMINAL = ("FINISHED", "FAILED", "KILLED")
_STATUSES = ("RUNNING", *_TERMINAL)
# each kind's fields and the types a record must give them
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "metric": {"k": str, "v": (int, float), "ts": int, "step": int},
    "param": {"k": str, "v": str},
    "tag": {"k": str, "v": str},
    "artifact": {"path": str},
    "status": {"status": str},
    "dataset": {"name": str, "digest": str, "source": str, "profile": dict},
    END: {"bytes": int, "sha256": str},
}


def parse_line(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for a sound spool line, else (None, why it is damaged)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    try:
        record = json.loads(text)
    except ValueError:
        return None, "not JSON (torn by a killed writer, or damaged)"
    kind = record.get("t") if isinstance(record, dict) else None
    fields = _FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return None, "not a spool record (no known kind `t`)"
    for name, types in fields.items():
        value = record.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            return None, f"a {kind} record without a valid `{name}`"
    if kind == "status" and record["status"] not in _STATUSES:
        return None, f"an unknown status {record['status']!r}"
    return record, None


def line_number(path: Path, position: int) -> int:
    """The 1-based number of the line that starts at byte `position` of `path`."""
    count, done = 1, 0
    with open(path, "rb") as f:
        while done < position:
            chunk = f.read(min(1 << 20, position - done))
            if not chunk:
                break
            count += chunk.count(b"\n")
            done += len(chunk)
    return count


def end_record(path: Path) -> dict[str, Any]:
    """The record that seals spool `path` as it is now: its size and sha256."""
    sha256 = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha256.update(chunk)
            size += len(chunk)
    return {"t": END, "bytes": size, "sha256": sha256.hexdigest()}


def check_spool(output_dir: str | Path) -> str | None:
    """None if the spool of a run whose training ended is whole, else what is wrong with it
    (naming the file, and the line where that can be told).

    Whole: its last line is an `end` record whose size and sha256 match every byte before it
    (damaged lines before it were there when the run ended: a killed writer's torn lines, which
    any upload skips). One without a seal (written before seals existed) is whole if its last
    line is a run's end status (FINISHED, FAILED or KILLED): every record comes before it.
    """
    path = Path(output_dir) / SPOOL
    try:
        data = path.read_bytes()
    except OSError as err:
        return f"{path} cannot be read ({err.strerror or err})"
    if not data:
        return f"{path} is empty"
    if not data.endswith(b"\n"):
        lines = data.count(b"\n") + 1
        return f"{path} ends in the middle of line {lines} (cut short after its run ended)"
    start = data.rstrip(b"\n").rfind(b"\n") + 1  # the last line
    last, _ = parse_line(data[start:])
    if last is not None and last["t"] == END:
        if last["bytes"] == start and hashlib.sha256(data[:start]).hexdigest() == last["sha256"]:
            return None
        return f"{path} was changed after its run ended ({_where_changed(data[:start], last)})"
    if last is not None and last["t"] == "status" and last["status"] in _TERMINAL:
        return None  # unsealed (written before seals, or cut just after): its end status is there
    damaged = _first_damaged(data)
    lines = data.count(b"\n")
    why = f"; line {damaged[0]} is damaged: {damaged[1]}" if damaged else ""
    return f"{path} stops at line {lines} before its run's end record (cut short){why}"


def _first_damaged(data: bytes) -> tuple[int, str] | None:
    for number, line in enumerate(data.splitlines(), start=1):
        _, why = parse_line(line)
        if why is not None:
            return number, why
    return None


def _where_changed(data: bytes, end: dict[str, Any]) -> str:
    damaged = _first_damaged(data)
    if damaged is not None:
        return f"line {damaged[0]} is damaged: {damaged[1]}"
    if len(data) != end["bytes"]:
        return f"{len(data):,} bytes before its end record, which says {end['bytes']:,}"
    return "its sha256 differs from the one its end record holds"


def last_logged_step(output_dir: str | Path) -> int | None:
    """The step of the last metric the run spooled (None: none yet), from the spool's tail:
    what `scaling status` shows for a running cell, without asking MLflow."""
    path = Path(output_dir) / SPOOL
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        record, _ = parse_line(line)  # a torn line (the tail's first, one being written): None
        if record is not None and record["t"] == "metric":
            return int(record["step"])
    return None


def reset_uploaded(output_dir: str | Path) -> None:
    """Send the whole spool again on the next upload: the run it went to is gone (a lost
    tracking store, a deleted run), and the run that replaces it has none of it. Exactly once
    still holds: the uploader skips what the new run already has (`jobs.telemetry.tracking`)."""
    (Path(output_dir) / UPLOADED_OFFSET).unlink(missing_ok=True)
