"""One level fallback, one margin default, one parser of the baseline, one builder of the
sequential design (issue 50).

Each was once typed in several places that drifted apart (a re-analysis judged at 5% a study run
at 1.1%). A second copy written beside the one kept here fails this test, which reads the source
of `analysis/` and `scaling/` (nothing is imported): each pattern must match at exactly the one
line named, which the rest of the code calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (what, pattern over a source line, the one place it may match)
ONE_PLACE = [
    (
        "the level fallback (`analysis.stats.gains.levels.level_or_default`)",
        re.compile(r"\bor\s+(TOP_)?ALPHA\b|\bALPHA\s+if\b|\belse\s+ALPHA\b"),
        "analysis/stats/gains/levels.py",
    ),
    (
        "the margin default (`analysis.tables.spec.DEFAULT_MARGIN_PCT`)",
        re.compile(r"(?i)margin.*(?<![\w.])0?\.50?(?![\w.])|(?<![\w.])0?\.50?(?![\w.]).*margin"),
        "analysis/tables/spec.py",
    ),
    (
        "the baseline parser (`analysis.tables.spec.parse_baselines`)",
        re.compile(r"(?i)baseline.*\.(split|partition)\(|\.(split|partition)\(.*baseline"),
        "analysis/tables/spec.py",
    ),
    (
        "the sequential design's builder (`analysis.judgement.make_design`)",
        re.compile(r"(?<!class )\bDesign\("),
        "analysis/judgement.py",
    ),
]


def matches(pattern: re.Pattern[str]) -> list[str]:
    """`path:line` of every source line of analysis/ and scaling/ that `pattern` matches."""
    found = []
    for package in ("analysis", "scaling"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}")
    return found


@pytest.mark.parametrize("what, pattern, home", ONE_PLACE, ids=[w for w, _, _ in ONE_PLACE])
def test_written_in_one_place(what: str, pattern: re.Pattern[str], home: str) -> None:
    found = matches(pattern)
    assert len(found) == 1 and found[0].startswith(f"{home}:"), (
        f"{what} must be written once, in {home}; found at:\n" + "\n".join(found)
    )


def test_a_second_copy_is_found() -> None:
    """The patterns catch the copies this test replaced."""
    fallback, margin, baseline, design = (p for _, p, _ in ONE_PLACE)
    assert fallback.search('    return top.get("level") or ALPHA')
    assert fallback.search("    alpha = level or ALPHA")
    assert margin.search('        "+-margin [default: 0.5]",')
    assert margin.search("    margin_pct: float = 0.5")
    assert not margin.search("    margin_pct: float = DEFAULT_MARGIN_PCT")
    assert baseline.search('    names = [b for b in baseline.split(",")]')
    assert design.search("        return Design(self.start, self.max, self.step, self.margin_pct)")
    assert not design.search("class Design(NamedTuple):")
