"""The LR grid's resolution as a noise term (analysis.stats.gains.resolution).

The statistical test: identical arms whose LR grids miss their optima by a uniform fraction of
a step (``off_grid_study``: up to ``curve`` ln(2)^2 / 4 of the loss from the grid alone, 6
seeds, curvature 0.15), so that a study's seeds detect the grid's error as a gain. Without the
term the verdict claimed in 83/200 such studies under the model's own noise (benchmarks/
bench_lr_grid.py); with it the claims must stay under the binomial bound of a 5% method, under
the model's noise and on curves 4x steeper above the optimum (a shape the term does not
assume). Then a real gain of 1.8% is still found (the term must not buy its calibration with all
the power).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.gains.resolution import (
    _location_var_pct,
    _reach,
    curvature,
    pair_var,
    penalty_moments,
    t_p,
    tuning_variances,
)
from analysis.stats.lr.frontier import lr_frontier
from analysis.synthetic.scenarios import NOISES, Noise, off_grid_study
from tests.analysis.bounds import RateTest, max_count, replay_until_decided, studies_to_catch

NUM_DRAWS = 100
# claims at 5% against 12.5%, at most 180 studies (a 5% rate fails with probability 0.99%, 12.5%
# passes with 9.9%; the fixed 100 studies this replaced passed 12.5% with 28%)
CLAIM_TEST = RateTest(0.05, 2.5, batch=20, max_n=studies_to_catch(0.05, 2.5))
# a real gain missed at 20% against 40%, at most 100 studies (0.64% and 4.8%)
MISS_TEST = RateTest(0.20, 2.0, batch=20, max_n=100)
CURVE = 0.15
LADDER_CURVE = 0.05  # benchmarks/bench_ladder_cost.py's curves, nats per ln(LR)^2
CLAIMS = ("persists", "grows", "fades", "helps", "hurts")


@pytest.mark.parametrize("below,above", [(math.log(2), math.log(2)), (0.3, 0.9), (0.5, None)])
def test_without_run_noise_the_optimum_lies_uniformly_between_the_midpoints(below, above):
    c = 0.04
    hi = below if above is None else above  # a missing side mirrors the other
    u = np.random.default_rng(0).uniform(-below / 2, hi / 2, 400_000)
    sides = [(below, 0.0, 1, ()), None if above is None else (above, 0.0, 1, ())]
    mean, var = _location_var_pct(0.15, c, sides, sd_run=None)
    assert var == pytest.approx(np.var(100 * c * u**2), rel=0.02)
    assert (mean, var) == pytest.approx(penalty_moments(c, below / 2, hi / 2), rel=0.02)
    assert mean == pytest.approx(np.mean(100 * c * u**2), rel=0.02)
    assert _location_var_pct(0.15, c, [None, None], None) == (0.0, 0.0)
    # seeds that agree exactly: the grid's term alone decides, as a normal test
    assert t_p(0.3, 0.0, 2, 0.01) == pytest.approx(2 * stats.norm.sf(3.0), rel=1e-3)
    assert t_p(0.0, 0.0, 2, 0.01) == 1.0


def test_a_pick_the_noise_cannot_confirm_widens_where_the_optimum_may_lie():
    """A neighbour seen far worse than the best LR (a steep side, or clear data) leaves the
    midpoint; one seen about as good, within the run noise, lets the optimum reach towards it,
    further with more noise, and past it by at most one more step, as far as the LRs tried
    beyond it allow (never less far than the neighbour alone allows)."""
    h, c, loss = math.log(2), 0.15, 3.0
    clear = [(h, 0.2, 1, ()), (h, 0.2, 1, ())]
    assert _location_var_pct(c, c / loss, clear, sd_run=0.002) == pytest.approx(
        _location_var_pct(c, c / loss, clear, sd_run=None)
    )
    assert _reach(h, c, 0.2, 1, 0.002) == h / 2
    tie = [(h, 0.2, 1, ()), (h, 0.0, 1, ())]  # the upper neighbour seen as good as the best
    assert h / 2 < _reach(h, c, 0.0, 1, 0.01) < _reach(h, c, 0.0, 1, 0.02) <= h
    assert _reach(h, c, 0.0, 1, 1.0) == 2 * h  # one step past the neighbour, no further
    past = _reach(h, c, 0.0, 1, 0.05)
    assert h < past < 2 * h
    # an LR tried a step beyond the neighbour bounds the reach past it: seen as good as the best
    # (the curve would have it better), less far; seen far worse, no further than the neighbour
    assert h < _reach(h, c, 0.0, 1, 0.05, ((2 * h, 0.0, 1),)) < past
    assert _reach(h, c, 0.0, 1, 0.05, ((2 * h, 0.5, 1),)) == h
    assert _reach(h, c, 0.0, 4, 0.01) < _reach(h, c, 0.0, 1, 0.01)  # more common seeds
    (m0, v0), (m1, v1) = (_location_var_pct(c, c / loss, tie, sd) for sd in (0.002, 0.02))
    assert m1 > m0 and v1 > v0
    # a gain's term: both variances and the squared difference of the means
    tuning = {("a", "1", 1.0): (0.3, 0.01), ("b", "1", 1.0): (0.1, 0.02)}
    assert pair_var(tuning, ("a", "1", 1.0), ("b", "1", 1.0)) == pytest.approx(0.07)
    assert pair_var(tuning, ("a", "1", 1.0), ("c", "1", 1.0)) == pytest.approx(0.01 + 0.09)


def _one_seed_picks(num: int, sd: float, rng, df: float | None) -> list[tuple[float, list]]:
    """An LR search's picks on one scan seed, as the ladder's sizes past the law make them:
    three 2x-grid LRs around a guess up to a few steps off, the edge extended until the best
    seen is interior, the loss ``LADDER_CURVE u^2`` plus run noise (normal, or Student t on
    ``df`` df scaled to sd ``sd``: heavier tails than the term assumes). Each pick: (where the
    optimum truly lies from the best LR in ln LR, ``_location_var_pct``'s sides as seen)."""
    h = math.log(2)
    scale = sd if df is None else sd / math.sqrt(df / (df - 2))

    def seen(k: int, optimum: float) -> float:
        draw = rng.normal() if df is None else rng.standard_t(df)
        return LADDER_CURVE * (k * h - optimum) ** 2 + scale * draw

    out = []
    for _ in range(num):
        optimum = rng.uniform(-h / 2, h / 2)
        guess = int(round(rng.normal(0, 0.7)))
        tried = {k: seen(k, optimum) for k in (guess - 1, guess, guess + 1)}
        while (best := min(tried, key=tried.get)) in (min(tried), max(tried)):
            edge = best - 1 if best == min(tried) else best + 1
            tried[edge] = seen(edge, optimum)
        sides = []
        for others in (sorted((k for k in tried if k < best), reverse=True),
                       sorted(k for k in tried if k > best)):  # fmt: skip
            rises = [(abs(k - best) * h, tried[k] - tried[best], 1) for k in others]
            sides.append((*rises[0], tuple(rises[1:])))
        out.append((optimum - best * h, sides))
    return out


@pytest.mark.parametrize("df,most", [(None, 0.015), (3.0, 0.025)])
def test_the_reach_covers_where_a_one_seed_pick_leaves_the_optimum(df, most):
    """At the ladder's 1% seed noise (run sd 0.015 nats, a 2x step's rise 0.024 nats) a pick on
    one scan seed lies more than a step from the optimum in ~3% of arms. An arm's optimum lies
    outside its reach in at most 1.5% of picks under the model's noise (2.5% under t on 3 df,
    which it does not assume), and most picks more than a step off are still inside. Measured
    (model's noise): 39 outside, 21 of the 139 picks more than a step off; a reach that stopped
    at the neighbour left 157 outside (all 139), one at 2 sds instead of 2.5 left 125."""
    sd, h, num = 0.015, math.log(2), 4000
    picks = _one_seed_picks(num, sd, np.random.default_rng(11), df)
    outside = far = far_outside = 0
    for u, sides in picks:
        low, high = (_reach(s[0], LADDER_CURVE, s[1], s[2], sd, s[3]) for s in sides)
        miss = not -low <= u <= high
        outside += miss
        if abs(u) > h:
            far += 1
            far_outside += miss
    print(f"\noutside {outside}/{num}; more than a step off {far}, of them outside {far_outside}")
    assert far >= 0.015 * num  # the case the reach past the neighbour is for
    assert outside <= max_count(num, most)
    if df is None:
        assert far_outside <= 0.3 * far


def test_the_curvature_is_the_loss_curves_own():
    """Noiseless: every sweep's parabola is the curve itself, 0.15 nats per ln(LR)^2."""
    table = off_grid_study(1.0, rng_seed=1, num_seeds=3, lr_penalty=CURVE, noise=Noise(0.0, 0.0))
    frontiers = lr_frontier(table)
    assert curvature(table, frontiers) == pytest.approx(CURVE, rel=1e-6)
    tuning = tuning_variances(table, frontiers)
    assert len(tuning) == 10 and all(v > 0 for _, v in tuning.values())
    # one LR tried: no neighbour, no term; no bracketed sweep: no curvature
    one = table[
        np.isclose(table["lr"], table.groupby(["variant", "size"])["lr"].transform("median"))
    ]
    assert len(one) == len(table) // 3
    assert curvature(one, lr_frontier(one)) == 0.0
    assert set(tuning_variances(one, lr_frontier(one)).values()) == {(0.0, 0.0)}


def _word(args: tuple) -> str:
    k0, i, noise, skew = args
    table = off_grid_study(k0, rng_seed=7000 + i, num_seeds=6, lr_penalty=CURVE,
                           noise=NOISES[noise], lr_skew=skew)  # fmt: skip
    (v,) = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=i)).verdict[
        "variants"
    ]
    return v["verdict"]


