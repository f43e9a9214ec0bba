"""The verdict rule is written once: the README lists the same outcomes, in the same order, as
``analysis.verdict.RULE`` (which every report prints)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from analysis.compare import Budget, Comparison
from analysis.verdict import RULE, decide

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_and_report_state_the_same_rule():
    text = README.read_text()
    section = text.split("## Reading the report and the verdict")[1].split("\n## ")[0]
    rule_part = section.split("**The verdict rule.**")[1].split("Extrapolation never")[0]
    readme_outcomes = re.findall(r"^\s+- \*\*(\w+)\*\*", rule_part, flags=re.M)
    code_outcomes = re.findall(r"^\d\. (\w+):", RULE, flags=re.M)
    assert readme_outcomes == code_outcomes, (readme_outcomes, code_outcomes)
    assert {"hurts", "persists", "grows", "fades", "none", "inconclusive"} == set(code_outcomes)
    assert "Extrapolation never makes a claim" in section and "Extrapolation never" in RULE


def _comparison(gain_pct: np.ndarray) -> Comparison:
    seeds = np.ones(3, dtype=bool)
    top = Budget("800K", 1.6e7, 0, 1, "linear", seeds, gain_pct / 100, gain_pct, gain_pct, gain_pct)
    return Comparison("nonlinear", [top], [top])


@pytest.mark.parametrize("k_centre, words", [(1.02, "includes 1"), (0.8, "lies below 1")])
def test_significant_top_gain_without_a_multiplier_is_inconclusive_and_says_both(k_centre, words):
    """Rule 5: a top gain above 0 beside a k0 interval that reaches 1 is not "none" (that
    would deny a significant measured gain); it is inconclusive and states both facts."""
    rng = np.random.default_rng(0)
    gain = np.concatenate([[2.0], rng.normal(2.0, 0.5, 400)])  # CI about [1, 3] > 0
    gamma = np.concatenate([[0.0], rng.normal(0.0, 0.02, 400)])
    k0 = np.concatenate([[k_centre], rng.normal(k_centre, 0.05, 400)])
    out = decide(_comparison(gain), gamma, k0, 0.05, [])
    assert out["verdict"] == "inconclusive"
    reason = out["reason"]
    assert reason.startswith("measured gain at 800K significant: gain@800K 2%")
    lo, hi = out["top_gain_pct"]["ci"]
    assert lo > 0 and f"CI [{lo:.4g}, {hi:.4g}] > 0" in reason
    assert f"the fitted compute multiplier's interval {words}" in reason
    k_lo, k_hi = out["k0"]["ci"]
    assert (k_lo <= 1 <= k_hi) == (words == "includes 1") and k_lo < 1
    assert f"k0 {k_centre:.4g} CI [{k_lo:.4g}, {k_hi:.4g}]" in reason
