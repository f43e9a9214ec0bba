"""The options' prices and predictions (``analysis.stats.resolve.options``) on instant synthetic
cells (``analysis.synthetic.closed_loop``): the plan's levels add up to alpha, each option names
its edit and cost, the predicted P(resolve) is calibrated against what the next look read, and a
truth that only the LR grid's resolution hides buys the finer grid, not seeds.

Calibration: ``CAL_STUDIES`` closed-loop studies (true gains uniform in +-1.5% of the loss, the
model's noise), every purchase's predicted P(resolve) beside whether the look after it resolved,
in five bins of the prediction. A bin of ``n`` purchases passes when its realised rate lies
within ``2.58 sqrt(p (1 - p) / n) + 0.05`` of its mean prediction ``p`` (99% binomial, plus
0.05 for the predictive's own approximations); bins under 20 purchases are not judged.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from analysis.stats.resolve.evidence import read_table
from analysis.stats.resolve.loop import Plan
from analysis.stats.resolve.options import price
from analysis.synthetic.closed_loop import (
    BASELINE,
    Truth,
    closed_loop,
    flops_hours,
    outcome,
    rows_of,
    start_cells,
)
from tests.analysis.pool import map_studies

CAL_STUDIES = 150
GRID_STUDIES = 20
BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0 + 1e-9)
PLAN = Plan(budget=150.0, max_looks=4)
# only the grid's resolution hides the gain: an LR curve 15x the default's, scanned at 2x steps
# that miss each arm's optimum by up to half a step, and quiet seeds (paired sd ~0.08%)
GRID_TRUTH = dict(run_sd=0.002, lr_penalty=0.3, grid_miss=1.0)


def test_the_looks_levels_spend_alpha_and_nothing_more() -> None:
    levels = Plan(budget=1.0, max_looks=4).levels()
    assert math.isclose(sum(levels), 0.05, rel_tol=1e-12)
    assert all(a < b for a, b in zip(levels, levels[1:], strict=False))  # O'Brien-Fleming shape
    assert Plan(budget=1.0, max_looks=4, spend=False).levels() == [0.05] * 5
    with pytest.raises(ValueError, match="positive budget"):
        Plan(budget=0.0)


def test_each_option_names_its_edit_its_cells_and_their_cost() -> None:
    truth = Truth(gain_pct=0.4, study_seed=3)
    table = rows_of(truth, start_cells())
    ev = read_table(table, BASELINE, 0.02, 0.5)["nonlinear"]
    options = price(ev, 0.02, flops_hours)  # priced at the level it was read at
    kinds = {o.kind for o in options}
    assert {"seeds", "lr_grid", "size"} <= kinds and "tokens" not in kinds  # no tokens axis
    for o in options:
        assert o.cost == pytest.approx(
            sum(flops_hours(c["variant"], c["n_params"], c["tokens"]) for c in o.cells)
        )
        assert 0.0 <= o.p_resolve <= 1.0 and o.edit
    assert [o.per_hour for o in options] == sorted((o.per_hour for o in options), reverse=True)
    by_kind = {o.kind: o for o in options}
    assert by_kind["size"].edit.startswith("sizes: add")
    assert by_kind["lr_grid"].half_width_pct <= ev.half_width_pct + 1e-12
    seeds = [o for o in options if o.kind == "seeds"]
    assert all(o.edit.startswith("seeds: add ") for o in seeds)  # a fixed list: no seeds.max


def _calibration_study(i: int) -> list[tuple[float, bool]]:
    gain = float(np.random.default_rng([i, 99]).uniform(-1.5, 1.5))
    path, start = closed_loop(Truth(gain_pct=gain, study_seed=5000 + i), PLAN, margin_pct=0.5)
    return outcome(path, start)["predicted"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_predicted_chance_to_resolve_is_what_the_next_look_reads() -> None:
    pairs = [p for study in map_studies(_calibration_study, range(CAL_STUDIES)) for p in study]
    pred = np.array([p for p, _ in pairs])
    real = np.array([r for _, r in pairs], float)
    rows, judged = [], 0
    for lo, hi in zip(BINS, BINS[1:], strict=False):
        inside = (pred >= lo) & (pred < hi)
        n = int(inside.sum())
        if n == 0:
            continue
        p, r = float(pred[inside].mean()), float(real[inside].mean())
        rows.append(f"{lo:.1f}-{min(hi, 1):.1f}: n {n}, predicted {p:.3f}, realised {r:.3f}")
        if n >= 20:
            judged += 1
            assert abs(r - p) <= 2.58 * math.sqrt(p * (1 - p) / n) + 0.05, "\n".join(rows)
    print("\n".join(rows))
    assert judged >= 3, "\n".join(rows)


def _grid_study(i: int) -> dict:
    truth = Truth(gain_pct=0.6, study_seed=7000 + i, **GRID_TRUTH)
    path, start = closed_loop(truth, Plan(budget=150.0, max_looks=4, start_seeds=4), 0.5)
    return outcome(path, start)


def test_a_gain_only_the_lr_grid_hides_buys_the_finer_grid() -> None:
    # the finer grid is priced for what it does: the grid's term, which dominates here, falls
    for i in range(5):
        table = rows_of(Truth(0.6, 7000 + i, **GRID_TRUTH), start_cells(start_seeds=4))
        ev = read_table(table, BASELINE, 0.02, 0.5)["nonlinear"]
        finer = next(o for o in price(ev, 0.02, flops_hours) if o.kind == "lr_grid")
        assert ev.grid_var > 4 * ev.seeds_se**2
        assert finer.half_width_pct < 0.6 * ev.half_width_pct
    results = list(map_studies(_grid_study, range(GRID_STUDIES)))
    bought = [r["first_kind"] for r in results if r["first_kind"] is not None]
    grid = sum(k == "lr_grid" for k in bought)
    resolved = sum(r["resolved"] for r in results)
    print(f"first purchase the finer grid in {grid}/{len(bought)}; resolved {resolved}")
    assert len(bought) >= GRID_STUDIES // 2
    assert grid >= 0.9 * len(bought)


def test_longer_training_brackets_each_arms_lr_at_the_new_budget() -> None:
    """Each arm's runs to 2x the top budget at its best LR's grid multiples, on its seeds: one
    LR there would leave the verdict's LR guard holding at the new budget (its frontier is per
    budget), so the longer runs could not resolve it."""
    table = rows_of(Truth(gain_pct=0.4, study_seed=3), start_cells())
    ev = read_table(table, BASELINE, 0.02, 0.5)["nonlinear"]
    assert [o for o in price(ev, 0.02, flops_hours) if o.kind == "tokens"] == []  # no axis
    ev = dataclasses.replace(ev, has_tokens_axis=True)
    (option,) = [o for o in price(ev, 0.02, flops_hours) if o.kind == "tokens"]
    assert {c["budget"] for c in option.cells} == {2.0 * ev.tokens}
    assert {c["size"] for c in option.cells} == {ev.size}
    for arm in (BASELINE, "nonlinear"):
        mine = [c for c in option.cells if c["variant"] == arm]
        lrs = sorted({c["lr"] for c in mine})
        assert lrs == pytest.approx(sorted(ev.best_lrs[arm] * m for m in ev.grid_multiples[arm]))
        assert len(lrs) >= 3 and len(mine) == len(lrs) * ev.num_seeds
