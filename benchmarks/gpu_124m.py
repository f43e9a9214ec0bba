"""GPU check: the paper's 124M shape, `linear` vs `nonlinear`, bf16, one command.

    python benchmarks/gpu_124m.py [--steps 150] [--out DIR]     # on a machine with one GPU
    python benchmarks/gpu_124m.py --tiny                          # the same path on a CPU, tiny

Measures the device's bf16 matmul rate first (8192² GEMMs), then trains each arm through the
real training job (`python -m jobs` under torchrun: megatron-core schedules, megatron's
optimizer, bf16) on the offline stdlib corpus, and prints ms/step, tokens/s, MFU (against the
peak the run logged, `jobs.engines.device`, and against the measured matmul rate), peak device
memory, and the nonlinear / linear step-time ratio. The model's vocab is GPT-2's padded 50304, so
the FLOPs are the 124M model's whatever the tokenizer's size. The defaults finish within about 8
minutes on one H100/H200-class GPU (most of it data preparation and two process starts).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def matmul_flops_per_s(device: str, size: int, iters: int) -> float:
    """Sustained FLOP/s of square GEMMs in bf16 (GPU) or fp32 (CPU)."""
    import torch

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    return 2 * size**3 * iters / (time.perf_counter() - start)


def run_config(args, variant: str, data_dir: Path, work: Path, peak: float) -> dict:
    if args.tiny:
        model = dict(num_layers=2, hidden_size=64, num_attention_heads=4, seq_length=128)
        batch = dict(global_batch_tokens=8 * 128, micro_batch_size=8)
    else:  # GPT-3 small; 8 x 1024 tokens per micro-batch, 8 micro-batches per step
        model = dict(num_layers=12, hidden_size=768, num_attention_heads=12, seq_length=1024)
        batch = dict(global_batch_tokens=64 * 1024, micro_batch_size=8)
    return {
        "name": f"gpu124m-{variant}",
        "study": "gpu-check",
        "seed": 0,
        "output_dir": str(work / variant),
        "model": {**model, "vocab_size": 50304, "query_variant": variant},
        "data": {"path": str(data_dir), "seed": 1234, "num_val_windows": 16},
        "train": {"steps": args.steps, **batch},
        "optimizer": {"lr": 8e-4},
        "schedule": {"kind": "cosine", "warmup_steps": min(50, args.steps // 4)},
        "precision": "fp32" if args.tiny else "bf16",
        "tracking": {
            "tracking_uri": f"sqlite:///{work / 'mlflow.db'}",
            "experiment": "gpu-check",
            "flush_interval_s": 5.0,
        },
    }


def metric(tracking_uri: str, run_id: str, key: str, skip: int = 0) -> list[float]:
    from mlflow.tracking import MlflowClient

    history = MlflowClient(tracking_uri).get_metric_history(run_id, key)
    return [m.value for m in sorted(history, key=lambda m: m.step) if m.step > skip]


def _failure(stderr: str) -> str:
    """The training process's own exception line (not torchrun's ChildFailedError wrapper)."""
    pattern = re.compile(r"^(?:\[\w+\]:)?\s*([\w.]*(?:Error|Exception|OutOfMemory\w*)): (.*)$")
    found = [
        m.group(0).strip()
        for m in map(pattern.match, stderr.splitlines())
        if m and "ChildFailedError" not in m.group(1)
    ]
    lines = [line for line in stderr.splitlines() if line.strip()]
    return (found or lines or ["no output"])[-1][:800]


def run_arm(args, variant: str, data_dir: Path, work: Path, peak: float) -> dict:
    """Train one arm in its own process; its speed, MFU and peak memory from its MLflow run.
    Raises RuntimeError naming the failure (the job's last stderr lines) if it does not finish."""
    import yaml
    from mlflow.tracking import MlflowClient

    from models import ModelConfig, accounting

    cfg = run_config(args, variant, data_dir, work, peak)
    path = work / f"{variant}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command = [*torchrun, "--nproc_per_node", "1", "-m", "jobs", str(path)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"exit code {done.returncode}: {_failure(done.stderr)}")
    outcome = json.loads((Path(cfg["output_dir"]) / "result.json").read_text())
    uri, run_id = cfg["tracking"]["tracking_uri"], outcome["run_id"]
    step = statistics.median(metric(uri, run_id, "step_time_s", skip=10))
    tokens_per_s = cfg["train"]["global_batch_tokens"] / step
    flops_per_token = accounting.flops_per_token(ModelConfig(**cfg["model"]))
    tags = MlflowClient(uri).get_run(run_id).data.tags
    logged_peak = float(tags["mfu_peak_flops_per_device"])
    memory = metric(uri, run_id, "peak_device_memory_bytes") or [math.nan]
    return {
        "step_time_s": step,
        "tokens_per_s": tokens_per_s,
        "mfu": tokens_per_s * flops_per_token / logged_peak,
        "mfu_peak": logged_peak,
        "mfu_peak_source": tags["mfu_peak_source"],
        "mfu_vs_measured_matmul": tokens_per_s * flops_per_token / peak,
        "peak_memory_gib": max(memory) / 2**30,
        "flops_per_token": flops_per_token,
        "final_val_loss": outcome["final_val_loss"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--tiny", action="store_true", help="tiny shape on the CPU (path check)")
    parser.add_argument("--out", type=Path, default=None, help="write results.json here")
    args = parser.parse_args()

    import torch

    from data_prep import DataPrepConfig, prepare

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.tiny:
        print("no CUDA device: use --tiny to check the path on a CPU", file=sys.stderr)
        return 2
    peak = matmul_flops_per_s(
        device, 8192 if device == "cuda" else 1024, 50 if device == "cuda" else 5
    )
    print(
        f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}: "
        f"measured matmul rate {peak / 1e12:.1f} TFLOP/s"
    )

    work = Path(tempfile.mkdtemp(prefix="gpu124m-"))
    data_dir = work / "data"
    prepare(
        DataPrepConfig(
            source="stdlib",
            output_dir=str(data_dir),
            vocab_size=8192,
            max_bytes=4_000_000 if args.tiny else 30_000_000,
            validation_fraction=0.02,
        )
    )
    results = {"device": device, "matmul_flops_per_s": peak, "arms": {}}
    for variant in ("linear", "nonlinear"):
        try:
            results["arms"][variant] = run_arm(args, variant, data_dir, work, peak)
        except Exception as err:  # noqa: BLE001 - one arm's failure must not hide the other's
            results["arms"][variant] = {"error": f"{type(err).__name__}: {err}"}
    header = f"{'arm':<10} {'ms/step':>9} {'tokens/s':>10} {'MFU':>7} {'MFU(mm)':>8}"
    print(f"\n{header} {'peak GiB':>9} {'val loss':>9}")
    for variant, r in results["arms"].items():
        if "error" in r:
            print(f"{variant:<10} FAILED: {r['error']}")
            continue
        print(
            f"{variant:<10} {r['step_time_s'] * 1e3:>9.1f} {r['tokens_per_s']:>10.0f} "
            f"{r['mfu']:>7.1%} {r['mfu_vs_measured_matmul']:>8.1%} "
            f"{r['peak_memory_gib']:>9.2f} {r['final_val_loss']:>9.4f}"
        )
    done = {v: r for v, r in results["arms"].items() if "error" not in r}
    if done:
        first = next(iter(done.values()))
        print(
            f"MFU against {first['mfu_peak'] / 1e12:.4g} TFLOP/s ({first['mfu_peak_source']}); "
            f"MFU(mm) against the measured matmul rate {peak / 1e12:.3g} TFLOP/s"
        )
    if len(done) == 2:
        print(
            f"nonlinear / linear step time: "
            f"{done['nonlinear']['step_time_s'] / done['linear']['step_time_s']:.3f}"
        )
    else:
        print("nonlinear / linear step time: n/a (an arm failed, see above)")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_124m.json").write_text(json.dumps(results, indent=2))
    return 0 if len(done) == len(results["arms"]) else 1


if __name__ == "__main__":
    sys.exit(main())
