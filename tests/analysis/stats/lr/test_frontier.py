"""``analysis.lr_frontier``: the LR contract scaling's refinement builds on (docs/interfaces.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.judgement import table_judgement
from analysis.tables.runs import normalise

LRS = (1e-3, 2e-3, 4e-3, 8e-3)


def _table(loss_of_lr, status_of=lambda lr, seed: "completed", lrs=LRS, seeds=3, select=False):
    rows = []
    for lr in lrs:
        for seed in range(seeds):
            status = status_of(lr, seed)
            loss = loss_of_lr(lr) + 0.001 * seed if status == "completed" else np.nan
            row = {"variant": "linear", "size": "10M", "num_nonembedding_params": 1e7,
                   "tokens": 2e8, "seed": seed, "lr": lr, "final_val_loss": loss,
                   "status": status}  # fmt: skip
            if select:
                row["select_val_loss"] = 3.0 + abs(np.log(lr / 1e-3))  # best at 1e-3
            rows.append(row)
    return normalise(pd.DataFrame(rows), "test")


def _one(table, **kw):
    (f,) = analysis.lr_frontier(table, **kw)
    return f


def bowl(best):
    return lambda lr: 3.0 + 0.1 * np.log(lr / best) ** 2


def test_interior_and_edges_name_the_lr_one_grid_step_beyond():
    f = _one(_table(bowl(2.5e-3)))
    assert (f.state, f.best_lr, f.next_lrs) == ("interior", 2e-3, [])
    assert f.lrs == list(LRS) and f.usable_lrs == list(LRS)
    f = _one(_table(bowl(1e-4)))
    assert (f.state, f.best_lr) == ("edge_low", 1e-3)
    assert f.next_lrs == [pytest.approx(5e-4)]
    f = _one(_table(bowl(1e-1)))
    assert (f.state, f.best_lr) == ("edge_high", 8e-3)
    assert f.next_lrs == [pytest.approx(1.6e-2)]
    assert _one(_table(bowl(1e-1)), step_factor=3.0).next_lrs == [pytest.approx(2.4e-2)]


def test_a_diverged_seed_makes_the_lr_unusable_and_brackets_from_above():
    """4e-3 looks best on its surviving seed, but one seed diverged there: never chosen."""
    table = _table(bowl(4e-3), lambda lr, s: "diverged" if lr >= 4e-3 and s > 0 else "completed")
    f = _one(table)
    assert f.usable_lrs == [1e-3, 2e-3] and f.diverged_lrs == [4e-3, 8e-3]
    assert (f.state, f.best_lr, f.next_lrs) == ("bracketed_by_divergence", 2e-3, [])


def test_a_failed_neighbour_brackets_nothing_and_is_named_to_rerun():
    table = _table(bowl(2.5e-3), lambda lr, s: "failed" if lr == 4e-3 and s == 1 else "completed")
    f = _one(table)
    assert (f.state, f.best_lr, f.next_lrs) == ("edge_high", 2e-3, [4e-3])


def test_no_usable_lr_and_a_single_lr():
    f = _one(_table(bowl(2e-3), lambda lr, s: "diverged" if s == 0 else "completed"))
    assert (f.state, f.best_lr, f.usable_lrs) == ("no_usable_lr", None, [])
    assert f.next_lrs == [pytest.approx(5e-4)]
    f = _one(_table(bowl(2e-3), lrs=(2e-3,)))
    assert (f.state, f.best_lr) == ("edge_low", 2e-3)  # one LR is at both edges
    assert f.next_lrs == [pytest.approx(1e-3), pytest.approx(4e-3)]


def test_a_missing_seed_makes_the_lr_unusable():
    table = _table(bowl(2.5e-3))
    table = table[~((table["lr"] == 2e-3) & (table["seed"] == 2))]
    f = _one(table)
    assert 2e-3 not in f.usable_lrs and f.best_lr in (1e-3, 4e-3)


def test_the_selection_loss_chooses_when_every_run_has_one():
    f = _one(_table(bowl(4e-3), select=True))
    assert f.best_lr == 1e-3 and f.state == "edge_low"
    from analysis.stats.analyze import analyse

    assert (
        analyse(
            _table(bowl(4e-3), select=True), table_judgement("linear", num_resamples=0)
        ).verdict["lr_chosen_on"]
        == "select_val_loss"
    )
