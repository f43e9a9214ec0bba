"""MLflow tracking for one cell: one rank, asynchronous, spooled to disk so nothing is lost.

Every record (metric, param, tag, artifact, end-of-run status) is first appended to a local
JSON-lines spool in `OUTPUT/tracking/`; a background thread uploads the spool in `log_batch`
calls every `flush_interval_s` and remembers how far it got. The training loop therefore only
pays for a JSON line per call (microseconds), a server that is down only delays uploads, and a
killed process leaves a spool the next attempt (a resume, or `upload_spool`) finishes uploading.
The run id lives in `OUTPUT/mlflow_run_id`, so a resumed or requeued job continues the same run.

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
import threading
import time
from pathlib import Path
from typing import Any

from foundation.contract import RUN_ID_FILE, TAG_PARENT, ensure_experiment, make_client
from foundation.studypaths import sqlite_path
from jobs.config import TrackingConfig
from jobs.telemetry.spool import SPOOL, UPLOADED_OFFSET

__all__ = [
    "Tracker",
    "NullTracker",
    "resolve_tracking_uri",
    "upload_spool",
    "METRIC_QUEUE_S",
    "SystemMetrics",
    "SYSTEM_METRICS_INTERVAL_S",
]

METRIC_QUEUE_S = "time/queue_s"  # seconds from `scaling submit` to the training start
TAG_QUEUE_S = "queue_s"

SYSTEM_METRICS_INTERVAL_S = 10.0  # MLflow's default; its env var overrides it (see SystemMetrics)

_MAX_METRICS, _MAX_PARAMS, _MAX_TAGS = 1000, 100, 100
_PARAM_VALUE_LIMIT = 6000


def resolve_tracking_uri(tracking: TrackingConfig, output_dir: Path) -> str:
    """Config, else `MLFLOW_TRACKING_URI`, else a SQLite store beside the run's outputs."""
    if tracking.tracking_uri:
        return tracking.tracking_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(output_dir).resolve() / 'mlflow.db'}"


class _Uploader:
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
        return int(self.offset_file.read_text()) if self.offset_file.is_file() else 0

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
            position += len(line)
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the torn last line of a killed writer
            kind = record["t"]
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


