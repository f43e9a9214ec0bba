"""A study's own judgement (`analysis.judgement.Judgement`), built in one place from the
resolved study: `scaling run`'s report, each sequential look, `scaling status`'s look lines and
`scaling analyze STUDY` all judge by it, so they cannot disagree on the baseline, the margin,
the level, the design or the bootstrap's seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.look_state import looks_summary
from scaling.state.files.search_state import SearchState, read_state

if TYPE_CHECKING:
    from analysis.judgement import Judgement
    from analysis.stats.looks.sequential import Design

__all__ = ["design_of", "study_judgement"]


def design_of(study: ResolvedStudy) -> Design:
    """The study's `seeds: {start, max, step}` with its margin and level, as the statistics
    take it."""
    from analysis.judgement import make_design  # lazy: scipy and pandas, paid at a look

    rounds = study.spec.seed_rounds
    assert rounds is not None, "design_of() is for a study with sequential seeds"
    verdict = study.spec.verdict
    return make_design(
        {"start": rounds.start, "max": rounds.max, "step": rounds.step,
         "margin_pct": verdict.margin_pct, "alpha": verdict.alpha}
    )  # fmt: skip


def study_judgement(
    study: ResolvedStudy,
    inference: dict | None = None,
    search: SearchState | None = None,
) -> Judgement:
    """The study's own judgement (`analysis.judgement`), the one `scaling run`, each look,
    `scaling status` and `scaling analyze STUDY` judge by: its `verdict` section (baseline,
    margin, level), its sequential design and looks (judged at the last look's level), the LR
    search's state, whether it measured stability, its downstream tasks, and `inference`
    (measured figures: `scaling.inference_cost.inference_study` for `run`, read only for `analyze`).
    `search`: the LR search's state as just read, else read here."""
    from analysis.judgement import STUDY, table_judgement  # lazy: `scaling --help` stays fast

    spec = study.spec
    if spec.lr.search is not None and search is None:
        search = read_state(study.folder)
    tasks = spec.evaluation.tasks if spec.evaluation is not None else None
    return table_judgement(
        spec.verdict.baseline,  # the looks' too (`looks.take_look`)
        margin_pct=spec.verdict.margin_pct,
        alpha=spec.verdict.alpha,
        # sequential seeds: judged at the last look's level, the looks in the report
        looks=looks_summary(study.folder) if spec.seed_rounds else None,
        design=design_of(study) if spec.seed_rounds else None,
        lr_search=None if search is None else _search_summary(search),
        stability=bool(spec.lr.search and spec.lr.search.find_edge),
        downstream_tasks=None if tasks is None else tuple(tasks),
        inference=inference,
        by=STUDY,
    )


def _search_summary(search: SearchState) -> dict:
    """What the report says about the LR search (rounds, cells added, arms left at an edge)."""
    return {
        "rounds": search.round,
        "num_added_cells": sum(len(a.seeds) for a in search.added),
        "ended": search.ended,
        "open_arms": list(search.open_arms),
        "stopped_arms": list(search.stopped_arms),
    }
