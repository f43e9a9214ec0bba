"""Helpers of the fault tests: run the `scaling` CLI as a user would, count what MLflow holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from scaling.state.status import study_status
from tests.conftest import REPO
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import study_runs

SCALING = str(Path(sys.executable).with_name("scaling"))


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **extra)
    env.pop("WORLD_SIZE", None)
    return env


def start_cli(
    args: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """`scaling ARGS` in its own process group (so a test can SIGKILL all of it at once);
    `env`: extra variables (e.g. `jobs.testing.PauseFiles.env()`)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [SCALING, *args],
            env=cli_env(**(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the CLI, submitit's controllers and every training task: its process tree
    (local controllers and the warm server run in sessions of their own), then its group."""
    from foundation.process.proc import kill_tree

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


def wait_held(
    pause,
    names,
    alive: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout_s: float = 600,
) -> None:
    """Wait until every run in `names` holds at `pause.step` (a `jobs.testing.PauseFiles`);
    fail at once if `alive` (the CLI or the training process) ends first, with `log`'s tail."""
    from tests.scaling.helpers import poll

    def held() -> bool:
        if alive is not None:
            assert alive.poll() is None, log.read_text()[-3000:] if log else "it ended"
        return all(pause.reached(name) for name in names)

    poll(held, timeout_s, f"{list(names)} to hold at step {pause.step}", 0.1)


def scaling_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [SCALING, *args],
        env=cli_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def slurm_spec(tmp_path, data_dir, uri, steps: int, **overrides) -> dict:
    """A tiny Slurm study of `steps` steps a cell (tests.scaling.conftest.small_spec)."""
    base = {
        "executor": "slurm",
        "sizes": ["30K"],
        "variants": ["linear", "nonlinear"],
        "parallel": {},
        "tokens": {"per_size": {"30K": steps * 256}},
        "train": {"checkpoint_interval": 20},
        "slurm": {"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1},
    }
    return small_spec(data_dir, tmp_path / "study", uri, **{**base, **overrides})


def child_runs(study) -> list:
    return [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]


def job_logs(study) -> str:
    return "".join(p.read_text() for p in (study.folder / "submitit").rglob("*_log.out"))


def ended_rows(study) -> list | None:
    """The status rows once no cell is pending or running (None before)."""
    rows = study_status(study)
    return rows if all(r.state not in ("queued", "running") for r in rows) else None


def assert_each_step_once(uri: str, rows, steps: int) -> int:
    total = 0
    for row in rows:
        received = step_counts(uri, row.run_id)
        assert sorted(received) == list(range(1, steps + 1)), row.cell_id
        assert set(received.values()) == {1}, row.cell_id
        total += sum(received.values())
    return total
