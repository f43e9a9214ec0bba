"""The pieces the verdict's guarantees rest on, each checked where it acts: the family-wise
procedure, the small-sample inflation of the bootstrap, the LR re-chosen in every draw, the
paired-seed interval at a size noisier than the rest, and the diagnostics that name a misfit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.gains import levels
from analysis.stats.gains.compare import Budget, Comparison
from analysis.stats.gains.robust import PAIRED, GainTest
from analysis.stats.lr.frontier import lr_frontier
from analysis.stats.rules.evidence import Evidence
from analysis.stats.rules.verdict import apply_rule
from analysis.stats.variance import noise
from analysis.stats.variance.cells import build_groups, selected_lrs, usable_cells
from analysis.synthetic.scenarios import NOISES, Noise, noisy_study

SIZES = ["1M", "3M", "10M", "30M"]


def _family(gains: list[float], se: float, gamma: tuple[float, float], rng_seed: int = 0):
    """A comparison over ``SIZES`` whose per-size gains have the given centres and standard
    error (both tests agree), and gamma draws centred at ``gamma[0]`` with sd ``gamma[1]``."""
    rng = np.random.default_rng(rng_seed)
    budgets, tests = [], []
    for size, g in zip(SIZES, gains, strict=True):
        draws = np.concatenate([[g], rng.normal(g, se, 20_000)])  # [B+1]
        seeds = np.ones(3, dtype=bool)
        budgets.append(Budget(size, 1e8, 0, 1, "linear", seeds, draws, draws, draws, draws))
        tests.append(GainTest(g, draws[1:], g, se / 10, 2))  # the bootstrap decides
    gamma_draws = np.concatenate([[gamma[0]], rng.normal(*gamma, 20_000)])
    k0 = np.concatenate([[1.0], rng.normal(1.0, 0.01, 20_000)])
    return Comparison("nonlinear", budgets, budgets), tests, gamma_draws, k0


def test_weighted_holm_gives_the_top_size_80_percent_and_passes_weight_on():
    weights = levels.size_weights(5)
    assert weights[-1] == pytest.approx(0.8) and sum(weights) == pytest.approx(1.0)
    # a small size at p 0.03 is significant unadjusted, not in the family (level 0.0025)
    rejected, tested = levels.weighted_holm([0.03, 0.5, 0.5, 0.5, 0.5], weights, 0.05)
    assert rejected == [False] * 5 and tested[0] == pytest.approx(0.0025)
    assert tested[-1] == pytest.approx(0.04)
    # the top rejected first passes its weight on: the others are then tested at 0.0125
    rejected, tested = levels.weighted_holm([0.011, 0.5, 0.5, 0.5, 0.001], weights, 0.05)
    assert rejected == [True, False, False, False, True]
    assert tested[0] == pytest.approx(0.0125) and tested[-1] == pytest.approx(0.04)
    assert levels.global_p([0.011, 0.5, 0.5, 0.5, 0.001], weights) == pytest.approx(0.00125)


def test_fades_needs_a_size_significant_in_the_family_not_a_chance_one():
    """A smaller size significant at 5% unadjusted, a negative gamma, no gain at the top: the
    unadjusted rule said `fades`; in the family that size is tested at 1.67% (0.2/3 x 5% ...
    after nothing else is rejected: 0.25%), so no claim is made."""
    comp, tests, gamma, k0 = _family([0.5, 0.0, 0.0, 0.0], 0.21, (-0.2, 0.03))
    assert 0.01 < tests[0].p() < 0.05  # significant alone
    out = apply_rule(Evidence(comp, tuple(tests), gamma, k0), 0.05, table_judgement(margin_pct=0.5))
    assert out["verdict"] in ("none", "undetected"), out["reason"]  # no claim
    assert not any(s["rejected"] for s in out["sizes"])
    # the same size clearly significant: fades, naming it
    comp, tests, gamma, k0 = _family([1.5, 0.0, 0.0, 0.0], 0.21, (-0.2, 0.03))
    out = apply_rule(Evidence(comp, tuple(tests), gamma, k0), 0.05, table_judgement(margin_pct=0.5))
    assert out["verdict"] == "fades" and "gain@1M" in out["reason"]
    assert out["sizes"][0]["rejected"] and out["sizes"][0]["p"] <= out["sizes"][0]["level"]


def test_grows_needs_the_top_size_rejected_at_its_family_level():
    """The top gain at p between 4% and 5% with gamma > 0: unadjusted that was `grows`."""
    comp, tests, gamma, k0 = _family([0.0, 0.0, 0.0, 0.421], 0.21, (0.2, 0.03))
    p_top = tests[-1].p()
    assert levels.TOP_ALPHA < p_top < levels.ALPHA
    out = apply_rule(Evidence(comp, tuple(tests), gamma, k0), 0.05, table_judgement(margin_pct=0.5))
    assert out["verdict"] == "undetected" and not out["top_gain_pct"]["rejected"]
    assert out["top_gain_pct"]["level"] == pytest.approx(levels.TOP_ALPHA)


def test_bootstrap_draws_carry_the_small_sample_inflation():
    """Each component's draws have sd = t/z inflation x its fitted sd (3 seeds: 2 df for the
    shared part gives a factor 2.2); without it the intervals are too short."""
    model = noise.NoiseModel(["a", "b"], np.array([0.004, 0.004]), np.array([0.006, 0.006]),
                          4.0, 2.0, noise._inflate(4.0), noise._inflate(2.0))  # fmt: skip
    assert model.inflate_seed == pytest.approx(stats.t.ppf(0.975, 2) / stats.norm.ppf(0.975))
    rng = np.random.default_rng(0)
    present = np.ones((2, 3), dtype=bool)
    draws = noise.simulate(np.zeros(2), present, np.array([0, 1]), model, 20_000, rng)
    shared = draws.mean(axis=1)  # [B, seeds]: the run parts average out of two cells... and
    diff = draws[:, 0] - draws[:, 1]  # different sizes: independent; sd of one cell's draws
    sd_cell = draws[:, 0].std()
    want = np.hypot(model.inflate_seed * 0.006, model.inflate_run * 0.004)
    assert sd_cell == pytest.approx(want, rel=0.03), (sd_cell, want)
    assert diff.std() == pytest.approx(np.sqrt(2) * want, rel=0.03)
    assert shared.shape == (20_000, 3)


def test_a_flat_lr_is_chosen_again_in_every_draw():
    """LR penalty 0.0005 ln(m)^2 (0.00024 at 2x, well inside the noise): the best LR differs
    from the data's in a large share of draws; with the LR fixed across draws it never would."""
    table = noisy_study(1.0, Noise(), rng_seed=3, lr_penalty=0.0005)
    frontiers = lr_frontier(table)
    groups = build_groups(usable_cells(table, frontiers), 400, 0, selected_lrs(table, frontiers))
    changed = (groups.best_lr[1:] != groups.best_lr[0]).mean(axis=0)  # [groups]
    assert changed.min() > 0.1 and changed.mean() > 0.3, changed
    # and each draw's loss is read at that draw's LR: below the data's LR cell where it changed
    at_data_lr = np.nanmean(groups.draws, axis=2)[:, groups.chosen[0]]  # [B+1, groups]
    lower = (groups.loss[1:] < at_data_lr[1:]).mean(axis=0)  # [groups]
    assert np.array_equal(lower, changed) and (groups.loss <= at_data_lr).all(), (lower, changed)
    # the steep default penalty: the LR choice is settled, as the issue found
    steep = noisy_study(1.0, Noise(), rng_seed=3)
    frontiers = lr_frontier(steep)
    groups = build_groups(usable_cells(steep, frontiers), 400, 0, selected_lrs(steep, frontiers))
    assert (groups.best_lr[1:] != groups.best_lr[0]).mean() < 0.05


