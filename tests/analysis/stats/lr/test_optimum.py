"""``analysis.stats.lr.optimum``: each arm at its LR optimum, not at its best grid LR.

The study-level test is the one the method exists for: identical arms whose LR grids miss their
optima by different fractions of a step. At each arm's best grid LR the grid alone moves the
gain; at the parabola's minimum it does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats import core
from analysis.stats.core import analyse
from analysis.stats.gains.compare import baseline_map, compare
from analysis.stats.gains.robust import GainTest
from analysis.stats.lr.frontier import lr_frontier
from analysis.stats.lr.optimum import Bracket, brackets, shift_draws, vertex_drop
from analysis.stats.variance.cells import build_groups, usable_cells
from analysis.synthetic.scenarios import off_grid_study
from analysis.tables.runs import normalise

CLAIMS = ("persists", "grows", "fades", "helps", "hurts")


def test_the_drop_is_the_parabolas_own_for_any_spacing():
    x = np.log(np.array([1e-3, 2.5e-3, 4e-3]))
    vertex, depth, c = np.log(2.1e-3), 2.9, 0.07
    y = depth + c * (x - vertex) ** 2
    assert vertex_drop(x, y[None])[0] == pytest.approx(y[1] - depth, rel=1e-9)
    # no minimum between the outer points: the grid value stands
    assert vertex_drop(
        x, np.array([[3.0, 2.9, 2.8], [3.0, 3.1, 3.0], [3.0, 3.0, 3.0]])
    ).tolist() == [
        0.0,
        0.0,
        0.0,
    ]


def _rows(lrs_by_seed: dict[int, tuple[float, ...]], loss_of) -> pd.DataFrame:
    rows = []
    for seed, lrs in lrs_by_seed.items():
        for lr in lrs:
            rows.append({"variant": "linear", "size": "10M", "num_nonembedding_params": 1e7,
                         "tokens": 2e8, "seed": seed, "lr": lr, "status": "completed",
                         "final_val_loss": loss_of(lr) + 0.01 * seed})  # fmt: skip
    return normalise(pd.DataFrame(rows), "test")


def test_a_two_stage_search_brackets_on_the_seeds_all_three_lrs_ran():
    """Seed 0 scanned three LRs, seeds 1 and 2 ran the winner only: the parabola is fitted on
    seed 0, and the shift moves every seed of the winner."""
    loss = lambda lr: 3.0 + 0.05 * np.log(lr / 1.5e-3) ** 2  # noqa: E731
    table = _rows({0: (1e-3, 2e-3, 4e-3), 1: (2e-3,), 2: (2e-3,)}, loss)
    (bracket,) = brackets(table, lr_frontier(table)).values()
    assert bracket.num_seeds == 1
    assert bracket.shift == pytest.approx(loss(2e-3) - 3.0, rel=0.05)
    frontiers = lr_frontier(table)
    plain = build_groups(usable_cells(table, frontiers), 0)
    moved = build_groups(usable_cells(table, frontiers), 0, brackets=brackets(table, frontiers))
    assert np.allclose(plain.seed_loss - moved.seed_loss, bracket.shift)
    assert moved.info["lr_shift"].iloc[0] == pytest.approx(bracket.shift)


def test_an_lr_at_the_edge_or_without_a_neighbour_keeps_its_own_loss():
    loss = lambda lr: 3.0 + 0.05 * np.log(lr / 1e-3) ** 2  # noqa: E731
    edge = _rows({s: (1e-3, 2e-3) for s in range(3)}, loss)  # best at the low edge
    assert brackets(edge, lr_frontier(edge)) == {}
    only_winner = _rows({0: (2e-3,), 1: (1e-3, 2e-3, 4e-3)}, lambda lr: loss(lr * 0.5))
    assert list(brackets(only_winner, lr_frontier(only_winner))) == [("linear", "10M", 2e8)]


def test_the_shifts_noise_widens_the_paired_interval():
    """The shift is one number per arm: its bootstrap variance adds to the paired mean's."""
    table = off_grid_study(1.0, rng_seed=3, num_seeds=4)
    frontiers = lr_frontier(table)
    groups = build_groups(
        usable_cells(table, frontiers), 200, 0, brackets=brackets(table, frontiers)
    )
    top = compare(groups, baseline_map(groups, ["linear"]), "nonlinear").curve[-1]
    sd = groups.info["lr_shift_sd"].to_numpy()[[top.base, top.var]]
    assert (sd > 0).all()
    with_shift = GainTest.of(top, groups).se
    groups.info["lr_shift_sd"] = 0.0
    seeds_only = GainTest.of(top, groups).se
    base_loss = groups.seed_loss[top.base][top.seeds].mean()
    added = (100 * np.hypot(*sd) / base_loss) ** 2
    assert with_shift**2 - seeds_only**2 == pytest.approx(added, rel=1e-6)


def test_shift_draws_are_the_data_then_one_per_draw():
    bracket = Bracket((0.0, 0.7, 1.4), (3.02, 3.0, 3.01), 2)
    draws = shift_draws(bracket, 0.005, 500, np.random.default_rng(0))
    assert draws.shape == (501,) and draws[0] == pytest.approx(bracket.shift)
    assert 0 < draws[1:].std() and (draws >= 0).all()
    assert (shift_draws(bracket, 0.0, 3, np.random.default_rng(0)) == bracket.shift).all()


# Twelve fixed studies (6 seeds, curvature 0.15 per ln(LR)^2, so up to 0.018 of loss from the
# grid alone): at the best grid LRs 3 of them claim a gain or a loss on identical arms (grows,
# hurts, hurts; measured by removing the shift, ``brackets`` returning {}); at the LR optima none
# does.
STUDIES = range(12)


def _word(i: int, at_optimum: bool, monkeypatch) -> str:
    if not at_optimum:
        monkeypatch.setattr(core, "lr_brackets", lambda table, frontiers: {})
    (v,) = analyse(
        off_grid_study(1.0, rng_seed=i, lr_penalty=0.15), "linear", num_resamples=200, seed=i
    ).verdict["variants"]
    return v["verdict"]


def test_identical_arms_off_their_lr_grids_claim_nothing_at_their_optima(monkeypatch):
    words = [_word(i, True, monkeypatch) for i in STUDIES]
    assert sum(w in CLAIMS for w in words) == 0, words
    assert words.count("none") >= 9, words


def test_at_the_best_grid_lrs_the_same_studies_would_claim(monkeypatch):
    """The fixture above is one where the grid matters: without the shift it claims."""
    words = [_word(i, False, monkeypatch) for i in (3, 5, 9)]
    assert all(w in CLAIMS for w in words), words
