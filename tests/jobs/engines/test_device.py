"""Device semantics of the GPU path, proven on a CPU.

NCCL serves only CUDA tensors; a gloo backend registered for the `cuda` device type only
(`cuda:gloo`) refuses CPU tensors the same way on a CPU machine. So: (1) with CUDA reported
present, the group `models.runtime` asks for must carry CPU tensors too; (2) whole runs (both
engines, 1 and 2 ranks, DP/TP/PP) preempt (the stop flag SIGUSR2 sets), save, resume and finish with
the groups built from that request, NCCL played by the CPU-refusing gloo.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from jobs.testing import tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import as_nccl_would, backend_requested_on_cuda, train_with_gpu_groups


def _refuses_cpu_tensors(backend: str) -> bool:
    """Whether a 1-rank group with `backend` refuses an all-reduce of a CPU tensor."""
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.all_reduce(torch.ones(1))
        return False
    except RuntimeError as err:
        assert "No backend type associated with device type cpu" in str(err)
        return True
    finally:
        dist.destroy_process_group()


def test_nccl_stand_in_refuses_cpu_tensors_and_the_requested_backend_does_not():
    """The stand-in behaves like NCCL, and the backend asked for on a CUDA machine (recorded,
    not run) serves CPU tensors; each rank sets the device `local rank % visible devices`."""
    assert _refuses_cpu_tensors(as_nccl_would("nccl"))
    requested, devices = backend_requested_on_cuda(world_size=2)
    assert "nccl" in requested  # CUDA tensors still go to NCCL
    assert not _refuses_cpu_tensors(as_nccl_would(requested))
    assert devices == [0]  # local rank 1, one visible device (a site binding one GPU per task)


RUNS = {
    "megatron-1": (1, {}),
    "deepspeed-1": (1, {"engine": "deepspeed"}),
    "megatron-dp2": (2, {"parallel": {"data_parallel": 2}}),
    "deepspeed-dp2": (2, {"engine": "deepspeed", "parallel": {"data_parallel": 2}}),
    "megatron-tp2": (2, {"parallel": {"tensor_parallel": 2}}),
    "megatron-pp2": (2, {"parallel": {"pipeline_parallel": 2}}),
}


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(RUNS))
def test_runs_preempt_save_resume_and_finish_on_the_gpu_groups(tmp_path, data_dir, run):
    """Loss sums (train and eval), the preemption flag, checkpoint agreement and the resume's
    reductions all pass through groups whose NCCL part refuses CPU tensors; each requeue is a
    fresh process, as under submitit."""
    world_size, over = RUNS[run]
    cfg = tiny_run_dict(tmp_path, data_dir, train={"steps": 3}, **over)
    first = run_ranks(train_with_gpu_groups, world_size, cfg, True)
    assert [r["status"] for r in first] == ["preempted"] * world_size
    assert {r["steps"] for r in first} == {1}
    second = run_ranks(train_with_gpu_groups, world_size, cfg, False)
    for result in second:
        assert result["status"] == "completed" and result["steps"] == 3
        assert result["backends"] == [as_nccl_would(backend_requested_on_cuda()[0])]
        assert result["train_losses"] == second[0]["train_losses"]
    assert second[0]["final_val_loss"] < second[0]["train_losses"][0]


def test_mfu_peak_is_the_present_devices_own(monkeypatch):
    """The datasheet peak of the GPU present, in the run's dtype; an unlisted GPU is measured;
    a configured peak wins; a CPU states its nominal one. (No CUDA here: the device's name is
    reported, and the measurement's GEMMs are replaced by a known rate.)"""
    from jobs.engines import device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    names = iter(["NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe", "NVIDIA Z9"])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: next(names))
    monkeypatch.setattr(device, "measured_matmul_flops", lambda dtype: 123e12)
    assert device.mfu_peak(None, bf16=True) == (989e12, "datasheet NVIDIA H200 bf16")
    assert device.mfu_peak(None, bf16=False)[0] == 19.5e12
    assert device.mfu_peak(None, bf16=True)[0] == 756e12
    assert device.mfu_peak(None, bf16=True) == (123e12, "measured NVIDIA Z9 bf16 matmul")
    assert device.mfu_peak(5e14, bf16=True) == (5e14, "train.peak_flops_per_device")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device.mfu_peak(None, bf16=False) == (1e12, "cpu nominal")


@pytest.mark.slow
def test_sigusr2_requeues_a_two_rank_job_on_the_gpu_groups(tmp_path, data_dir, monkeypatch):
    """SIGUSR2 to both tasks of a local submitit job (DP=2): rank 0's `checkpoint()` sets the
    stop flag, the ranks agree, save, the job is requeued and resumes to the end, all on groups
    whose NCCL part refuses CPU tensors."""

    import submitit

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from tests.jobs.helpers import GpuGroupsTrainingJob, usr2_at_step_5

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    steps = 40
    cfg = tiny_run_dict(tmp_path, data_dir, train={"steps": steps}, parallel={"data_parallel": 2})
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit")
    executor.update_parameters(timeout_min=10, tasks_per_node=2)
    job_fn = GpuGroupsTrainingJob(from_dict(RunConfig, cfg, where="run"))
    results, out = usr2_at_step_5(executor, job_fn)
    assert [r.status for r in results] == ["completed", "completed"], out
    resumed_at = int(out.split("resumed at step ")[1].split()[0])
    assert 5 <= resumed_at < steps
    assert results[1].train_losses == results[0].train_losses
    assert len(results[0].train_losses) == steps
