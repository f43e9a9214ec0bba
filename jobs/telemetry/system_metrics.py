"""MLflow's system metrics for a run: which rank samples them, into which run, and the monitor.

Each node's local rank 0 runs MLflow's monitor in a background thread (no cost per step); the
run id comes from global rank 0's tracker, broadcast to every rank.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from jobs.config import TrackingConfig
from jobs.telemetry.tracking import NullTracker, Tracker
from jobs.telemetry.upload import resolve_tracking_uri

__all__ = ["SystemMetrics", "SYSTEM_METRICS_INTERVAL_S", "start_system_metrics"]

SYSTEM_METRICS_INTERVAL_S = 10.0  # MLflow's default; its env var overrides it (see SystemMetrics)


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


def start_system_metrics(
    tracking: TrackingConfig,
    output_dir: Path,
    tracker: Tracker | NullTracker,
    rank: int,
    resumed: bool,
) -> SystemMetrics | None:
    """MLflow's system metrics on each node's local rank 0 (a background thread; no cost per
    step), else None. Collective: rank 0 broadcasts the run id, as a CPU tensor over gloo."""
    if not (tracking.enabled and SystemMetrics.enabled()):
        return None
    if resumed and rank == 0:
        tracker.flush()  # the run is RUNNING again before the monitor checks it
    run_id = _broadcast_run_id(tracker.run_id if rank == 0 else None)
    if run_id is None or _local_rank() != 0:
        return None
    num_nodes = int(os.environ.get("SLURM_NNODES") or 1)
    node_id = f"node_{os.environ.get('SLURM_NODEID', '0')}" if num_nodes > 1 else None
    uri = resolve_tracking_uri(tracking, output_dir)
    try:
        return SystemMetrics(run_id, uri, node_id)
    except Exception as err:  # noqa: BLE001 - system metrics never fail a run
        print(f"[jobs] system metrics off: {type(err).__name__}: {err}", flush=True)
        return None


_RUN_ID_BYTES = 64  # MLflow run ids are 32 hex characters


def _broadcast_run_id(run_id: str | None) -> str | None:
    """Global rank 0's MLflow run id on every rank (None if it has none yet: server down)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return run_id
    buffer = torch.zeros(_RUN_ID_BYTES, dtype=torch.uint8)  # CPU: the default group's gloo part
    if dist.get_rank() == 0 and run_id:
        encoded = run_id.encode()[:_RUN_ID_BYTES]
        buffer[: len(encoded)] = torch.tensor(list(encoded), dtype=torch.uint8)
    dist.broadcast(buffer, src=0)
    text = bytes(buffer.tolist()).rstrip(b"\0").decode()
    return text or None


def _local_rank() -> int:
    """This process's rank on its node (the launcher's LOCAL_RANK, else Slurm's, else 0)."""
    return int(os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID") or 0)
