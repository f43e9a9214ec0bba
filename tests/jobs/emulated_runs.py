"""Run-config cases for the CUDA-branch emulation and the worker that trains them.

One `run_ranks(train_emulated, 2, cases)` launch trains every case in turn on the same two
processes (each `train()` builds and tears down its own groups), so the many layouts cost one
interpreter start, one megatron/DeepSpeed import and one emulation.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path
from typing import Any

import torch

from jobs.testing import tiny_run_dict

__all__ = ["layout_case", "study_case", "study_case_name", "study_cell", "train_emulated"]

ENGINES = {
    "megatron": {"engine": "megatron"},
    "deepspeed": {"engine": "deepspeed", "deepspeed": {"zero_stage": 1}},
}
LAYOUTS = {
    "dp2": {"data_parallel": 2},
    "tp2": {"tensor_parallel": 2},
    "pp2": {"pipeline_parallel": 2},
}
# the tiny model of jobs.testing, but 4 layers (PP2: two per stage) and one micro-batch per rank
_TINY_TRAIN = {"steps": 2, "global_batch_tokens": 128, "micro_batch_size": 2}


def layout_case(
    tmp_path: Path, data_dir: Path, engine: str, layout: str, position: str
) -> dict[str, Any]:
    """A bf16 run of `engine` at `layout` with `position` embeddings, to preempt and resume."""
    name = f"{engine}-{layout}-{position}"
    run = tiny_run_dict(
        tmp_path / name,
        data_dir,
        name=name,
        precision="bf16",
        parallel=LAYOUTS[layout],
        model={"num_layers": 4, "position_embedding": position},
        train=_TINY_TRAIN,
        **ENGINES[engine],
    )
    return {"name": name, "run": run, "resume": True}


def study_case_name(study_file: Path, size: str | None, engine: str) -> str:
    return f"study-{study_file.stem}-{size or 'first'}-{engine}"


def study_cell(study_file: Path, size: str | None = None):
    """The study's first cell, or with `size` its first cell of that size. A size past the first
    wave (`lr.search.transfer: law`) is not in the starting grid: its cell is built as its wave
    adds it (`expand_cells` with an added point: the arm's middle grid LR, the first scan seed)."""
    from scaling.spec.grid import expand_cells, learning_rates
    from scaling.spec.loader import read_study

    resolved = read_study(study_file)
    cells = [c for c in resolved.cells if size is None or c.size == size]
    if cells:
        return cells[0]
    spec = resolved.spec
    if size not in spec.sizes:
        raise ValueError(f"{study_file.name}: no size {size!r} in study.sizes {spec.sizes}")
    variant = spec.variants[0]
    grid = learning_rates(spec, variant, size)
    point = (size, variant, spec.scan_seeds[0], grid[len(grid) // 2], 1)
    return expand_cells(spec, resolved.vocab_size, added=[point])[-1]


def study_case(
    study_file: Path, size: str | None, engine: str, tmp_path: Path, data_dir: Path
) -> dict[str, Any]:
    """The first step of a shipped study's cell (`study_cell`), shrunk to run on two CPU
    processes.

    Kept from the study: precision, engine settings (ZeRO stage), tensor and pipeline
    parallelism, the query variant, position embedding, QK-norm and tying, the optimiser and
    schedule. Shrunk: the shape (2 layers per pipeline stage, d 64, 4 heads, seq 32, the tiny
    dataset's vocabulary), data parallelism (to what two processes leave), the batch and
    tracking (off). `engine` replaces the study's engine (each study runs on both).
    """
    from foundation.config import to_dict

    cell = study_cell(study_file, size)
    run = to_dict(cell.run)
    parallel = dict(run["parallel"])
    parallel["data_parallel"] = max(
        1, 2 // (parallel["tensor_parallel"] * parallel["pipeline_parallel"])
    )
    kept_model = {
        key: run["model"][key]
        for key in ("query_variant", "qk_norm", "position_embedding", "tie_embeddings")
    }
    kept_model["num_layers"] = 2 * parallel["pipeline_parallel"]
    name = study_case_name(study_file, size, engine)
    tiny = tiny_run_dict(
        tmp_path / name,
        data_dir,
        name=name,
        precision=run["precision"],
        parallel=parallel,
        model=kept_model,
        optimizer=run["optimizer"],
        schedule={**run["schedule"], "warmup_steps": 1},
        train={**_TINY_TRAIN, "steps": 1},
        engine=engine,
        deepspeed=run["deepspeed"],
    )
    return {"name": name, "run": tiny, "resume": False}


def _train_case(case: dict[str, Any], emulation) -> dict[str, Any]:
    """Train `case` (stopped after step 1 and resumed when `case["resume"]`); what it did."""
    from unittest import mock

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.loop import trainer

    seen: dict[str, Any] = {}
    real_build_engine = trainer.build_engine

    def build_engine(config, model, bf16):
        engine = real_build_engine(config, model, bf16)
        floating = {n: str(p.dtype) for n, p in model.named_parameters() if p.is_floating_point()}
        seen.setdefault("param_dtypes", floating)
        optimizer = engine.optimizer
        inner = getattr(optimizer, "chained_optimizers", [optimizer])  # megatron's chain
        seen.setdefault("optimizer", [type(o).__name__ for o in inner])
        dp_group = engine.ps.get_data_parallel_group()
        seen.setdefault("dp_ranks", list(torch.distributed.get_process_group_ranks(dp_group)))
        return engine

    first = len(emulation.collectives)
    report: dict[str, Any] = {"name": case["name"]}
    try:
        config = from_dict(RunConfig, case["run"], where="run")
        with mock.patch.object(trainer, "build_engine", build_engine):
            if case["resume"]:
                stop = threading.Event()
                stop.set()  # what SIGUSR2 / SIGTERM sets: stop and save after step 1
                _next_rendezvous_port()
                preempted = trainer.train(config, stop=stop)
                report["preempted"] = (preempted.status, preempted.steps)
                _forget_deepspeed()
            _next_rendezvous_port()
            result = trainer.train(config)
        report.update(status=result.status, steps=result.steps, losses=result.train_losses)
    except Exception as err:  # noqa: BLE001 - reported to the test, which names the case
        report["error"] = f"{type(err).__name__}: {err}"
        report["traceback"] = traceback.format_exc()[-4000:]
    report.update(seen)
    dp_ranks = tuple(seen.get("dp_ranks", ()))
    report["dp_gradient_reductions"] = [
        (c.op, c.dtype, c.numel)
        for c in emulation.gradient_reductions(since=first)
        if c.group_ranks == dp_ranks
    ]
    report["collective_devices"] = sorted({c.device for c in emulation.collectives[first:]})
    return report


def train_emulated(
    rank: int, world_size: int, cases: list[dict[str, Any]], device_count: int = 1
) -> dict[str, Any]:
    """Under the CUDA-branch emulation, train every case in turn; per-case reports."""
    from tests.jobs.cuda_emulation import activate

    emulation = activate(device_count)
    reports = []
    for case in cases:
        reports.append(_train_case(case, emulation))
        _forget_deepspeed()
    return {
        "reports": reports,
        "backends": emulation.backends,
        "cuda_devices_set": emulation.cuda_devices_set,
        "deepspeed_devices_set": emulation.deepspeed_devices_set,
    }


def between_runs() -> None:
    """Ready this process for another `train()`: DeepSpeed's handles dropped, a fresh port."""
    _forget_deepspeed()
    _next_rendezvous_port()


def _next_rendezvous_port() -> None:
    """A fresh rendezvous port for the next `train()` in this process (same on every rank): the
    previous run's TCP store may outlive it (DeepSpeed keeps references), and its stale keys
    would send the next run's gloo to closed sockets."""
    from tests.distributed import next_rendezvous_port

    next_rendezvous_port()


def _forget_deepspeed() -> None:
    """Drop DeepSpeed's module-level handles on the process groups a finished `train()` has
    destroyed. A job process trains one run; here several share a process, and DeepSpeed's
    cached world group kept the first run's TCP store alive, so the next run's groups met its
    stale keys and hung."""
    import gc
    import sys

    if "deepspeed" not in sys.modules:
        return
    from deepspeed.comm import comm
    from deepspeed.utils import groups

    comm.cdb = None
    groups._WORLD_GROUP = None
    groups._ZERO_PARAM_INTRA_PARALLEL_GROUP = None
    groups._DATA_PARALLEL_GROUP = None
    groups._MODEL_PARALLEL_GROUP = None
    groups._TENSOR_MODEL_PARALLEL_GROUP = None
    groups.mpu = None
    gc.collect()
