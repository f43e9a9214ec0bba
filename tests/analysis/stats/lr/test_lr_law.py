"""``analysis.stats.lr.lr_law``: LR transfer by a law each arm fits itself, on synthetic LR curves
whose true optimum follows a power law in N with scatter (known truth), and one whose law breaks
at the top size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.stats.lr import lr_law

SIZES = (25e6, 50e6, 85e6, 350e6, 680e6)  # the shipped ladder's nominal N
STEP = 2.0
CURVE = 0.05  # loss added at the optimum x m: CURVE ln(m)^2 (0.024 at one grid step)


def porian(n):
    return 0.0047 * (n / 108e6) ** (-1 / 3)


def true_optima(rng, scatter=0.15, break_at_top=1.0):
    """An arm's true best LR per size: 1.3x Porian's law with log-normal scatter."""
    opt = [1.3 * porian(n) * math.exp(rng.normal(0, scatter)) for n in SIZES]
    opt[-1] *= break_at_top
    return opt


def walk_arm(rng, optima, run_sd=0.002, min_sizes=3, max_rounds=3):
    """One arm up the ladder as the LR search runs it: law LRs or the full grid, then edges.

    Returns (chosen LR per size, LRs run per size, the last plan)."""
    done, chosen, num_runs = [], [], []
    for n, opt in zip(SIZES, optima, strict=True):
        plan = lr_law.plan_arm("arm", done, n, porian(n), STEP, min_sizes=min_sizes)
        lrs = plan.lrs or [porian(n) * m for m in (0.5, 1.0, 2.0)]
        loss = {lr: 3.0 + CURVE * math.log(lr / opt) ** 2 + rng.normal(0, run_sd) for lr in lrs}
        for _ in range(max_rounds):
            if plan.lrs is not None:  # on the law: an edge is extended only when the law breaks
                if lr_law.plan_arm("arm", [*done, (n, loss)], n, porian(n), STEP).broken is None:
                    break
            ordered = sorted(loss)
            best = min(loss, key=loss.get)
            if ordered[0] < best < ordered[-1]:
                break
            new = best / STEP if best == ordered[0] else best * STEP
            loss[new] = 3.0 + CURVE * math.log(new / opt) ** 2 + rng.normal(0, run_sd)
        done.append((n, loss))
        chosen.append(min(loss, key=loss.get))
        num_runs.append(len(loss))
    return chosen, num_runs, lr_law.plan_arm("arm", done, 1e9, porian(1e9), STEP)


def within_one_step(chosen, optima):
    return [
        abs(math.log(c / o)) <= math.log(STEP) + 1e-9 for c, o in zip(chosen, optima, strict=True)
    ]


def test_the_law_recovers_slope_and_its_interval_covers_the_next_optimum():
    rng = np.random.default_rng(0)
    covered, slopes = 0, []
    for _ in range(100):
        optima = true_optima(rng)
        law = lr_law.fit_lr_law(
            "arm", [(n, o) for n, o in zip(SIZES[:4], optima[:4], strict=True)], STEP
        )
        slopes.append(law.slope)
        lo, hi = law.interval(SIZES[4])
        covered += lo <= optima[4] <= hi
    assert np.median(slopes) == pytest.approx(-1 / 3, abs=0.1)
    assert covered >= 80  # a 90% interval


def test_grid_cells_widen_the_interval_even_on_two_exact_points():
    """Two sizes exactly on a law: the optimum is still only known to its grid cell."""
    law = lr_law.fit_lr_law("arm", [(25e6, 1e-2), (50e6, 1e-2 * 2 ** (-1 / 3))], STEP)
    lo, hi = law.interval(100e6)
    assert hi / lo > 1.5  # without the cell jitter this collapses to a single point
    assert lo < law.predict(100e6) < hi


def test_scan_takes_the_lrs_the_interval_cannot_exclude_and_at_least_two():
    law = lr_law.fit_lr_law("arm", [(n, porian(n)) for n in SIZES[:3]], STEP)
    lrs = lr_law.scan_lrs(law, 350e6, porian(350e6))
    assert 2 <= len(lrs) <= 3
    lo, hi = law.interval(350e6)
    assert all(lo / STEP**0.5 <= lr <= hi * STEP**0.5 for lr in lrs)
    assert any(abs(math.log(lr / porian(350e6))) < 0.01 for lr in lrs)
    assert lr_law.grid_step_lrs(1.0, 2.0, 0.9, 1.1) == [1.0]
    assert lr_law.grid_step_lrs(1.0, 2.0, 0.6, 1.5) == [0.5, 1.0, 2.0]


def test_two_point_optimum_with_the_curvature_finds_the_vertex():
    opt, c = 2.5e-3, 0.05
    loss = {lr: 3 + c * math.log(lr / opt) ** 2 for lr in (1e-3, 2e-3, 4e-3)}
    assert lr_law.curvature(loss) == pytest.approx(c)
    assert lr_law.two_point_optimum(1e-3, loss[1e-3], 2e-3, loss[2e-3], c) == pytest.approx(opt)
    assert lr_law.curvature({1e-3: 1.0, 2e-3: 2.0, 4e-3: 3.0}) is None  # winner at an edge


def test_synthetic_ladder_saves_scans_and_tunes_within_one_step():
    """100 arms, law with scatter, run noise: the top two sizes scan fewer LRs than the full
    grid's three (+ edges), and nearly every chosen LR is within one grid step of the truth."""
    rng = np.random.default_rng(1)
    ok, full_runs, law_runs, broken = 0, 0, 0, 0
    for _ in range(100):
        optima = true_optima(rng)
        chosen, num_runs, plan = walk_arm(rng, optima)
        ok += all(within_one_step(chosen, optima))
        full_runs += sum(num_runs[:3])
        law_runs += sum(num_runs[3:])
        broken += plan.broken is not None
    assert ok >= 95
    print(f"LRs per size: full grid {full_runs / 300:.2f}, on the law {law_runs / 200:.2f}")
    assert full_runs / 300 >= 3
    assert law_runs / 200 < 2.75  # a 90% interval from 3-4 sizes often reaches 3 cells
    assert broken <= 15  # a falsely broken law costs only the scan it would have saved


