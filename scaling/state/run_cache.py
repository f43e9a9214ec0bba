"""The study's FINISHED MLflow runs, cached in the study folder: a status poll costs what changed.

A full `runs/search` of a study makes the server load and serialise every run with its ~60
params: 23 MB and ~7 s for 2,000 runs on PostgreSQL (`benchmarks/bench_reliability.py`), on
every poll. But a FINISHED run does
not change: its cell (completed or diverged) is never resubmitted. FAILED and KILLED runs are
(`submit` sets them back to SCHEDULED and the job to RUNNING), so only FINISHED runs are cached,
in `<study folder>/mlflow_runs.json` (`CACHE_NAME`). A warm poll then asks the server only for
  1. the study's runs that are not FINISHED (`attributes.status != 'FINISHED'`), and
  2. by id (`attributes.run_id IN (...)`, `IN_CHUNK` ids a query), the runs that may have
     finished since the last poll: those not FINISHED then, and the run named in the
     `mlflow_run_id` file of each cell that neither the cache nor query 1 gave a run (`submit`
     writes it when it creates the run, before the job starts), minus what query 1 returned.
Both filters run in the server's SQL, so polling a study whose cells have all finished
serialises no run. Every run the server returns replaces its cached record.

When the full search happens instead (and rewrites the cache): on the first poll without a
cache; when the cache is unreadable, of another `VERSION`, or written for another server,
experiment or study (a damaged cache is never trusted, only rebuilt); on `scaling status
--refresh`; and on every `submit`, which decides what to train and so must see a run deleted in
MLflow. Until one of those, a cached run that was deleted in MLflow keeps its row in status.

Two processes may poll at once: each writes the whole file atomically (`foundation.atomic`), the
last one wins, and either version is a consistent view that the next poll completes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation import contract
from foundation.atomic import UnsafePath, read_text, write_text
from scaling.spec.resolved import ResolvedStudy
from scaling.state.run_search import FoundRun

__all__ = ["CACHE_NAME", "VERSION", "IN_CHUNK", "CellRun", "Entry", "poll_runs"]

CACHE_NAME = "mlflow_runs.json"
VERSION = 2  # 2: CellRun.code_files
IN_CHUNK = 200  # run ids per `IN (...)` query: short SQL, few round trips
_RUN_ID = re.compile(r"[0-9A-Za-z_-]+")  # what MLflow run ids look like; anything else is junk
_FLOATS = ("final_val_loss", "last_val_loss", "select_loss")
# The cache as this process last read or wrote it, by path: (the file's inode, mtime and size,
# its key, what it held). A driver polling 10,000 finished cells spent 1.2 s of each poll
# parsing and checking the same unchanged file; a file another process replaced has another
# inode (`foundation.atomic` writes by rename), so it is read again.
_MEMO: dict[Path, tuple[tuple[int, int, int], dict[str, str], tuple[dict, set]]] = {}


@dataclass(frozen=True)
class CellRun:
    """What MLflow knows about one cell's run."""

    run_id: str
    status: str  # MLflow: SCHEDULED, RUNNING, FINISHED, FAILED, KILLED
    outcome: str | None  # tag written by the job: running, completed, diverged
    final_val_loss: float | None
    last_val_loss: float | None
    start_time: int
    config_hash: str | None  # tag: the resolved run config this run trains (cells.config_hash)
    select_loss: float | None = None  # on the LR-selection windows, when the job has them
    code_digest: str | None = None  # tag: the model code it trained with (`catalog.variants`)
    code_accepted: str | None = None  # tag: the later code digest its result was accepted for
    code_files: str | None = None  # tag: the digest's parts (`catalog.variants.format_parts`)

    def stale(self, digest: str) -> bool:
        """A result of other model code than `digest` (today's), not accepted for it.

        A run from before code digests were recorded has none and counts as fresh.
        """
        return self.code_digest not in (None, digest) and self.code_accepted != digest


@dataclass(frozen=True)
class Entry:
    """One cell run as the poll found it."""

    cell_id: str
    run: CellRun


def poll_runs(
    study: ResolvedStudy,
    exp_id: str,
    search: Callable[[str], list[FoundRun]],
    refresh: bool = False,
) -> dict[str, Entry]:
    """run id → entry, for every run of the study's cells, through the cache (module docstring).

    `search(filter_string)` returns the experiment's active runs matching the filter.
    """
    path = study.folder / CACHE_NAME
    key = {"tracking_uri": study.mlflow.tracking_uri, "experiment_id": exp_id, "study": study.name}
    of_study = f"tags.{contract.TAG_STUDY} = '{study.name}'"
    cached = None if refresh else _load(path, key)
    if cached is None:
        runs = _entries(study, search(of_study))
    else:
        finished, unfinished = cached
        runs = dict(finished)
        fresh = _entries(study, search(f"{of_study} and attributes.status != 'FINISHED'"))
        seen_cells = {e.cell_id for e in (*finished.values(), *fresh.values())}
        maybe_done = (unfinished | _run_id_files(study, seen_cells)) - fresh.keys() - runs.keys()
        for chunk in _chunks(sorted(maybe_done)):
            ids = ", ".join(f"'{run_id}'" for run_id in chunk)
            fresh |= _entries(study, search(f"attributes.run_id IN ({ids})"))
        runs |= fresh  # the server's answer wins over the cache
    _save(path, key, runs, cached)
    return runs


