"""One level fallback, one margin default, one parser of the baseline, one builder of the
sequential design (issue 50); one resample count and one detect gain, no default for a
judgement's setting below its builders, and one call of the baseline parser, in the
`Judgement`'s builder (issue 60).

Each was once typed in several places that drifted apart (a re-analysis judged at 5% a study run
at 1.1%). A second copy written beside the one kept here fails this test, which reads the source
of `analysis/` and `scaling/` (nothing is imported): each pattern must match at exactly the one
line named, which the rest of the code calls. The `Judgement` is built in one place and handed
down whole, so no function below its builders may default ``alpha``, ``level``, ``margin_pct``,
``num_resamples`` or ``detect_gain_pct``: such a default is a second value that a call which
forgets the judgement's silently uses (read with `ast`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")

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
    (
        "the resample count (`analysis.tables.judgement.DEFAULT_RESAMPLES`)",
        re.compile(r"(?<![\w.,])1_?000(?![\w.])(?!\s*\*)"),  # `1000 * s`: a unit
        "analysis/tables/judgement.py",
    ),
    (
        "the detect gain (`analysis.tables.judgement.DEFAULT_DETECT_GAIN_PCT`)",
        re.compile(r"(?i)(detect[_ -]gain|power table).*(?<![\w.])0?\.50?(?![\w.])"),
        "analysis/tables/judgement.py",
    ),
]

# a judgement's settings: defaulted only where a `Judgement` is built
SETTINGS = ("alpha", "level", "margin_pct", "num_resamples", "detect_gain_pct")
BUILDERS = {
    "analysis/judgement.py:table_judgement",  # the one builder
    "analysis/tables/judgement.py:reanalysed",  # a re-analysis: None keeps the study's setting
    "scaling/study_judgement.py:study_judgement",
}
# the same names for quantities that are not a judgement's: `scaling plan`'s level (the top
# size's share of 5%, before any run), the LR law's own interval, and a display's 95%
NOT_A_JUDGEMENT = {
    "analysis/stats/planning/power.py",
    "analysis/stats/lr/lr_law.py",
    "analysis/report/fmt.py:with_ci",
}


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


def defaulted_settings(path: Path, source: str) -> list[str]:
    """``path:function(name=)`` for each function of ``source`` that defaults a setting of the
    judgement (``SETTINGS``), unless it builds one or its name means something else."""
    rel = path.relative_to(ROOT).as_posix() if path.is_absolute() else path.as_posix()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        name = getattr(node, "name", "<lambda>")
        if f"{rel}:{name}" in BUILDERS or rel in NOT_A_JUDGEMENT:
            continue
        if f"{rel}:{name}" in NOT_A_JUDGEMENT:
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        defaulted = positional[len(positional) - len(args.defaults) :]
        defaulted += [a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
        found += [f"{rel}:{name}({a.arg}=)" for a in defaulted if a.arg in SETTINGS]
    return found


def test_no_setting_of_the_judgement_is_defaulted_below_its_builders() -> None:
    found = []
    for package in ("analysis", "scaling"):
        for path in sorted((ROOT / package).rglob("*.py")):
            found += defaulted_settings(path, path.read_text())
    assert not found, (
        "a setting of the `Judgement` defaulted below its builders (pass the judgement whole, "
        "or take the setting without a default):\n" + "\n".join(found)
    )


# the baseline string becomes its arms in one place: the `Judgement`'s builder calls the parser,
# and everything else reads `Judgement.baselines` (or verdict.json's `baselines`, which it wrote)
PARSER = "parse_baselines"
PARSE_SITES = {"analysis/judgement.py:table_judgement"}
PARSER_HOME = "analysis/tables/spec.py"  # where it is defined, and the format with it


def baseline_parses(rel: str, source: str) -> list[str]:
    """``path:function`` of each use of the baseline parser in ``source`` (a call, or the
    function passed on), and ``path:import`` of each import of it under any name."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = node.name
        if isinstance(node, ast.ImportFrom) and any(a.name == PARSER for a in node.names):
            found.append(f"{rel}:import")
        elif isinstance(node, ast.Name) and node.id == PARSER:
            found.append(f"{rel}:{where}")
        elif isinstance(node, ast.Attribute) and node.attr == PARSER:
            found.append(f"{rel}:{where}")
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(source), "<module>")
    return found


