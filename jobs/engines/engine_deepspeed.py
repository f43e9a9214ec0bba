"""The `deepspeed` engine: DeepSpeed ZeRO 0/1/2 over DP, megatron-core layers for TP.

Same model (`build_gpt`), data, schedule and logging as the megatron engine. DeepSpeed expects
the old Megatron `mpu` names, so `_MegatronMpu` maps them onto megatron-core's parallel_state
(model parallel = TP here; PP > 1 is refused by the run config). The optimiser is torch AdamW
with the same parameter groups, wrapped by ZeRO; DeepSpeed does accumulation, clipping and the
grad norm (at ZeRO stage 0 with torch AdamW DeepSpeed computes none, so the engine does, by the
megatron engine's rule). In bf16, gradients accumulate and reduce in fp32 (`data_types`), as
in the megatron engine; DeepSpeed supports that at stages 1 and 2 only.

Checkpoints store the module state and ZeRO's optimiser state with DeepSpeed's own non-tensor
bookkeeping (loss-scaler object, slice maps) removed, so they load with `weights_only=True`;
those fields are rebuilt by the engine itself.
"""

from __future__ import annotations

import argparse
import enum
import os
from typing import Any

import torch

from jobs.config import RunConfig
from jobs.engines.batches import split_window
from jobs.engines.collectives import sum_over
from jobs.engines.engine_megatron import global_grad_norm
from jobs.engines.optim import build_adamw
from models.runtime import local_cuda_device

__all__ = ["DeepSpeedEngine", "deepspeed_config"]


class _MegatronMpu:
    """DeepSpeed's `mpu` protocol on top of megatron-core parallel_state."""

    def __init__(self) -> None:
        from megatron.core import parallel_state

        self.ps = parallel_state

    def get_model_parallel_rank(self) -> int:
        return self.ps.get_tensor_model_parallel_rank()

    def get_model_parallel_world_size(self) -> int:
        return self.ps.get_tensor_model_parallel_world_size()

    def get_model_parallel_group(self):
        return self.ps.get_tensor_model_parallel_group()

    get_tensor_model_parallel_rank = get_model_parallel_rank
    get_tensor_model_parallel_world_size = get_model_parallel_world_size
    get_tensor_model_parallel_group = get_model_parallel_group

    def get_data_parallel_rank(self) -> int:
        return self.ps.get_data_parallel_rank()

    def get_data_parallel_world_size(self) -> int:
        return self.ps.get_data_parallel_world_size()

    def get_data_parallel_group(self):
        return self.ps.get_data_parallel_group()


