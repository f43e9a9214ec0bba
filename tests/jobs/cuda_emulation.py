"""CUDA-branch emulation: drive the engines' GPU code paths on a CPU-only machine.

What a CPU test normally exercises is the CPU fallback: no CUDA, so `jobs.loop.trainer` trains in
fp32, the megatron engine steps torch AdamW and DeepSpeed runs without bf16. A GPU run takes
other branches - a bf16 model, megatron's `Float16OptimizerWithFloat16Params`, DeepSpeed's
`BF16_Optimizer`, the `cpu:gloo,cuda:nccl` default group, a CUDA device per rank - and those
never ran in CI. `activate()` makes this process take them:

- the CPU adapter (`models._cpu_adapter`) is installed first, as on any CPU machine, so that
  every `device="cuda"` literal and `Tensor.cuda()` lands on the CPU;
- then `torch.cuda.is_available()` reports True, `device_count()` reports `device_count`
  visible devices and `set_device` records the index it is asked for; the default group the
  runtime requests (`cpu:gloo,cuda:nccl`) is built with NCCL played by gloo
  (`cpu:gloo,cuda:gloo`);
- CPU tensors answer `Tensor.type()` with their CUDA names (`torch.cuda.BFloat16Tensor`), so
  megatron's optimizer and grad-clipping type checks pass;
- DeepSpeed gets its CPU accelerator (`DS_ACCELERATOR=cpu`; its CUDA accelerator would open
  streams) whose `set_device` is recorded too;
- every collective (`torch.distributed.all_reduce`, `reduce_scatter_tensor`, ...) is recorded
  with its dtype, device, element count and group ranks, then runs.

It emulates dispatch and dtypes, NOT kernels: every operation still runs on CPU kernels, so
it says nothing about CUDA kernels, memory, speed, NCCL itself or fused GPU optimizers (apex /
Transformer Engine are absent, so megatron uses its torch fallbacks). It catches a wrong dtype
reaching a layer, a wrong optimizer class, a reduction in the wrong precision, a device index
chosen wrongly. Call `activate()` in a fresh process (the `tests.distributed.run_ranks`
workers) before anything builds a process group; nothing undoes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

__all__ = ["Collective", "Emulation", "activate"]

EMULATED_DEVICE_NAME = "NVIDIA H100 (CUDA-branch emulation on CPU)"  # datasheet peak for MFU
_COLLECTIVES = (
    "all_reduce",
    "reduce_scatter_tensor",
    "all_gather_into_tensor",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "_reduce_scatter_base",
    "_all_gather_base",
)
_CUDA_TYPE_NAMES = {
    torch.float32: "torch.cuda.FloatTensor",
    torch.bfloat16: "torch.cuda.BFloat16Tensor",
    torch.float16: "torch.cuda.HalfTensor",
    torch.float64: "torch.cuda.DoubleTensor",
    torch.int64: "torch.cuda.LongTensor",
    torch.int32: "torch.cuda.IntTensor",
    torch.uint8: "torch.cuda.ByteTensor",
    torch.bool: "torch.cuda.BoolTensor",
}


@dataclass(frozen=True)
class Collective:
    """One collective call: its name, the dtype and device of its tensor, its size and group."""

    op: str
    dtype: str
    device: str
    numel: int
    group_ranks: tuple[int, ...]


@dataclass
class Emulation:
    """What the emulated process did: collectives, devices asked for, backends requested."""

    device_count: int
    collectives: list[Collective] = field(default_factory=list)
    cuda_devices_set: list[int] = field(default_factory=list)
    deepspeed_devices_set: list[Any] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)

    def gradient_reductions(self, since: int = 0, min_numel: int = 1024) -> list[Collective]:
        """Floating reductions (from the `since`-th collective on) spanning more than one rank
        with at least `min_numel` elements: gradient buckets, not the loss sums and flags of
        the control plane, nor gathers of parameters."""
        return [
            c
            for c in self.collectives[since:]
            if c.dtype in ("torch.bfloat16", "torch.float16", "torch.float32")
            and c.numel >= min_numel
            and len(c.group_ranks) > 1
            and c.op in ("all_reduce", "reduce_scatter_tensor", "reduce_scatter", "reduce")
        ]


class _CudaTypeNames(TorchFunctionMode):
    """CPU tensors answer `Tensor.type()` as the CUDA tensor they stand for."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = _CUDA_TYPE_NAMES.get(args[0].dtype)
            if name is not None:
                return name
        return func(*args, **kwargs)


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, list | tuple) and value and isinstance(value[0], torch.Tensor):
            return value[0]
    return None