def test_the_baseline_is_parsed_only_by_the_judgements_builder() -> None:
    """Issue 60: the baseline parsed once. A report, a plan or a spec check that needs the arms
    takes the `Judgement` (or its ``baselines``), never the string: a second parse site is a
    second reading of the format that can drift (``"A, B"``, an empty part)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found += baseline_parses(rel, path.read_text())
    allowed = PARSE_SITES | {f"{site.split(':')[0]}:import" for site in PARSE_SITES}
    assert set(found) - allowed == set(), (
        f"the baseline parsed outside {sorted(PARSE_SITES)} (take the `Judgement`'s "
        "`baselines` instead):\n" + "\n".join(sorted(set(found) - allowed))
    )
    assert PARSE_SITES <= set(found), "the builder no longer parses the baseline: update this"
    assert f"def {PARSER}(" in (ROOT / PARSER_HOME).read_text()


def test_a_second_copy_is_found() -> None:
    """The patterns catch the copies this test replaced."""
    fallback, margin, baseline, design, resamples, detect = (p for _, p, _ in ONE_PLACE)
    assert fallback.search('    return top.get("level") or ALPHA')
    assert fallback.search("    alpha = level or ALPHA")
    assert margin.search('        "+-margin [default: 0.5]",')
    assert margin.search("    margin_pct: float = 0.5")
    assert not margin.search("    margin_pct: float = DEFAULT_MARGIN_PCT")
    assert baseline.search('    names = [b for b in baseline.split(",")]')
    # the parse sites issue 60 removed, as they were
    for source in (
        'def _baseline_name(v):\n    names = parse_baselines(v["baseline"])\n',
        "def grid_terms(table, baseline):\n    return _measure(table, parse_baselines(baseline))\n",
        "from analysis.tables.spec import parse_baselines as arms\n",
        "def problems(self):\n    return list(map(spec.parse_baselines, [self.baseline]))\n",
    ):
        assert baseline_parses("analysis/x.py", source), source
    assert not baseline_parses("analysis/x.py", "def f(v, j):\n    return j.baselines[0]\n")
    assert design.search("        return Design(self.start, self.max, self.step, self.margin_pct)")
    assert not design.search("class Design(NamedTuple):")
    assert resamples.search("    num_resamples: int = 1000,")
    assert resamples.search('RESAMPLES_HELP = "parametric bootstrap draws [default: 1000]"')
    assert resamples.search("    draws: int | None = 1000,")
    assert not resamples.search("    ms = 1000 * seconds")  # a unit, not a count of draws
    assert detect.search("    detect_gain_pct: float = 0.5,")
    assert detect.search('DETECT_HELP = "gain (%) for the power table [default: 0.5]"')
    # the signatures issue 60 took the defaults out of, as they were
    for source in (
        "def analyse(table, baseline, num_resamples=1000, seed=0, margin_pct=0.5, alpha=ALPHA):",
        "def apply_rule(comparison, tests, gamma, k0, level, guards, alpha: float = ALPHA):",
        "def decide_look(table, design, look, baseline, level: float | None = None):",
        "def downstream_verdict(runs, baseline, *, margin_pct=DEFAULT_MARGIN_PCT):",
        "def holm_levels(p_values, alpha=ALPHA):",
    ):
        assert defaulted_settings(Path("analysis/x.py"), source + "\n    pass\n"), source
    assert not defaulted_settings(Path("analysis/x.py"), "def f(table, judgement):\n    pass\n")
    builder = "def table_judgement(baseline, *, alpha=None, num_resamples=1000):\n    pass\n"
    assert not defaulted_settings(Path("analysis/judgement.py"), builder)


# the `Judgement` is changed only by its own methods (`at_look`, `at_level`, `reanalysed`), each
# saying what it changes and why: a `dataclasses.replace` of one elsewhere is a second builder
JUDGEMENT_HOME = "analysis/tables/judgement.py"
# what names a judgement where it is copied (`j`, `own`, `self.judgement`)
JUDGEMENT_NAME = re.compile(r"(?i)judgement|^j$|^own$")


def judgement_fields() -> set[str]:
    """The `Judgement`'s fields, read from its class in ``JUDGEMENT_HOME``."""
    tree = ast.parse((ROOT / JUDGEMENT_HOME).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Judgement")
    return {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)}


