"""`train(config)`: one grid cell from a resolved run config to a final validation loss.

The loop is engine-agnostic: the engine does forward/backward/update and returns the loss and
grad norm (equal on every rank); this module owns the schedule, data position, evaluation,
checkpoints, divergence, preemption and what goes to MLflow (rank 0 only).
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from foundation.provenance import device_name, git_commit, versions
from jobs import checkpoint as ckpt
from jobs.batches import step_microbatches
from jobs.config import RunConfig
from jobs.optim import lr_at
from jobs.tracking import NullTracker, Tracker

__all__ = ["RunResult", "train"]

CPU_PEAK_FLOPS = 1e12  # stated MFU denominator for a CPU process (order of one modern socket)
GPU_PEAK_FLOPS = 989e12  # H100 SXM dense bf16


@dataclass
class RunResult:
    """What a cell produced. status: completed | diverged | preempted."""

    status: str
    final_val_loss: float
    steps: int
    tokens: int
    run_id: str | None = None
    train_losses: list[float] = field(default_factory=list)
    loop_time_s: float = 0.0  # wall time of the training loop (steps, evals, logging, saves)
    tracking_time_s: float = 0.0  # of which spent in tracker calls (rank 0)


@dataclass
class _State:
    """Everything besides model/optimiser a resume needs (the data position is the step)."""

    step: int = 0
    tokens_seen: int = 0
    best_loss: float = math.inf
    losses: list[float] = field(default_factory=list)  # train loss per step: the loss curve
    val_losses: list[list[float]] = field(default_factory=list)  # [step, val loss]


def train(config: RunConfig, stop: threading.Event | None = None) -> RunResult:
    """Train one cell, resuming from the newest checkpoint in `config.output_dir`.

    `stop` (set by `TrainingJob.checkpoint` on preemption) makes the loop finish the current
    step, save a checkpoint and return status `preempted`.
    """
    from models import runtime

    config.check_world_size(runtime.launched_world_size())  # before any process group exists
    finished = _finished_result(config)
    if finished is not None:  # a rerun of a finished cell (requeue after the end, resubmit)
        return finished
    runtime.initialize_parallel(config.parallel)
    try:
        return _Trainer(config, stop).run()
    finally:
        runtime.destroy()


def _result_file(config: RunConfig) -> Path:
    return Path(config.output_dir) / "result.json"


def _finished_result(config: RunConfig) -> RunResult | None:
    path = _result_file(config)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    data["final_val_loss"] = float(data["final_val_loss"])
    return RunResult(**data)


def _write_result(config: RunConfig, result: RunResult) -> None:
    path = _result_file(config)
    tmp = path.with_name(".result.json.tmp")
    tmp.write_text(json.dumps(result.__dict__, indent=1))
    os.replace(tmp, path)


def _plot_losses(state: _State, path: Path, title: str) -> Path:
    """Train and validation loss against step, for the MLflow run page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(state.losses) + 1), state.losses, label="train", lw=1)
    if state.val_losses:
        steps, values = zip(*state.val_losses, strict=True)
        ax.plot(steps, values, "o-", label="validation")
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


