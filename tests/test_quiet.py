"""The entry points hide megatron's known, harmless warnings, and `--verbose` shows them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from jobs.testing import tiny_run_dict
from tests.shipped import shipped_study

REPO = Path(__file__).resolve().parents[1]
# What a user saw on every command before: the fallback notices and the cuda-graph deprecation.
NOISE = ("Apex", "Transformer Engine", "full scope is deprecated", "UserWarning")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    env.pop("WORLD_SIZE", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(n in line for n in NOISE)]


def test_scaling_plan_prints_no_third_party_warnings(tmp_path):
    study = shipped_study("demo", tmp_path)  # not the repository's copy: runs/demo may be there
    args = ["-m", "scaling", "plan", "--no-check-environment", str(study)]
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "24 runs" in proc.stdout
    assert _noise(proc.stderr) == []


def test_training_entry_point_is_quiet_unless_verbose(tmp_path):
    """A real (2-step) training run imports megatron-core, which warns; only --verbose shows it."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(tiny_run_dict(tmp_path, train={"steps": 2})))
    quiet = _run(["-m", "jobs", str(config)], tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert _noise(quiet.stderr) == [], quiet.stderr[-3000:]

    verbose_config = tmp_path / "verbose.yaml"
    verbose = tiny_run_dict(tmp_path, train={"steps": 2}, output_dir=str(tmp_path / "v"))
    verbose_config.write_text(yaml.safe_dump(verbose))
    loud = _run(["-m", "scaling", "--verbose", "train", str(verbose_config)], tmp_path)
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert _noise(loud.stderr), "megatron's fallback warnings no longer appear: update NOISE"


def test_mlflow_info_lines_only_with_verbose(tmp_path):
    """A tracked run creates its SQLite MLflow store: MLflow logs that at INFO, which only
    `--verbose` shows (the same holds for its "View run" lines and alembic's migrations)."""
    from data_prep.testing import tiny_dataset

    data = tiny_dataset(tmp_path / "data")
    outputs = {}
    for flag in ([], ["--verbose"]):
        name = "loud" if flag else "quiet"
        run = tiny_run_dict(
            tmp_path,
            data_dir=data,
            train={"steps": 2},
            output_dir=str(tmp_path / name),
            tracking={"enabled": True, "tracking_uri": f"sqlite:///{tmp_path / name}.db"},
        )
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(run))
        proc = _run(["-m", "scaling", *flag, "train", str(config)], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs[name] = proc.stdout + proc.stderr
    assert "Creating initial MLflow database tables" in outputs["loud"]
    assert "Creating initial MLflow database tables" not in outputs["quiet"], outputs["quiet"]
    assert " INFO " not in outputs["quiet"], outputs["quiet"]
