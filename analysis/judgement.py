"""One judgement: everything that decides a verdict, built once and handed down whole.

`scaling run`, each sequential look, `scaling status` and `scaling analyze STUDY` judge a study
through one `Judgement` built from the resolved study (``scaling.study_judgement``);
a run CSV, or a user's own re-analysis of a study (another baseline, margin, seed or number of
draws), is judged through the same builder (``table_judgement``), and ``by`` says which it is.
``analysis.api.run_analysis(table, judgement, out)`` reads nothing else.

What it fixes, each in one place: the baseline string parsed once (``"A,B"``: per size the
stronger of arms A and B), the margin's default (``DEFAULT_MARGIN_PCT``), the family-wise
level's (``ALPHA``), and for a sequential study the `Design` and the level its last look was
judged at (that look's nominal level, not ``alpha``), its margin the design's.

The `Judgement` itself (a frozen dataclass) lives in the lowest room, ``analysis.tables.judgement``,
so that every function that decides or reports takes it whole; this module builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analysis.stats.gains.levels import level_or_default
from analysis.tables.judgement import (
    DEFAULT_DETECT_GAIN_PCT,
    DEFAULT_RESAMPLES,
    REANALYSIS,
    STUDY,
    TABLE,
    By,
    Judgement,
)
from analysis.tables.spec import DEFAULT_BASELINE, DEFAULT_MARGIN_PCT, parse_baselines

if TYPE_CHECKING:
    from analysis.stats.looks.sequential import Design

__all__ = [
    "DEFAULT_BASELINE",
    "DEFAULT_DETECT_GAIN_PCT",
    "DEFAULT_RESAMPLES",
    "STUDY",
    "REANALYSIS",
    "TABLE",
    "Judgement",
    "table_judgement",
    "make_design",
    "check_looks",
]

LOOK_KEYS = ("look", "num_paired_top", "info_fraction", "z", "level", "verdict", "stop", "reason")
DESIGN_KEYS = ("start", "max", "step", "margin_pct")


def table_judgement(
    baseline: str = DEFAULT_BASELINE,
    *,
    margin_pct: float | None = None,
    alpha: float | None = None,
    seed: int = 0,
    num_resamples: int = DEFAULT_RESAMPLES,
    detect_gain_pct: float = DEFAULT_DETECT_GAIN_PCT,
    looks: dict[str, Any] | None = None,
    design: Design | None = None,
    lr_search: dict[str, Any] | None = None,
    stability: bool = False,
    downstream_tasks: tuple[str, ...] | None = None,
    inference: dict[str, Any] | None = None,
    by: By = TABLE,
    changed: tuple[str, ...] = (),
) -> Judgement:
    """The one builder of a `Judgement`; ValueError names a bad value and its fix.

    ``margin_pct`` / ``alpha`` None: ``DEFAULT_MARGIN_PCT`` / ``ALPHA``. ``looks``: a study's
    looks.json (``{"design": {...}, "looks": [...]}``, docs/interfaces.md); with at least one
    look the judgement is the last look's: at its nominal level, with the design's margin and
    level (``margin_pct`` and ``alpha`` not used) and the bootstrap seeded from the runs (``seed``
    not used) and ``design`` the one in looks.json. ``design``: before any look, the study's
    (``make_design``), for the looks to come. A dict without looks (none judged yet) is the
    same as None.
    """
    baselines = tuple(parse_baselines(baseline))
    margin = DEFAULT_MARGIN_PCT if margin_pct is None else float(margin_pct)
    level = alpha = level_or_default(alpha)
    if looks is not None and not looks.get("looks"):
        looks = None
    if looks is not None:
        last = check_looks(looks)
        design = make_design(looks["design"])  # the design its looks were judged under
        margin, alpha, level = design.margin_pct, design.alpha, float(last["level"])
    if num_resamples < 0:
        raise ValueError(f"--resamples must be >= 0, got {num_resamples}")
    return Judgement(
        baseline=baseline,
        baselines=baselines,
        margin_pct=margin,
        alpha=alpha,
        level=level,
        seed=int(seed),
        num_resamples=int(num_resamples),
        detect_gain_pct=float(detect_gain_pct),
        design=design,
        looks=looks,
        lr_search=lr_search,
        stability=stability,
        downstream_tasks=downstream_tasks,
        inference=inference,
        by=by,
        changed=tuple(changed),
    )


def make_design(d: dict[str, Any]) -> Design:
    """The one constructor of a sequential `Design`: from a study's `seeds: {start, max, step}`
    with its verdict's margin and level (``scaling.looks.sequential_seeds.design_of``), or from the
    ``design`` a looks.json was judged under (a file without ``alpha`` was judged at
    ``ALPHA``, the field's default)."""
    from analysis.stats.looks.sequential import Design  # lazy: scipy, paid when judged

    alpha = level_or_default(d.get("alpha"))
    return Design(int(d["start"]), int(d["max"]), int(d["step"]), float(d["margin_pct"]), alpha)


def check_looks(looks: dict[str, Any]) -> dict[str, Any]:
    """The last look of a ``looks.json`` dict, after checking what the report reads from it."""
    design = looks.get("design")
    missing = [k for k in DESIGN_KEYS if not isinstance(design, dict) or k not in design]
    missing += sorted({k for look in looks["looks"] for k in LOOK_KEYS if k not in look})
    if missing:
        raise ValueError(
            f"sequential: not a looks.json state (missing {', '.join(missing)}); pass the "
            "study's looks.json as read by scaling.state.files.look_state.read_looks"
        )
    numbers = [int(look["look"]) for look in looks["looks"]]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"sequential: looks numbered {numbers}; expected 1, 2, ... in order")
    return looks["looks"][-1]