class _Trainer:
    def __init__(self, config: RunConfig, stop: threading.Event | None) -> None:
        from megatron.core import parallel_state

        from data_prep import training_dataset, validation_windows
        from models.accounting import flops_per_token
        from models.build import build_gpt

        self.config = config
        self.stop = stop
        self.ps = parallel_state
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.output_dir = Path(config.output_dir)
        self.ckpt_root = self.output_dir / "checkpoints"
        if self.rank == 0:
            self.ckpt_root.mkdir(parents=True, exist_ok=True)
        self.bf16 = torch.cuda.is_available() and config.precision in ("auto", "bf16")
        if config.precision == "bf16" and not torch.cuda.is_available():
            raise ValueError("precision: 'bf16' needs a GPU; use 'auto' or 'fp32' on CPU")
        overrides: dict[str, Any] = {}
        if self.bf16:
            overrides = {"bf16": True, "params_dtype": torch.bfloat16}
            overrides["pipeline_dtype"] = torch.bfloat16
        model = build_gpt(
            config.model, config.parallel, seed=config.seed, transformer_overrides=overrides
        )
        self.engine = self._build_engine(model)
        steps, seqs = config.train.steps, config.global_batch_sequences
        self.dataset = training_dataset(config.data, config.model.seq_length, steps * seqs)
        self.val_windows = validation_windows(config.data, config.model.seq_length)
        self.flops_per_token = flops_per_token(config.model)
        peak = config.train.peak_flops_per_device
        if peak is None:
            peak = GPU_PEAK_FLOPS if torch.cuda.is_available() else CPU_PEAK_FLOPS
        self.peak_flops = peak * self.world
        self._saved_step = -1
        self.tracker: Tracker | NullTracker = NullTracker()
        if self.rank == 0 and config.tracking.enabled:
            self.tracker = Tracker(self.output_dir, config.tracking, run_name=config.name)

    def _build_engine(self, model):
        if self.config.engine == "deepspeed":
            from jobs.engine_deepspeed import DeepSpeedEngine

            return DeepSpeedEngine(self.config, model)
        from jobs.engine_megatron import MegatronEngine

        return MegatronEngine(self.config, model)

    # --- tracking -------------------------------------------------------------------------
    def _start_tracking(self, resumed: bool) -> None:
        from foundation.config import flatten, to_dict

        config = self.config
        tags = {
            "study": config.study,
            "cell_id": config.name,
            "variant": config.model.query_variant,
            "seed": str(config.seed),
            "lr": str(config.optimizer.lr),
            **config.tracking.tags,
            "engine": config.engine,
            "outcome": "running",
            "git_commit": git_commit(),
            "host": socket.gethostname(),
            "device": device_name(),
            "world_size": str(self.world),
            **versions(),
        }
        self.tracker.set_status("RUNNING")
        self.tracker.set_tags(tags)
        if not resumed:
            self.tracker.log_params(flatten(to_dict(config)))

    def _finish_tracking(self, result: RunResult, state: _State) -> None:
        from foundation.config import dump_file
        from models.accounting import num_nonembedding_params, num_params

        config = self.config
        if self.rank != 0:
            return
        summary = {
            "n_params": num_params(config.model),
            "n_nonembedding_params": num_nonembedding_params(config.model),
            "tokens": state.tokens_seen,
            "flops": self.flops_per_token * state.tokens_seen,
        }
        if result.status == "completed":
            summary["final_val_loss"] = result.final_val_loss
        self.tracker.log_metrics(summary, step=state.step)
        artifacts = self.output_dir / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        dump_file(config, artifacts / "run_config.yaml")
        curve = artifacts / "loss_curve.csv"
        lines = ["step,train_loss,val_loss"]
        val = {int(s): v for s, v in state.val_losses}
        for i, loss in enumerate(state.losses, start=1):
            lines.append(f"{i},{loss!r},{val.get(i, '')}")
        curve.write_text("\n".join(lines) + "\n")
        plot = _plot_losses(state, artifacts / "loss_curve.png", config.name)
        self.tracker.log_artifact(artifacts / "run_config.yaml")
        self.tracker.log_artifact(curve)
        self.tracker.log_artifact(plot)
        self.tracker.set_tags({"outcome": result.status})
        self.tracker.set_status("FINISHED")

    # --- the loop -------------------------------------------------------------------------
    def _payload(self, state: _State) -> dict[str, Any]:
        return {
            "engine": self.engine.state_dict(),
            "state": {**state.__dict__},
            "rng": ckpt.rng_state(),
        }

    def _save(self, state: _State) -> None:
        if state.step == self._saved_step:
            return
        self._saved_step = state.step
        ckpt.save_checkpoint(
            self.ckpt_root, state.step, self._payload(state), self.config.train.keep_checkpoints
        )

    def _resume(self) -> tuple[_State, bool]:
        payload = ckpt.load_newest(self.ckpt_root)
        if payload is None:
            return _State(), False
        self.engine.load_state_dict(payload["engine"])
        ckpt.set_rng_state(payload["rng"])
        state = _State(**payload["state"])
        self._saved_step = state.step
        if self.rank == 0:
            print(f"[jobs] {self.config.name}: resumed at step {state.step}", flush=True)
        return state, True

    def _stop_requested(self) -> bool:
        if self.stop is None:
            return False
        flag = torch.tensor([1 if self.stop.is_set() else 0])
        if self.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _diverged(self, loss: float, grad_norm: float, state: _State) -> str | None:
        if not math.isfinite(loss) or not math.isfinite(grad_norm):
            return f"non-finite loss {loss} / grad norm {grad_norm}"
        factor = self.config.train.divergence_factor
        past_warmup = state.step > self.config.schedule.warmup_steps
        if past_warmup and loss > factor * state.best_loss:
            return f"loss {loss:.4f} > {factor} x best {state.best_loss:.4f}"
        return None

    def run(self) -> RunResult:
        try:
            return self._run()
        except Exception as err:  # a crash (not a divergence): mark the run, keep the record
            self.tracker.set_tags({"error": f"{type(err).__name__}: {err}"[:1000]})
            self.tracker.set_status("FAILED")
            self.tracker.close(timeout_s=10)
            raise

    def _run(self) -> RunResult:
        config, train_cfg = self.config, self.config.train
        state, resumed = self._resume()
        self._start_tracking(resumed)
        dp_rank = self.ps.get_data_parallel_rank()
        dp_size = self.ps.get_data_parallel_world_size()
        status, reason = "completed", None
        loop_start = time.perf_counter()
        while state.step < train_cfg.steps:
            lr = lr_at(state.step, train_cfg.steps, config.optimizer.lr, config.schedule)
            self.engine.set_lr(lr)
            batches = step_microbatches(
                self.dataset,
                state.step,
                config.global_batch_sequences,
                dp_rank,
                dp_size,
                train_cfg.micro_batch_size,
            )
            start = time.perf_counter()
            loss, grad_norm = self.engine.train_step(batches)
            step_time = time.perf_counter() - start
            state.step += 1
            state.tokens_seen += config.tokens_per_step
            state.losses.append(loss)
            reason = self._diverged(loss, grad_norm, state)
            state.best_loss = min(state.best_loss, loss) if math.isfinite(loss) else state.best_loss
            tokens_per_s = config.tokens_per_step / step_time
            if reason or state.step % train_cfg.log_interval == 0:
                metrics = {
                    "train/loss": loss,
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens_seen": state.tokens_seen,
                    "tokens_per_s": tokens_per_s,
                    "mfu": tokens_per_s * self.flops_per_token / self.peak_flops,
                    "step_time_s": step_time,
                }
                self.tracker.log_metrics(metrics, step=state.step)
                if self.rank == 0:
                    print(
                        f"[jobs] {config.name} step {state.step}/{train_cfg.steps} loss "
                        f"{loss:.4f} lr {lr:.3g} grad_norm {grad_norm:.3g} "
                        f"{tokens_per_s:.0f} tok/s",
                        flush=True,
                    )
            if reason:
                status = "diverged"
                break
            if train_cfg.eval_interval and state.step % train_cfg.eval_interval == 0:
                if state.step < train_cfg.steps:  # the final eval follows the loop
                    self._evaluate(state)
            if train_cfg.checkpoint_interval and state.step % train_cfg.checkpoint_interval == 0:
                self._save(state)
            if self._stop_requested():
                self._save(state)
                self.tracker.close(timeout_s=10)  # Slurm kills soon; the spool keeps the rest
                return RunResult(
                    "preempted",
                    math.nan,
                    state.step,
                    state.tokens_seen,
                    self.tracker.run_id,
                    list(state.losses),
                )
        loop_time = time.perf_counter() - loop_start
        final = math.nan
        if status == "completed":
            final = self._evaluate(state)
            self._save(state)  # the finished state: a rerun only re-evaluates
        elif self.rank == 0:
            print(f"[jobs] {config.name}: diverged at step {state.step}: {reason}", flush=True)
            self.tracker.set_tags({"divergence_reason": reason})
        result = RunResult(
            status,
            final,
            state.step,
            state.tokens_seen,
            self.tracker.run_id,
            list(state.losses),
            loop_time,
        )
        self._finish_tracking(result, state)
        self.tracker.close()
        result.run_id = self.tracker.run_id  # created by the upload thread, maybe only now
        result.tracking_time_s = self.tracker.call_time_s
        if self.rank == 0:
            _write_result(self.config, result)
        return result

    def _evaluate(self, state: _State) -> float:
        val = self.engine.eval_loss(self.val_windows)
        state.val_losses.append([state.step, val])
        self.tracker.log_metrics({"val/loss": val}, step=state.step)
        return val