def judgement_replaces(rel: str, source: str, fields: set[str]) -> list[str]:
    """``path:line`` of each ``dataclasses.replace`` (or ``replace`` imported from
    ``dataclasses``) in ``source`` that copies a `Judgement`: its first argument is named as one
    (``JUDGEMENT_NAME``), or it sets only the `Judgement`'s fields, one of them not a name other
    dataclasses share (``baseline``, ``seed``): a resolve's `Evidence` has a ``level`` too, beside
    fields the `Judgement` lacks."""
    tree = ast.parse(source)
    bare = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "dataclasses"
        and any(a.name == "replace" and a.asname is None for a in n.names)
        for n in ast.walk(tree)
    )
    own = fields - {"baseline", "seed"}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        is_replace = (
            isinstance(f, ast.Attribute)
            and f.attr == "replace"
            and isinstance(f.value, ast.Name)
            and f.value.id == "dataclasses"
        ) or (bare and isinstance(f, ast.Name) and f.id == "replace")
        if not is_replace:
            continue
        target = ast.unparse(node.args[0]).split(".")[-1]
        keys = {k.arg for k in node.keywords}
        if JUDGEMENT_NAME.search(target) or (keys & own and keys <= fields):
            found.append(f"{rel}:{node.lineno}")
    return found


def test_the_judgement_is_copied_only_by_its_own_methods() -> None:
    """Issue 61: a resolve look's level set by `Judgement.at_level`, not by a `replace` beside
    it; a copy made elsewhere is a builder the tests of the judgement's methods do not see."""
    fields = judgement_fields()
    assert {"level", "margin_pct", "alpha", "by"} <= fields, fields  # the class is still read
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != JUDGEMENT_HOME:
                found += judgement_replaces(rel, path.read_text(), fields)
    assert not found, (
        "a `Judgement` copied by `dataclasses.replace` outside its class (add a method to "
        f"`Judgement` in {JUDGEMENT_HOME}, like `at_level`, and call it):\n" + "\n".join(found)
    )


def test_a_copy_of_the_judgement_is_found() -> None:
    """The check catches the copies issue 61's resolve made, as they were, and passes others."""
    fields = judgement_fields()
    for source in (  # scaling/driver/resolve.py before `at_level`
        "import dataclasses\nj = dataclasses.replace(self.judgement, level=level)\n",
        'import dataclasses\nj = dataclasses.replace(own, level=path["looks"][-1]["level"])\n',
        "import dataclasses\nx = dataclasses.replace(judgement, level=level), {}\n",
        "from dataclasses import replace\nj = replace(study_j, margin_pct=0.3)\n",
    ):
        assert judgement_replaces("scaling/x.py", source, fields), source
    for source in (  # other dataclasses' copies
        "import dataclasses\ns = dataclasses.replace(verdict, baseline=target)\n",
        "import dataclasses\nc = dataclasses.replace(cell, run=config)\n",
        "from dataclasses import replace\nw = replace(wall, seconds=1.0)\n",
        "import dataclasses\ne = dataclasses.replace(ev, level=0.05, word=word)\n",
        "t = table.replace(level, 0)\n",
    ):
        assert not judgement_replaces("scaling/x.py", source, fields), source
