"""One helper for side-effect prints: only global rank 0 speaks, always flushed, one prefix.

Read from the launcher's environment (`RANK`, else Slurm's `SLURM_PROCID`), or from
torch.distributed when it is already initialised, so no package needs its own rank check.
"""

from __future__ import annotations

import os
import sys

__all__ = ["global_rank", "rank0_print"]


def global_rank() -> int:
    """This process's global rank: torch.distributed's when initialised, else the launcher's."""
    dist = sys.modules.get("torch.distributed")  # never import torch just to ask
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))


def rank0_print(message: str, prefix: str = "[jobs]") -> None:
    """Print `message` on global rank 0 only (flushed: job logs are read while they run)."""
    if global_rank() == 0:
        print(f"{prefix} {message}" if prefix else message, flush=True)