class Tracker:
    """Rank-0 tracker: `log_*` append to the spool; a daemon thread uploads it."""

    def __init__(self, output_dir: str | Path, tracking: TrackingConfig, run_name: str) -> None:
        self.output_dir = Path(output_dir)
        (self.output_dir / "tracking").mkdir(parents=True, exist_ok=True)
        self._uploader = _Uploader(self.output_dir, tracking, run_name)
        self._lock = threading.Lock()  # guards the spool file
        self._upload_lock = threading.Lock()  # one upload at a time (thread or flush())
        spool = self._uploader.spool
        if spool.is_file() and spool.stat().st_size:
            with open(spool, "rb") as f:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
            if torn:  # a killed writer left half a line; end it so it is skipped, not merged
                with open(spool, "ab") as f:
                    f.write(b"\n")
        # line-buffered: each record reaches the OS at once, so SIGKILL loses nothing logged
        self._file = open(spool, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.last_error: str | None = None
        self.call_time_s = 0.0  # time the caller spent in log_* (the in-loop tracking cost)
        self._interval = tracking.flush_interval_s
        try:  # create (or find) the run now, so the cell shows as running at once
            self._uploader.ensure_run()
        except Exception as err:  # noqa: BLE001 - server down: the upload thread retries
            self.last_error = f"{type(err).__name__}: {err}"
        self._thread = threading.Thread(target=self._loop, name="mlflow-upload", daemon=True)
        self._thread.start()

    @property
    def run_id(self) -> str | None:
        return self._uploader.run_id

    def _write(self, record: dict[str, Any]) -> None:
        start = time.perf_counter()
        with self._lock:
            self._file.write(json.dumps(record) + "\n")
        self.call_time_s += time.perf_counter() - start

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        start = time.perf_counter()
        now = int(time.time() * 1000)
        with self._lock:
            for key, value in metrics.items():
                line = {"t": "metric", "k": key, "v": float(value), "ts": now, "step": step}
                self._file.write(json.dumps(line) + "\n")
        self.call_time_s += time.perf_counter() - start

    def log_params(self, params: dict[str, Any]) -> None:
        for key, value in params.items():
            self._write({"t": "param", "k": key, "v": str(value)[:_PARAM_VALUE_LIMIT]})

    def set_tags(self, tags: dict[str, Any]) -> None:
        for key, value in tags.items():
            self._write({"t": "tag", "k": key, "v": str(value)})

    def log_artifact(self, path: str | Path, artifact_dir: str | None = None) -> None:
        self._write({"t": "artifact", "path": str(Path(path).resolve()), "dir": artifact_dir})

    def set_status(self, status: str) -> None:
        """MLflow run status: RUNNING, FINISHED, FAILED or KILLED."""
        self._write({"t": "status", "status": status})

    def log_dataset(self, name: str, digest: str, source: str, profile: dict[str, Any]) -> None:
        """The run's training data as an MLflow dataset input (the UI's Dataset column)."""
        record = {"name": name, "digest": digest, "source": source, "profile": profile}
        self._write({"t": "dataset", **record})

    def _flush_file(self) -> None:
        with self._lock:
            self._file.flush()

    def _try_upload(self) -> bool:
        self._flush_file()
        try:
            self._uploader.upload()
            self.last_error = None
            return True
        except Exception as err:  # noqa: BLE001 - any failure: keep the spool, retry later
            self.last_error = f"{type(err).__name__}: {err}"
            return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if not self._stop.is_set():
                self._try_upload_locked()

    def flush(self) -> bool:
        """Upload now from the calling thread (waits for the uploader); True if all was sent."""
        self._wake.set()
        return self._try_upload_locked()

    def _try_upload_locked(self) -> bool:
        # the upload thread and a direct flush must not interleave offsets
        with self._upload_lock:
            return self._try_upload()

    def close(self, timeout_s: float = 60.0) -> bool:
        """Stop the thread and upload the rest, retrying up to `timeout_s`.

        Returns False (and keeps the spool for `upload_spool` or the next resume) if the server
        stayed unreachable.
        """
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        ok = self._try_upload_locked()
        while not ok and time.monotonic() < deadline:
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
            ok = self._try_upload_locked()
        with self._lock:
            self._file.close()
        if not ok:
            print(
                f"[jobs] MLflow unreachable ({self.last_error}); {self._uploader.pending()} "
                f"bytes stay spooled in {self._uploader.spool}; they upload on resume or with "
                "jobs.telemetry.tracking.upload_spool",
                flush=True,
            )
        return ok


class NullTracker:
    """What ranks other than 0, and runs with tracking disabled, log to."""

    run_id = None
    last_error = None
    call_time_s = 0.0

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        pass

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def set_tags(self, tags: dict[str, Any]) -> None:
        pass

    def log_artifact(self, path: str | Path, artifact_dir: str | None = None) -> None:
        pass

    def set_status(self, status: str) -> None:
        pass

    def log_dataset(self, name: str, digest: str, source: str, profile: dict[str, Any]) -> None:
        pass

    def flush(self) -> bool:
        return True

    def close(self, timeout_s: float = 60.0) -> bool:
        return True


def upload_spool(output_dir: str | Path, tracking: TrackingConfig, run_name: str) -> int:
    """Upload whatever a finished or killed run left in its spool; returns bytes still pending."""
    uploader = _Uploader(Path(output_dir), tracking, run_name)
    uploader.upload()
    return uploader.pending()


class SystemMetrics:
    """MLflow's own system metrics (CPU, host memory, disk, network; GPU utilisation and memory
    through NVML where a GPU is seen) for one node, logged by the node's local rank 0 as
    `system/...` (`system/node_<i>/...` on a multi-node job) into the cell's run.

    A daemon thread samples every `SYSTEM_METRICS_INTERVAL_S` seconds (MLflow's
    `MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL` overrides it; `MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING
    =false` turns it off); the training loop pays nothing per step. Its steps continue across a
    resume. It stops by itself when the run stops being RUNNING or the server cannot be asked
    (then this attempt logs no more system metrics; training goes on).
    """

    def __init__(self, run_id: str, tracking_uri: str, node_id: str | None) -> None:
        # lazy: mlflow's monitor imports psutil (and pynvml), needed only on a tracked rank
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self._monitor = SystemMetricsMonitor(
            run_id,
            sampling_interval=SYSTEM_METRICS_INTERVAL_S,
            resume_logging=True,
            node_id=node_id,
            tracking_uri=tracking_uri,
        )
        self._monitor.start()

    @staticmethod
    def enabled() -> bool:
        value = os.environ.get("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true")
        return value.strip().lower() not in ("false", "0", "no", "off")

    def stop(self) -> None:
        """End the sampling thread and send what it still holds (before the run's end status).

        MLflow's own `finish()` drops the samples of an unfinished logging window; here a last
        sample is taken and that window is published too, so every attempt (even one shorter
        than the interval) logs at least one point and the last seconds before a stop are kept.
        """
        monitor = self._monitor
        try:
            monitor.finish()
            monitor.collect_metrics()
            monitor.publish_metrics(monitor.aggregate_metrics())
            monitor.mlflow_logger.flush()
        except Exception as err:  # noqa: BLE001 - system metrics never fail a run
            print(f"[jobs] system metrics: {type(err).__name__}: {err}", flush=True)
