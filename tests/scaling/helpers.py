"""Helpers of the end-to-end tests: write a spec, list a study's MLflow runs, poll with a bound."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

# imported here, not on first poll: importing torch takes seconds, long enough for a tiny run
# to finish before the test reacts to its first checkpoint
from jobs.checkpoints.checkpoint import list_checkpoints
from scaling.driver.environment import load_study_spec
from scaling.spec.study import StudySpec


def write_and_load(spec: dict, path: Path) -> StudySpec:
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path)


def study_runs(study: StudySpec) -> list:
    """Every MLflow run of the study's experiment (parent and children)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(study.mlflow.tracking_uri)
    exp = client.get_experiment_by_name(study.mlflow.experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], max_results=1000)


def poll(
    condition: Callable[[], object],
    timeout_s: float,
    what: str | Callable[[], str],
    every_s: float = 0.5,
):
    """Return condition()'s first truthy value; fail the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    what = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def checkpoint_steps(output_dir: str) -> list[int]:
    root = Path(output_dir) / "checkpoints"
    return [step for step, _ in list_checkpoints(root)] if root.is_dir() else []


def logged_steps(study: StudySpec, run_id: str, metric: str = "train/loss") -> list[int]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(study.mlflow.tracking_uri)
    return sorted(m.step for m in client.get_metric_history(run_id, metric))


def scaling_cli(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m scaling ARGS` in `cwd` with one CPU thread, as a user runs it; must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


def dead(pid: int) -> bool:
    """The process is gone, or a zombie (ended; its parent has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def assert_one_error_line(proc: subprocess.CompletedProcess, secret: str, starts: str) -> str:
    """The command was refused as a user should see it: exit 2, no traceback, `secret` nowhere,
    and one non-empty stderr line starting with `starts`; that line."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and secret not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(starts), out
    return errors[0]


REPO = Path(__file__).resolve().parents[2]


def ci_demo_spec(tmp_path: Path) -> dict:
    """studies/demo.yaml, shrunk: the same design (4 sizes x 2 arms, a one-seed 3-LR scan with
    one refinement round, then the other seeds at each arm's winner), tiny cells, and 3 seeds
    instead of 6: seeds 1-2 follow the winners by the same path as seeds 1-5, for 24 cells less."""
    spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
    spec["name"] = "demo-ci"
    spec["seeds"] = [0, 1, 2]
    del spec["evaluation"]  # every cell scoring a task: tests/scaling/e2e/test_downstream_e2e.py
    del spec["output_dir"]  # the default: runs/demo-ci beside the spec (the demo's is ../runs)
    spec["mlflow"] = {"experiment": "demo-ci", "tracking_uri": "sqlite:///mlruns/mlflow.db"}
    spec["data"]["prepare"].update(output_dir=str(tmp_path / "data"), max_bytes=1_500_000)
    spec["data"]["num_val_windows"] = 8
    spec["data"]["num_select_windows"] = 8
    spec["model"]["seq_length"] = 32
    spec["tokens"]["per_size"] = {size: 12_288 for size in spec["sizes"]}
    spec["batch"] = {"rule": "fixed", "tokens": 512, "micro_batch_size": 16}  # 24 steps
    spec["schedule"]["warmup_steps"] = 4
    spec["train"] = {"eval_interval": 12, "log_interval": 4}
    return spec


def wait_for_an_empty_queue(timeout_s: float = 120) -> None:
    """Until this user has no job in the queue (an earlier test's sleep arrays end)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-u", getpass.getuser()], capture_output=True, text=True, timeout=30
        )
        if out.returncode == 0 and not out.stdout.strip():
            return
        time.sleep(1)
    pytest.fail(f"this user's jobs still queued after {timeout_s} s", pytrace=False)


def gated_package(root: Path, package: str) -> Path:
    """A user's own package `root/src/<package>` whose `variants.py` is tests/variants/gated.py
    (entry `<package>.variants:gated_query`, found through `python_path: src`); its file."""
    folder = root / "src" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    variant = folder / "variants.py"
    variant.write_text((REPO / "tests" / "variants" / "gated.py").read_text())
    return variant
