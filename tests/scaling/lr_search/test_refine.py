"""LR search round logic (`scaling.lr_search.extend_grid.decide`) on synthetic studies with a known
optimum.

Each arm's loss is `(log lr - log lr*)^2 + noise`, with LRs above a threshold diverging, so
where the search must end is known. The same `decide` that `scaling run` / `submit` call is
driven round after round here, as if every round's cells had run; `test_refine_e2e.py` runs
the real thing.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.stats.lr.frontier import lr_frontier
from analysis.tables.runs import normalise
from foundation.config import ConfigError
from scaling.lr_search.extend_grid import decide_round
from scaling.spec.grid import cell_id
from scaling.spec.loader import study_from_dict
from scaling.state.files.search_state import SearchState, read_state, write_state
from tests.scaling.conftest import small_spec

TOKENS = 1e6


def _spec(tmp_path, search: dict, grid: dict, seeds=(0, 1, 2)):
    data = small_spec(
        tmp_path / "data",
        tmp_path / "out",
        "sqlite:///" + str(tmp_path / "m.db"),
        sizes=["30K"],
        parallel={},
        tokens={"per_size": {"30K": 3072}},
        seeds=list(seeds),
        lr={"law": "none", "grid": {k: {"30K": v} for k, v in grid.items()}, "search": search},
    )
    data["variants"] = list(grid)
    return study_from_dict(data)


class Synthetic:
    """Runs (variant, seed, lr) cells of a known loss surface, like a study's MLflow runs."""

    def __init__(self, optimum: dict[str, float], diverge_above: float = math.inf, seed=0):
        self.optimum, self.diverge_above = optimum, diverge_above
        self.rng = np.random.default_rng(seed)
        self.rows: list[dict] = []

    def run(self, variant: str, seed: int, lr: float) -> None:
        loss = (math.log(lr) - math.log(self.optimum[variant])) ** 2 / 10 + 3.0
        diverged = lr > self.diverge_above
        self.rows.append(
            {
                "variant": variant,
                "size": "30K",
                "num_nonembedding_params": 3e4,
                "tokens": TOKENS,
                "seed": seed,
                "lr": lr,
                "final_val_loss": math.nan if diverged else loss + self.rng.normal(0, 1e-3),
                "status": "diverged" if diverged else "completed",
                "run_id": cell_id("30K", variant, seed, lr),
            }
        )

    def table(self) -> pd.DataFrame:
        return normalise(pd.DataFrame(self.rows), "synthetic")

    def known(self) -> set[str]:
        return {r["run_id"] for r in self.rows}


def _search(spec, world: Synthetic) -> tuple[SearchState, list[int]]:
    """Run the starting grid, then every round `decide` adds, until the search ends."""
    for variant, per_size in spec.lr.grid.items():
        for lr in per_size["30K"]:
            for seed in spec.scan_seeds:
                world.run(variant, seed, lr)
    state, added_per_round = SearchState(), []
    while not state.ended:
        before = len(state.added)
        state = decide_round(spec, world.table(), state, world.known())
        new = state.added[before:]
        added_per_round.append(sum(len(a.seeds) for a in new))
        for a in new:
            for seed in a.seeds:
                world.run(a.variant, seed, a.lr)
        assert len(added_per_round) < 20, "the search must end"
    return state, added_per_round


def test_a_grid_below_one_optimum_and_above_the_other_ends_interior(tmp_path):
    # linear's grid is far below its optimum (edge_high), nonlinear's far above (edge_low)
    grid = {"linear": [1e-5, 2e-5, 4e-5], "nonlinear": [0.1, 0.2, 0.4]}
    spec = _spec(tmp_path, {"max_rounds": 8, "scan_seeds": 1}, grid)
    world = Synthetic({"linear": 3e-4, "nonlinear": 4e-3})
    state, per_round = _search(spec, world)
    assert state.ended and state.open_arms == [] and state.stopped_arms == []
    final = {f.variant: f for f in lr_frontier(world.table())}  # every seed: what analysis sees
    assert final["linear"].state == "interior" and final["nonlinear"].state == "interior"
    assert final["linear"].best_lr == pytest.approx(3.2e-4)  # 2x steps from 1e-5: 3.2e-4 nearest
    assert final["nonlinear"].best_lr == pytest.approx(0.1 / 2**5)  # 3.125e-3, nearest 4e-3
    # one new LR per edge arm per round by the single scan seed, then 2 followers x 3 LRs x 2 arms
    assert per_round[:-1] == [2, 2, 2, 2, 1, 1] and per_round[-1] == 12
    followers = [a for a in state.added if a.seeds == [1, 2]]
    assert {(a.variant, a.reason) for a in followers} >= {("linear", "winner")}
    assert len(followers) == 6