def deepspeed_config(config: RunConfig, bf16: bool) -> dict[str, Any]:
    """The DeepSpeed JSON config derived from the run config (nothing set twice).

    In bf16, gradients accumulate and are reduced in fp32 (DeepSpeed's defaults are the model's
    dtype), like the megatron engine's `grad_reduce_in_fp32`; DeepSpeed has no fp32
    accumulation at stage 0.
    """
    if bf16 and config.deepspeed.zero_stage == 0:
        raise ValueError(
            "deepspeed.zero_stage: 0 in bf16 would accumulate gradients in bf16 (DeepSpeed has "
            "no fp32 accumulation without ZeRO), unlike the megatron engine; use zero_stage 1 "
            "or 2, or precision 'fp32'"
        )
    zero: dict[str, Any] = {"stage": config.deepspeed.zero_stage}
    if config.deepspeed.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
    dp = config.parallel.data_parallel
    return {
        "train_micro_batch_size_per_gpu": config.train.micro_batch_size,
        "gradient_accumulation_steps": config.num_microbatches,
        "train_batch_size": config.train.micro_batch_size * config.num_microbatches * dp,
        "gradient_clipping": config.optimizer.grad_clip,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "bf16": {"enabled": bf16},
        "data_types": {"grad_accum_dtype": "fp32"},
        # bf16 would otherwise make it bf16: BF16_Optimizer (ZeRO-1) then all-reduces the
        # fp32-accumulated gradients in bf16
        "communication_data_type": "fp32",
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def _plain(obj: Any) -> Any:
    """Tensors, numbers, strings, lists and dicts only (what weights_only=True loads)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, bool | int | float | str) or obj is None:
        return obj
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if isinstance(value, bool | int | float | str | torch.Tensor | list | tuple | dict):
                out[key] = _plain(value)
            elif value is None or isinstance(value, enum.Enum):
                out[key] = _plain(value)
        return out
    raise TypeError(f"cannot store {type(obj).__name__} in a weights-only checkpoint")


def _device_args() -> argparse.Namespace | None:
    """DeepSpeed's `args` naming the CUDA device `models.runtime` chose for this rank.

    Without it DeepSpeed calls `set_device(LOCAL_RANK)` and puts its engine on
    `cuda:LOCAL_RANK`; on a site that binds one GPU per task every rank sees one device,
    index 0, and rank 1 failed with "invalid device ordinal".
    """
    if not torch.cuda.is_available():
        return None

    return argparse.Namespace(device_rank=local_cuda_device())


class DeepSpeedEngine:
    def __init__(self, config: RunConfig, model: torch.nn.Module, bf16: bool) -> None:
        import deepspeed

        # DeepSpeed insists on LOCAL_RANK even when the process group already exists
        os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
        if not torch.cuda.is_available():
            # On a CPU DeepSpeed JIT-compiles a shared-memory all-reduce at its first init (a C++
            # build under ~/.cache/torch_extensions, per venv path, behind a lock file): a job
            # killed mid-build left the lock, and every later job waited on it forever. gloo
            # through torch.distributed reduces the same tensors.
            import deepspeed.ops

            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        self.config = config
        optimizer = build_adamw(model, config.optimizer)
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            args=_device_args(),
            model=model,
            optimizer=optimizer,
            config=deepspeed_config(config, bf16),
            mpu=_MegatronMpu(),
        )
        from megatron.core import parallel_state

        self.ps = parallel_state
        # stage 0 with a torch optimizer: DeepSpeed's get_global_grad_norm() stays None
        self.own_grad_norm = config.deepspeed.zero_stage == 0 and not bf16
        self.params = [p for p in model.parameters() if p.requires_grad]

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _loss(self, window: torch.Tensor) -> torch.Tensor:
        input_ids, position_ids, labels = split_window(window)
        device = self.engine.device
        per_token = self.engine(
            input_ids.to(device), position_ids.to(device), None, labels=labels.to(device)
        )  # [b, s]
        return per_token.float().mean()

    def train_step(self, microbatches: list[torch.Tensor]) -> tuple[float, float]:
        total = torch.zeros(1, dtype=torch.float64, device=self.engine.device)
        own_norm = None
        for i, window in enumerate(microbatches):
            loss = self._loss(window)
            self.engine.backward(loss)  # DeepSpeed scales by 1 / accumulation steps
            if self.own_grad_norm and i == len(microbatches) - 1:
                # the boundary's backward has averaged the gradients over DP; not yet clipped
                own_norm = global_grad_norm(self.params, self.ps.get_model_parallel_group())
            self.engine.step()  # updates only at the accumulation boundary
            total += loss.detach().double()  # on the device: no host sync per micro-batch
        sum_over(total, group=self.ps.get_data_parallel_group())
        count = len(microbatches) * self.ps.get_data_parallel_world_size()
        grad_norm = self.engine.get_global_grad_norm()
        if grad_norm is None:
            grad_norm = own_norm if own_norm is not None else float("nan")
        return float(total) / count, float(grad_norm)

    @torch.no_grad()
    def eval_loss(self, windows: torch.Tensor) -> float:
        dp_rank = self.ps.get_data_parallel_rank()
        dp_size = self.ps.get_data_parallel_world_size()
        mine = windows[dp_rank::dp_size]  # [N / dp, seq + 1]
        self.engine.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.engine.device)
        for i in range(0, len(mine), 8):
            chunk = mine[i : i + 8]
            total[0] += self._loss(chunk).double() * chunk.shape[0]
            total[1] += chunk.shape[0]
        self.engine.train()
        sum_over(total, group=self.ps.get_data_parallel_group())
        return float(total[0] / total[1])

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.engine.module.state_dict(),
            "optimizer": _plain(self.optimizer.state_dict()),
        }

    def replicated_over_dp(self) -> tuple[str, ...]:
        if self.config.deepspeed.zero_stage == 0:
            return ("model", "optimizer")
        return ("model",)  # ZeRO 1/2: each DP rank holds its own slice of the optimiser state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.engine.module.load_state_dict(state["model"])
        if self.config.deepspeed.zero_stage == 0:
            self.optimizer.load_state_dict(state["optimizer"])
            return
        dp = self.ps.get_data_parallel_world_size()
        states = [state["optimizer"]] * dp  # rigid checkpoint: only this rank's entry is read
        self.optimizer.load_state_dict(
            states, load_optimizer_states=True, load_from_fp32_weights=True
        )
