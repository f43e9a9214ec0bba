"""One recipe on both engines and both devices: the same parameters weight-decayed, a grad norm
at every ZeRO stage, gradients accumulated in fp32 under bf16."""

from __future__ import annotations

import pytest

from jobs.testing import tiny_run_config, tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import engine_report, train_ranks


def test_megatron_optimizer_decays_exactly_what_the_cpu_path_decays(tmp_path, data_dir):
    """From megatron's own param groups (its optimizer builds on a CPU in fp32): gains are
    `wd_mult=0` there, and the decay AdamW applies per parameter equals `jobs.engines.optim`'s."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

    from jobs.engines.engine_megatron import megatron_optimizer
    from jobs.engines.optim import build_adamw
    from models import runtime
    from models.build import build_gpt

    cfg = tiny_run_config(tmp_path, data_dir)
    try:
        model = build_gpt(cfg.model, cfg.parallel, seed=cfg.seed)
        ddp = DistributedDataParallel(
            model.config, DistributedDataParallelConfig(grad_reduce_in_fp32=True), model
        )
        gpu_groups = megatron_optimizer(ddp, cfg.optimizer, bf16=False).param_groups
        cpu_groups = build_adamw(model, cfg.optimizer).param_groups
        names = {id(p): n for n, p in model.named_parameters()}
        on_gpu = {names[id(p)]: g["weight_decay"] for g in gpu_groups for p in g["params"]}
        on_cpu = {names[id(p)]: g["weight_decay"] for g in cpu_groups for p in g["params"]}
        wd_mult = {names[id(p)]: g["wd_mult"] for g in gpu_groups for p in g["params"]}
        shapes = {n: p.dim() for n, p in model.named_parameters()}
    finally:
        runtime.destroy()
    assert on_gpu == on_cpu and len(on_gpu) == len(shapes)
    gains = {n for n, dim in shapes.items() if dim == 1}
    assert gains and {wd_mult[n] for n in gains} == {0.0}  # megatron's own marking
    assert {on_gpu[n] for n in gains} == {0.0}
    assert {on_gpu[n] for n in shapes if n not in gains} == {cfg.optimizer.weight_decay}


@pytest.mark.slow
def test_deepspeed_stage0_reports_the_grad_norm_the_other_engines_report(tmp_path, data_dir):
    """At ZeRO stage 0 DeepSpeed computes no grad norm; the first step's norm (same init, same
    batch) equals the megatron engine's and DeepSpeed's own at stage 2, and a run completes."""
    reports = {}
    for name, over in {
        "megatron": {},
        "zero0": {"engine": "deepspeed", "deepspeed": {"zero_stage": 0}},
        "zero2": {"engine": "deepspeed", "deepspeed": {"zero_stage": 2}},
    }.items():
        cfg = tiny_run_dict(tmp_path / name, data_dir, **over)
        (reports[name],) = run_ranks(engine_report, 1, cfg, False)
    assert reports["megatron"]["grad_norm"] > 0.1
    for name in ("zero0", "zero2"):
        assert reports[name]["loss"] == pytest.approx(reports["megatron"]["loss"], rel=1e-6)
        assert reports[name]["grad_norm"] == pytest.approx(
            reports["megatron"]["grad_norm"], rel=1e-5
        )
    cfg = tiny_run_dict(tmp_path / "run", data_dir, engine="deepspeed", deepspeed={"zero_stage": 0})
    ((result,),) = run_ranks(train_ranks, 1, [cfg])
    assert result["status"] == "completed", result
    assert result["train_losses"][-1] < result["train_losses"][0] - 0.1


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["megatron", "deepspeed-zero1", "deepspeed-zero2"])
def test_bf16_gradients_accumulate_in_fp32(tmp_path, data_dir, engine):
    """Read from the engine built over a bf16 model: megatron's DDP config and its main_grad
    buffers, DeepSpeed's (model dtype, gradient-accumulation dtype)."""
    over = {}
    if engine.startswith("deepspeed"):
        over = {"engine": "deepspeed", "deepspeed": {"zero_stage": int(engine[-1])}}
    cfg = tiny_run_dict(tmp_path, data_dir, **over)
    (report,) = run_ranks(engine_report, 1, cfg, True)
    assert report["params"] == ["torch.bfloat16"]  # every floating parameter, position table too
    if engine == "megatron":
        assert report["grad_reduce_in_fp32"] is True
        assert report["main_grad"] == ["torch.float32"]
    else:
        assert report["data_types"] == ["torch.bfloat16", "torch.float32"]


def test_deepspeed_stage0_in_bf16_is_refused_naming_the_field(tmp_path, data_dir):
    """DeepSpeed has no fp32 accumulation without ZeRO: refused rather than run unlike megatron."""
    from jobs.engines.engine_deepspeed import deepspeed_config

    cfg = tiny_run_config(tmp_path, data_dir, engine="deepspeed", deepspeed={"zero_stage": 0})
    with pytest.raises(ValueError, match="deepspeed.zero_stage: 0 in bf16"):
        deepspeed_config(cfg, bf16=True)
    assert deepspeed_config(cfg, bf16=False)["data_types"] == {"grad_accum_dtype": "fp32"}
    with pytest.raises(ValueError, match="deepspeed.zero_stage: 0 with precision 'bf16'"):
        tiny_run_config(
            tmp_path, data_dir, engine="deepspeed", deepspeed={"zero_stage": 0}, precision="bf16"
        )