def test_divergence_brackets_the_top_and_counts_as_interior(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 5, "scan_seeds": 1}, {"linear": [1e-4, 2e-4]})
    world = Synthetic({"linear": 1.0}, diverge_above=1e-3)  # optimum unreachable: diverges first
    state, _ = _search(spec, world)
    final = lr_frontier(world.table())[0]
    assert final.state == "bracketed_by_divergence" and final.best_lr == pytest.approx(8e-4)
    assert state.open_arms == []
    # followers: the winner and the usable neighbour below; never the diverged LR above
    assert sorted(a.lr for a in state.added if a.seeds == [1, 2]) == pytest.approx([4e-4, 8e-4])


def test_max_rounds_stops_and_names_the_arms_left_at_an_edge(tmp_path):
    grid = {"linear": [1e-5, 2e-5], "nonlinear": [1e-3, 2e-3, 4e-3]}
    spec = _spec(tmp_path, {"max_rounds": 2, "scan_seeds": 1}, grid)
    world = Synthetic({"linear": 1e-2, "nonlinear": 2e-3})
    state, per_round = _search(spec, world)
    # 2 rounds, then 2 followers x (nonlinear: 3 LRs; linear at its top edge: 8e-5 and 4e-5)
    assert state.round == 3 and per_round == [1, 1, 10]
    assert len(state.open_arms) == 1 and state.open_arms[0].startswith("linear 30K")
    assert "edge_high, best 8e-05" in state.open_arms[0]


def test_no_usable_lr_stops_the_arm_without_followers(tmp_path):
    grid = {"linear": [1e-3, 2e-3], "nonlinear": [1.0, 2.0]}
    spec = _spec(tmp_path, {"max_rounds": 3, "scan_seeds": 1}, grid)
    world = Synthetic({"linear": 1.5e-3, "nonlinear": 1e-3}, diverge_above=0.5)
    state, _ = _search(spec, world)
    assert [s.split(":")[0] for s in state.stopped_arms] == ["nonlinear 30K @1e+06 tokens"]
    assert {a.variant for a in state.added} == {"linear"}


def test_every_seed_scans_when_scan_seeds_is_null(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 3, "scan_seeds": None}, {"linear": [1e-4, 2e-4]})
    world = Synthetic({"linear": 2.5e-4})
    state, per_round = _search(spec, world)
    assert per_round == [3, 0]  # one round of 3 seeds at 4e-4, then nothing left to follow
    assert state.ended and state.round == 1


def test_the_same_runs_give_the_same_round_and_rounded_lrs_count_as_tried(tmp_path):
    spec = _spec(
        tmp_path, {"max_rounds": 3, "scan_seeds": 1, "step_factor": 1.0004}, {"linear": [1e-3]}
    )
    world = Synthetic({"linear": 1.0})
    world.run("linear", 0, 1e-3)
    one = decide_round(spec, world.table(), SearchState(), world.known())
    two = decide_round(spec, world.table(), SearchState(), world.known())
    assert one == two  # a crash between rounds recomputes exactly this round
    # 1e-3 x / 1.0004 round to the id of 1e-3 (3 digits): already tried, so nothing to scan
    assert one.ended and one.open_arms and all(a.seeds == [1, 2] for a in one.added)


def test_state_file_round_trips_and_a_damaged_one_names_the_fix(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 3}, {"linear": [1e-4, 2e-4]})
    world = Synthetic({"linear": 1e-2})
    for lr in (1e-4, 2e-4):
        world.run("linear", 0, lr)
    state = decide_round(spec, world.table(), SearchState(), world.known())
    write_state(tmp_path, state)
    assert read_state(tmp_path) == state
    (tmp_path / "lr_search.json").write_text('{"added": 3}')
    with pytest.raises(ValueError, match="delete it to restart the search"):
        read_state(tmp_path)


def test_a_scan_only_lr_never_wins_the_analysis():
    world = Synthetic({"linear": 1e-3})
    for lr in (2.5e-4, 5e-4, 1e-3):
        for seed in (0, 1, 2):
            world.run("linear", seed, lr)
    world.run("linear", 0, 2e-3)  # scanned by seed 0 only
    table = world.table()
    table.loc[table["lr"] == 2e-3, "final_val_loss"] = 1.0  # by far the best loss
    (f,) = lr_frontier(table)
    assert f.best_lr == pytest.approx(1e-3) and 2e-3 not in f.usable_lrs
    # ... but it says the winner is not established: the other seeds must run it
    assert f.state == "edge_high" and f.next_lrs == [pytest.approx(2e-3)]
    assert f.scanned_lrs == [pytest.approx(2e-3)]


