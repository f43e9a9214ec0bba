"""The backtest (``analysis.stats.backtest``, ``Analysis.add_backtest``): the study refits itself
without its largest size(s) and predicts them. Truths chosen here: a constant compute multiplier
(the held-out size's true loss and gain known), where the top step's flag is a false alarm. A
gain that vanishes at the top size only is test_law_holds.py's changed law."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.gains.levels import ALPHA
from analysis.stats.rules.verdict import law_level
from analysis.synthetic.scenarios import (
    NOISES,
    SIZES,
    at_compute_multiplier,
    chinchilla,
    noisy_study,
    true_gain_pct,
)
from tests.analysis.bounds import RateTest, replay_until_decided

K0 = 1.3  # a gain of 2.2-3.4% of the loss over 3.6M-100M
FOUR = SIZES[1:]  # 3.6M-100M: fit three sizes, hold the top out
NUM_COVERAGE = 200  # at most, a quarter under each of the four noises in turn
MISSES = RateTest(0.05, 2.5, batch=20, max_n=NUM_COVERAGE)
FLAGS = RateTest(ALPHA, 2.0, batch=20, max_n=NUM_COVERAGE)


def _backtest(table: pd.DataFrame, draws: int, seed: int = 0):
    result = analyse(table, table_judgement("linear", num_resamples=draws, seed=seed))
    return result, result.add_backtest()


def _predictions(found: dict) -> list[tuple]:
    return [
        (s["held_out"], r["variant"], r["predicted"], tuple(r["ci95"]))
        for s in found["steps"]
        for r in s["losses"] + s["gains"]
    ]


def _moved(table: pd.DataFrame, size: str) -> pd.DataFrame:
    """At ``size`` the variant 0.1 nats worse and the baseline 0.05 better on every run."""
    at = table["size"] == size
    moved = table.copy()
    moved.loc[at & (moved["variant"] == "nonlinear"), "final_val_loss"] += 0.1
    moved.loc[at & (moved["variant"] == "linear"), "final_val_loss"] -= 0.05
    return moved


def test_a_prediction_never_reads_the_sizes_it_predicts():
    """Every step's predictions are a function of the fitted sizes' runs only: moving the top
    size's losses moves what was measured there and none of the predictions; moving the next
    size leaves the rollout's first step (which predicts it) as it was. A backtest that refitted
    on every size (tried on a copy: ``refit(table)`` instead of ``refit(sub_table)`` in
    ``analysis.stats.backtest._step``) fails here."""
    table = noisy_study(K0, NOISES["model"], rng_seed=11)
    _, found = _backtest(table, 40)
    assert [s["held_out"] for s in found["steps"]] == ["33.1M", "100M"]  # the rollout, then top
    assert [len(s["fitted_sizes"]) for s in found["steps"]] == [3, 4]
    _, top_moved = _backtest(_moved(table, "100M"), 40)
    assert _predictions(top_moved) == _predictions(found)
    measured = [r["measured"] for s in found["steps"] for r in s["gains"]]
    assert [r["measured"] for s in top_moved["steps"] for r in s["gains"]] != measured
    # the 0.15-nat swing is far outside what the smaller sizes predict: flagged
    (gain,) = top_moved["steps"][-1]["gains"]
    assert gain["agrees"] is False and "nonlinear" in top_moved["skill"]["flagged"]
    assert top_moved["skill"]["shown_up_to_compute_ratio"] is None
    _, next_moved = _backtest(_moved(table, "33.1M"), 40)
    first = [p for p in _predictions(found) if p[0] == "33.1M"]
    assert [p for p in _predictions(next_moved) if p[0] == "33.1M"] == first


def test_too_few_sizes_say_so():
    table = noisy_study(K0, NOISES["model"], rng_seed=1, sizes=SIZES[2:])
    _, found = _backtest(table, 20)
    assert found["available"] is False and "3 sizes" in found["reason"]


def _noise(j: int) -> str:
    return list(NOISES)[j % len(NOISES)]


def _coverage_study(j: int) -> tuple[bool, bool, bool, bool, bool | None, bool | None]:
    """Study `j`: the noises in turn, each its own seeds (the 200 of the fixed design)."""
    return _coverage((j // len(NOISES), _noise(j)))


def _coverage(args: tuple) -> tuple[bool, bool, bool, bool, bool | None, bool | None]:
    """(linear's loss, nonlinear's loss, the gain) covered by the backtest's 95% intervals at the
    held-out top size; whether the gain's row agreed with the measurement; and whether the whole
    top step agreed (no row flagged) at rule 9's per-row level and, for comparison, with every
    row at the study's level (no multiplicity control)."""
    i, noise = args
    table = noisy_study(K0, NOISES[noise], rng_seed=6100 + i, sizes=FOUR)
    result, found = _backtest(table, 100, seed=i)
    top = result.backtest.top_check
    (step,) = found["steps"]
    n = FOUR[-1]
    truth = {
        "linear": chinchilla(n, 20 * n),
        "nonlinear": at_compute_multiplier(lambda c: K0)(n, 20 * n),
    }
    losses = {r["variant"]: r for r in step["losses"]}
    (gain,) = step["gains"]
    inside = [
        losses[a]["ci95"][0] <= truth[a] <= losses[a]["ci95"][1] for a in ("linear", "nonlinear")
    ]
    true_gain = true_gain_pct(K0, n)
    covered = gain["ci95"][0] <= true_gain <= gain["ci95"][1]
    agrees = top("nonlinear", law_level(ALPHA))["agrees"], top("nonlinear", ALPHA)["agrees"]
    return (*inside, covered, bool(gain["agrees"]), *agrees)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_backtests_intervals_cover_the_held_out_truth_at_their_rate():
    """Studies of the model's noise and the three it does not assume, in turn; 4 sizes, 3
    seeds. Each arm's predicted top loss and the predicted top gain miss the truth at most at
    5%, and the gain's row disagrees at most at 5%: each a sequential test of 5% against 12.5%
    (``tests.analysis.bounds.RateTest``, batches of 20, at most 200 studies, as the fixed design
    this replaced; a 5% rate fails it with probability 0.72%, 12.5% passes with 9.5%). The law
    holds in all of them, so a flagged top step (rule 9: any of its three rows at 5% / 3) is a
    false alarm: tested at 5% against 10% (0.66% and 37%: as weak as the fixed design's 18 of
    200 was at 10%, 37%). With every row at 5% (no multiplicity control) the fixed 200 were
    flagged 20 times, 5 with it (printed: both counts from one run); on a copy whose
    ``law_level`` returns alpha this fails (docs/testing.md). Slow: each study analysed twice
    (the full study and the refit) at 100 draws."""
    got, decided = replay_until_decided(
        _coverage_study,
        {
            "linear loss missed": (MISSES, lambda g: not g[0]),
            "nonlinear loss missed": (MISSES, lambda g: not g[1]),
            "gain missed": (MISSES, lambda g: not g[2]),
            "gain row flagged": (MISSES, lambda g: not g[3]),
            "top step flagged": (FLAGS, lambda g: g[4] is False),
        },
    )
    covered = np.array([g[:4] for g in got])
    missed = (~covered[:, :3]).sum(axis=0)
    print(f"\nmissed of {len(got)}: linear loss {missed[0]}, nonlinear loss {missed[1]}, gain "
          f"{missed[2]}; gain flagged {(~covered[:, 3]).sum()}; {decided}")  # fmt: skip
    for noise in NOISES:
        mine = [(g[4], g[5]) for j, g in enumerate(got) if _noise(j) == noise]
        print(f"{noise}: top step flagged {sum(a is False for a, _ in mine)}/{len(mine)} "
              f"(every row at 5%: {sum(b is False for _, b in mine)})")  # fmt: skip
    flagged = sum(g[4] is False for g in got)
    print(f"all: flagged {flagged}, every row at 5%: {sum(g[5] is False for g in got)}")
    assert decided == dict.fromkeys(decided, "pass"), decided
    assert all(g[4] is not None for g in got)  # every study's top step was checked
