"""`PilotJob`: one short training job that measures what a study's plan needs to know.

It runs the cell's own trainer set-up (model, engine, data, precision, checkpoint code: the
path the study's jobs take) for `warmup_steps` untimed and `steps` timed optimiser steps,
then saves one checkpoint, and returns per rank: mean step time, tokens/s, peak device memory
(on CPU the process's peak resident memory), MFU and the checkpoint's write time and bytes.
Then, with the trainer freed, the same model shape's inference cost on the same device
(`scaling.inference_cost.inference`: prefill tokens/s, KV-cache decode ms at batch 1 and 32, peak
memory) under ``"inference"``; a model split over pipeline stages is not measured there, and a
measurement that fails is reported under ``"inference"`` without failing the probe.
Nothing goes to MLflow and the checkpoint is deleted afterwards.

A job that runs out of memory returns status `oom` with the allocator's message instead of
raising, so the pilot can name the fix for that size while the others are still measured.
Only the rank that ran out knows: under pipeline or tensor parallelism its peers sit in a
collective waiting for it (on NCCL until the watchdog, 10 minutes). So the OOM rank returns
at once, without tearing its process group down (a destroy could wait on those peers), and
the pilot (`scaling.costs.pilot._collect`) reads each rank's result as it lands and cancels
the job on the first `oom`.

`memory_limit_bytes` makes the device smaller than it is, to learn what fits a smaller one:
on a GPU through torch's per-process memory fraction, on CPU as a data-segment limit
(RLIMIT_DATA) above what the process holds once its libraries are loaded.

Fault tests inject an OOM with `SCALING_TEST_PILOT_OOM_AT=RANK:STEP` (that rank raises
`torch.OutOfMemoryError` before that step); nothing else sets it.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import submitit

from jobs.config import RunConfig
from jobs.launch import launched_by_submitit

__all__ = ["PilotJob", "OK", "OOM", "ENV_OOM_AT"]

OK, OOM = "ok", "oom"
ENV_OOM_AT = "SCALING_TEST_PILOT_OOM_AT"  # tests only: "RANK:STEP"
_CPU_OOM = ("can't allocate memory", "not enough memory", "out of memory")


class PilotJob:
    """Picklable: `PilotJob(config, warmup_steps, steps)()` on every rank of the job."""

    def __init__(
        self,
        config: RunConfig,
        warmup_steps: int,
        steps: int,
        memory_limit_bytes: int | None = None,
    ) -> None:
        self.config = config
        self.warmup_steps = warmup_steps
        self.steps = steps
        self.memory_limit_bytes = memory_limit_bytes

    def __call__(self) -> dict[str, Any]:
        # lazy: torch, in the probe's own process only
        from models import runtime

        if launched_by_submitit():
            env = submitit.helpers.TorchDistributedEnvironment()
            if "MASTER_PORT" not in os.environ:
                env.master_port = runtime.rendezvous_port(submitit.JobEnvironment().job_id)
            env.export(set_cuda_visible_devices=False, overwrite=True)
        self.config.check_world_size(runtime.launched_world_size())
        try:
            runtime.initialize_parallel(self.config.parallel)
            if self.memory_limit_bytes:
                _limit_memory(self.memory_limit_bytes)
            result = self._measure()
        except Exception as err:  # noqa: BLE001 - only memory exhaustion is a result
            if not _is_oom(err):
                runtime.destroy()
                raise
            # No destroy: peers may be inside a collective with this rank, and tearing the
            # group down can wait on them. The pilot cancels the job once this result lands.
            rank = os.environ.get("RANK", "0")
            return {"status": OOM, "error": f"rank {rank}: {type(err).__name__}: {err}"[:400]}
        runtime.destroy()
        return result

    def _measure(self) -> dict[str, Any]:
        import torch

        # The trainer's own set-up, deliberately: the pilot must time the study's real path
        # (precision, engine, data loading, checkpoint writer), not a copy of it.
        from jobs.engines.batches import step_microbatches
        from jobs.engines.optim import lr_at
        from jobs.loop.trainer import Trainer
        from jobs.telemetry.record import LossHistory

        config, cuda = self.config, torch.cuda.is_available()
        trainer = Trainer(config, None)
        dp_rank, dp_size = (
            trainer.ps.get_data_parallel_rank(),
            trainer.ps.get_data_parallel_world_size(),
        )
        total = self.warmup_steps + self.steps
        timed = 0.0
        oom_at = _injected_oom()
        for step in range(total):
            if oom_at == (trainer.rank, step):
                raise torch.OutOfMemoryError(f"injected by {ENV_OOM_AT} at step {step}")
            trainer.engine.set_lr(lr_at(step, total, config.optimizer.lr, config.schedule))
            batches = step_microbatches(
                trainer.dataset,
                step,
                config.global_batch_sequences,
                dp_rank,
                dp_size,
                config.train.micro_batch_size,
            )
            start = time.perf_counter()
            trainer.engine.train_step(batches)
            if cuda:
                torch.cuda.synchronize()
            if step >= self.warmup_steps:
                timed += time.perf_counter() - start
        state = LossHistory(step=total, tokens_seen=total * config.tokens_per_step)
        start = time.perf_counter()
        trainer._save(state)  # every rank returns after the checkpoint is whole
        checkpoint_s = time.perf_counter() - start
        checkpoint_bytes = _tree_bytes(trainer.ckpt_root) if trainer.rank == 0 else 0
        step_s = timed / self.steps
        tokens_per_s = config.tokens_per_step / step_s
        if trainer.rank == 0:
            shutil.rmtree(trainer.ckpt_root, ignore_errors=True)
        result = {
            "status": OK,
            "rank": trainer.rank,
            "step_time_s": step_s,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * trainer.flops_per_token / trainer.peak_flops,
            "peak_flops": trainer.peak_flops,
            "peak_memory_bytes": _peak_memory(cuda),
            "memory_kind": "device" if cuda else "host RSS",
            "checkpoint_write_s": checkpoint_s,
            "checkpoint_bytes": checkpoint_bytes,
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "bf16": trainer.bf16,
        }
        bf16 = trainer.bf16
        del trainer, batches  # the training state goes before the inference model is built
        if cuda:
            torch.cuda.empty_cache()
        result["inference"] = _inference(config, bf16)
        return result


def _inference(config: RunConfig, bf16: bool) -> dict[str, Any]:
    """This probe's model (same layout, weights from its seed) measured for inference."""
    if config.parallel.pipeline_parallel > 1:
        return {"status": "skipped", "error": "pipeline_parallel > 1: decode needs one stage"}
    import torch

    # lazy: megatron-core and the measurement load only inside the job
    from models.build import build_gpt
    from scaling.inference_cost.inference import InferenceSettings, measure_built

    try:
        overrides = {"bf16": True, "params_dtype": torch.bfloat16} if bf16 else {}
        model = build_gpt(
            config.model, config.parallel, seed=config.seed, transformer_overrides=overrides
        )
        settings = InferenceSettings.for_seq_length(config.model.seq_length)
        figures = measure_built({"model": model}, settings, config.model.vocab_size)["model"]
    except Exception as err:  # noqa: BLE001 - the training figures stand without it
        if _is_oom(err):
            return {"status": OOM, "error": f"{type(err).__name__}: {err}"[:400]}
        return {"status": "failed", "error": f"{type(err).__name__}: {err}"[:400]}
    return {"status": OK, **figures}


def _injected_oom() -> tuple[int, int] | None:
    """(rank, step) from `SCALING_TEST_PILOT_OOM_AT=RANK:STEP`, or None (the normal case)."""
    value = os.environ.get(ENV_OOM_AT)
    if not value:
        return None
    rank, _, step = value.partition(":")
    if not (rank.isdigit() and step.isdigit()):
        raise ValueError(f"{ENV_OOM_AT} must be RANK:STEP (e.g. 1:2), got {value!r}")
    return int(rank), int(step)


def _is_oom(err: BaseException) -> bool:
    import torch

    if isinstance(err, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(err, RuntimeError) and any(s in str(err) for s in _CPU_OOM)


def _limit_memory(limit: int) -> None:
    import torch

    if torch.cuda.is_available():
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
        return
    status = Path("/proc/self/status").read_text()
    held = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmData"))
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = held * 1024 + limit
    resource.setrlimit(resource.RLIMIT_DATA, (soft if hard < 0 else min(soft, hard), hard))


def _peak_memory(cuda: bool) -> int:
    import torch

    if cuda:
        return int(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