def _entries(study: ResolvedStudy, found: list[FoundRun]) -> dict[str, Entry]:
    """The runs that belong to one of the study's cells (not its parent run)."""
    out = {}
    for run in found:
        tags = run.tags
        cid = tags.get(contract.TAG_CELL_ID)
        if (
            not cid
            or tags.get(contract.TAG_ROLE) == contract.ROLE_STUDY
            or tags.get(contract.TAG_STUDY) != study.name
        ):
            continue
        out[run.run_id] = Entry(
            cid,
            CellRun(
                run_id=run.run_id,
                status=run.status,
                outcome=tags.get(contract.TAG_OUTCOME),
                final_val_loss=contract.summary_metric(run.metrics, contract.FINAL_VAL_LOSS),
                last_val_loss=contract.summary_metric(run.metrics, contract.VAL_LOSS),
                start_time=run.start_time,
                config_hash=tags.get(contract.TAG_CONFIG_HASH),
                select_loss=contract.summary_metric(run.metrics, contract.FINAL_SELECT_LOSS),
                code_digest=tags.get(contract.TAG_CODE_DIGEST),
                code_accepted=tags.get(contract.TAG_CODE_ACCEPTED),
                code_files=tags.get(contract.TAG_CODE_FILES),
            ),
        )
    return out


def _run_id_files(study: ResolvedStudy, skip: set[str]) -> set[str]:
    """The run ids that `submit` wrote into the output dirs of the cells not in `skip`."""
    ids = set()
    for cell in study.cells:
        if cell.cell_id in skip:
            continue
        try:
            run_id = (Path(cell.run.output_dir) / contract.RUN_ID_FILE).read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if _RUN_ID.fullmatch(run_id):
            ids.add(run_id)
    return ids


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), IN_CHUNK):
        yield ids[start : start + IN_CHUNK]


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.lstat()  # a link planted over the cache is not the file this process wrote
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _load(path: Path, key: dict[str, str]) -> tuple[dict[str, Entry], set[str]] | None:
    """(finished run id → entry, ids not finished at the last poll), or None: no usable cache.
    Read from `_MEMO` while the file is the one this process last read or wrote."""
    memo = _MEMO.get(path)
    if memo is not None and memo[0] == _signature(path) and memo[1] == key:
        finished, unfinished = memo[2]
        return dict(finished), set(unfinished)
    signature = _signature(path)
    loaded = _parse(path, key)
    if loaded is not None and signature is not None and signature == _signature(path):
        _MEMO[path] = (signature, dict(key), (dict(loaded[0]), set(loaded[1])))
    return loaded


def _parse(path: Path, key: dict[str, str]) -> tuple[dict[str, Entry], set[str]] | None:
    """`_load` from the file itself."""
    try:
        data = json.loads(read_text(path) or "null")  # a link, a FIFO, a directory: UnsafePath
        if data.get("version") != VERSION or data.get("key") != key:
            return None
        finished = {}
        for run_id, record in data["finished"].items():
            entry = _entry(record)
            if entry.run.run_id != run_id or entry.run.status != "FINISHED":
                return None
            finished[run_id] = entry
        unfinished = data["unfinished"]
        if not isinstance(unfinished, list) or not all(
            isinstance(i, str) and _RUN_ID.fullmatch(i) for i in unfinished
        ):
            return None
        return finished, set(unfinished)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # absent, damaged or not a file: rebuilt by a full search, never trusted


def _entry(record: dict[str, Any]) -> Entry:
    """An entry from its JSON record; TypeError/KeyError on anything not written by `_save`."""
    fields = {f.name for f in dataclasses.fields(CellRun)}
    if set(record) != fields | {"cell_id"}:
        raise KeyError(f"fields {sorted(record)}")
    for name in ("cell_id", "run_id", "status"):
        _check(record[name], str, name)
    for name in ("outcome", "config_hash", "code_digest", "code_accepted", "code_files"):
        _check(record[name], (str, type(None)), name)
    for name in _FLOATS:
        _check(record[name], (float, int, type(None)), name)
    _check(record["start_time"], int, "start_time")
    values = {k: v for k, v in record.items() if k != "cell_id"}
    for name in _FLOATS:
        values[name] = None if values[name] is None else float(values[name])
    return Entry(record["cell_id"], CellRun(**values))


def _check(value: Any, kind: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{name}: {value!r}")


def _save(
    path: Path,
    key: dict[str, str],
    runs: dict[str, Entry],
    cached: tuple[dict[str, Entry], set[str]] | None,
) -> None:
    """Write the cache if what it holds changed; a folder that cannot be written is no error."""
    finished = {i: e for i, e in sorted(runs.items()) if e.run.status == "FINISHED"}
    unfinished = {i for i, e in runs.items() if e.run.status != "FINISHED"}
    if cached is not None and cached == (finished, unfinished):
        return
    records = {i: {"cell_id": e.cell_id, **dataclasses.asdict(e.run)} for i, e in finished.items()}
    data = {"version": VERSION, "key": key, "finished": records, "unfinished": sorted(unfinished)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(data, indent=0))
    except (OSError, UnsafePath):
        _MEMO.pop(path, None)
        return  # a read-only folder, or not a file there: status still works, without the cache
    signature = _signature(path)
    if signature is not None:
        _MEMO[path] = (signature, dict(key), (dict(finished), set(unfinished)))
