"""Hide the third-party warnings that every command prints and that mean nothing to a user.

Megatron-core warns on import that Apex and Transformer Engine are missing (it falls back to
torch, which is what a CPU run or a plain CUDA install wants), and on every model config that
its default cuda-graph scope "full" is deprecated (we never capture CUDA graphs). Each command's
entry point calls `silence_known_warnings` once; `--verbose` skips it, so nothing is lost.
Only these messages are matched: an unexpected warning still shows.
"""

from __future__ import annotations

import warnings

__all__ = ["KNOWN_HARMLESS", "silence_known_warnings"]

# (message regex, category): matched at the start of the message, as `warnings` does.
KNOWN_HARMLESS: tuple[tuple[str, type[Warning]], ...] = (
    (r"Transformer Engine and Apex are not installed", UserWarning),
    (r"Apex is not installed", UserWarning),
    (r"Transformer Engine is not installed", UserWarning),
    (r"full scope is deprecated", UserWarning),
    (r"The following imports from `dynamic_context.py` will be removed", DeprecationWarning),
    (r"`torch.jit.script_method` is deprecated", DeprecationWarning),
)


def silence_known_warnings() -> None:
    """Ignore the `KNOWN_HARMLESS` warnings in this process (idempotent)."""
    for message, category in KNOWN_HARMLESS:
        warnings.filterwarnings("ignore", message=message, category=category)
