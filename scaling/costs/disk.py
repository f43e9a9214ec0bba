"""Disk a study's checkpoints take: one checkpoint of a cell, and how many a finished cell keeps."""

from __future__ import annotations

from jobs.engine_specs import engine_spec
from models.accounting import checkpoint_bytes
from scaling.backends.executors import executor_for
from scaling.spec.resolved import ResolvedStudy

__all__ = ["cell_checkpoint_bytes", "num_checkpoints_kept"]


def cell_checkpoint_bytes(study: ResolvedStudy, run) -> int:
    """One checkpoint of `run`: bf16 weights where the run trains in bf16 (precision bf16,
    or auto on a Slurm study that asks for GPUs), else fp32."""
    precision = run.precision
    if precision == "auto":
        precision = executor_for(study).planned_precision
    zero_stage = engine_spec(run.engine).zero_stage(run)
    return checkpoint_bytes(run.model, run.parallel, zero_stage, precision == "bf16")


def num_checkpoints_kept(train) -> int:
    """Checkpoints a finished run leaves: the newest `keep_checkpoints` of its rotating saves
    (every `checkpoint_interval` steps and the final one) plus every `keep_steps` one."""
    # counted, not listed: plan prices any step count, however large (a set of 1e294 saves
    # took all the memory)
    steps, interval = train.steps, train.checkpoint_interval
    num_saves = steps // interval + (steps % interval != 0) if interval else 1
    kept = set(train.keep_steps)
    kept_saves = sum(
        0 < s <= steps and (s == steps or bool(interval) and s % interval == 0) for s in kept
    )
    return min(train.keep_checkpoints, num_saves - kept_saves) + len(kept)
