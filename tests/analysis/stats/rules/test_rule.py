"""The verdict rule is written once: the README lists the same outcomes, in the same order, as
``analysis.stats.rules.verdict.RULE`` (which every report prints)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from analysis.judgement import table_judgement
from analysis.stats.gains.compare import Budget, Comparison
from analysis.stats.gains.robust import GainTest
from analysis.stats.rules.evidence import Evidence
from analysis.stats.rules.verdict import GAMMA_PIN, RULE, apply_rule

README = Path(__file__).resolve().parents[4] / "README.md"


def test_readme_and_report_state_the_same_rule():
    text = README.read_text()
    section = text.split("## Reading the report and the verdict")[1].split("\n## ")[0]
    rule_part = section.split("**The verdict rule.**")[1].split("Extrapolation never")[0]
    readme_outcomes = re.findall(r"^\s+- \*\*(\w+)\*\*", rule_part, flags=re.M)
    code_outcomes = re.findall(r"^\d\. (\w+):", RULE, flags=re.M)
    assert readme_outcomes == code_outcomes, (readme_outcomes, code_outcomes)
    assert {
        "hurts", "persists", "grows", "fades", "helps", "none", "undetected", "inconclusive"
    } == set(code_outcomes)  # fmt: skip
    assert "Extrapolation never makes a claim" in section and "Extrapolation never" in RULE


def _comparison(gain_pct: np.ndarray) -> Comparison:
    seeds = np.ones(3, dtype=bool)
    top = Budget("800K", 1.6e7, 0, 1, "linear", seeds, gain_pct / 100, gain_pct, gain_pct, gain_pct)
    return Comparison("nonlinear", [top], [top])


def _test(gain: np.ndarray, se: float) -> GainTest:
    return GainTest(float(gain[0]), gain[1:], float(gain[0]), se, 2)


@pytest.mark.parametrize("k_centre, words", [(1.02, "includes 1"), (0.8, "lies below 1")])
def test_significant_top_gain_without_a_multiplier_helps_and_says_both(k_centre, words):
    """Rule 5: a top gain above 0 beside a k0 interval that reaches 1 is not "none" (that
    would deny a significant measured gain) nor "persists": it is "helps", stating both."""
    rng = np.random.default_rng(0)
    gain = np.concatenate([[2.0], rng.normal(2.0, 0.5, 400)])  # CI about [1, 3] > 0
    gamma = np.concatenate([[0.0], rng.normal(0.0, 0.02, 400)])  # pinned: within +-0.0969
    k0 = np.concatenate([[k_centre], rng.normal(k_centre, 0.05, 400)])
    out = apply_rule(
        Evidence(_comparison(gain), tuple([_test(gain, 0.1)]), gamma, k0), 0.05, table_judgement()
    )
    assert out["verdict"] == "helps"
    reason = out["reason"]
    assert reason.startswith("gain@800K 2%")
    lo, hi = out["top_gain_pct"]["ci"]
    assert lo > 0 and f"CI [{lo:.4g}, {hi:.4g}] > 0" in reason
    assert f"the fitted compute multiplier's interval {words}" in reason
    k_lo, k_hi = out["k0"]["ci"]
    assert (k_lo <= 1 <= k_hi) == (words == "includes 1") and k_lo < 1
    assert f"k0 {k_centre:.4g} CI [{k_lo:.4g}, {k_hi:.4g}]" in reason
    # the same gain with k0 above 1 but gamma reaching past +-log10(1.25): not pinned
    wide = np.concatenate([[0.0], rng.normal(0.0, 0.08, 400)])
    k_up = np.concatenate([[1.5], rng.normal(1.5, 0.05, 400)])
    out = apply_rule(
        Evidence(_comparison(gain), tuple([_test(gain, 0.1)]), wide, k_up), 0.05, table_judgement()
    )
    g_lo, g_hi = out["gamma"]["ci"]
    assert out["verdict"] == "helps" and (g_lo < -GAMMA_PIN or g_hi > GAMMA_PIN)
    assert "trend not pinned" in out["reason"]
    tight = np.concatenate([[0.0], rng.normal(0.0, 0.02, 400)])
    out = apply_rule(
        Evidence(_comparison(gain), tuple([_test(gain, 0.1)]), tight, k_up), 0.05, table_judgement()
    )
    assert out["verdict"] == "persists"
    assert -GAMMA_PIN <= out["gamma"]["ci"][0] and out["gamma"]["ci"][1] <= GAMMA_PIN
