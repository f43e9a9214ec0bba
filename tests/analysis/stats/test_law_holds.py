"""Rule 9 (``analysis.stats.rules.verdict``): persists, grows and fades stand only where the
study's own backtest agrees at its top size; the flag's false alarms, Bonferroni over the top
step's three rows, stay at the study's level where the law holds.

Synthetic truths, 4 sizes 3.6M-100M (one backtest step: fit 3.6M-33M, predict 100M), 100
draws. The law changes (``analysis.synthetic.law_change``, one LR per cell: the cheapest
analysis): the variant at a 1.5x compute multiplier below the top size, and at the top 1x (the
gain vanishes) or 1.1x (a fifth of it is left, still measurable: there steps 2-8 say fades or
persists, what rule 9 must take back). Where the law holds, the flag's false alarms are counted
on ``test_backtest.py``'s coverage studies (the same 200 analyses, run once). The measured
figures are printed (docs/statistics.md, "Backtest").
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.gains.levels import ALPHA
from analysis.stats.looks.sequential import Design, decide_look
from analysis.stats.rules.verdict import LAW_CHECKED, law_holds, law_level
from analysis.synthetic.law_change import law_change_study
from tests.analysis.bounds import RateTest, replay_until_decided

NUM_DRAWS = 100
K_FITTED = 1.5  # below the top size: a 1.6-2.2% gain
K_TOPS = (1.0, 1.1)  # at the top: none left, or a fifth (0.4%)
NUM_CHANGED = 200  # at most, the two top multipliers in turn
# the flag misses a change this large in at most 20% of the studies (tested against 40%)
MISSED = RateTest(0.2, 2.0, batch=20, max_n=NUM_CHANGED)


def _changed(j: int) -> tuple[float, str, bool | None]:
    """(the top multiplier, the word, whether the top step agreed at rule 9's level) of study
    `j` whose law changes: the two top multipliers in turn, each its own seeds."""
    k_top, i = K_TOPS[j % len(K_TOPS)], j // len(K_TOPS)
    table = law_change_study(K_FITTED, k_top, rng_seed=31000 + i, num_seeds=4)
    result = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=i))
    (v,) = result.verdict["variants"]
    return k_top, v["verdict"], result.backtest.top_check("nonlinear", law_level(ALPHA))["agrees"]


@functools.cache
def changed_run() -> tuple[list[tuple[float, str, bool | None]], str]:
    got, decided = replay_until_decided(_changed, {"missed": (MISSED, lambda g: g[2] is not False)})
    return got, decided["missed"]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_law_that_changes_at_the_top_never_keeps_persists_grows_or_fades():
    """For every study, a top step that does not agree leaves no persists, grows or fades; and
    the flag catches the change in most of them: its misses are a sequential test of 20%
    against 40% (``tests.analysis.bounds.RateTest``, batches of 20, at most the 200 studies of
    the fixed design it replaced; a 20% rate fails it with probability 0.38%, 40% passes with
    3.5%, exactly). Without rule 9 the 1.1x studies read fades or persists against their own
    flagged backtest (6 of the first 20), and this fails."""
    got, decided = changed_run()
    for k in K_TOPS:
        words = Counter(w for kk, w, _ in got if kk == k)
        flags = Counter(a for kk, _, a in got if kk == k)
        print(f"\nk at the top {k}: words {dict(words)}; top step agrees {dict(flags)}")
    standing = [(k, w) for k, w, agrees in got if agrees is not True and w in LAW_CHECKED]
    assert not standing, standing
    caught = sum(a is False for _, _, a in got)
    print(f"{len(got)} studies, caught {caught}: {decided}")
    assert decided == "pass", caught


def test_every_path_to_the_word_reads_the_backtest():
    """One study whose gain falls to a fifth at the top: steps 2-8 say fades or persists; the
    analysis (run, analyze) and a sequential look (and so status, which reads looks.json) both
    say helps, with the rows that disagreed."""
    table = law_change_study(K_FITTED, 1.1, rng_seed=31100, num_seeds=4)
    result = analyse(table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=1))
    (v,) = result.verdict["variants"]
    assert v["verdict"] == "helps", v["reason"]
    assert "the law changed past 33.1M: " in v["reason"]
    assert "needs the backtest to agree" in v["reason"]
    top = v["decision"]["backtest_top"]
    assert top["agrees"] is False and top["held_out"] == "100M"
    assert top["level"] == pytest.approx(ALPHA / 3)
    look = decide_look(
        table,
        table_judgement("linear", num_resamples=NUM_DRAWS, design=Design(start=3, max=4, step=1)),
        2,
    )
    assert look.verdicts == {"nonlinear": "helps"}
    # verdict.json's backtest reuses the refit the rule read: the same rows, the same flag
    found = result.add_backtest()
    (gain,) = found["steps"][-1]["gains"]
    assert gain["agrees"] is False and "nonlinear" in found["skill"]["flagged"]
    assert found["steps"][-1]["flag_level"] == pytest.approx(ALPHA / 3)


def _decision(word: str, top_ci: list[float], rejected: bool) -> dict:
    top = {"size": "100M", "value": sum(top_ci) / 2, "ci": top_ci, "rejected": rejected}
    return {"verdict": word, "reason": "steps 2-8", "top_gain_pct": top}


def _check(agrees: bool | None) -> dict:
    row = {"quantity": "gain", "unit": "%", "predicted": 1.19, "ci": [0.85, 1.47]}
    row.update(measured=0.36, measured_ci=[0.15, 0.56], agrees=agrees)
    out = {"agrees": agrees, "held_out": "100M", "fitted_sizes": ["11M", "33.1M"], "level": 0.05}
    return {**out, "rows": [row], "error": None if agrees is not None else "the refit failed"}


@pytest.mark.parametrize(
    "word, top_ci, rejected, after",
    [
        ("persists", [0.15, 0.56], True, "helps"),
        ("grows", [0.15, 0.56], True, "helps"),
        ("fades", [-0.3, 0.56], False, "inconclusive"),
        ("fades", [-0.9, -0.2], True, "hurts"),
    ],
)
def test_a_flagged_top_step_takes_the_word_back_to_what_the_top_gain_says(
    word, top_ci, rejected, after
):
    out = law_holds(_decision(word, top_ci, rejected), _check(False))
    assert out["verdict"] == after
    assert (
        "the law changed past 33.1M: gain predicted 1.19% [0.85, 1.47], measured 0.36% "
        "[0.15, 0.56]" in out["reason"]
    )
    assert out["reason"].endswith(f"{word} needs the backtest to agree")
    unchecked = law_holds(_decision(word, top_ci, rejected), _check(None))
    assert unchecked["verdict"] == after and "could not check" in unchecked["reason"]
    kept = law_holds(_decision(word, top_ci, rejected), _check(True))
    assert kept["verdict"] == word and kept["reason"] == "steps 2-8"
