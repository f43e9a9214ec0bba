"""Provenance tags for a run: what produced it (code version, packages, hardware).

modded-nanogpt's rule: every run logs what it needs to be reproduced on its own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import torch

__all__ = ["device_name", "versions", "git_commit"]


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "megatron-core", "deepspeed", "mlflow", "nonlinear-query-scaling"):
        try:
            out[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            out[f"version.{pkg}"] = "absent"
    return out


def git_commit() -> str:
    repo = Path(__file__).resolve().parents[1]
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() or "unknown"
