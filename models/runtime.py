"""Process groups and seeds: the one place that starts and stops torch.distributed and megatron.

``init_distributed`` reads the launcher's environment (torchrun, or Slurm through submitit's
``TorchDistributedEnvironment().export()``); with no launcher it makes a 1-rank group, so the
models API works in a plain Python process. On a machine without CUDA it uses gloo and activates
the CPU adapter, so nothing else has to know whether it runs on CPU.

On a machine with CUDA the default group maps each device type to its own backend
(``cpu:gloo,cuda:nccl``): NCCL serves only CUDA tensors, and the run's control plane (loss sums,
the preemption flag, checkpoint agreement) and parts of megatron and DeepSpeed hand collectives
CPU tensors. megatron's TP/PP/DP groups are made with ``backend=None`` and inherit the mapping.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch
import torch.distributed as dist

from foundation.env_settings import rendezvous_timeout_s
from models import _cpu_adapter, cross_stage
from models.config import ParallelConfig

_owns_process_group = False


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            return int(value)
    return None


def launched_world_size() -> int:
    """Number of processes the launcher started (1 without a launcher)."""
    return _env_int("WORLD_SIZE", "SLURM_NTASKS") or 1


def rendezvous_port(job_id: str) -> int:
    """The TCP port of job `job_id`'s rendezvous: the same in every task, below the ephemeral range.

    Outgoing connections take their local ports from the kernel's ephemeral range
    (``/proc/sys/net/ipv4/ip_local_port_range``). submitit's own choice (20000-60000, from the
    job id) mostly falls inside it, and a client socket holding that port made rank 0 fail with
    EADDRINUSE while the job's other ranks waited for it. Only a listening socket can hold a
    port below the range. Where the range leaves no room below, the ports above it are used.
    """
    low, high = _ephemeral_range()
    if low - 20000 >= 1000:
        first, last = 20000, low - 1
    elif 65535 - high >= 1000:
        first, last = high + 1, 65535
    else:
        first, last = 20000, 60000
    return random.Random(str(job_id)).randint(first, last)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def process_group_backend(cuda: bool) -> str:
    """The default group's backend: CUDA tensors on NCCL and CPU tensors on gloo, or gloo only.

    A plain ``"nccl"`` group refuses CPU tensors ("No backend type associated with device type
    cpu"); the per-device form serves both device types.
    """
    return "cpu:gloo,cuda:nccl" if cuda else "gloo"


def cuda_device_index(local_rank: int) -> int:
    """The CUDA device of the rank with `local_rank` on its node: the rank modulo the visible
    devices (a site that binds one GPU per task shows each rank one device, index 0)."""
    count = torch.cuda.device_count()
    if count < 1:
        raise RuntimeError("CUDA is available but no device is visible (CUDA_VISIBLE_DEVICES)")
    return local_rank % count


def local_cuda_device() -> int:
    """This rank's CUDA device: `cuda_device_index` of its local rank (``LOCAL_RANK``, else
    ``SLURM_LOCALID``, else 0). The one choice every engine follows (DeepSpeed included)."""
    return cuda_device_index(_env_int("LOCAL_RANK", "SLURM_LOCALID") or 0)


def init_distributed() -> None:
    """Join (or create) the default process group (see `process_group_backend`).

    Rank and world size come from ``RANK``/``WORLD_SIZE`` (torchrun, submitit's export) or
    ``SLURM_PROCID``/``SLURM_NTASKS``; the rendezvous from ``MASTER_ADDR``/``MASTER_PORT``.
    Without them, or with a world size of 1, a single-process group on an in-memory store: no
    port is opened. (submitit exports a MASTER_PORT derived from the job id even for one task,
    and a port another socket happens to hold failed such cells with EADDRINUSE.)
    """
    global _owns_process_group
    if not torch.cuda.is_available():
        _cpu_adapter.activate()
    if dist.is_initialized():
        return
    backend = process_group_backend(torch.cuda.is_available())
    rank = _env_int("RANK", "SLURM_PROCID")
    world_size = _env_int("WORLD_SIZE", "SLURM_NTASKS")
    if rank is None or world_size in (None, 1) or "MASTER_ADDR" not in os.environ:
        if world_size not in (None, 1):
            raise ValueError(
                f"WORLD_SIZE={world_size} but MASTER_ADDR is not set; launch with torchrun or "
                "export the rendezvous (submitit's TorchDistributedEnvironment().export())"
            )
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    else:
        if torch.cuda.is_available():
            torch.cuda.set_device(local_cuda_device())
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # torchrun hosts the store
            dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size)
        else:
            store = _rendezvous(rank, world_size)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    _owns_process_group = True


def _rendezvous(rank: int, world_size: int) -> dist.Store:
    """The job's TCP store (hosted by rank 0), once every rank has joined it.

    Bounded by ``SCALING_RENDEZVOUS_TIMEOUT_S`` (300 s), not the process group's 30 minutes: a
    rank whose peer died before joining (a crash at start, a port taken) fails with this error
    instead of holding its job, and the cell's slot, for half an hour.
    """
    from datetime import timedelta

    addr, port = os.environ["MASTER_ADDR"], os.environ.get("MASTER_PORT")
    if port is None:
        raise ValueError("MASTER_ADDR is set but MASTER_PORT is not; export both (or neither)")
    wait_s = rendezvous_timeout_s()  # checked by the command before any job started
    try:
        store = dist.TCPStore(
            addr,
            int(port),
            world_size,
            is_master=rank == 0,
            timeout=timedelta(seconds=wait_s),
            wait_for_workers=True,
            multi_tenant=True,
        )
    except RuntimeError as err:  # torch.distributed.DistStoreError among them
        raise RuntimeError(
            f"rank {rank} of {world_size}: the rendezvous at {addr}:{port} did not complete "
            f"within {wait_s:g} s (SCALING_RENDEZVOUS_TIMEOUT_S): another rank of this job did "
            f"not start, or died before joining; see the other tasks' logs ({err})"
        ) from err
    store.set_timeout(timedelta(minutes=30))  # torch's default for the process group's use
    return store


def initialize_parallel(parallel: ParallelConfig) -> None:
    """Create megatron's TP/PP/DP groups for ``parallel`` (joining the default group first),
    and ``models.cross_stage``'s groups when there are two or more pipeline stages.

    Raises ValueError if the launched world size is not TP x PP x DP, or if megatron's groups
    already exist with other sizes.
    """
    from megatron.core import parallel_state

    parallel.validate()
    world_size = dist.get_world_size() if dist.is_initialized() else launched_world_size()
    if world_size != parallel.world_size:
        raise ValueError(
            f"parallel: tensor_parallel x pipeline_parallel x data_parallel = "
            f"{parallel.world_size}, but {world_size} processes were launched; make them equal"
        )
    init_distributed()  # also activates the CPU adapter on a machine without CUDA
    if parallel_state.model_parallel_is_initialized():
        have = (
            parallel_state.get_tensor_model_parallel_world_size(),
            parallel_state.get_pipeline_model_parallel_world_size(),
        )
        if have != (parallel.tensor_parallel, parallel.pipeline_parallel):
            raise ValueError(
                f"parallel: model parallel groups already exist with TP={have[0]}, PP={have[1]}; "
                "call models.runtime.destroy() before switching to "
                f"TP={parallel.tensor_parallel}, PP={parallel.pipeline_parallel}"
            )
    else:
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=parallel.tensor_parallel,
            pipeline_model_parallel_size=parallel.pipeline_parallel,
        )
    cross_stage.setup()  # its own groups for tensors that skip pipeline stages (idempotent)


def ensure_parallel(parallel: ParallelConfig | None = None) -> ParallelConfig:
    """The parallel layout in force, creating a 1-process one if nothing is set up yet."""
    from megatron.core import parallel_state

    if parallel is None and parallel_state.model_parallel_is_initialized():
        init_distributed()  # joins nothing new; activates the CPU adapter if needed
        tp = parallel_state.get_tensor_model_parallel_world_size()
        pp = parallel_state.get_pipeline_model_parallel_world_size()
        return ParallelConfig(tp, pp, dist.get_world_size() // (tp * pp))
    parallel = parallel or ParallelConfig()
    initialize_parallel(parallel)
    return parallel


def set_seed(seed: int) -> None:
    """Seed torch and megatron's RNG tracker (model-parallel and data-parallel streams).

    The initial weights do not come from these streams: ``models.init`` draws each parameter
    from its own generator seeded from the seed and the parameter's global name.
    """
    from megatron.core import tensor_parallel

    torch.manual_seed(seed)
    tensor_parallel.model_parallel_cuda_manual_seed(seed)


def ensure_rng_tracker(seed: int = 1234) -> None:
    """Megatron's attention forks the tracker's model-parallel stream; make sure it exists."""
    from megatron.core import tensor_parallel

    if not tensor_parallel.get_cuda_rng_tracker().is_initialized():
        state = torch.get_rng_state()
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
        torch.set_rng_state(state)


def destroy() -> None:
    """Tear down megatron's groups and, if we created it, the default process group."""
    global _owns_process_group
    from megatron.core import parallel_state, tensor_parallel

    cross_stage.reset()
    parallel_state.destroy_model_parallel()
    tensor_parallel.get_cuda_rng_tracker().reset()
    if _owns_process_group and dist.is_initialized():
        dist.destroy_process_group()
    _owns_process_group = False