def _claims(word: str) -> bool:
    return word in CLAIMS


def _missed(word: str) -> bool:
    return word not in ("persists", "grows", "fades", "helps")


def _null_word(i: int, noise: str, skew: float) -> str:
    return _word((1.0, i, noise, skew))


def _null_model(i: int) -> str:
    return _null_word(i, "model", 1.0)


def _null_steep(i: int) -> str:
    return _null_word(i, "model", 4.0)


def _gain_word(i: int) -> str:
    return _word((1.25, i, "model", 1.0))


@pytest.mark.slow
@pytest.mark.parametrize(
    "noise,skew,fn", [("model", 1.0, _null_model), ("model", 4.0, _null_steep)]
)
def test_the_grid_s_error_alone_rarely_claims(noise, skew, fn):
    """Claims tested sequentially (``CLAIM_TEST``): batches of 20 until decided."""
    got, decided = replay_until_decided(fn, {"claims": (CLAIM_TEST, _claims)})
    words = Counter(got)
    claims = sum(words[c] for c in CLAIMS)
    print(f"\n{noise}, curve {skew}x above: claims {claims}/{len(got)}; {dict(words)}; {decided}")
    assert decided == {"claims": "pass"}, words


@pytest.mark.slow
def test_a_real_gain_is_still_found():
    """A compute multiplier of 1.25 (a gain of 1.8% at the top size): a gain is claimed, missed
    at most at 20% (``MISS_TEST``), and never the wrong way."""
    got, decided = replay_until_decided(_gain_word, {"missed": (MISS_TEST, _missed)})
    words = Counter(got)
    print(f"\nk0 1.25: {dict(words)} of {len(got)}; {decided}")
    assert decided == {"missed": "pass"}, words
    assert words["hurts"] == 0


