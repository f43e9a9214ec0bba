"""Importable worker functions for `run_ranks` (spawned processes need module-level callables)."""

from __future__ import annotations

from typing import Any

from jobs import TrainingJob


def train_ranks(rank: int, world_size: int, configs: list[dict]) -> list[dict[str, Any]]:
    """Train each config in turn on this rank; return each RunResult as a dict. Each config
    after the first meets on a fresh rendezvous port: the previous group's TCP store port may
    still be held, and a second group on it never formed."""
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop.trainer import train
    from tests.distributed import next_rendezvous_port

    results = []
    for i, config in enumerate(configs):
        if i:
            next_rendezvous_port()
        results.append(dict(train(from_dict(RunConfig, config, where="run")).__dict__))
    return results


def preempt_then_resume(rank: int, world_size: int, config: dict) -> list[dict[str, Any]]:
    """Train with the stop flag already set (stops and saves after step 1), then resume."""
    import threading

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop.trainer import train

    cfg = from_dict(RunConfig, config, where="run")
    stop = threading.Event()
    stop.set()
    first = train(cfg, stop=stop)
    second = train(cfg)
    return [dict(first.__dict__), dict(second.__dict__)]


def backend_requested_on_cuda(world_size: int = 2) -> tuple[str, list[int]]:
    """(backend, devices set) that `models.runtime.init_distributed` asks for on a CUDA machine
    with one visible device: CUDA is reported present and the group constructor is recorded,
    not run (so no process group, port or device is touched)."""
    import os
    from unittest import mock

    import torch
    import torch.distributed as dist

    from models import runtime

    calls: list[str] = []
    devices: list[int] = []

    class _Recorded(Exception):
        pass

    def record(backend=None, *args, **kwargs):
        calls.append(backend)
        raise _Recorded

    env = {"RANK": str(world_size - 1), "WORLD_SIZE": str(world_size), "LOCAL_RANK": "1"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="1", TORCHELASTIC_USE_AGENT_STORE="True")
    with (
        mock.patch.dict(os.environ, env),
        mock.patch.object(torch.cuda, "is_available", lambda: True),
        mock.patch.object(torch.cuda, "device_count", lambda: 1),
        mock.patch.object(torch.cuda, "set_device", devices.append),
        mock.patch.object(dist, "is_initialized", lambda: False),
        mock.patch.object(dist, "init_process_group", record),
    ):
        try:
            runtime.init_distributed()
        except _Recorded:
            pass
    assert len(calls) == 1, calls
    return calls[0], devices


def as_nccl_would(backend: str) -> str:
    """`backend` with NCCL played by a gloo that serves only the `cuda` device type: such a group
    refuses CPU tensors exactly as NCCL does ("No backend type associated with device type
    cpu"), while the other device types keep their backends."""
    if ":" not in backend:
        return "cuda:gloo" if backend == "nccl" else backend
    pairs = [pair.split(":") for pair in backend.split(",")]
    return ",".join(f"{device}:{'gloo' if name == 'nccl' else name}" for device, name in pairs)


def train_with_gpu_groups(rank: int, world_size: int, config: dict, preempt: bool) -> dict:
    """Train `config` with the process groups built from the backend requested on a CUDA machine,
    NCCL played by a CPU-refusing gloo (`as_nccl_would`). `preempt`: with the stop flag set, as
    SIGUSR2 sets it (all ranks agree, save after step 1, return `preempted`); else resume from
    the newest checkpoint and finish."""
    import threading
    from unittest import mock

    import torch.distributed as dist

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop.trainer import train

    requested, _ = backend_requested_on_cuda()
    real_init = dist.init_process_group
    used: list[str] = []

    def init(backend=None, *args, **kwargs):
        used.append(as_nccl_would(requested))
        return real_init(used[-1], *args, **kwargs)

    stop = threading.Event()
    if preempt:
        stop.set()
    with mock.patch.object(dist, "init_process_group", init):
        result = train(from_dict(RunConfig, config, where="run"), stop=stop)
    return {**result.__dict__, "backends": used}


def engine_report(rank: int, world_size: int, config: dict, bf16: bool) -> dict[str, Any]:
    """Build the run's model and engine (bf16 params when `bf16`, also on a CPU), take one
    training step on step 0's micro-batches, and report the engine's dtypes, loss and grad norm.
    In bf16 the step is skipped (CPU kernels are not what is checked there)."""
    import torch

    from data_prep import training_dataset
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.engines.batches import step_microbatches
    from jobs.engines.engine import build_engine
    from models import runtime
    from models.build import build_gpt

    cfg = from_dict(RunConfig, config, where="run")
    runtime.initialize_parallel(cfg.parallel)
    overrides = {}
    if bf16:
        overrides = {"bf16": True, "params_dtype": torch.bfloat16, "pipeline_dtype": torch.bfloat16}
    model = build_gpt(cfg.model, cfg.parallel, seed=cfg.seed, transformer_overrides=overrides)
    engine = build_engine(cfg, model, bf16)
    report: dict[str, Any] = {"params": sorted({str(p.dtype) for p in model.parameters()})}
    if cfg.engine == "deepspeed":
        report["data_types"] = [str(t) for t in engine.engine.get_data_types()]
    else:
        report["grad_reduce_in_fp32"] = engine.model.ddp_config.grad_reduce_in_fp32
        report["main_grad"] = sorted({str(p.main_grad.dtype) for p in engine.params})
    if not bf16:
        seqs = cfg.global_batch_sequences
        dataset = training_dataset(cfg.data, cfg.model.seq_length, seqs)
        ps = runtime_parallel_state()
        batches = step_microbatches(
            dataset,
            0,
            seqs,
            ps.get_data_parallel_rank(),
            ps.get_data_parallel_world_size(),
            cfg.train.micro_batch_size,
        )
        engine.set_lr(cfg.optimizer.lr)
        report["loss"], report["grad_norm"] = engine.train_step(batches)
    runtime.destroy()
    return report


