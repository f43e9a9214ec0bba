"""The run's own collectives (its control plane): loss sums, the preemption flag, agreement.

megatron's and DeepSpeed's gradient traffic is theirs; these are the few reductions the loop,
the engines' loss reporting and the checkpoints add. Two kinds, each one collective per call:

- Sums of losses stay on the device the losses were computed on (`loss_device`): one
  all-reduce of a device tensor per step, and one host sync when the caller reads the float.
  On a GPU that is NCCL's own traffic; no host sync per micro-batch.
- Yes/no agreement (every rank ok? any rank asked to stop?) is host state: a CPU tensor,
  carried by the default group's `cpu:gloo` part (see `models.runtime.process_group_backend`).

With one process (no group, or a group of one) nothing is sent.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["loss_device", "sum_over", "all_ranks", "any_rank"]


def loss_device() -> torch.device:
    """Where per-step loss sums live: this rank's CUDA device, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _world(group) -> int:
    if not dist.is_initialized():
        return 1
    return dist.get_world_size(group)


def sum_over(values: torch.Tensor, group=None) -> torch.Tensor:
    """In place: `values` summed over `group` (a device tensor: one all-reduce, no host sync)."""
    if _world(group) > 1:
        dist.all_reduce(values, group=group)
    return values


def all_ranks(ok: bool, group=None) -> bool:
    """Collective (so also a barrier): True only if `ok` on every rank of `group`."""
    flag = torch.tensor([1 if ok else 0])
    if _world(group) > 1:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def any_rank(flag: bool, group=None) -> bool:
    """Collective: True if `flag` on any rank of `group` (e.g. a stop asked of rank 0 only)."""
    value = torch.tensor([1 if flag else 0])
    if _world(group) > 1:
        dist.all_reduce(value, op=dist.ReduceOp.MAX, group=group)
    return bool(value.item())
