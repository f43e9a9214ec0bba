"""`train(config)`: one grid cell from a resolved run config to a final validation loss.

The loop is engine-agnostic: the engine does forward/backward/update and returns the loss and
grad norm (equal on every rank); this module owns the schedule, data position, evaluation,
checkpoints, divergence, preemption and what goes to MLflow (rank 0 only).

Fault tests can hold the loop after a given step (`SCALING_TEST_PAUSE_AT_STEP` and
`SCALING_TEST_PAUSE_FILE`, see jobs/loop/pause.py) to act at an exact step; nothing else sets them,
and unset they cost one `is None` per step.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from foundation import contract as C
from foundation.process.log import rank0_print
from jobs.checkpoints import checkpoint as ckpt
from jobs.checkpoints.fork import load_parent_checkpoint, parent_run_id
from jobs.config import RunConfig
from jobs.engines.batches import step_microbatches
from jobs.engines.collectives import any_rank
from jobs.engines.device import TAG_MFU_PEAK, TAG_MFU_PEAK_SOURCE, mfu_peak
from jobs.engines.engine import build_engine
from jobs.engines.optim import lr_at
from jobs.loop.pause import pause_point
from jobs.loop.spikes import is_spike, next_ema
from jobs.loop.stop import REQUEUE
from jobs.telemetry import record
from jobs.telemetry.record import LossHistory, RunResult
from jobs.telemetry.system_metrics import SystemMetrics, start_system_metrics
from jobs.telemetry.tracking import NullTracker, Tracker
from models import runtime

__all__ = ["RunResult", "train"]


def train(config: RunConfig, stop: threading.Event | None = None) -> RunResult:
    """Train one cell, resuming from the newest checkpoint in `config.output_dir`.

    `stop` (set by `TrainingJob` on USR2 or SIGTERM, on any rank) makes the loop finish the
    current step, save a checkpoint and return status `preempted` (USR2: submitit requeues) or
    `interrupted` (SIGTERM: the MLflow run is marked KILLED; see jobs/loop/stop.py).
    """

    config.check_world_size(runtime.launched_world_size())  # before any process group exists
    finished = record.finished_result(config)
    if finished is not None:  # a rerun of a finished cell (requeue after the end, resubmit)
        return finished
    runtime.initialize_parallel(config.parallel)
    try:
        return Trainer(config, stop).run()
    finally:
        runtime.destroy()


class Trainer:
    def __init__(self, config: RunConfig, stop: threading.Event | None) -> None:
        from megatron.core import parallel_state

        # lazy: the data loaders and the model's megatron-core modules, imported only when a cell
        # trains (a finished cell's rerun returns before)
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
        if config.init_weights is not None:  # before the engine copies or shards the weights
            from models.nanogpt import load_weights  # lazy, as above

            load_weights(model, config.init_weights, config.model)
        self.engine = build_engine(config, model, self.bf16)
        self.model = model  # the engine trains these parameters; downstream tasks score them
        seqs = config.global_batch_sequences
        # the sample order is drawn for num_dataset_steps (a WSD family shares it), not `steps`
        num_samples = config.train.num_dataset_steps * seqs
        self.dataset = training_dataset(config.data, config.model.seq_length, num_samples)
        self.val_windows = validation_windows(config.data, config.model.seq_length)
        self.select_windows = None  # the LR-selection set, disjoint from val_windows
        if config.data.num_select_windows:
            self.select_windows = validation_windows(config.data, config.model.seq_length, "select")
        self.flops_per_token = flops_per_token(config.model)
        peak, self.peak_source = mfu_peak(config.train.peak_flops_per_device, self.bf16)
        self.peak_flops_per_device = peak
        self.peak_flops = peak * self.world
        self._saved_step = -1
        self.pause = pause_point(config.name)  # None unless a fault test asks for one
        self.tracker: Tracker | NullTracker = NullTracker()
        if self.rank == 0 and config.tracking.enabled:
            self.tracker = Tracker(self.output_dir, config.tracking, run_name=config.name)
        self.system_metrics: SystemMetrics | None = None

    # --- the loop -------------------------------------------------------------------------
    def _payload(self, state: LossHistory) -> dict[str, Any]:
        """This rank's checkpoint: state that the first DP rank holds identically is written by
        that rank only (model weights; optimiser state unless the engine shards it over DP)."""
        engine_state = self.engine.state_dict()
        if self.ps.get_data_parallel_rank() != 0:
            source = ckpt.shared_from(self.ps.get_data_parallel_src_rank())
            engine_state.update({key: source for key in self.engine.replicated_over_dp()})
        return {
            "engine": engine_state,
            "state": {**state.__dict__},
            "rng": ckpt.rng_state(),
        }

    def _save(self, state: LossHistory) -> None:
        if state.step == self._saved_step:
            return
        self._saved_step = state.step
        ckpt.save_checkpoint(
            self.ckpt_root,
            state.step,
            self._payload(state),
            self.config.train.keep_checkpoints,
            layout=self._layout(),
            keep_steps=self.config.train.keep_steps,
        )

    def _layout(self) -> dict[str, int]:
        """The parallel layout a checkpoint's shards belong to (checked on resume)."""
        par = self.config.parallel
        return {
            "tensor_parallel": par.tensor_parallel,
            "pipeline_parallel": par.pipeline_parallel,
            "data_parallel": par.data_parallel,
        }

    def _resume(self) -> tuple[LossHistory, bool]:
        """(state, resumed): this run's newest checkpoint, else its `init_from`, else fresh."""
        payload = ckpt.load_newest(self.ckpt_root, layout=self._layout())
        resumed = payload is not None
        if payload is None and self.config.init_from is not None:
            payload = load_parent_checkpoint(self.config, self._layout())
            init = self.config.init_from
            rank0_print(f"{self.config.name}: forked from {init.output_dir} at step {init.step}")
        if payload is None:
            return LossHistory(), False
        self.engine.load_state_dict(payload["engine"])
        ckpt.set_rng_state(payload["rng"])
        state = LossHistory(**payload["state"])
        if resumed:
            self._saved_step = state.step
            rank0_print(f"{self.config.name}: resumed at step {state.step}")
        return state, resumed

    def _stop_requested(self) -> bool:
        if self.stop is None:
            return False
        return any_rank(self.stop.is_set())  # only global rank 0 is told by submitit

    def _diverged(self, loss: float, grad_norm: float, state: LossHistory) -> str | None:
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
            self._stop_system_metrics()
            self.tracker.set_tags({C.TAG_ERROR: f"{type(err).__name__}: {err}"[:1000]})
            self.tracker.set_status("FAILED")
            self.tracker.close(timeout_s=10)
            raise

    def _start_record(self, resumed: bool) -> None:
        """Run record at (re)start: identity, provenance, the MFU peak used, a branch's lineage."""
        config = self.config
        record.start(self.tracker, config, self.world, resumed)
        self.tracker.set_tags(
            {
                TAG_MFU_PEAK: f"{self.peak_flops_per_device:.4g}",
                TAG_MFU_PEAK_SOURCE: self.peak_source,
            }
        )
        rank0_print(
            f"{config.name}: MFU against {self.peak_flops_per_device / 1e12:.4g} TFLOP/s per "
            f"device ({self.peak_source})"
        )
        if config.init_from is not None:
            lineage = {C.TAG_BRANCH_STEP: str(config.init_from.step)}
            parent = parent_run_id(config)
            if parent:
                lineage[C.TAG_PARENT_CELL_RUN] = parent
            self.tracker.set_tags(lineage)

    def _stop_system_metrics(self) -> None:
        if self.system_metrics is not None:
            self.system_metrics.stop()
            self.system_metrics = None

    def _step_metrics(
        self, loss: float, lr: float, grad_norm: float, tokens_seen: int, step_time: float
    ) -> dict[str, float]:
        tokens_per_s = self.config.tokens_per_step / step_time
        metrics = {
            "train/loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens_seen": tokens_seen,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * self.flops_per_token / self.peak_flops,
            "step_time_s": step_time,
        }
        if torch.cuda.is_available():  # for sizing micro-batches and layouts
            metrics["peak_device_memory_bytes"] = torch.cuda.max_memory_allocated()
        return metrics

    def _run(self) -> RunResult:
        train_cfg = self.config.train
        state, resumed = self._resume()
        self._start_record(resumed)
        self.system_metrics = start_system_metrics(
            self.config.tracking, self.output_dir, self.tracker, self.rank, resumed
        )
        status, reason = C.COMPLETED, None
        loop_start = time.perf_counter()
        while state.step < train_cfg.steps:
            reason = self._train_step(state)
            if reason:
                status = C.DIVERGED
                break
            if train_cfg.eval_interval and state.step % train_cfg.eval_interval == 0:
                if state.step < train_cfg.steps:  # the final eval follows the loop
                    self._evaluate(state)
            interval = train_cfg.checkpoint_interval
            if (interval and state.step % interval == 0) or state.step in train_cfg.keep_steps:
                self._save(state)
            if self.pause is not None:  # tests only: hold here until released (jobs/loop/pause.py)
                self.pause.after_step(state.step, self.stop, self.rank)
            if self._stop_requested():
                return self._preempted(state)
        return self._finish(state, status, reason, time.perf_counter() - loop_start)

    def _train_step(self, state: LossHistory) -> str | None:
        """One optimiser step on `state.step`'s batches, logged; why it diverged, or None."""
        config, train_cfg = self.config, self.config.train
        lr = lr_at(state.step, train_cfg.steps, config.optimizer.lr, config.schedule)
        self.engine.set_lr(lr)
        batches = step_microbatches(
            self.dataset,
            state.step,
            config.global_batch_sequences,
            self.ps.get_data_parallel_rank(),
            self.ps.get_data_parallel_world_size(),
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
        spiked = is_spike(loss, state.loss_ema, train_cfg.spike_factor)
        state.loss_ema = next_ema(state.loss_ema, loss)
        if spiked:
            state.spike_steps.append(state.step)
            self.tracker.log_metrics({C.TRAIN_SPIKE_STEP: state.step}, step=state.step)
        if reason or spiked or state.step % train_cfg.log_interval == 0:
            metrics = self._step_metrics(loss, lr, grad_norm, state.tokens_seen, step_time)
            metrics[C.TRAIN_SPIKES] = len(state.spike_steps)
            self.tracker.log_metrics(metrics, step=state.step)
            rank0_print(
                f"{config.name} step {state.step}/{train_cfg.steps} loss {loss:.4f} "
                f"lr {lr:.3g} grad_norm {grad_norm:.3g} {metrics['tokens_per_s']:.0f} tok/s"
            )
        return reason

    def _preempted(self, state: LossHistory) -> RunResult:
        """A stop was asked: save this step; `preempted` if submitit requeues (USR2),
        `interrupted` if the job ends (SIGTERM, on this rank or only on another one)."""
        self._save(state)
        self._stop_system_metrics()
        requeue = self.stop is not None and self.stop.is_set()
        requeue = requeue and getattr(self.stop, "reason", REQUEUE) == REQUEUE
        status = "preempted" if requeue else "interrupted"
        rank0_print(f"{self.config.name}: {status} at step {state.step}, checkpoint saved")
        if not requeue:  # stopped from outside, not broken: the cell reads as cancelled
            self.tracker.set_status("KILLED")
        self.tracker.close(timeout_s=10)  # Slurm kills soon; the spool keeps the rest
        return RunResult(
            status,
            math.nan,
            state.step,
            state.tokens_seen,
            self.tracker.run_id,
            list(state.losses),
        )

    def _finish(
        self, state: LossHistory, status: str, reason: str | None, loop_time: float
    ) -> RunResult:
        """The loop ended (all steps, or a divergence): final eval and save, the run record."""
        final = final_select = math.nan
        if status == C.COMPLETED:
            final, final_select = self._evaluate(state)
            self._save(state)  # the finished state: a rerun only re-evaluates
            self._downstream(state)
        else:
            rank0_print(f"{self.config.name}: diverged at step {state.step}: {reason}")
            self.tracker.set_tags({C.TAG_DIVERGENCE: reason})
        self._stop_system_metrics()
        result = RunResult(
            status,
            final,
            state.step,
            state.tokens_seen,
            self.tracker.run_id,
            list(state.losses),
            loop_time,
            final_select_loss=final_select,
        )
        if self.rank == 0:
            record.finish(self.tracker, self.config, result, state, self.flops_per_token)
        self.tracker.close()
        result.run_id = self.tracker.run_id  # created by the upload thread, maybe only now
        result.tracking_time_s = self.tracker.call_time_s
        if self.rank == 0:
            record.write_result(self.config, result)
        return result

    def _downstream(self, state: LossHistory) -> None:
        """The study's downstream tasks (`jobs.evaluation`), once per cell, scored on rank 0
        (TP = PP = 1: every rank holds the whole model); the other ranks wait for it."""
        if self.config.evaluation is None:
            return
        if self.rank == 0:
            from jobs.evaluation.run import evaluate_cell  # lazy: lm_eval only when asked

            evaluate_cell(self.config, self.model, self.tracker, state.step)
        if self.world > 1:
            dist.barrier()

    def _evaluate(self, state: LossHistory) -> tuple[float, float]:
        """(loss on the reported windows, loss on the LR-selection windows or NaN)."""
        val = self.engine.eval_loss(self.val_windows)
        state.val_losses.append([state.step, val])
        metrics = {C.VAL_LOSS: val}
        select = math.nan
        if self.select_windows is not None:
            select = self.engine.eval_loss(self.select_windows)
            metrics[C.VAL_SELECT] = select
        self.tracker.log_metrics(metrics, step=state.step)
        return val, select
