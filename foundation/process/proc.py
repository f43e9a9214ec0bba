"""Child processes: stopping one (ask first, then insist), and killing a tree (Linux /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

__all__ = ["stop", "children", "kill", "kill_tree"]


def stop(proc: subprocess.Popen, timeout_s: float = 20) -> None:
    """SIGTERM `proc`, wait up to `timeout_s` for it to exit, then SIGKILL it; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def children(pid: int) -> list[int]:
    """The direct children of `pid` ([] if it is gone), whichever of its threads started them."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    found = []
    for thread in threads:
        try:
            found += [int(k) for k in (thread / "children").read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def kill(pid: int) -> None:
    """SIGKILL `pid`; one that has already gone is no error."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every descendant, parents first (so none starts another child)."""
    tree = [pid]
    for parent in tree:  # grows while walking: breadth-first over the descendants
        tree.extend(children(parent))
    for target in tree:
        kill(target)
