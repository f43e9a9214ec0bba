"""The study spec: one YAML file describes a whole grid, validated once with errors naming fields.

A study is sizes × variants (arms) × seeds × learning rates. This module holds the spec's
dataclasses and the checks that need nothing but the spec itself; `scaling.cells` expands it into
resolved run configs (which runs every model/run-config check), and `scaling.environment` checks
what lies outside the file (dataset on disk, MLflow server, Slurm). `load_study` does all three,
so a spec that loads is a spec that can be submitted.

Relative paths in the spec (dataset, output dir) are resolved against the current directory when
the spec is loaded and stored absolute, because jobs run elsewhere (a Slurm node, a subprocess).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from foundation.config import ConfigError, from_dict
from scaling.ladder import ARMS, Shape, parse_size, shape_for_size

__all__ = [
    "MlflowSpec",
    "DataSpec",
    "ShapeSpec",
    "LadderSpec",
    "TokensSpec",
    "LRSpec",
    "BatchSpec",
    "ParallelSpec",
    "SlurmSpec",
    "LocalSpec",
    "CostSpec",
    "Study",
    "ANY",
]

ANY = "*"  # key in per-size / per-variant tables that applies to every size / variant
_TRACKING_URI = re.compile(r"^(https?|sqlite|postgresql|mysql|databricks)[:+]")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# ModelConfig fields a study sets itself (the ladder gives the shape, the arm the variant).
_MODEL_FIELDS_OWNED = {
    "num_layers": "sizes / ladder.shapes",
    "hidden_size": "sizes / ladder.shapes",
    "num_attention_heads": "sizes / ladder.shapes",
    "query_variant": "variants",
    "qk_norm": "variants (linear_qknorm)",
    "ffn_hidden_size": "variants (wider_mlp)",
}


@dataclass
class MlflowSpec:
    """Where the study's runs go: one parent run per study, one child per cell."""

    experiment: str
    tracking_uri: str


@dataclass
class DataSpec:
    """A prepared dataset (`path`), or the parameters to prepare one (`prepare`).

    `prepare` is a `data_prep.DataPrepConfig` mapping; its `output_dir` is the dataset path.
    Training-sample order is `seed + cell seed`: arms that share a seed see identical batches
    (paired comparison), different seeds see different orders.
    """

    path: str | None = None
    prepare: dict[str, Any] | None = None
    seed: int = 1234
    num_val_windows: int = 64
    val_seed: int = 0


@dataclass
class ShapeSpec:
    """An explicit shape for one size, overriding the ladder rule."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int


@dataclass
class LadderSpec:
    """The size → shape rule's two constants (see `scaling.ladder`) and explicit shapes."""

    aspect_ratio: float = 64.0  # hidden_size / num_layers (GPT-3 small: 768 / 12)
    head_dim: int = 64
    shapes: dict[str, ShapeSpec] = field(default_factory=dict)


@dataclass
class TokensSpec:
    """Training tokens per size: `tokens_per_param` × nominal N, unless given in `per_size`."""

    tokens_per_param: float | None = 20.0  # Chinchilla's compute-optimal ratio
    per_size: dict[str, float] = field(default_factory=dict)


@dataclass
class LRSpec:
    """Peak learning rates: a grid per (variant, size) so every arm is compared at its best LR.

    For each (variant, size): `grid[variant][size]`, else `grid["*"][size]`, else (law `porian`)
    `porian_lr(N) × m` for each m in `multipliers`.
    """

    law: Literal["porian", "none"] = "porian"
    multipliers: list[float] = field(default_factory=lambda: [1.0])
    grid: dict[str, dict[str, list[float]]] = field(default_factory=dict)


@dataclass
class BatchSpec:
    """Tokens per optimiser step: Porian's law of N, or `tokens` (fixed), or `per_size`."""

    rule: Literal["porian", "fixed"] = "porian"
    tokens: int | None = None
    per_size: dict[str, int] = field(default_factory=dict)
    micro_batch_size: int = 1


@dataclass
class ParallelSpec:
    """Parallelism of one cell; `gpus_per_job` (processes, on CPU) must equal TP × PP × DP."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    gpus_per_job: int | None = None

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel


@dataclass
class SlurmSpec:
    """Resources of every Slurm job; one job per cell, cells grouped into job arrays."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: int = 60
    gpus_per_node: int = 0  # 0: CPU-only nodes (one task per process, no GPU request)
    cpus_per_task: int = 1
    mem_gb: float | None = None
    constraint: str | None = None
    array_parallelism: int = 64  # at most this many cells of one array run at once
    additional: dict[str, Any] = field(default_factory=dict)  # extra sbatch options
    setup: list[str] = field(default_factory=list)  # shell lines run before the job


