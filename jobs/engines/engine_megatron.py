"""The `megatron` engine: megatron-core DDP + `get_forward_backward_func` (so PP works).

On GPU the optimiser is megatron's (`get_megatron_optimizer`, optionally its distributed
optimizer), which does bf16 master weights, clipping and the grad norm. On CPU megatron's
optimizers assert CUDA tensors, so the step is torch AdamW over the same parameters, fed the
gradients megatron's DDP reduced into `param.main_grad` (mean over DP; tied embeddings across
PP stages synced by `finalize_model_grads`); the grad norm counts each TP-sharded tensor once
per shard and replicated/shared tensors once, summed over the model-parallel group - the same
rule megatron's `get_grad_norm_fp32` uses.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from jobs.config import OptimizerConfig, RunConfig
from jobs.engines.batches import split_window
from jobs.engines.collectives import loss_device, sum_over
from jobs.engines.optim import apply_wd_mult, build_adamw
from models import cross_stage

__all__ = ["MegatronEngine", "global_grad_norm", "megatron_optimizer"]


def global_grad_norm(params: list[torch.nn.Parameter], model_parallel_group) -> float:
    """L2 norm of the gradients of the whole model, equal on every rank: each TP-sharded tensor
    counted once per shard, replicated and shared ones once, summed over the model-parallel
    group (the rule of megatron's `get_grad_norm_fp32`)."""
    from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate
    from megatron.core.transformer.module import param_is_not_shared

    squares = torch.zeros(1, dtype=torch.float64)
    for param in params:
        grad = param.grad
        if grad is None or not param_is_not_shared(param):
            continue
        if param_is_not_tensor_parallel_duplicate(param):
            squares += grad.double().pow(2).sum().cpu()
    if dist.get_world_size(model_parallel_group) > 1:
        dist.all_reduce(squares, group=model_parallel_group)
    return float(squares.sqrt())


def _loss_func(output: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    # output: per-token loss [b, s] from the last stage
    loss = output.float().mean()
    return loss, {"loss": loss.detach().clone()}  # clone: the schedule divides loss in place


def _forward_step(data_iterator, model):
    window = next(data_iterator)  # [b, seq + 1]
    input_ids, position_ids, labels = split_window(window)
    device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
    output = model(input_ids.to(device), position_ids.to(device), None, labels=labels.to(device))
    return output, _loss_func


def megatron_optimizer(model: torch.nn.Module, opt: OptimizerConfig, bf16: bool):
    """megatron's optimizer over the DDP-wrapped `model`, decaying what `jobs.engines.optim`
    decays."""
    from megatron.core.optimizer import OptimizerConfig as MegatronOptimizerConfig
    from megatron.core.optimizer import get_megatron_optimizer

    mconfig = MegatronOptimizerConfig(
        optimizer="adam",
        lr=opt.lr,
        weight_decay=opt.weight_decay,
        adam_beta1=opt.beta1,
        adam_beta2=opt.beta2,
        adam_eps=opt.eps,
        clip_grad=opt.grad_clip,
        bf16=bf16,
        params_dtype=torch.bfloat16 if bf16 else torch.float32,
        use_distributed_optimizer=opt.distributed,
    )
    optimizer = get_megatron_optimizer(mconfig, [model])
    apply_wd_mult(optimizer.param_groups, opt.weight_decay)
    return optimizer


class MegatronEngine:
    """Owns the DDP-wrapped model and its optimiser; every method is collective."""

    def __init__(self, config: RunConfig, model: torch.nn.Module, bf16: bool) -> None:
        from megatron.core import parallel_state
        from megatron.core.distributed import (
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )
        from megatron.core.pipeline_parallel import get_forward_backward_func

        self.config = config
        self.on_gpu = torch.cuda.is_available()
        if self.on_gpu and config.optimizer.distributed:
            # its parameter state lives outside state_dict() (save_parameter_state), which the
            # per-rank checkpoints here do not write yet: a resume would lose Adam's moments
            raise ValueError(
                "optimizer.distributed: checkpointing megatron's distributed optimizer is not "
                "implemented; set optimizer.distributed: false (or use engine 'deepspeed' with "
                "deepspeed.zero_stage 1 or 2 to shard optimiser state)"
            )
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True,
            overlap_grad_reduce=False,
            use_distributed_optimizer=self.on_gpu and config.optimizer.distributed,
        )
        self.model = DistributedDataParallel(model.config, ddp_config, model)
        tconfig = model.config
        tconfig.finalize_model_grads_func = finalize_model_grads
        tconfig.no_sync_func = self.model.no_sync
        # Free pipeline-stage outputs once sent (megatron's `custom_backward`): saves activation
        # memory under PP. (Backward on CPU works either way: the CPU adapter answers
        # `torch.cuda.current_device()` with the CPU device inside autograd too.)
        tconfig.deallocate_pipeline_outputs = True
        self.forward_backward = get_forward_backward_func()
        self.ps = parallel_state
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        if self.on_gpu:
            self.optimizer = megatron_optimizer(self.model, config.optimizer, bf16)
            tconfig.grad_scale_func = self.optimizer.scale_loss
        else:
            self.optimizer = build_adamw(self.model.module, config.optimizer)

    # --- one optimiser step ---------------------------------------------------------------
    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _run(self, windows: list[torch.Tensor], forward_only: bool) -> list[dict]:
        outputs = self.forward_backward(
            forward_step_func=_forward_step,
            data_iterator=iter(windows),
            model=[self.model],
            num_microbatches=len(windows),
            seq_length=self.config.model.seq_length,
            micro_batch_size=windows[0].shape[0],
            forward_only=forward_only,
        )
        cross_stage.finish()  # a variant's tensors sent past pipeline stages: all delivered now
        return outputs

    def _reduce_mean(self, total: torch.Tensor) -> float:
        """[sum, count] (a device tensor) from the last stage, summed over DP and known on every
        PP rank; the one host sync of the step is the float read at the end."""
        sum_over(total, group=self.ps.get_data_parallel_group())
        if self.ps.get_pipeline_model_parallel_world_size() > 1:
            dist.broadcast(
                total,
                src=self.ps.get_pipeline_model_parallel_last_rank(),
                group=self.ps.get_pipeline_model_parallel_group(),
            )
        return float(total[0] / total[1])

    def _sum_count(self, losses: list[torch.Tensor], weights: list[int]) -> torch.Tensor:
        """[sum of weight x loss, sum of weights] on the loss device, zeros off the last stage."""
        total = torch.zeros(2, dtype=torch.float64, device=loss_device())
        if self.ps.is_pipeline_last_stage() and losses:
            scale = torch.tensor(weights, dtype=torch.float64, device=total.device)
            total[0] = (torch.stack(losses).to(total) * scale).sum()  # no host sync
            total[1] = float(sum(weights))
        return total

    def _mean_loss(self, outputs: list[dict], count: int) -> float:
        """Mean of per-micro-batch losses over micro-batches and DP, known on every rank."""
        losses = [o["loss"] for o in outputs]
        return self._reduce_mean(self._sum_count(losses, [1] * len(losses)))

    def train_step(self, microbatches: list[torch.Tensor]) -> tuple[float, float]:
        """Forward/backward over this rank's micro-batches, then the update: (loss, grad norm)."""
        self.model.zero_grad_buffer()
        self.optimizer.zero_grad()
        outputs = self._run(microbatches, forward_only=False)
        loss = self._mean_loss(outputs, len(microbatches))
        if self.on_gpu:
            _, grad_norm, _ = self.optimizer.step()
            return loss, float(grad_norm if grad_norm is not None else float("nan"))
        for param in self.params:
            param.grad = param.main_grad.to(param.dtype)
        grad_norm = global_grad_norm(self.params, self.ps.get_model_parallel_group())
        clip = self.config.optimizer.grad_clip
        if clip > 0 and grad_norm > clip:
            scale = clip / (grad_norm + 1e-6)
            for param in self.params:
                param.grad.mul_(scale)
        self.optimizer.step()
        return loss, grad_norm

    @torch.no_grad()
    def eval_loss(self, windows: torch.Tensor) -> float:
        """Mean loss over validation windows [N, seq + 1], split over DP ranks by index."""
        dp_rank = self.ps.get_data_parallel_rank()
        dp_size = self.ps.get_data_parallel_world_size()
        mine = windows[dp_rank::dp_size]  # [N / dp, seq + 1]
        # PP sends fixed-shape activations between stages, so every micro-batch is one window
        # there; without PP the last micro-batch may be smaller.
        size = 1 if self.ps.get_pipeline_model_parallel_world_size() > 1 else 8
        chunks = [mine[i : i + size] for i in range(0, len(mine), size)]
        self.model.eval()
        outputs = self._run(chunks, forward_only=True)
        # a micro-batch's loss is its mean over rows; weight by rows
        total = self._sum_count([o["loss"] for o in outputs], [c.shape[0] for c in chunks])
        self.model.train()
        return self._reduce_mean(total)

    # --- checkpoint payload ---------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.module.state_dict(), "optimizer": self.optimizer.state_dict()}

    def replicated_over_dp(self) -> tuple[str, ...]:
        return ("model", "optimizer")  # DDP; the distributed optimizer is refused above

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