def test_a_law_that_breaks_at_the_top_size_falls_back_instead_of_mis_tuning():
    """The top size's optimum jumps 8x off the law: declared broken, the edge is extended and
    the chosen LR is still within one grid step of the truth."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        optima = true_optima(rng, scatter=0.05, break_at_top=8.0)
        chosen, num_runs, plan = walk_arm(rng, optima)
        assert plan.broken is not None and "680M" not in plan.broken
        assert "N=6.8e+08" in plan.broken and "law broken" in plan.broken
        assert within_one_step(chosen, optima)[-1], (chosen[-1], optima[-1])
        assert num_runs[-1] >= 3


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match=">= 2 sizes"):
        lr_law.fit_lr_law("arm", [(1e7, 1e-3)], STEP)
    with pytest.raises(ValueError, match="step must be > 1"):
        lr_law.fit_lr_law("arm", [(1e7, 1e-3), (2e7, 1e-3)], 1.0)
    with pytest.raises(ValueError, match="min_sizes"):
        lr_law.plan_arm("arm", [], 1e8, 1e-3, STEP, min_sizes=1)


def test_a_lone_lr_gets_its_nearer_neighbour():
    """A law known exactly (resolution 0, no scatter) reaches one cell; one LR shows no slope."""
    points = [(n, porian(n)) for n in SIZES[:3]]
    law = lr_law.fit_lr_law("arm", points, STEP, resolution=0.0)
    lo, hi = law.interval(350e6)
    assert len(lr_law.grid_step_lrs(porian(350e6) * 1.2, STEP, lo, hi)) == 1
    lrs = lr_law.scan_lrs(law, 350e6, porian(350e6) * 1.2)  # prediction below the grid LR
    assert lrs == pytest.approx([porian(350e6) * 0.6, porian(350e6) * 1.2])


def test_the_law_s_own_scatter_widens_the_interval():
    """Optima scattered well beyond their resolution: the residual scatter must enter."""
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(100):
        optima = [porian(n) * math.exp(rng.normal(0, 0.4)) for n in (*SIZES, 1.4e9)]
        law = lr_law.fit_lr_law(
            "arm", list(zip(SIZES, optima[:5], strict=True)), STEP, resolution=0.25
        )
        lo, hi = law.interval(1.4e9)
        covered += lo <= optima[5] <= hi
    assert covered >= 75  # a 90% interval; a scatter of 3 df is itself uncertain


def test_a_size_left_with_one_usable_lr_breaks_the_law_instead_of_raising():
    done = [(n, {porian(n) * m: 3 + CURVE * math.log(m / 1.2) ** 2 for m in (0.5, 1, 2)})
            for n in SIZES[:3]]  # fmt: skip
    done.append((SIZES[3], {porian(SIZES[3]): 3.0}))  # its other law LR diverged
    plan = lr_law.plan_arm("arm", done, SIZES[4], porian(SIZES[4]), STEP)
    assert plan.lrs is None and "under 2 usable LRs" in plan.broken


def test_a_diverged_lr_above_the_winner_bounds_the_optimum_it_is_not_a_gap():
    """Winner 2e-3, 4e-3 diverged, the truth 3.5e-3; the arm's curvature from its other sizes
    is half the true one on this side (curves are not parabolas): the two usable LRs alone
    extrapolate past 4e-3, an LR the arm cannot train at. Censored there, the optimum stays in
    [2e-3, 4e-3), and a law fitted through that size sits below the gap reading's."""
    c, opt, ceiling = 0.05, 3.5e-3, 4e-3
    loss = {lr: 3 + c * math.log(lr / opt) ** 2 for lr in (1e-3, 2e-3)}
    assert lr_law.estimate_optimum(loss, c / 2) > ceiling  # the diverged LR as a gap
    censored = lr_law.estimate_optimum(loss, c / 2, ceiling)
    assert 2e-3 <= censored < ceiling
    assert lr_law.estimate_optimum(loss, c, ceiling) == pytest.approx(opt)  # below: kept
    points = [(n, porian(n)) for n in SIZES[:2]] + [(SIZES[2], 3 * porian(SIZES[2]))]
    gap = lr_law.fit_lr_law("arm", points, STEP)
    bounded = lr_law.fit_lr_law("arm", points, STEP, ceilings=[None, None, porian(SIZES[2])])
    assert bounded.interval(SIZES[3])[1] < gap.interval(SIZES[3])[1]
    # plan_arm reads the censoring as a finished size's third item
    done = [(n, {porian(n) * m: 3 + CURVE * math.log(m) ** 2 for m in (0.5, 1, 2)})
            for n in SIZES[:3]]  # fmt: skip
    top = {porian(SIZES[3]) * m: 3 + CURVE * math.log(m / 8) ** 2 for m in (0.5, 1)}
    gap_plan = lr_law.plan_arm("arm", [*done, (SIZES[3], top)], SIZES[4], porian(SIZES[4]), STEP)
    capped = [*done, (SIZES[3], top, porian(SIZES[3]) * 2)]
    plan = lr_law.plan_arm("arm", capped, SIZES[4], porian(SIZES[4]), STEP)
    assert plan.checks[-1].optimum < porian(SIZES[3]) * 2 < gap_plan.checks[-1].optimum
