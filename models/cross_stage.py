"""A tensor made on the first pipeline stage and used on later stages, its gradient flowing back.

megatron-core's pipeline schedules pass only hidden states from one stage to the next. A variant
whose later layers read something an early layer made (a value residual reads layer 1's
values) hands that tensor over with this module:

    first stage:   x = send_to_later_stages(x)           # x itself; its grad gains theirs
    later stage:   x = receive_from_first_stage(like=y)  # y: a tensor of x's shape and dtype

Who talks to whom: the rank holding stage 0 sends to the later stages of its own pipeline
group (megatron's: the ranks with the same tensor- and data-parallel rank), so a TP rank gets
its own slice. On the way back each later stage sends its gradient, and the first stage adds
them to its own. With one pipeline stage ``send_to_later_stages`` returns its input and sends
nothing, so single-stage runs compute exactly what they did without this module.

Why first-in-first-out matching is enough: megatron-core 0.16.1's schedules without
interleaving (``forward_backward_no_pipelining``, ``forward_backward_pipelining_without_
interleaving``, forward-only or not) run the forwards of micro-batches 0..n-1 in that order on
every stage, and their backwards in that order too. So each stage must call
``receive_from_first_stage`` exactly once per forward, and the first stage
``send_to_later_stages`` exactly once per forward, with grad mode alike on both sides. Not
supported: the interleaved (virtual) pipeline and full activation recompute (a recomputed
forward would send again); `check_config` refuses both.

The messages travel on groups of their own (`setup`, called where megatron's groups are made),
never on megatron's pipeline group: NCCL matches point-to-point messages in issue order, not by
tag, so they must not mix with the schedule's. Two groups per pipeline group, one per direction:
NCCL queues a pair's messages on one stream, and a value queued before a gradient coming the
other way could leave both ranks waiting.

A posted send is waited before its handle is dropped, and only once its receiver has surely
posted the receive (waiting earlier could stall the pipeline): the first stage waits its sends
of a micro-batch when that micro-batch's gradients have come back; everything else at `finish`,
which the caller runs after each schedule call (``jobs.engines.engine_megatron`` does, and
``models.runtime.destroy`` drains too).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

_forward_group: Any = None  # stage 0 -> later stages (tensors)
_backward_group: Any = None  # later stages -> stage 0 (their gradients)
_pipeline_ranks: list[int] = []  # this rank's pipeline group, stage order (global ranks)
_sent_forward: list[list[Any]] = []  # the first stage's send handles, one list per forward
_pending: list[Any] = []  # every other send handle this rank posted since the last `finish`


def _all_pipeline_groups(mine: list[int]) -> list[list[int]]:
    """Every pipeline group's global ranks, stage order, as megatron-core made them: each rank
    contributes its own group (a collective on the default group, once at set-up)."""
    local = torch.tensor(mine, dtype=torch.int64)  # CPU: gloo serves it under any mapping
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)
    return sorted({tuple(g.tolist()) for g in gathered})


def setup() -> None:
    """Create the cross-stage groups (every rank, same order), if there are two or more stages.

    Call after megatron's ``initialize_model_parallel``; idempotent. The groups are made with
    ``backend=None``, like megatron's, so they inherit the default group's device mapping
    (``cpu:gloo,cuda:nccl`` on a GPU machine, see ``models.runtime``).
    """
    global _forward_group, _backward_group, _pipeline_ranks
    from megatron.core import parallel_state  # lazy: `models` stays cheap to import

    stages = parallel_state.get_pipeline_model_parallel_world_size()
    if stages == 1 or _forward_group is not None:
        return
    mine = dist.get_process_group_ranks(parallel_state.get_pipeline_model_parallel_group())
    for ranks in _all_pipeline_groups(mine):  # the same list, in the same order, on every rank
        forward, backward = dist.new_group(list(ranks)), dist.new_group(list(ranks))
        if list(ranks) == mine:
            _forward_group, _backward_group, _pipeline_ranks = forward, backward, mine


def reset() -> None:
    """Wait what is in flight and forget the groups (before megatron's are torn down)."""
    global _forward_group, _backward_group, _pipeline_ranks
    finish()
    for group in (_forward_group, _backward_group):
        if group is not None and dist.is_initialized():
            dist.destroy_process_group(group)
    _forward_group = _backward_group = None
    _pipeline_ranks = []


def finish() -> None:
    """Wait every send this rank has posted. Run it on every rank after each schedule call:
    by then every receive has been posted or is about to be, without this rank's help."""
    for handles in _sent_forward:
        for handle in handles:
            handle.wait()
    for handle in _pending:
        handle.wait()
    _sent_forward.clear()
    _pending.clear()


def check_config(config: Any) -> None:
    """Raise ValueError where a megatron ``TransformerConfig`` would break the message order."""
    if config.pipeline_model_parallel_size == 1:
        return
    if config.virtual_pipeline_model_parallel_size is not None:
        raise ValueError(
            "virtual_pipeline_model_parallel_size: cross-stage tensors need the schedule without "
            "interleaving; leave it unset"
        )
    if config.recompute_granularity == "full":
        raise ValueError(
            "recompute_granularity: 'full' re-runs each layer's forward, which would send "
            "cross-stage tensors twice; use 'selective' or none"
        )


def _is_pipelined() -> bool:
    return bool(_pipeline_ranks)


class _SendToLaterStages(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        # a copy: nothing may write the buffer while it is in flight
        payload = tensor.detach().clone(memory_format=torch.contiguous_format)
        handles = [
            dist.isend(payload, dst=rank, group=_forward_group) for rank in _pipeline_ranks[1:]
        ]
        _sent_forward.append(handles)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        total = grad
        for rank in _pipeline_ranks[1:]:  # stage order: the same sum on every run
            theirs = torch.empty_like(grad, memory_format=torch.contiguous_format)
            dist.recv(theirs, src=rank, group=_backward_group)
            total = total + theirs
        # they sent these gradients after receiving this micro-batch's tensor: its sends are done
        for handle in _sent_forward.pop(0):
            handle.wait()
        return total


class _ReceiveFromFirstStage(torch.autograd.Function):
    @staticmethod
    def forward(ctx, like: torch.Tensor) -> torch.Tensor:
        received = torch.empty_like(like, memory_format=torch.contiguous_format)
        dist.recv(received, src=_pipeline_ranks[0], group=_forward_group)
        return received

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> None:
        payload = grad.contiguous()
        _pending.append(dist.isend(payload, dst=_pipeline_ranks[0], group=_backward_group))
        return None  # `like` only gave the shape


def send_to_later_stages(tensor: torch.Tensor) -> torch.Tensor:
    """On the first stage: post `tensor` to every later stage; returns `tensor` as a new node
    whose gradient adds the later stages' (use the returned tensor, not the argument, so that
    its backward runs). With one stage: `tensor` itself, nothing sent."""
    if not _is_pipelined():
        return tensor
    return _SendToLaterStages.apply(tensor)


def receive_from_first_stage(like: torch.Tensor) -> torch.Tensor:
    """On a later stage: what the first stage sent for this forward (blocking), shaped and typed
    like `like`. Its gradient goes back to the first stage if `like` requires grad (the first
    stage's tensor must then require grad too)."""
    if not _is_pipelined():
        raise RuntimeError(
            "receive_from_first_stage: no cross-stage groups (one pipeline stage, or megatron's "
            "groups made without models.runtime.initialize_parallel, which calls setup())"
        )
    if dist.get_rank() == _pipeline_ranks[0]:
        raise RuntimeError("receive_from_first_stage: the first stage sends, it does not receive")
    return _ReceiveFromFirstStage.apply(like)
