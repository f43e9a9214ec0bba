"""The closed loop (``analysis.stats.resolve.loop.resolve_loop``) over whole synthetic studies:
judge, price, buy the best option within the budget, judge again as a look of the declared
design, on instant cells (``analysis.synthetic.closed_loop``: 25M/50M/100M, LRs 0.5x/1x/2x the
law's optimum missed by up to half a step per arm, 3 seeds, per-run sd 0.012: a paired sd of
about 0.5% of the loss at the top) with the verdict's binding test as the judge, its LR choice
inside the interval (``evidence.choice_draws``; its intervals checked against ``analyse``'s).

False claims over the whole adaptive path, identical arms, under the model's noise and two it
does not assume (Student's t on 3 df; an arm x seed effect shared by every size and LR), and
under the model's noise at one LR per arm (no grid or choice term: the spending's own test,
which fails with every look at 5% where the grid's floor hides it from the others): decided
sequentially (``tests.analysis.bounds.RateTest``, batches of 20, Wald's test of 5% against 12.5%,
at most 180 studies, where it fails above ``binom.ppf(0.99, 180, 0.05)`` = 16 claims).

A true gain at the margin (1% at every size, margin 1%): at least 80% of ``POWER_STUDIES``
resolved within the 150 device-hour budget, and its device-hours printed against the fixed
design of equal power (the fewest seeds at every size and LR, as run, whose paired t at 5%
reaches the loop's resolved rate, at most 95%: ``analysis.stats.planning.power.power_of``).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.planning.power import power_of
from analysis.stats.resolve.evidence import read_table
from analysis.stats.resolve.loop import Plan
from analysis.synthetic.closed_loop import (
    NOISES,
    SIZES,
    Truth,
    closed_loop,
    flops_hours,
    outcome,
    rows_of,
    start_cells,
)
from analysis.tables.runs import normalise
from tests.analysis.bounds import RateTest, replay_until_decided, studies_to_catch

PLAN = Plan(budget=150.0, max_looks=4)
NULL_TEST = RateTest(0.05, 2.5, batch=20, max_n=studies_to_catch(0.05, 2.5))
POWER_STUDIES = 60
MARGIN = 1.0  # % of the loss: the gain at the margin is 1%


def _null(noise: str, i: int) -> dict:
    path, start = closed_loop(Truth(0.0, 20_000 + i, noise), PLAN, margin_pct=0.5)
    return outcome(path, start)


def _null_model(i: int) -> dict:
    return _null("model", i)


def _null_t3(i: int) -> dict:
    return _null("t3", i)


def _null_size_correlated(i: int) -> dict:
    return _null("size_correlated", i)


def _null_one_lr(i: int) -> dict:
    """The spending's own case: one LR per arm at the optimum, so no grid or choice term floors
    the interval and every look is a fresh chance (margin 0.25: the path runs its looks)."""
    path, start = closed_loop(
        Truth(0.0, 20_000 + i, "model", grid_miss=0.0), PLAN, margin_pct=0.25, grid=(1.0,)
    )
    return outcome(path, start)


NULLS = {
    "model": _null_model,
    "t3": _null_t3,
    "size_correlated": _null_size_correlated,
    "one_lr": _null_one_lr,
}
assert set(NOISES) < set(NULLS)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("noise", list(NULLS))
def test_identical_arms_claim_at_most_alpha_over_the_whole_path(noise: str) -> None:
    results, decided = replay_until_decided(
        NULLS[noise], {"claims": (NULL_TEST, lambda r: r["claimed"])}
    )
    claims = sum(r["claimed"] for r in results)
    words = {w: sum(r["word"] == w for r in results) for w in {r["word"] for r in results}}
    print(f"{noise}: {claims}/{len(results)} claims, {words}")
    assert decided["claims"] == "pass", f"{claims}/{len(results)} claims: {words}"


# (true gain %, seeds at every LR, noise, LR penalty): designs where every LR ran every seed, so
# the fast judge and ``analyse`` choose the LR by the same rule in every draw
AGREEMENT = [
    (0.0, 3, "model", 0.02),
    (0.5, 5, "model", 0.02),
    (0.0, 4, "t3", 0.02),
    (1.0, 3, "model", 0.005),
    (0.0, 6, "size_correlated", 0.005),
]
AGREE_PCT = 0.1  # each end of each interval, percentage points of the loss


@pytest.mark.parametrize("i", range(len(AGREEMENT)))
def test_the_fast_judges_intervals_agree_with_analyses(i: int) -> None:
    """At the level ``analyse`` tests its top size at, the fast judge's pooled interval (each
    arm's LR chosen again in every draw) lies within ``AGREE_PCT`` of ``analyse``'s at each end
    (Monte Carlo: 4,000 draws against 1,000), and its paired t within the same of ``analyse``'s
    (whose grid term may reach past a neighbour the noise cannot rule out)."""
    gain, seeds, noise, penalty = AGREEMENT[i]
    truth = Truth(gain, 900 + i, noise, lr_penalty=penalty)
    table = normalise(rows_of(truth, start_cells(SIZES, seeds)), "synthetic")
    verdict = analyse(table, table_judgement("linear", num_resamples=1000, seed=3)).verdict
    top = verdict["variants"][0]["decision"]["top_gain_pct"]
    ev = read_table(table, "linear", top["level"], MARGIN)["nonlinear"]
    paired = (ev.estimate_pct - ev.half_width_pct, ev.estimate_pct + ev.half_width_pct)
    print(i, ev.pooled_ci, top["pooled_ci"], paired, top["paired_ci"])
    assert np.allclose(ev.pooled_ci, top["pooled_ci"], rtol=0, atol=AGREE_PCT)
    assert np.allclose(paired, top["paired_ci"], rtol=0, atol=AGREE_PCT)
    assert ev.choice_var == 0.0  # every LR ran every seed: the choice adds no term of its own


def _at_margin(i: int) -> dict:
    path, start = closed_loop(Truth(MARGIN, 30_000 + i), PLAN, margin_pct=MARGIN)
    out = outcome(path, start)
    look0 = path.looks[0]
    out["look0_half"] = look0["half_width_pct"]["nonlinear"]
    return out


def fixed_design_hours(num_seeds: int) -> float:
    return sum(
        flops_hours(c["variant"], c["n_params"], c["tokens"]) for c in start_cells(SIZES, num_seeds)
    )


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_gain_at_the_margin_is_resolved_within_the_budget() -> None:
    from tests.analysis.pool import map_studies

    results = list(map_studies(_at_margin, range(POWER_STUDIES)))
    resolved = sum(r["word"] in ("helps", "persists", "grows") for r in results)
    rate = resolved / len(results)
    hours = float(np.mean([r["start_hours"] + r["spent"] for r in results]))
    # the fixed design of equal power: paired sd 0.5% (sqrt(2) x 0.012 of a loss of 3.43)
    sd = 100 * np.sqrt(2) * 0.012 / 3.43
    target = min(rate, 0.95)  # all resolved: compare with a fixed design of 95% power
    n = next(k for k in range(3, 200) if power_of(MARGIN, sd, k, 0.05) >= target)
    print(
        f"resolved {resolved}/{len(results)}; loop {hours:.0f} device-hours on average, "
        f"fixed design of equal power {n} seeds: {fixed_design_hours(n):.0f} "
        f"(ratio {hours / fixed_design_hours(n):.2f})"
    )
    assert resolved >= 0.8 * len(results)
