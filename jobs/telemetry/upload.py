"""Sending a run's spool to MLflow: the run it belongs to, and each record exactly once.

`jobs.telemetry.tracking.Tracker` appends every record to the spool (`jobs.telemetry.spool`);
a `SpoolUploader` reads it from the last uploaded offset and sends it in `log_batch` calls. The
tracker's thread runs one; `upload_spool` finishes what a killed or finished run left behind.

Exactly once: a resumed run re-executes (and re-spools) the steps between its last checkpoint
and the kill, and an upload whose answer was lost (server or database restarting) is sent
again. So the uploader sends each metric's steps in increasing order and never a step at or
below the last one that metric already has in MLflow: it asks the server (`get_run`, whose
latest metrics carry their step) before its first upload and after any failed one, and counts
on from there while uploads succeed. Metrics are therefore logged at most once per (key, step):
a re-executed step keeps the values of its first attempt (identical for the loss; an exact
resume replays the same batches).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from foundation.contract import RUN_ID_FILE, TAG_PARENT, ensure_experiment, make_client
from foundation.studypaths import sqlite_path
from jobs.config import TrackingConfig
from jobs.telemetry.spool import END, SPOOL, UPLOADED_OFFSET, line_number, parse_line

__all__ = ["SpoolUploader", "resolve_tracking_uri", "upload_spool", "METRIC_QUEUE_S"]

METRIC_QUEUE_S = "time/queue_s"  # seconds from `scaling submit` to the training start
TAG_QUEUE_S = "queue_s"

_MAX_METRICS, _MAX_PARAMS, _MAX_TAGS = 1000, 100, 100


def resolve_tracking_uri(tracking: TrackingConfig, output_dir: Path) -> str:
    """Config, else `MLFLOW_TRACKING_URI`, else a SQLite store beside the run's outputs."""
    if tracking.tracking_uri:
        return tracking.tracking_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(output_dir).resolve() / 'mlflow.db'}"


