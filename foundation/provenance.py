"""Provenance tags for a run: what produced it (code version, packages, hardware).

modded-nanogpt's rule: every run logs what it needs to be reproduced on its own. torch is
imported only inside `device_name`, so importing this module stays light.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import subprocess
from pathlib import Path

__all__ = ["device_name", "versions", "git_commit", "host_name", "source_digest"]

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


def _source_files(module: str) -> tuple[Path, list[Path]] | None:
    """(root, the .py files of `module`: every one under a package), or None if not found.

    Found by `importlib.util.find_spec`, which imports only a dotted name's parent packages.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        return root, sorted(root.rglob("*.py"))
    if spec.origin and Path(spec.origin).is_file():
        return Path(spec.origin).parent, [Path(spec.origin)]
    return None


def source_digest(modules: list[str]) -> str:
    """A 16-hex digest of the source of `modules` (packages: every .py file under them).

    What decides whether a finished run still describes the code: a run records the digest of
    the code that built its model, and a changed digest makes its result stale. File names
    count relative to their package, so the same code in another checkout has the same digest.
    """
    h = hashlib.sha256()
    for module in modules:
        h.update(f"module {module}\n".encode())
        found = _source_files(module)
        if found is None:
            h.update(b"not found\n")
            continue
        root, files = found
        for path in files:
            h.update(f"file {path.relative_to(root).as_posix()}\n".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]
