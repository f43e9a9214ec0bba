"""Make megatron-core run on a CPU-only process with gloo. Only ``models.runtime`` imports this.

megatron-core assumes CUDA in a handful of places (see FACTS.md): tensors created with
``device=torch.cuda.current_device()`` or ``device="cuda"`` (attention, p2p communication, the
pipeline schedules), ``Tensor.cuda()`` when tying embeddings across pipeline stages,
``torch.cuda.synchronize()`` after p2p, and its RNG tracker, which saves and restores the CUDA
generator. On a process without CUDA this module makes the CPU play the role of "the current
CUDA device":

- ``torch.cuda.current_device()`` returns the CPU device (not an index: megatron also calls it
  inside autograd backward, where a ``TorchFunctionMode`` is not applied, so the value itself
  must work as a ``device=``), ``torch.cuda.synchronize()`` does nothing, and the
  CUDA RNG calls (``get_rng_state``, ``set_rng_state``, ``manual_seed``) act on the CPU
  generator, as do megatron's ``_get_cuda_rng_state``/``_set_cuda_rng_state``. Without this
  the first two raise and ``manual_seed`` silently does nothing.
- A ``TorchFunctionMode`` rewrites a CUDA ``device=`` argument (``"cuda"``, ``"cuda:N"``, an int
  index, a CUDA ``torch.device``) to CPU and makes ``Tensor.cuda()`` a no-op; it covers the
  literals in the pipeline schedules and p2p code, which run outside autograd.

Nothing changes on a machine with CUDA: ``activate()`` returns without touching anything.
"""

from __future__ import annotations

import threading

import torch
from torch.overrides import TorchFunctionMode

_lock = threading.Lock()
_active = False
_mode: TorchFunctionMode | None = None


def _is_cuda_device(device: object) -> bool:
    if isinstance(device, bool):
        return False
    if isinstance(device, int):
        return True
    if isinstance(device, str):
        return device.startswith("cuda")
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return False


class _CudaToCpu(TorchFunctionMode):
    """Route tensor creation aimed at CUDA to the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        if "device" in kwargs and _is_cuda_device(kwargs["device"]):
            kwargs = {**kwargs, "device": "cpu"}
        elif func is torch.Tensor.to and len(args) > 1 and _is_cuda_device(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


def _cpu_rng_state(*args, **kwargs) -> torch.Tensor:
    return torch.get_rng_state()


def _set_cpu_rng_state(new_state: torch.Tensor, *args, **kwargs) -> None:
    torch.set_rng_state(new_state)


def is_active() -> bool:
    return _active


def activate() -> None:
    """Install the CPU stand-ins for megatron's CUDA calls (idempotent; no-op with CUDA)."""
    global _active, _mode
    if torch.cuda.is_available():
        return
    with _lock:
        if _active:
            return
        from megatron.core.tensor_parallel import random as mrandom

        torch.cuda.current_device = lambda: torch.device("cpu")
        torch.cuda.synchronize = lambda *args, **kwargs: None
        torch.cuda.get_rng_state = _cpu_rng_state
        torch.cuda.set_rng_state = _set_cpu_rng_state
        torch.cuda.manual_seed = lambda seed: torch.manual_seed(seed)
        mrandom._get_cuda_rng_state = _cpu_rng_state
        mrandom._set_cuda_rng_state = _set_cpu_rng_state
        _mode = _CudaToCpu()
        _mode.__enter__()  # stays on for the life of the process (torch keeps it per thread)
        _active = True