@dataclass
class LocalSpec:
    """The local executor: cells run as subprocesses of `scaling submit`, a few at a time."""

    max_parallel: int = 1
    timeout_min: int = 24 * 60


@dataclass
class CostSpec:
    """Sustained training FLOP/s per GPU used by `plan` for time and GPU-hours.

    4e14: an H100's 989 TFLOP/s dense bf16 at 40% MFU, typical for megatron at these sizes.
    """

    flops_per_gpu_s: float = 4e14


@dataclass
class Study:
    """A scaling study: the grid, the recipe and where it runs."""

    name: str
    mlflow: MlflowSpec
    data: DataSpec
    sizes: list[str]
    variants: list[str]
    seeds: list[int]
    output_dir: str | None = None  # default runs/<name>: submitit logs and one dir per cell
    model: dict[str, Any] = field(default_factory=dict)  # shared ModelConfig fields
    ladder: LadderSpec = field(default_factory=LadderSpec)
    tokens: TokensSpec = field(default_factory=TokensSpec)
    lr: LRSpec = field(default_factory=LRSpec)
    batch: BatchSpec = field(default_factory=BatchSpec)
    schedule: dict[str, Any] = field(default_factory=dict)  # jobs ScheduleConfig fields
    optimizer: dict[str, Any] = field(default_factory=dict)  # jobs OptimizerConfig, minus lr
    train: dict[str, Any] = field(default_factory=dict)  # jobs TrainConfig, minus steps/batch
    parallel: dict[str, ParallelSpec] = field(default_factory=dict)  # size or "*" → parallelism
    engine: Literal["megatron", "deepspeed"] = "megatron"
    deepspeed: dict[str, Any] = field(default_factory=dict)
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    executor: Literal["local", "slurm"] = "local"
    local: LocalSpec = field(default_factory=LocalSpec)
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    cost: CostSpec = field(default_factory=CostSpec)

    # --- derived --------------------------------------------------------------------------
    @property
    def folder(self) -> Path:
        """The study folder: submitit logs, job records and one output dir per cell."""
        return Path(self.output_dir) if self.output_dir else Path("runs", self.name).absolute()

    @property
    def dataset_path(self) -> Path:
        return Path(self.data.path if self.data.path else self.data.prepare["output_dir"])

    def shape(self, size: str) -> Shape:
        """The explicit shape of `size` if given, else the ladder rule's."""
        explicit = self.ladder.shapes.get(size)
        if explicit is not None:
            return Shape(explicit.num_layers, explicit.hidden_size, explicit.num_attention_heads)
        return shape_for_size(size, self.ladder.aspect_ratio, self.ladder.head_dim)

    def parallel_for(self, size: str) -> ParallelSpec:
        return self.parallel.get(size) or self.parallel.get(ANY) or ParallelSpec()

    # --- checks that need only the spec ---------------------------------------------------
    def validate(self) -> None:
        _check_name(self.name)
        if not self.mlflow.experiment:
            raise ConfigError("study.mlflow.experiment: empty; name the MLflow experiment")
        if not _TRACKING_URI.match(self.mlflow.tracking_uri):
            raise ConfigError(
                f"study.mlflow.tracking_uri: {self.mlflow.tracking_uri!r} is not a tracking URI; "
                "use e.g. http://127.0.0.1:5000 or sqlite:///path/mlflow.db"
            )
        self._validate_data()
        self._validate_grid()
        self._validate_recipe()
        self._validate_resources()

    def _validate_data(self) -> None:
        data = self.data
        if not data.path and not data.prepare:
            raise ConfigError(
                "study.data: give `path` (a directory made by `scaling prepare-data`) or "
                "`prepare` (DataPrepConfig fields to prepare one)"
            )
        if data.prepare is not None:
            from data_prep.config import DataPrepConfig

            prep = dict(data.prepare)
            if data.path:
                if prep.get("output_dir") not in (None, data.path):
                    raise ConfigError(
                        f"study.data.prepare.output_dir: {prep['output_dir']!r} differs from "
                        f"study.data.path {data.path!r}; drop one of them"
                    )
                prep["output_dir"] = data.path
            if "output_dir" not in prep:
                raise ConfigError(
                    "study.data.prepare.output_dir: missing; name where the dataset goes "
                    "(or set study.data.path)"
                )
            from_dict(DataPrepConfig, prep, "study.data.prepare")
            data.prepare = prep
        if data.num_val_windows < 1:
            raise ConfigError(f"study.data.num_val_windows: {data.num_val_windows} must be >= 1")

    def _validate_grid(self) -> None:
        _check_list("sizes", self.sizes, "e.g. [2M, 6M, 25M]")
        known = ", ".join(ARMS)
        _check_list("variants", self.variants, f"e.g. [linear, nonlinear]; known: {known}")
        _check_list("seeds", self.seeds, "e.g. [0, 1, 2]")
        for i, variant in enumerate(self.variants):
            if variant not in ARMS:
                raise ConfigError(
                    f"study.variants[{i}]: unknown variant {variant!r}; use one of "
                    f"{', '.join(ARMS)}"
                )
        for i, seed in enumerate(self.seeds):
            if seed < 0:
                raise ConfigError(f"study.seeds[{i}]: {seed} is negative; seeds are >= 0")
        for size, shape in self.ladder.shapes.items():
            _check_size_name(f"study.ladder.shapes.{size}", size)
            for name in ("num_layers", "hidden_size", "num_attention_heads"):
                if getattr(shape, name) < 1:
                    raise ConfigError(f"study.ladder.shapes.{size}.{name}: must be >= 1")
        if self.ladder.aspect_ratio <= 0 or self.ladder.head_dim < 1:
            raise ConfigError("study.ladder: aspect_ratio must be > 0 and head_dim >= 1")
        for i, size in enumerate(self.sizes):
            _check_size_name(f"study.sizes[{i}]", size)
            if size not in self.ladder.shapes:
                try:
                    self.shape(size)
                except ValueError as err:
                    raise ConfigError(f"study.sizes[{i}]: {err}") from err
        for owned, where in _MODEL_FIELDS_OWNED.items():
            if owned in self.model:
                raise ConfigError(
                    f"study.model.{owned}: set by the study's {where}, not in study.model; "
                    "remove it here"
                )

    def _validate_recipe(self) -> None:
        tokens = self.tokens
        _check_keys("study.tokens.per_size", tokens.per_size, self.sizes, allow_any=False)
        for size, value in tokens.per_size.items():
            if not value > 0:
                raise ConfigError(f"study.tokens.per_size.{size}: {value} must be > 0 tokens")
        if tokens.tokens_per_param is not None and not tokens.tokens_per_param > 0:
            raise ConfigError(
                f"study.tokens.tokens_per_param: {tokens.tokens_per_param} must be > 0 (e.g. 20)"
            )
        missing = [s for s in self.sizes if s not in tokens.per_size]
        if tokens.tokens_per_param is None and missing:
            raise ConfigError(
                f"study.tokens: no budget for size(s) {', '.join(missing)}; set "
                "tokens_per_param or per_size for them"
            )
        self._validate_lr()
        batch = self.batch
        if batch.rule == "fixed" and batch.tokens is None:
            raise ConfigError("study.batch.tokens: required with rule 'fixed' (tokens per step)")
        if batch.tokens is not None and batch.tokens < 1:
            raise ConfigError(f"study.batch.tokens: {batch.tokens} must be >= 1")
        _check_keys("study.batch.per_size", batch.per_size, self.sizes, allow_any=False)
        for size, value in batch.per_size.items():
            if value < 1:
                raise ConfigError(f"study.batch.per_size.{size}: {value} must be >= 1 tokens")
        if batch.micro_batch_size < 1:
            raise ConfigError(
                f"study.batch.micro_batch_size: {batch.micro_batch_size} must be >= 1"
            )
        if "lr" in self.optimizer:
            raise ConfigError("study.optimizer.lr: set learning rates under study.lr, not here")
        for owned in ("steps", "global_batch_tokens", "micro_batch_size"):
            if owned in self.train:
                raise ConfigError(
                    f"study.train.{owned}: derived from study.tokens / study.batch; remove it"
                )
        self._validate_job_sections()

    def _validate_job_sections(self) -> None:
        """The sections passed to the run config, checked with its own dataclasses."""
        from jobs.config import DeepSpeedConfig, OptimizerConfig, ScheduleConfig, TrainConfig

        from_dict(ScheduleConfig, self.schedule, "study.schedule")
        from_dict(OptimizerConfig, {**self.optimizer, "lr": 1.0}, "study.optimizer")
        from_dict(TrainConfig, {**self.train, "steps": 1, "global_batch_tokens": 1}, "study.train")
        from_dict(DeepSpeedConfig, self.deepspeed, "study.deepspeed")

    def _validate_lr(self) -> None:
        lr = self.lr
        if lr.law != "none":
            _check_list("lr.multipliers", lr.multipliers, "e.g. [0.5, 1, 2]")
            for i, m in enumerate(lr.multipliers):
                if not m > 0:
                    raise ConfigError(f"study.lr.multipliers[{i}]: {m} must be > 0")
        for variant, per_size in lr.grid.items():
            if variant != ANY and variant not in self.variants:
                raise ConfigError(
                    f"study.lr.grid.{variant}: not one of study.variants "
                    f"({', '.join(self.variants)}) or '*'"
                )
            _check_keys(f"study.lr.grid.{variant}", per_size, self.sizes, allow_any=False)
            for size, values in per_size.items():
                _check_list(f"lr.grid.{variant}.{size}", values, "e.g. [1e-3, 2e-3]")
                for i, value in enumerate(values):
                    if not value > 0:
                        raise ConfigError(
                            f"study.lr.grid.{variant}.{size}[{i}]: {value} must be > 0"
                        )
        if lr.law == "none":
            for variant in self.variants:
                for size in self.sizes:
                    if size not in lr.grid.get(variant, lr.grid.get(ANY, {})):
                        raise ConfigError(
                            f"study.lr.grid: no learning rates for ({variant}, {size}) and "
                            "lr.law is 'none'; add grid entries or use law 'porian'"
                        )

    def _validate_resources(self) -> None:
        _check_keys("study.parallel", self.parallel, self.sizes, allow_any=True)
        for key, par in self.parallel.items():
            for name in ("tensor_parallel", "pipeline_parallel", "data_parallel"):
                if getattr(par, name) < 1:
                    raise ConfigError(f"study.parallel.{key}.{name}: must be >= 1")
            if par.gpus_per_job is not None and par.gpus_per_job != par.world_size:
                raise ConfigError(
                    f"study.parallel.{key}.gpus_per_job: {par.gpus_per_job} != TP x PP x DP = "
                    f"{par.tensor_parallel} x {par.pipeline_parallel} x {par.data_parallel} = "
                    f"{par.world_size}; set gpus_per_job to {par.world_size} or change TP/PP/DP"
                )
        if self.local.max_parallel < 1 or self.local.timeout_min < 1:
            raise ConfigError("study.local: max_parallel and timeout_min must be >= 1")
        slurm = self.slurm
        for name in ("time_limit_min", "cpus_per_task", "array_parallelism"):
            if getattr(slurm, name) < 1:
                raise ConfigError(f"study.slurm.{name}: {getattr(slurm, name)} must be >= 1")
        if slurm.gpus_per_node < 0:
            raise ConfigError(f"study.slurm.gpus_per_node: {slurm.gpus_per_node} must be >= 0")
        if slurm.gpus_per_node > 0:
            for size in self.sizes:
                world = self.parallel_for(size).world_size
                if world > slurm.gpus_per_node and world % slurm.gpus_per_node:
                    raise ConfigError(
                        f"study.parallel: size {size} needs {world} GPUs, not a whole number of "
                        f"nodes of study.slurm.gpus_per_node={slurm.gpus_per_node}; use a "
                        "multiple of it"
                    )
        if self.cost.flops_per_gpu_s <= 0:
            raise ConfigError("study.cost.flops_per_gpu_s: must be > 0 (e.g. 4e14)")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"study.name: {name!r} must be letters, digits, '.', '_' or '-' (it names folders "
            "and MLflow tags)"
        )


def _check_list(field_name: str, values: list, example: str) -> None:
    if not values:
        raise ConfigError(f"study.{field_name}: empty; give at least one ({example})")
    seen = set()
    for i, value in enumerate(values):
        if value in seen:
            raise ConfigError(
                f"study.{field_name}[{i}]: {value!r} is listed twice, which would duplicate "
                "cells; remove the repeat"
            )
        seen.add(value)


def _check_size_name(where: str, size: str) -> None:
    try:
        parse_size(size)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from err


def _check_keys(where: str, table: dict, sizes: list[str], allow_any: bool) -> None:
    for key in table:
        if key == ANY and allow_any:
            continue
        if key not in sizes:
            extra = " or '*'" if allow_any else ""
            raise ConfigError(
                f"{where}.{key}: not one of study.sizes ({', '.join(sizes)}){extra}; fix the key"
            )