def runtime_parallel_state():
    from megatron.core import parallel_state

    return parallel_state


def train_once(rank: int, world_size: int, config: dict, preempt: bool) -> dict[str, Any]:
    """Train `config` once on this rank; `preempt`: with the stop flag set (SIGUSR2's effect),
    so the run stops and saves after step 1; else resume from the newest checkpoint."""
    import threading

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop.trainer import train

    stop = threading.Event()
    if preempt:
        stop.set()
    return dict(train(from_dict(RunConfig, config, where="run"), stop=stop).__dict__)


class GpuGroupsTrainingJob(TrainingJob):
    """`jobs.TrainingJob` whose process builds its groups as `train_with_gpu_groups` does (the
    CUDA request, NCCL played by a CPU-refusing gloo), and is requeued as itself on SIGUSR2."""

    def __call__(self):
        from unittest import mock

        import torch.distributed as dist

        requested, _ = backend_requested_on_cuda()
        real_init = dist.init_process_group

        def init(backend=None, *args, **kwargs):
            return real_init(as_nccl_would(requested), *args, **kwargs)

        with mock.patch.object(dist, "init_process_group", init):
            return super().__call__()

    def checkpoint(self, *args: Any, **kwargs: Any):
        submission = super().checkpoint(*args, **kwargs)
        submission.function = GpuGroupsTrainingJob(self.config, self.preempt_wait_s)
        return submission


def usr2_at_step_5(executor: Any, job_fn: Any) -> tuple[list, str]:
    """Submit `job_fn` (a two-task job) on `executor`, send SIGUSR2 to every task once rank 0
    has logged step 5, wait for the requeued job to end; (per-rank results, its stdout)."""
    import os
    import signal
    import time

    from foundation.process.proc import children

    job = executor.submit(job_fn)
    deadline = time.monotonic() + 300
    while "step 5/" not in (job.stdout() or ""):
        assert not job.done(), job.stderr()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for task in children(int(job.job_id)):
        os.kill(task, signal.SIGUSR2)
    return job.results(), job.stdout()


def whole_then_cut_and_resumed(
    rank: int, world_size: int, whole: dict, cut: dict
) -> tuple[dict, dict]:
    """In one launch: train `whole` to its end, then `cut` stopped after step 1 (saved) and
    resumed from its checkpoint under the backend a CUDA machine requests
    (`train_with_gpu_groups`); the whole run's and the resumed run's results. Three launches
    would pay each rank's imports three times."""
    from tests.jobs.emulated_runs import between_runs

    (first,) = train_ranks(rank, world_size, [whole])
    between_runs()
    train_with_gpu_groups(rank, world_size, cut, True)
    between_runs()
    return first, train_with_gpu_groups(rank, world_size, cut, False)


def trained_then_newest_damaged_and_rerun(
    rank: int, world_size: int, config: dict, damaged_rank: int
) -> tuple[dict, dict]:
    """Train `config` to its end; then, as if killed before its last save, its result and last
    checkpoint go, and (issue 55 #8) 4,000 bytes in the middle of rank `damaged_rank`'s file
    of the checkpoint before are overwritten; the cell is run again. Both results."""
    import shutil
    import time
    from pathlib import Path

    from jobs.checkpoints.checkpoint import list_checkpoints
    from tests.jobs.emulated_runs import between_runs

    (first,) = train_ranks(rank, world_size, [config])
    out = Path(config["output_dir"])
    if rank == 0:
        (out / "result.json").unlink()
        (_, last), (_, newest), *_ = list_checkpoints(out / "checkpoints")
        shutil.rmtree(last)
        path = newest / f"rank_{damaged_rank:05d}.pt"
        data = bytearray(path.read_bytes())
        middle = len(data) // 2 - 2000
        data[middle : middle + 4000] = b"\xff" * 4000
        path.write_bytes(bytes(data))
        (out / "damaged").touch()
    deadline = time.monotonic() + 120
    while not (out / "damaged").exists():  # no process group between two runs: a file says so
        assert time.monotonic() < deadline, "rank 0 never damaged the checkpoint"
        time.sleep(0.1)
    between_runs()
    (second,) = train_ranks(rank, world_size, [config])
    return first, second
