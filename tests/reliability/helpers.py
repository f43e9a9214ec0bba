"""Helpers of the fault tests: run the `scaling` CLI as a user would, count what MLflow holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import REPO

SCALING = str(Path(sys.executable).with_name("scaling"))


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **extra)
    env.pop("WORLD_SIZE", None)
    return env


def start_cli(args: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """`scaling ARGS` in its own process group (so a test can SIGKILL all of it at once)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [SCALING, *args],
            env=cli_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the CLI, submitit's controllers and every training task: its process tree
    (local controllers and the warm server run in sessions of their own), then its group."""
    from foundation.proc import kill_tree

    kill_tree(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def step_counts(uri: str, run_id: str, metric: str = "train/loss") -> Counter:
    """How many points MLflow holds for each step of `metric` (1 everywhere = exactly once)."""
    from mlflow.tracking import MlflowClient

    return Counter(m.step for m in MlflowClient(uri).get_metric_history(run_id, metric))


def spooled_steps(output_dir: Path, metric: str = "train/loss") -> Counter:
    """How often each step of `metric` was written to the cell's local spool (re-executions)."""
    spool = output_dir / "tracking" / "spool.jsonl"
    counts: Counter = Counter()
    if spool.is_file():
        for line in spool.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("t") == "metric" and record.get("k") == metric:
                counts[record["step"]] += 1
    return counts
