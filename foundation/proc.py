"""Stopping a child process: ask first, then insist."""

from __future__ import annotations

import subprocess

__all__ = ["stop"]


def stop(proc: subprocess.Popen, timeout_s: float = 20) -> None:
    """SIGTERM `proc`, wait up to `timeout_s` for it to exit, then SIGKILL it; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
