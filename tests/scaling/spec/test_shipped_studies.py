"""The studies shipped in studies/ validate and plan (the cluster ones without their cluster).

Each is planned from a copy in the test's own folder (tests/shipped.py): the repository's
`runs/` may hold a user's study state (after `scripts/demo.sh`), which `plan` rightly reads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from analysis.stats.gains.levels import MIN_SEEDS
from analysis.stats.rules.verdict import MIN_SIZES
from scaling.costs.lr_search import search_cost
from scaling.costs.plan import plan_study
from scaling.driver.environment import load_study_spec
from scaling.state.files.search_state import AddedLR, SearchState, write_state
from tests.shipped import shipped_names, shipped_study


@pytest.mark.parametrize("name", ["demo", "quick", "paper-124m", "paper-124m-tokens", "ladder"])
def test_shipped_study_validates_and_plans(name, tmp_path):
    resolved = load_study_spec(shipped_study(name, tmp_path), check_environment=False)
    plan = plan_study(resolved)
    study = resolved.spec
    variants = {row.variant for row in plan.rows}
    assert {"linear", "nonlinear"} <= variants
    assert plan.num_runs == len({row.cell_id for row in plan.rows})
    if name in ("demo", "quick"):  # CPU: >= 4 sizes x 2 arms x >= 2 seeds, for a laptop
        assert len(study.sizes) >= 4 and len(study.seeds) >= 2 and study.executor == "local"
        assert plan.total_flops < 1e14
    else:  # cluster-sized: GPU jobs on Slurm, every arm with an LR sweep
        assert study.executor == "slurm" and study.slurm.gpus_per_node > 0
        lrs = {(r.variant, r.size): set() for r in plan.rows}
        for row in plan.rows:
            lrs[(row.variant, row.size)].add(row.lr)
        assert min(len(v) for v in lrs.values()) >= 3
        assert study.lr.search is not None  # the grid grows while an arm's best is at an edge
        # the ladder's starting grid is its first wave only (the test below): price the worst case
        assert plan.gpu_hours + search_cost(resolved, plan).gpu_hours > 100


def test_the_shipped_ladder_transfers_lrs_and_adds_seeds_in_looks(tmp_path):
    """Issue 37's defaults: sizes in waves on each arm's LR law, the other seeds at the winner
    only, seeds added in looks; the plan starts with the first wave's scan (seed 0, 3 LRs)."""
    resolved = load_study_spec(shipped_study("ladder", tmp_path), check_environment=False)
    study = resolved.spec
    search = study.lr.search
    assert (search.transfer, search.follow_neighbours, search.scan_seeds) == ("law", 0, 1)
    rounds = study.seed_rounds
    assert (rounds.start, rounds.max, rounds.step) == (3, 10, 2) and study.seeds == [0, 1, 2]
    plan = plan_study(resolved)
    assert sorted({row.size for row in plan.rows}) == ["25M", "50M", "85M"]
    assert plan.num_runs == 3 * 4 * 3 and {row.seed for row in plan.rows} == {0}


def test_plan_command_prints_the_cost_table(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaling",
            "plan",
            str(shipped_study("paper-124m", tmp_path)),
            "--no-check-environment",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # seed 0 scans the starting grid (4 arms x 4 LRs); the LR search's worst case is beside it
    assert "124M-nonlinear-s0-lr0.0008" in out and "16 runs" in out and "GPU-hours" in out
    assert "lr search (max_rounds 2, scan seeds 1 of 3): worst case +32 cells" in out


def test_quick_is_the_smallest_study_the_verdict_can_judge(tmp_path):
    """studies/quick.yaml: exactly what the verdict rule needs not to say `inconclusive` (4 sizes,
    3 paired seeds, 3 LRs for the scan seed so that an interior best is bracketed), 2 arms; its
    header states its cell count, which `scaling plan` gives."""
    path = shipped_study("quick", tmp_path)
    resolved = load_study_spec(path, check_environment=False)
    study, plan = resolved.spec, plan_study(resolved)
    assert len(study.sizes) == MIN_SIZES and len(study.seeds) == MIN_SEEDS
    assert study.variants == ["linear", "nonlinear"] and study.lr.search is not None
    assert study.scan_seeds == [0] and study.lr.search.follow_neighbours == 0
    lrs: dict[tuple[str, str], set[float]] = {}
    for row in plan.rows:
        lrs.setdefault((row.variant, row.size), set()).add(row.lr)
    assert {row.seed for row in plan.rows} == {0}  # the scan; seeds 1-2 follow its winner
    assert {len(v) for v in lrs.values()} == {3}  # the fewest with a best inside the grid
    search = search_cost(resolved)
    expected = plan.num_runs + search.num_follower_cells  # the scan, then seeds 1-2 at its winner
    assert (plan.num_runs, expected, expected + search.num_scan_cells) == (24, 40, 48)
    assert f"# {expected} cells expected, {expected + search.num_scan_cells} at most" in (
        path.read_text()
    )


def _plant_demo_state(root) -> None:
    """What `scripts/demo.sh` leaves in `runs/demo`: an LR search that added a round of cells."""
    state = SearchState(
        added=[
            AddedLR("linear", "12K", 0.0, 0.192, [0], 1, "best at the upper edge"),
            AddedLR("nonlinear", "12K", 0.0, 0.096, [0], 1, "best at the upper edge"),
        ]
    )
    write_state(root / "runs" / "demo", state)


def test_a_users_runs_folder_does_not_reach_the_tests(tmp_path):
    """The README's order: `scripts/demo.sh` (runs/demo with LR-search state), then the tests.

    The planted state is real (planning the file in place reads it: more cells), and the tests'
    copies of every shipped study plan exactly what the file alone gives."""
    user = tmp_path / "user"
    for name in shipped_names():
        shipped_study(name, user)
    alone = {
        name: plan_study(
            load_study_spec(shipped_study(name, tmp_path / "alone"), check_environment=False)
        ).num_runs
        for name in shipped_names()
    }
    _plant_demo_state(user)
    in_place = plan_study(load_study_spec(user / "studies" / "demo.yaml", check_environment=False))
    assert in_place.num_runs > alone["demo"]  # the user's state is read where it lies
    for name in shipped_names():
        copy = shipped_study(name, user / "test-copy")
        planned = plan_study(load_study_spec(copy, check_environment=False)).num_runs
        assert planned == alone[name], name
    assert alone["demo"] == 24