def _group_of(args: tuple, kwargs: dict) -> Any:
    if "group" in kwargs:
        return kwargs["group"]
    return next((a for a in args if isinstance(a, dist.ProcessGroup)), None)


def _group_ranks(group: Any) -> tuple[int, ...]:
    if group is None:
        return tuple(range(dist.get_world_size()))
    try:
        return tuple(dist.get_process_group_ranks(group))
    except (ValueError, RuntimeError):
        return ()


def _nccl_played_by_gloo(backend: str | None) -> str:
    """`cpu:gloo,cuda:nccl` -> `cpu:gloo,cuda:gloo`: gloo serves the `cuda` device type. A plain
    `nccl` group serves `cuda` alone, so it becomes `cuda:gloo`, which refuses CPU tensors as
    NCCL does (a group that cannot carry the CPU-side collectives fails here as on a GPU)."""
    backend = backend or "cpu:gloo,cuda:gloo"
    if backend == "nccl":
        return "cuda:gloo"
    if ":" not in backend:
        return "cpu:gloo,cuda:gloo"
    pairs = [pair.split(":") for pair in backend.split(",")]
    return ",".join(f"{device}:{'gloo' if name == 'nccl' else name}" for device, name in pairs)


def activate(device_count: int = 1) -> Emulation:
    """Make this process take the CUDA branches (see the module docstring); returns the record.

    `device_count`: the GPUs each rank sees (1: a site that binds one GPU per task).
    """
    from models import _cpu_adapter

    _cpu_adapter.activate()  # before CUDA "appears": the kernels stay on the CPU
    emulation = Emulation(device_count)
    os.environ["DS_ACCELERATOR"] = "cpu"

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: device_count
    torch.cuda.set_device = lambda index: emulation.cuda_devices_set.append(int(index))
    # `torch.cuda.current_device()` stays the CPU adapter's CPU device (megatron also calls it
    # in backward, where no TorchFunctionMode applies), so the loss sums' "CUDA device" is too
    from jobs.engines import collectives, engine_megatron

    collectives.loss_device = engine_megatron.loss_device = lambda: torch.device("cpu")
    torch.cuda.get_device_name = lambda *args, **kwargs: EMULATED_DEVICE_NAME
    torch.cuda.max_memory_allocated = lambda *args, **kwargs: 0
    torch.cuda.memory_allocated = lambda *args, **kwargs: 0
    torch.cuda.empty_cache = lambda: None

    real_init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        emulation.backends.append(_nccl_played_by_gloo(backend))
        return real_init(emulation.backends[-1], *args, **kwargs)

    dist.init_process_group = init_process_group

    for name in _COLLECTIVES:
        real = getattr(dist, name, None)
        if real is not None:
            setattr(dist, name, _recording(real, name, emulation))

    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    # its CPU accelerator would JIT-compile a shared-memory all-reduce for CPU tensors; a GPU
    # run's collectives go through torch.distributed, so this one does too
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False

    accelerator = get_accelerator()
    accelerator.set_device = lambda index: emulation.deepspeed_devices_set.append(index)

    _CudaTypeNames().__enter__()  # for the life of the process, like the CPU adapter's mode
    return emulation


def _recording(real, name: str, emulation: Emulation):
    def collective(*args, **kwargs):
        tensor = _first_tensor(args, kwargs)
        if tensor is not None:
            emulation.collectives.append(
                Collective(
                    name,
                    str(tensor.dtype),
                    tensor.device.type,
                    tensor.numel(),
                    _group_ranks(_group_of(args, kwargs)),
                )
            )
        return real(*args, **kwargs)

    collective.__wrapped__ = real
    return collective
