"""The peak FLOP/s MFU divides by: the one of the device actually present.

Dense (no sparsity) tensor-core rates from the vendors' datasheets, per device and dtype; a GPU
not in the table is measured (sustained bf16/fp32 GEMMs, well under a second) rather than
assumed. A CPU process states a nominal 1 TFLOP/s (the order of one modern socket). The run
logs which peak it used and where it came from.
"""

from __future__ import annotations

import time

import torch

__all__ = ["PEAK_FLOPS", "table_peak_flops", "measured_matmul_flops", "mfu_peak"]

CPU_PEAK_FLOPS = 1e12
TAG_MFU_PEAK = "mfu_peak_flops_per_device"  # run tags: the MFU denominator and its source
TAG_MFU_PEAK_SOURCE = "mfu_peak_source"

# (substring of torch.cuda.get_device_name(), dtype) -> dense FLOP/s; most specific names first.
# fp32 is the non-tensor-core rate: torch's default matmul precision ("highest") uses no TF32.
PEAK_FLOPS: list[tuple[str, str, float]] = [
    ("H100 PCIe", "bf16", 756e12),
    ("H100 NVL", "bf16", 835e12),
    ("H100", "bf16", 989e12),  # SXM
    ("H200", "bf16", 989e12),
    ("GH200", "bf16", 989e12),
    ("B200", "bf16", 2250e12),
    ("A100", "bf16", 312e12),
    ("L40S", "bf16", 362e12),
    ("H100 PCIe", "fp32", 51e12),
    ("H100", "fp32", 67e12),
    ("H200", "fp32", 67e12),
    ("A100", "fp32", 19.5e12),
]


def table_peak_flops(device_name: str, dtype: str) -> float | None:
    """The datasheet peak of `device_name` in `dtype` ("bf16" | "fp32"), None if unlisted."""
    for name, kind, flops in PEAK_FLOPS:
        if name in device_name and kind == dtype:
            return flops
    return None


def measured_matmul_flops(dtype: torch.dtype, size: int = 4096, iters: int = 20) -> float:
    """Sustained FLOP/s of square GEMMs on the current CUDA device."""
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    return 2 * size**3 * iters / (time.perf_counter() - start)


def mfu_peak(configured: float | None, bf16: bool) -> tuple[float, str]:
    """(peak FLOP/s of one device, where it came from) for this process's device."""
    if configured is not None:
        return configured, "train.peak_flops_per_device"
    if not torch.cuda.is_available():
        return CPU_PEAK_FLOPS, "cpu nominal"
    name = torch.cuda.get_device_name()
    dtype = "bf16" if bf16 else "fp32"
    peak = table_peak_flops(name, dtype)
    if peak is not None:
        return peak, f"datasheet {name} {dtype}"
    measured = measured_matmul_flops(torch.bfloat16 if bf16 else torch.float32)
    return measured, f"measured {name} {dtype} matmul"
