"""The training job: one grid cell from a resolved run config to a final validation loss.

Public API (imported lazily so `scaling --help` does not load torch): `RunConfig`,
`load_run_config(path)`, `train(config) -> RunResult`, `RunResult`, `TrainingJob(config)`
(submitit Checkpointable), and `jobs.testing.tiny_run_config(tmp_path, **overrides)`.

Rooms (arrows point down; `config` is below them all):
- `loop/`: the training loop (`train`), its stop, pause and loss-spike rules.
- `checkpoints/`: atomic per-rank checkpoints, resume, a fork from another run's checkpoint.
- `telemetry/`: what a run reports: MLflow tracker, spool, uploads, system metrics, run record.
- `engines/`: what computes a step: both engines, optimiser and schedule, collectives, batches.
- `evaluation/`: the downstream tasks (lm-eval harness), scored once per cell.
At the top: `engine_specs` (the registry of engines, below `config`), `config` (the run
config), `job` (submitit's callable), `cli` and `__main__`, `faults` (how a known fault, e.g.
a full disk, ends the job: one line, no traceback), `launch` (whether a submitit executor
started this process) and `testing` (tiny run configs for tests).
"""

from __future__ import annotations

import importlib
from typing import Any

from foundation.process.megatron_jit import defer_megatron_compile

defer_megatron_compile()  # before any megatron import: its fused kernels compile on first use

_EXPORTS = {
    "RunConfig": "jobs.config",
    "OptimizerConfig": "jobs.config",
    "ScheduleConfig": "jobs.config",
    "TrainConfig": "jobs.config",
    "TrackingConfig": "jobs.config",
    "DeepSpeedConfig": "jobs.config",
    "load_run_config": "jobs.config",
    "train": "jobs.loop.trainer",
    "RunResult": "jobs.telemetry.record",
    "TrainingJob": "jobs.job",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
