"""Provenance tags for a run: what produced it (code version, packages, hardware).

modded-nanogpt's rule: every run logs what it needs to be reproduced on its own. torch is
imported only inside `device_name`, so importing this module stays light.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

__all__ = ["device_name", "versions", "git_commit", "host_name"]

PACKAGES = ("torch", "megatron-core", "deepspeed", "mlflow", "pydantic", "nonlinear-query-scaling")


def device_name() -> str:
    """The accelerator (CUDA device name), or the CPU's core and thread counts."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def host_name() -> str:
    return socket.gethostname()


def versions() -> dict[str, str]:
    """`version.<package>` tags of the packages that decide a run's numbers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in PACKAGES:
        try:
            out[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            out[f"version.{pkg}"] = "absent"
    return out


def git_commit() -> str:
    """The checkout's HEAD commit, or "unknown" outside a git checkout."""
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
