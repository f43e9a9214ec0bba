"""The studies shipped in studies/ validate and plan (the cluster ones without their cluster)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaling.costs.plan import plan_study
from scaling.rounds.environment import load_study_spec

STUDIES = Path(__file__).resolve().parents[2] / "studies"


@pytest.mark.parametrize("name", ["demo", "paper-124m", "paper-124m-tokens", "ladder"])
def test_shipped_study_validates_and_plans(name):
    resolved = load_study_spec(STUDIES / f"{name}.yaml", check_environment=False)
    plan = plan_study(resolved)
    study = resolved.spec
    variants = {row.variant for row in plan.rows}
    assert {"linear", "nonlinear"} <= variants
    assert plan.num_runs == len({row.cell_id for row in plan.rows})
    if name == "demo":  # CPU-sized: >= 4 sizes x 2 arms x >= 2 seeds, small enough for a laptop
        assert len(study.sizes) >= 4 and len(study.seeds) >= 2 and study.executor == "local"
        assert plan.total_flops < 1e14
    else:  # cluster-sized: GPU jobs on Slurm, every arm with an LR sweep
        assert study.executor == "slurm" and study.slurm.gpus_per_node > 0
        lrs = {(r.variant, r.size): set() for r in plan.rows}
        for row in plan.rows:
            lrs[(row.variant, row.size)].add(row.lr)
        assert min(len(v) for v in lrs.values()) >= 3
        assert plan.gpu_hours > 100
        assert study.lr.search is not None  # the grid grows while an arm's best is at an edge


def test_plan_command_prints_the_cost_table():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaling",
            "plan",
            str(STUDIES / "paper-124m.yaml"),
            "--no-check-environment",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # seed 0 scans the starting grid (4 arms x 4 LRs); the LR search's worst case is beside it
    assert "124M-nonlinear-s0-lr0.0008" in out and "16 runs" in out and "GPU-hours" in out
    assert "lr search (max_rounds 2, scan seeds 1 of 3): worst case +32 cells" in out
