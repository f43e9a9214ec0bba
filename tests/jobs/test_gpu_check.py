"""`scripts/gpu_check.sh --tiny`: the prepared GPU command runs on a CPU, every part, one JSON.

The first lent GPU gets one command (`scripts/gpu_check.sh`, 8 minutes on an H100); this proves
the script itself here: the three parts run, the GPU tests skip with their reason, both arms'
figures and the trajectory gap land in `gpu_check.json`, and a failing part is named while the
others still run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_tiny_gpu_check_runs_every_part_and_writes_its_figures(tmp_path):
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--tiny", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["failed"] == [] and set(report["parts"]) == {
        "pytest_gpu", "gpu_124m", "trajectory",
    }  # fmt: skip
    assert report["parts"]["pytest_gpu"]["counts"].get("skipped", 0) >= 1  # no GPU here
    figures = report["figures"]
    for arm in ("linear", "nonlinear"):
        assert figures[arm]["tokens_per_s"] > 0 and 0 < figures[arm]["mfu"] < 1
        gap = figures["trajectory_gap"][arm]
        assert gap["precision"] == "fp32" and gap["passed"] and gap["max_rel_gap"] < 1e-4
    assert figures["step_time_ratio"] > 0
    assert "all parts passed" in done.stdout