@pytest.mark.parametrize("optimum", [1e-3, 1.2e-3, 0.8e-3])
def test_two_stage_scan_neighbours_bracket_the_winner_on_the_scan_seeds(optimum):
    """follow_neighbours 0: the winner is run by every seed, its neighbours by seed 0 only; a
    neighbour that is worse on seed 0 brackets it, one that is better on seed 0 does not."""
    world = Synthetic({"linear": optimum}, seed=3)
    for lr in (5e-4, 1e-3, 2e-3):
        world.run("linear", 0, lr)
    for seed in (1, 2):
        world.run("linear", seed, 1e-3)
    (f,) = lr_frontier(world.table())
    assert f.usable_lrs == [pytest.approx(1e-3)] and f.best_lr == pytest.approx(1e-3)
    assert f.state == "interior" and f.next_lrs == []
    table = world.table()
    table.loc[(table["lr"] == 5e-4), "final_val_loss"] = 2.0  # the scan says 5e-4 is better
    (f,) = lr_frontier(table)
    assert f.state == "edge_low" and f.next_lrs == [pytest.approx(5e-4)]


@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"step_factor": 1.0}, "study.lr.search.step_factor"),
        ({"max_rounds": -1}, "study.lr.search.max_rounds"),
        ({"scan_seeds": 4}, "study.lr.search.scan_seeds"),
        ({"scan_seeds": 0}, "study.lr.search.scan_seeds"),
        ({"follow_neighbours": -1}, "study.lr.search.follow_neighbours"),
    ],
)
def test_bad_search_settings_name_the_field(tmp_path, search, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _spec(tmp_path, search, {"linear": [1e-3]})


def test_load_study_adds_the_rounds_cells_through_the_grid(tmp_path, data_dir):
    import yaml

    from scaling.driver.environment import load_study_spec
    from scaling.state.files.search_state import AddedLR

    spec = small_spec(
        data_dir,
        tmp_path / "out",
        "sqlite:///" + str(tmp_path / "m.db"),
        sizes=["30K"],
        parallel={},
        variants=["linear"],
        seeds=[0, 1],
        tokens={"per_size": {"30K": 3072}},
        lr={"law": "none", "grid": {"*": {"30K": [1e-3, 2e-3]}}, "search": {"max_rounds": 2}},
    )
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    assert [(c.seed, c.lr, c.round) for c in study.cells] == [(0, 1e-3, 0), (0, 2e-3, 0)]
    added = [
        AddedLR("linear", "30K", 3072.0, 4e-3, [0], 1, "edge_high at 0.002"),
        AddedLR("linear", "30K", 3072.0, 2e-3, [1], 2, "winner"),
    ]
    write_state(study.folder, SearchState(added, ended=True))
    again = load_study_spec(path, check_environment=False)
    rounds = [(c.cell_id, c.round, c.tags["round"]) for c in again.cells if c.round]
    assert rounds == [("30K-linear-s0-lr0.004", 1, "1"), ("30K-linear-s1-lr0.002", 2, "2")]
    assert again.cells[0].tags["round"] == "0"
    assert again.cell("30K-linear-s0-lr0.004").run.optimizer.lr == 4e-3  # the grid's own path
    # a hand-edited state whose LR rounds to a tried cell id is refused, not run twice
    added.append(AddedLR("linear", "30K", 3072.0, 1.0004e-3, [0], 1, "edge_low"))
    write_state(study.folder, SearchState(added))
    with pytest.raises(ConfigError, match="duplicate cell 30K-linear-s0-lr0.001 .*lr_search.json"):
        load_study_spec(path, check_environment=False)


def test_the_report_names_the_arms_max_rounds_left_at_an_edge(tmp_path):
    from analysis.api import run_analysis
    from analysis.judgement import table_judgement
    from scaling.study_judgement import _search_summary

    grid = {"linear": [1e-5, 2e-5], "nonlinear": [1e-3, 2e-3, 4e-3]}
    spec = _spec(tmp_path, {"max_rounds": 2, "scan_seeds": 1}, grid)
    world = Synthetic({"linear": 1e-2, "nonlinear": 2e-3})
    state, _ = _search(spec, world)
    verdict = run_analysis(
        world.table(),
        table_judgement("linear", num_resamples=20, lr_search=_search_summary(state)),
        tmp_path / "report",
    )
    assert verdict["lr_search"]["open_arms"] == state.open_arms
    report = (tmp_path / "report" / "report.md").read_text()
    assert "LR search: 3 round(s) after the starting grid added 12 cell(s)" in report
    assert f"Left at an edge when max_rounds stopped the search: {state.open_arms[0]}" in report
    # and the LR table flags the same arm: its best is the top LR every seed ran
    linear = next(r for r in verdict["lr_selection"] if r["variant"] == "linear")
    assert linear["state"] == "edge_high" and linear["best_lr"] == pytest.approx(8e-5)
