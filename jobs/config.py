"""The run config: everything one grid cell needs, validated once at the boundary.

A run config is model + data + optimiser + schedule + training loop + parallelism + engine +
tracking + precision + output dir. `load_run_config` turns a YAML/JSON file into a `RunConfig`
whose `validate()` has checked every cross-field constraint, so the trainer trusts it. All the
checks run before any process group is created or any file is written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from data_prep.config import DataConfig
from foundation.config import ConfigError, from_dict, load_file
from jobs.engine_specs import ENGINE_SPECS, EngineName, engine_spec
from models.config import ModelConfig, ParallelConfig

__all__ = [
    "OptimizerConfig",
    "ScheduleConfig",
    "TrainConfig",
    "DeepSpeedConfig",
    "TrackingConfig",
    "InitFrom",
    "EvaluationConfig",
    "RunConfig",
    "load_run_config",
]


@dataclass
class OptimizerConfig:
    """AdamW; defaults are the paper's recipe (betas 0.9/0.95, wd 0.1 on 2-D weights, clip 1)."""

    lr: float = 6e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0  # 0 disables clipping
    # megatron engine on GPU: shard optimiser state over DP (megatron's distributed optimizer)
    distributed: bool = False

    def validate(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"optimizer.lr must be > 0, got {self.lr}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ValueError(f"optimizer.{name} must be in [0, 1), got {value}")
        if self.weight_decay < 0 or self.grad_clip < 0 or self.eps <= 0:
            raise ValueError("optimizer.weight_decay and grad_clip must be >= 0 and eps > 0")


@dataclass
class ScheduleConfig:
    """Learning-rate schedule.

    `cosine`: linear warmup to `optimizer.lr`, cosine decay to `min_lr_ratio * lr` at the last
    step (the paper: floor lr/10). `wsd`: warmup, constant, then a decay over the last
    `decay_fraction` of the steps to `min_lr_ratio * lr` with `decay_shape` (Hägele et al. 2024).
    `constant`: warmup, then the peak LR to the end: the stable phase of a WSD run, from whose
    kept checkpoints cooldown branches (`RunConfig.init_from`) fork.
    """

    kind: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
    decay_shape: Literal["linear", "cosine", "sqrt"] = "linear"
    # Warmup step s runs at peak x (s + 1) / divisor. `steps`: divisor = warmup_steps (the peak is
    # reached on the last warmup step); `steps_plus_one`: warmup_steps + 1, the reference
    # train.py's formula (docs/recipe.md measures the difference).
    warmup_divisor: Literal["steps", "steps_plus_one"] = "steps"

    def validate(self) -> None:
        if self.warmup_steps < 0:
            raise ValueError(f"schedule.warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"schedule.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if not 0 < self.decay_fraction <= 1:
            raise ValueError(
                f"schedule.decay_fraction must be in (0, 1], got {self.decay_fraction}"
            )

    @property
    def warmup_offset(self) -> int:
        """What `warmup_divisor` adds to `warmup_steps` in the warmup's denominator."""
        return 1 if self.warmup_divisor == "steps_plus_one" else 0

    def decay_start(self, total_steps: int) -> int:
        """First (0-based) step of a WSD run's decay: the last round(decay_fraction x steps)
        steps decay (at least one), never before warmup ends. A cooldown branch forks here."""
        num_decay = max(1, round(self.decay_fraction * total_steps))
        return max(self.warmup_steps, total_steps - num_decay)


@dataclass
class TrainConfig:
    """The loop: how long, how big a step, how often to evaluate, checkpoint and log."""

    steps: int
    global_batch_tokens: int  # tokens per optimiser step, over all DP ranks and micro-batches
    micro_batch_size: int = 1  # sequences per forward pass on one DP rank
    eval_interval: int = 0  # evaluate every K steps (0: only at the end)
    checkpoint_interval: int = 0  # save every K steps (0: only on preemption)
    keep_checkpoints: int = 2
    # Steps whose checkpoints are saved and never rotated away (a WSD stable run's branch points)
    keep_steps: list[int] = field(default_factory=list)
    # Steps the training-sample order is drawn for (None: `steps`). Past one epoch megatron's
    # order depends on the number of samples drawn, so a stable run and its branches share the
    # longest branch's step count here and read identical batches.
    dataset_steps: int | None = None
    log_interval: int = 1  # train metrics every K steps
    # Divergence: a non-finite loss, or a loss above `divergence_factor` x the best loss so far
    # after warmup, ends the run with outcome `diverged`.
    divergence_factor: float = 3.0
    # A loss spike: a train loss above `spike_factor` x its running EMA (jobs.loop.spikes); counted
    # and logged as `train/spikes` and `train/spike_step`, never ends the run.
    spike_factor: float = 3.0
    # Peak FLOP/s of one device for MFU; None: the present GPU's datasheet peak in the run's
    # dtype (jobs.engines.device), measured if unlisted; 1e12 on CPU.
    peak_flops_per_device: float | None = None

    def validate(self) -> None:
        for name in ("steps", "global_batch_tokens", "micro_batch_size", "log_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("eval_interval", "checkpoint_interval"):
            if getattr(self, name) < 0:
                value = getattr(self, name)
                raise ValueError(f"train.{name} must be >= 0 (0 disables), got {value}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"train.keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        if self.divergence_factor <= 1:
            raise ValueError(f"train.divergence_factor must be > 1, got {self.divergence_factor}")
        if not self.spike_factor > 1:
            raise ValueError(
                f"train.spike_factor must be > 1 (a loss that many times its running mean is a "
                f"spike; e.g. 3), got {self.spike_factor}"
            )
        bad = [s for s in self.keep_steps if not 1 <= s <= self.steps]
        if bad:
            raise ValueError(
                f"train.keep_steps: {bad} outside 1..train.steps={self.steps}; keep only steps "
                "the run reaches"
            )
        if self.dataset_steps is not None and self.dataset_steps < self.steps:
            raise ValueError(
                f"train.dataset_steps={self.dataset_steps} is below train.steps={self.steps}; "
                "the sample order must cover every step (use null for train.steps)"
            )

    @property
    def num_dataset_steps(self) -> int:
        return self.dataset_steps if self.dataset_steps is not None else self.steps


@dataclass
class DeepSpeedConfig:
    """Options of the `deepspeed` engine (ZeRO over the DP dimension)."""

    zero_stage: int = 1
    offload_optimizer: bool = False  # keep optimiser state (and its step) on the CPU

    def validate(self) -> None:
        if self.zero_stage not in (0, 1, 2):
            raise ValueError(f"deepspeed.zero_stage must be 0, 1 or 2, got {self.zero_stage}")


@dataclass
class TrackingConfig:
    """Where the cell's MLflow run lives.

    `tracking_uri` None: `MLFLOW_TRACKING_URI`, else a SQLite file `mlflow.db` in output_dir.
    `tags` carries the orchestration's cell tags (study, cell_id, variant, size, seed, lr).
    """

    enabled: bool = True
    tracking_uri: str | None = None
    experiment: str = "default"
    parent_run_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    flush_interval_s: float = 10.0

    def validate(self) -> None:
        if self.flush_interval_s <= 0:
            raise ValueError(f"tracking.flush_interval_s must be > 0, got {self.flush_interval_s}")


@dataclass
class InitFrom:
    """Start from another run's kept checkpoint (a WSD cooldown branch forking its stable run).

    The checkpoint's model, optimiser, RNG and loss history are loaded as if this run had
    trained those steps itself; the run's own checkpoints, once it has any, take precedence.
    """

    output_dir: str  # the parent run's output dir (its checkpoints/ holds step_<step>)
    step: int


@dataclass
class EvaluationConfig:
    """Downstream tasks the cell's job runs after its last step (`jobs.evaluation`): harness
    task names (or the local `scaling_local`), the first `limit` items of each (None: all)."""

    tasks: list[str] = field(default_factory=list)
    limit: int | None = None

    def validate(self) -> None:
        if not self.tasks:
            raise ValueError("evaluation.tasks: empty; name at least one task, e.g. scaling_local")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"evaluation.tasks: {self.tasks} names a task twice; list each once")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"evaluation.limit: {self.limit} must be >= 1 (or null: every item)")


@dataclass
class RunConfig:
    """One grid cell, resolved: what `scaling train` and `jobs.TrainingJob` run."""

    name: str  # the cell id
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    output_dir: str
    study: str = "default"
    seed: int = 0  # initialisation seed (data order is data.seed)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    engine: EngineName = "megatron"  # a registered engine (`jobs.engine_specs`)
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto: bf16 on GPU, fp32 on CPU
    init_from: InitFrom | None = None  # a cooldown branch: the parent's checkpoint to start at
    # A reference (nanoGPT-format) checkpoint whose weights replace the seed's initialisation:
    # the same starting point as the paper's own train.py (`models.nanogpt.load_weights`).
    init_weights: str | None = None
    evaluation: EvaluationConfig | None = None  # downstream tasks after the last step

    # --- derived quantities: one place, named ---------------------------------------------
    @property
    def tokens_per_sequence(self) -> int:
        return self.model.seq_length

    @property
    def global_batch_sequences(self) -> int:
        """Sequences per optimiser step: global_batch_tokens / seq_length."""
        return self.train.global_batch_tokens // self.model.seq_length

    @property
    def num_microbatches(self) -> int:
        """Gradient-accumulation steps per DP rank: global seqs / (DP x micro batch)."""
        return self.global_batch_sequences // (
            self.parallel.data_parallel * self.train.micro_batch_size
        )

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_sequences * self.model.seq_length

    def validate(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"name must be a non-empty cell id without '/', got {self.name!r}")
        if not self.output_dir:
            raise ValueError("output_dir must be set: checkpoints and the MLflow run id go there")
        seq = self.model.seq_length
        if self.train.global_batch_tokens % seq:
            raise ValueError(
                f"train.global_batch_tokens={self.train.global_batch_tokens} is not a multiple of "
                f"model.seq_length={seq}; use a multiple such as "
                f"{max(1, self.train.global_batch_tokens // seq) * seq}"
            )
        per_step = self.parallel.data_parallel * self.train.micro_batch_size
        if self.global_batch_sequences % per_step:
            raise ValueError(
                f"train.global_batch_tokens={self.train.global_batch_tokens} gives "
                f"{self.global_batch_sequences} sequences per step, not divisible by "
                f"parallel.data_parallel x train.micro_batch_size = {per_step}; make "
                f"global_batch_tokens a multiple of {per_step * seq}"
            )
        if self.schedule.warmup_steps > self.train.steps:
            raise ValueError(
                f"schedule.warmup_steps={self.schedule.warmup_steps} exceeds "
                f"train.steps={self.train.steps}"
            )
        if not engine_spec(self.engine).pipeline_parallel and self.parallel.pipeline_parallel > 1:
            with_pp = [s.name for s in ENGINE_SPECS.values() if s.pipeline_parallel]
            raise ValueError(
                f"engine {self.engine!r} does not support parallel.pipeline_parallel > 1; use "
                f"engine {with_pp[0]!r} for pipeline parallelism or set pipeline_parallel: 1"
            )
        if engine_spec(self.engine).zero and self.deepspeed.zero_stage == 0:
            if self.precision == "bf16":  # "auto" is checked where the device is known
                raise ValueError(
                    "deepspeed.zero_stage: 0 with precision 'bf16' would accumulate gradients in "
                    "bf16 (DeepSpeed has no fp32 accumulation without ZeRO); use zero_stage 1 "
                    "or 2, or precision 'fp32'"
                )
        if self.data.num_val_windows < self.parallel.data_parallel:
            raise ValueError(
                f"data.num_val_windows={self.data.num_val_windows} is smaller than "
                f"parallel.data_parallel={self.parallel.data_parallel}; every DP rank evaluates "
                "a share of the windows, so use at least one window per DP rank"
            )
        if 0 < self.data.num_select_windows < self.parallel.data_parallel:
            raise ValueError(
                f"data.num_select_windows={self.data.num_select_windows} is smaller than "
                f"parallel.data_parallel={self.parallel.data_parallel}; every DP rank evaluates "
                "a share of the windows, so use at least one window per DP rank (or 0: none)"
            )
        self.model.validate_parallel(self.parallel)
        if self.init_from is not None:
            self._validate_init_from(self.init_from)
        if self.init_weights is not None:
            self._validate_init_weights(self.init_weights)
        if self.evaluation is not None:
            self.evaluation.validate()

    def _validate_init_from(self, init: InitFrom) -> None:
        """A branch forks a constant-LR run, so it must fork before its own decay starts."""
        if not init.output_dir:
            raise ValueError("init_from.output_dir: empty; name the parent run's output dir")
        if Path(init.output_dir).resolve() == Path(self.output_dir).resolve():
            raise ValueError(
                "init_from.output_dir: is this run's own output_dir; a branch writes its own "
                "checkpoints elsewhere (its own newest checkpoint is resumed anyway)"
            )
        if self.schedule.kind != "wsd":
            raise ValueError(
                f"init_from: needs schedule.kind 'wsd' (a cooldown from a stable run), got "
                f"{self.schedule.kind!r}"
            )
        start = self.schedule.decay_start(self.train.steps)
        if not self.schedule.warmup_steps <= init.step <= start or init.step < 1:
            raise ValueError(
                f"init_from.step: {init.step} must be a step after warmup "
                f"(schedule.warmup_steps={self.schedule.warmup_steps}, and >= 1) and at or "
                f"before this run's decay start {start} (train.steps={self.train.steps}, "
                f"schedule.decay_fraction={self.schedule.decay_fraction}); the parent trained "
                "at the constant peak LR up to it"
            )

    def _validate_init_weights(self, path: str) -> None:
        """A reference checkpoint holds the whole model: one stage, unsharded, from step 0."""
        if self.init_from is not None:
            raise ValueError(
                "init_weights: set together with init_from; a branch starts from its parent's "
                "checkpoint, so drop one of them"
            )
        par = self.parallel
        if par.tensor_parallel != 1 or par.pipeline_parallel != 1:
            raise ValueError(
                f"init_weights: needs parallel.tensor_parallel = pipeline_parallel = 1 (got "
                f"{par.tensor_parallel}, {par.pipeline_parallel}); a reference checkpoint is "
                "one unsharded model"
            )
        if not Path(path).is_file():
            raise ValueError(
                f"init_weights: {path} is not a file; give a reference checkpoint (.pt with "
                "'model' and 'model_args')"
            )

    def check_world_size(self, world_size: int) -> None:
        """The launcher's world size must equal TP x PP x DP; raised before any group exists."""
        expected = self.parallel.world_size
        if world_size != expected:
            model_parallel = self.parallel.tensor_parallel * self.parallel.pipeline_parallel
            raise ConfigError(
                f"run.parallel: TP {self.parallel.tensor_parallel} x PP "
                f"{self.parallel.pipeline_parallel} x DP {self.parallel.data_parallel} = "
                f"{expected} processes, but the launcher started {world_size}; launch {expected} "
                f"processes or set parallel.data_parallel = {world_size} / {model_parallel}"
            )

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a run config file (YAML or JSON); errors name the file and field."""
    data = load_file(path)
    try:
        return from_dict(RunConfig, data, where="run")
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from err