def test_a_size_three_times_noisier_is_judged_on_its_own_seeds_and_named():
    """3x run noise at the top size: the pooled model (c N^slope over all sizes) understates
    it; the paired-seed interval decides there, and the diagnostics name the size."""
    table = noisy_study(1.0, NOISES["top_size_3x"], rng_seed=4, num_seeds=8)
    verdict = analyse(table, table_judgement("linear", num_resamples=300, seed=1)).verdict
    (v,) = verdict["variants"]
    top = list(v["gain_pct_by_size"].values())[-1]["gain_pct"]
    assert top["decided_by"] == PAIRED
    assert any("100M does not fit c*N^slope" in d for d in verdict["noise_diagnostics"])
    ratio = float(verdict["noise_diagnostics"][0].split("variance is ")[1].split("x")[0])
    assert ratio > 2.0  # 9x the variance in truth, on 35 df


def test_lr_cells_that_move_together_are_named_and_the_model_noise_is_not():
    together = noisy_study(1.0, NOISES["arm_seed_across_lrs"], rng_seed=5, num_seeds=8)
    found = analyse(together, table_judgement("linear", num_resamples=50)).verdict[
        "noise_diagnostics"
    ]
    assert any("LR cells move together within a seed" in d for d in found), found
    p = float(found[-1].split(", p ")[1].split(")")[0])
    assert p < 0.01
    clean = analyse(
        noisy_study(1.0, Noise(), rng_seed=5, num_seeds=8),
        table_judgement("linear", num_resamples=50),
    )
    assert clean.verdict["noise_diagnostics"] == []


def test_the_multiple_comparisons_sentence_states_the_level_the_verdict_used():
    """A word the numbers contradict is a bug: at alpha 1% the sentence says 1%, not 5%."""
    table = noisy_study(1.0, Noise(), rng_seed=5)
    for alpha, said in ((0.05, "family-wise 5%: "), (0.01, "family-wise 1%: ")):
        verdict = analyse(
            table, table_judgement("linear", num_resamples=100, seed=0, alpha=alpha)
        ).verdict
        assert verdict["multiple_comparisons"].startswith(said), verdict["multiple_comparisons"]
        assert verdict["variants"][0]["decision"]["level"] <= alpha