class SpoolUploader:
    """Reads the spool from the last uploaded offset and sends it; not thread-safe by itself."""

    def __init__(self, output_dir: Path, tracking: TrackingConfig, run_name: str) -> None:
        self.output_dir = output_dir
        self.tracking = tracking
        self.run_name = run_name
        self.uri = resolve_tracking_uri(tracking, output_dir)
        self._client: Any = None
        self._store = sqlite_path(self.uri)
        self._store_file: tuple[int, int] | None = None  # the SQLite file first written to
        self.spool = output_dir / SPOOL
        self.offset_file = output_dir / UPLOADED_OFFSET
        self.run_id_file = output_dir / RUN_ID_FILE
        self.run_id: str | None = (
            self.run_id_file.read_text().strip() if self.run_id_file.is_file() else None
        )
        # per metric key, the highest step MLflow has; None = unknown, ask the server first
        self._last_step: dict[str, int] | None = None
        self._checked_start = False

    @property
    def client(self) -> Any:
        if self._client is None:  # made on first use: see `_check_store`
            self._client = make_client(self.uri, max_retries=1, timeout_s=10)
        return self._client

    def _check_store(self) -> None:
        """Refuse to upload into a SQLite store that vanished, or was replaced by another file,
        since this run's id was made: opening it would create a new store (racing the other
        jobs to create its schema) that lacks the run. The records stay spooled; the study's
        next `scaling run --new-store` sends them to a new run (`scaling.state.store_check`)."""
        if self._store is None or self.run_id is None:
            return
        try:
            st = self._store.stat()
        except OSError:
            raise FileNotFoundError(f"the MLflow store {self._store} is gone") from None
        if self._store_file is None:
            self._store_file = (st.st_dev, st.st_ino)
        elif self._store_file != (st.st_dev, st.st_ino):
            raise FileNotFoundError(f"the MLflow store {self._store} was replaced")

    def ensure_run(self) -> str:
        self._check_store()
        if self.run_id is not None and not self._checked_start:
            self._start_scheduled_run()
        if self.run_id is None:
            tags = {}
            if self.tracking.parent_run_id:
                tags[TAG_PARENT] = self.tracking.parent_run_id
            exp_id = ensure_experiment(self.client, self.tracking.experiment, self.uri)
            run = self.client.create_run(exp_id, run_name=self.run_name, tags=tags)
            tmp = self.run_id_file.with_name(".mlflow_run_id.tmp")
            tmp.write_text(run.info.run_id)
            os.replace(tmp, self.run_id_file)
            self.run_id = run.info.run_id
        return self.run_id

    def _start_scheduled_run(self) -> None:
        """Give a run `scaling submit` made (SCHEDULED, nothing logged yet) its start time now.

        MLflow cannot move a run's start, and its duration would count the time the cell waited
        for a slot or a node. So a run that never trained is deleted and made again now (same
        tags, same name); the wait is its tag `queue_s` and metric `time/queue_s`. Deleted
        first, so a cell never has two runs: a job killed in between finds the deleted run in
        `mlflow_run_id` on its restart and makes the new one then.
        """
        old = self.client.get_run(self.run_id)
        if old.info.status != "SCHEDULED" or old.data.metrics:
            self._checked_start = True
            return  # running, resumed or retried: its start is its first training start
        queue_s = max(0.0, time.time() - old.info.start_time / 1000)
        tags = {k: v for k, v in old.data.tags.items() if not k.startswith("mlflow.")}
        if TAG_PARENT in old.data.tags:
            tags[TAG_PARENT] = old.data.tags[TAG_PARENT]
        tags[TAG_QUEUE_S] = f"{queue_s:.1f}"
        if old.info.lifecycle_stage != "deleted":
            self.client.delete_run(old.info.run_id)
        run = self.client.create_run(old.info.experiment_id, run_name=old.info.run_name, tags=tags)
        tmp = self.run_id_file.with_name(".mlflow_run_id.tmp")
        tmp.write_text(run.info.run_id)
        os.replace(tmp, self.run_id_file)
        self.run_id, self._checked_start = run.info.run_id, True
        self.client.log_metric(run.info.run_id, METRIC_QUEUE_S, queue_s, step=0)

    def _offset(self) -> int:
        """How far MLflow has the spool; 0 (all again: each point still lands once, see above)
        if the file is missing or damaged, or claims more than the spool holds."""
        if not self.offset_file.is_file():
            return 0
        try:
            offset = int(self.offset_file.read_bytes().decode("ascii"))
        except ValueError:  # not a number (not even ASCII): damaged
            print(f"[jobs] {self.offset_file} is damaged; sending the spool again", flush=True)
            return 0
        size = self.spool.stat().st_size if self.spool.is_file() else 0
        return offset if 0 <= offset <= size else 0

    def _set_offset(self, offset: int) -> None:
        tmp = self.offset_file.with_name(".uploaded_offset.tmp")
        tmp.write_text(str(offset))
        os.replace(tmp, self.offset_file)

    def pending(self) -> int:
        size = self.spool.stat().st_size if self.spool.is_file() else 0
        return size - self._offset()

    def upload(self) -> None:
        """Send everything spooled so far; raises if the server is unreachable (offset kept)."""
        try:
            self._upload()
        except BaseException:
            self._last_step = None  # a batch may have landed although its answer was lost
            raise

    def _server_last_steps(self, run_id: str) -> dict[str, int]:
        if self._last_step is None:
            latest = self.client.get_run(run_id).data.to_proto().metrics  # latest = max step
            self._last_step = {m.key: m.step for m in latest}
        return self._last_step

    def _upload(self) -> None:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.exceptions import MlflowException

        if not self.spool.is_file():
            return
        run_id = self.ensure_run()  # checks the store is still the one the run is in
        offset = self._offset()
        with open(self.spool, "rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # only whole lines; a torn last line waits
        if end == 0:
            return
        last_step = self._server_last_steps(run_id)
        metrics, params, tags = [], [], []

        def log_batch(metrics: list, params: list, tags: list) -> bool:
            """False if the server refuses these records for good (a 4xx answer)."""
            try:
                self.client.log_batch(run_id, metrics=metrics, params=params, tags=tags)
            except MlflowException as err:
                if not 400 <= err.get_http_status_code() < 500:
                    raise  # server trouble: keep the records, retry later
                print(f"[jobs] MLflow refused a batch: {err}", flush=True)
                return False
            return True

        def send() -> None:
            # A refused param (logged before with another value) must not take metrics with
            # it, nor block the records after it: retry without params, then drop.
            if (metrics or params or tags) and not log_batch(metrics, params, tags) and params:
                log_batch(metrics, [], tags)
            metrics.clear(), params.clear(), tags.clear()

        position = offset
        for line in data[:end].splitlines(keepends=True):
            record, damage = parse_line(line)
            if record is None:  # a killed writer's torn line, or damage: skipped, said
                number = line_number(self.spool, position)
                print(f"[jobs] {self.spool} line {number}: {damage}; skipped", flush=True)
            position += len(line)
            if record is None:
                continue
            kind = record["t"]
            if kind == END:
                continue  # the seal of a run's spool (`jobs.telemetry.spool`): nothing to send
            if kind == "metric":
                key, step = record["k"], record["step"]
                if step <= last_step.get(key, -1):
                    continue  # already in MLflow (a re-executed step, or a resent batch)
                last_step[key] = step
                metrics.append(Metric(key, record["v"], record["ts"], step))
            elif kind == "param":
                params.append(Param(record["k"], record["v"]))
            elif kind == "tag":
                tags.append(RunTag(record["k"], record["v"]))
            else:  # artifact / status / dataset: order matters, send what came before first
                send()
                if kind == "dataset":
                    self.client.log_inputs(run_id, datasets=[_dataset_input(record)])
                elif kind == "artifact":
                    path = Path(record["path"])
                    if path.is_file():
                        self.client.log_artifact(run_id, str(path), record.get("dir"))
                elif kind == "status":
                    if record["status"] == "RUNNING":
                        self.client.update_run(run_id, status="RUNNING")
                    else:
                        self.client.set_terminated(run_id, record["status"])
            if len(metrics) >= _MAX_METRICS or len(params) >= _MAX_PARAMS or len(tags) >= _MAX_TAGS:
                send()
                self._set_offset(position)
        send()
        self._set_offset(position)


def _dataset_input(record: dict[str, Any]) -> Any:
    """The MLflow input of a spooled `dataset` record, in the training context."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    dataset = Dataset(
        name=record["name"],
        digest=record["digest"],
        source_type="local",
        source=json.dumps({"uri": record["source"]}),
        profile=json.dumps(record["profile"]),
    )
    return DatasetInput(dataset, tags=[InputTag("mlflow.data.context", "training")])


def upload_spool(output_dir: str | Path, tracking: TrackingConfig, run_name: str) -> int:
    """Upload whatever a finished or killed run left in its spool; returns bytes still pending."""
    uploader = SpoolUploader(Path(output_dir), tracking, run_name)
    uploader.upload()
    return uploader.pending()
