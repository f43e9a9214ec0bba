"""Cell expansion: a study becomes one fully resolved `jobs.RunConfig` per grid cell.

Every derived number of a cell is computed here by a named rule (`scaling.ladder`), from the
size's nominal parameter count N, so every arm at a size shares tokens, batch and schedule and
differs only in its `ARMS` overrides and its learning rate:

- tokens D: `tokens.per_size[size]`, else `tokens_per_param × N`, rounded up to whole steps;
- tokens per step: `batch.per_size[size]`, else fixed `batch.tokens`, else Porian's law; rounded
  to whole sequences, a multiple of DP × micro-batch, at least one such group;
- warmup: `schedule.warmup_steps` if set, else N tokens (Porian), at most a third of the steps;
- AdamW beta2: `optimizer.beta2` if set, else Porian's rule for the batch size.

Building each `RunConfig` with `from_dict` runs every model, parallelism and run-config check, so
TP not dividing heads or PP not dividing layers surfaces here with the cell and field named.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from foundation.config import ConfigError, from_dict, to_dict
from scaling.ladder import (
    arm_overrides,
    nominal_params,
    porian_batch_tokens,
    porian_beta2,
    porian_lr,
    porian_warmup_tokens,
)
from scaling.study import ANY, Study

if TYPE_CHECKING:
    from jobs.config import RunConfig

__all__ = ["Cell", "cell_id", "learning_rates", "expand_cells", "tokens_per_step", "num_steps"]

MAX_WARMUP_FRACTION = 1 / 3  # tiny budgets would otherwise spend the whole run warming up


@dataclass(frozen=True)
class Cell:
    """One grid point and the run config that trains it."""

    cell_id: str
    size: str
    variant: str
    seed: int
    lr: float
    run: RunConfig

    @property
    def tags(self) -> dict[str, str]:
        """The MLflow tags that identify this cell (docs/interfaces.md)."""
        return {
            "study": self.run.study,
            "cell_id": self.cell_id,
            "variant": self.variant,
            "size": self.size,
            "seed": str(self.seed),
            "lr": f"{self.lr:.6g}",
            "engine": self.run.engine,
        }

    @property
    def world_size(self) -> int:
        return self.run.parallel.world_size

    @property
    def config_hash(self) -> str:
        """Fingerprint of what the cell trains (not where it logs or writes): a finished run
        with another fingerprint was trained under a different recipe."""
        data = to_dict(self.run)
        for where in ("tracking", "output_dir"):
            data.pop(where)
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def cell_id(size: str, variant: str, seed: int, lr: float) -> str:
    """``"12M-nonlinear-s0-lr0.00976"``: sortable, readable, safe as a folder name."""
    return f"{size}-{variant}-s{seed}-lr{lr:.3g}"


def learning_rates(study: Study, variant: str, size: str) -> list[float]:
    """The LR grid of (variant, size): explicit grid entries, else the law × multipliers."""
    grid = study.lr.grid
    for key in (variant, ANY):
        if size in grid.get(key, {}):
            return list(grid[key][size])
    assert study.lr.law == "porian", "validate() guarantees a grid entry when law is 'none'"
    base = porian_lr(nominal_params(study.shape(size)))
    return [base * m for m in study.lr.multipliers]


def tokens_per_step(study: Study, size: str, seq_length: int) -> int:
    """Global batch in tokens: whole sequences, a multiple of DP × micro-batch sequences."""
    if size in study.batch.per_size:
        target = study.batch.per_size[size]
    elif study.batch.rule == "fixed":
        target = study.batch.tokens
    else:
        target = porian_batch_tokens(nominal_params(study.shape(size)))
    group = study.parallel_for(size).data_parallel * study.batch.micro_batch_size * seq_length
    return max(1, round(target / group)) * group


def num_steps(study: Study, size: str, step_tokens: int) -> int:
    """Optimiser steps to train the size's token budget (rounded up to whole steps)."""
    if size in study.tokens.per_size:
        budget = study.tokens.per_size[size]
    else:
        budget = study.tokens.tokens_per_param * nominal_params(study.shape(size))
    return max(1, math.ceil(budget / step_tokens))


