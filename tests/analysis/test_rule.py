"""The verdict rule is written once: the README lists the same outcomes, in the same order, as
``analysis.verdict.RULE`` (which every report prints)."""

from __future__ import annotations

import re
from pathlib import Path

from analysis.verdict import RULE

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
