"""MLflow tracking for one cell: one rank, asynchronous, spooled to disk so nothing is lost.

Every record (metric, param, tag, artifact, end-of-run status) is first appended to a local
JSON-lines spool in `OUTPUT/tracking/`; a background thread uploads the spool in `log_batch`
calls every `flush_interval_s` and remembers how far it got. The training loop therefore only
pays for a JSON line per call (microseconds), a server that is down only delays uploads, and a
killed process leaves a spool the next attempt (a resume, or `upload_spool`) finishes uploading.
The run id lives in `OUTPUT/mlflow_run_id`, so a resumed or requeued job continues the same run.
Reading the spool and sending each record exactly once is `jobs.telemetry.upload`'s.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from jobs.config import TrackingConfig
from jobs.telemetry.spool import end_record
from jobs.telemetry.upload import SpoolUploader

__all__ = ["Tracker", "NullTracker"]

_PARAM_VALUE_LIMIT = 6000


class Tracker:
    """Rank-0 tracker: `log_*` append to the spool; a daemon thread uploads it."""

    def __init__(self, output_dir: str | Path, tracking: TrackingConfig, run_name: str) -> None:
        self.output_dir = Path(output_dir)
        (self.output_dir / "tracking").mkdir(parents=True, exist_ok=True)
        self._uploader = SpoolUploader(self.output_dir, tracking, run_name)
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

    def seal(self) -> None:
        """The run's training ended: end the spool with the size and sha256 of all before it,
        so a replay can tell it whole from cut short or damaged (`jobs.telemetry.spool`).
        One read of the spool, once per run."""
        with self._lock:
            self._file.flush()
            self._file.write(json.dumps(end_record(self._uploader.spool)) + "\n")

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
                "jobs.telemetry.upload.upload_spool",
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

    def seal(self) -> None:
        pass

    def flush(self) -> bool:
        return True

    def close(self, timeout_s: float = 60.0) -> bool:
        return True