def _run_dict(
    study: Study,
    size: str,
    variant: str,
    seed: int,
    lr: float,
    vocab_size: int,
    parent_run_id: str | None,
) -> dict[str, Any]:
    shape = study.shape(size)
    par = study.parallel_for(size)
    seq_length = int(study.model.get("seq_length", 1024))
    step_tokens = tokens_per_step(study, size, seq_length)
    steps = num_steps(study, size, step_tokens)
    n = nominal_params(shape)
    schedule = dict(study.schedule)
    if schedule.get("warmup_steps") is None:
        warmup = math.ceil(porian_warmup_tokens(n) / step_tokens)
        schedule["warmup_steps"] = min(warmup, int(steps * MAX_WARMUP_FRACTION))
    optimizer = {"beta2": porian_beta2(step_tokens), **study.optimizer, "lr": lr}
    cid = cell_id(size, variant, seed, lr)
    model = {
        "vocab_size": vocab_size,
        "seq_length": seq_length,
        **study.model,
        "num_layers": shape.num_layers,
        "hidden_size": shape.hidden_size,
        "num_attention_heads": shape.num_attention_heads,
        **arm_overrides(variant, shape.hidden_size, par.tensor_parallel),
    }
    cell = {"study": study.name, "cell_id": cid, "variant": variant, "size": size}
    tags = {**cell, "seed": str(seed), "lr": f"{lr:.6g}", "engine": study.engine}
    return {
        "name": cid,
        "study": study.name,
        "seed": seed,
        "model": model,
        "data": {
            "path": str(study.dataset_path),
            "seed": study.data.seed + seed,
            "num_val_windows": study.data.num_val_windows,
            "val_seed": study.data.val_seed,
        },
        "optimizer": optimizer,
        "schedule": schedule,
        "train": {
            **study.train,
            "steps": steps,
            "global_batch_tokens": step_tokens,
            "micro_batch_size": study.batch.micro_batch_size,
        },
        "parallel": {
            "tensor_parallel": par.tensor_parallel,
            "pipeline_parallel": par.pipeline_parallel,
            "data_parallel": par.data_parallel,
        },
        "engine": study.engine,
        "deepspeed": dict(study.deepspeed),
        "tracking": {
            "tracking_uri": study.mlflow.tracking_uri,
            "experiment": study.mlflow.experiment,
            "parent_run_id": parent_run_id,
            "tags": tags,
        },
        "precision": study.precision,
        "output_dir": str(study.folder / "cells" / cid),
    }


def expand_cells(study: Study, vocab_size: int, parent_run_id: str | None = None) -> list[Cell]:
    """Every cell of the grid (sizes × variants × seeds × LRs), in a stable order.

    Raises ConfigError naming the study field when a resolved run config is invalid (e.g. TP
    does not divide a size's heads) or two cells would coincide.
    """
    from jobs.config import RunConfig

    cells: list[Cell] = []
    seen: dict[str, str] = {}
    for size in study.sizes:
        _check_split(study, size)
        for variant in study.variants:
            for lr in learning_rates(study, variant, size):
                for seed in study.seeds:
                    data = _run_dict(study, size, variant, seed, lr, vocab_size, parent_run_id)
                    cid = data["name"]
                    where = f"study (size {size}, variant {variant}, seed {seed}, lr {lr!r})"
                    if cid in seen:
                        raise ConfigError(
                            f"study.lr: duplicate cell {cid} from {where} and {seen[cid]}; "
                            "learning rates that round to the same 3 digits collide; remove one"
                        )
                    seen[cid] = where
                    try:
                        run = from_dict(RunConfig, data, where="run")
                    except ConfigError as err:
                        raise ConfigError(f"{where}: {_study_hint(err, size)}") from err
                    cells.append(Cell(cid, size, variant, seed, lr, run))
    return cells


def _check_split(study: Study, size: str) -> None:
    """TP must divide the heads and PP the layers of the size's shape (named study fields)."""
    shape = study.shape(size)
    par = study.parallel_for(size)
    key = size if size in study.parallel else ANY
    described = (
        f"size {size} is {shape.num_layers} layers x {shape.hidden_size} hidden x "
        f"{shape.num_attention_heads} heads"
    )
    if shape.num_attention_heads % par.tensor_parallel:
        raise ConfigError(
            f"study.parallel.{key}.tensor_parallel: {par.tensor_parallel} does not divide the "
            f"heads; {described}; use a divisor of {shape.num_attention_heads} or give an "
            f"explicit shape under study.ladder.shapes.{size}"
        )
    if shape.num_layers % par.pipeline_parallel:
        raise ConfigError(
            f"study.parallel.{key}.pipeline_parallel: {par.pipeline_parallel} does not divide "
            f"the layers; {described}; use a divisor of {shape.num_layers} or give an explicit "
            f"shape under study.ladder.shapes.{size}"
        )


def _study_hint(err: ConfigError, size: str) -> str:
    """Point run-config errors back at the study fields that produced them."""
    message = str(err)
    if "parallel." in message:
        message += f" (set study.parallel.{size}, or an explicit shape under study.ladder.shapes)"
    return message