def test_a_study_without_lrs_has_no_term():
    table = off_grid_study(1.0, rng_seed=2, num_seeds=3).assign(lr=float("nan"))
    assert tuning_variances(table, lr_frontier(table)) == {}


def test_the_plan_and_the_reports_power_table_read_the_term_the_verdict_uses():
    """`scaling plan --noise STUDY` takes the grid's term from `grid_terms`, and the report's
    "Seed noise and power" table from the same pairs: at the top size both are the verdict's own
    (`top_gain_pct.grid_sd` squared), and the table's detectable gain is the test's with it."""
    from analysis.stats.analyze import grid_terms
    from analysis.stats.planning.power import power_table

    table = off_grid_study(1.0, rng_seed=3, num_seeds=3, lr_penalty=CURVE)
    verdict = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=0)).verdict
    (v,) = verdict["variants"]
    terms = grid_terms(table, table_judgement("linear"))
    top = list(v["gain_pct_by_size"])[-1]
    assert list(terms) == list(v["gain_pct_by_size"])  # every size, smallest first
    assert terms[top] == pytest.approx(v["decision"]["top_gain_pct"]["grid_sd"] ** 2)
    assert terms[top] > 0
    rows = {r["size"]: r for r in verdict["seed_noise"] if r["variant"] == "nonlinear"}
    row = rows[top]
    assert row["grid_sd_pct"] ** 2 == pytest.approx(terms[top])
    sd = {top: row["paired_diff_sd_pct"]}
    (alone,) = power_table(sd, row["num_paired_seeds"], 0.5)
    (both,) = power_table(sd, row["num_paired_seeds"], 0.5, tune_by_size={top: terms[top]})
    assert row["mde_pct"] == pytest.approx(both["mde_pct"]) and both["mde_pct"] > alone["mde_pct"]
