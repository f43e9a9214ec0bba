"""Each test's wall and CPU seconds, for finding where the suite's time goes (docs/testing.md).

With ``SCALING_TEST_TIMES=FILE`` the conftest appends one line per test to FILE:
``nodeid<TAB>wall<TAB>cpu``. The CPU is the test process tree's: the worker itself, every live
descendant (a statistical replay's pool, a server, a training cell) and what the reaped ones
left in their parents' child times, read from ``/proc`` before and after the test. Under two
workers the wall of a test includes its share of the other's load; the CPU does not, which is
why the suite (CPU-bound on 2 cores) is shrunk by the CPU column.
``benchmarks/suite_times.py FILE`` sums it by test and by module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TIMES_ENV = "SCALING_TEST_TIMES"
_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float] | None:
    """(ppid, utime + stime + cutime + cstime in seconds) of ``pid``, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command, which may hold spaces
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds of ``root`` (this process) and of its live descendants, children's included."""
    root = root or os.getpid()
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p))}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total


def start() -> tuple[float, float]:
    return time.monotonic(), tree_cpu()


def record(path: str, nodeid: str, started: tuple[float, float]) -> None:
    wall, cpu = time.monotonic() - started[0], tree_cpu() - started[1]
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{nodeid}\t{wall:.2f}\t{max(cpu, 0.0):.2f}\n")
