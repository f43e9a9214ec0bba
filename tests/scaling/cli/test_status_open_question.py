"""`scaling status` on an open question (issue 61): under the grid, one line per unresolved
variant with its best option, the very lines the terminal prints after the verdict
(`analysis.report.sections.resolve.resolve_lines`), then the resolve path's state where
`run --resolve` declared a plan: how it ended (`scaling.driver.resolve.ended_line`, as the
resolve said it), or how far it went. Read off the lines `open_question_lines` returns, not off
a terminal.
"""

from __future__ import annotations

from analysis.report.sections.resolve import resolve_lines
from scaling.cli.status_view import open_question_lines
from scaling.driver.resolve import ended_line


def _option(kind: str, cost: float, p: float, edit: str) -> dict:
    return {"variant": "nonlinear", "kind": kind, "cost": cost, "half_width_pct": 0.4,
            "p_resolve": p, "p_plan": p, "edit": edit, "why": "", "note": "",
            "num_runs": 4}  # fmt: skip


def _verdict() -> dict:
    """Two unresolved variants, one with options and one without (nothing it could buy)."""
    variant = {"word": "undetected", "size": "100K", "estimate_pct": -0.1, "half_width_pct": 0.9,
               "seeds_sd_pct": 0.5, "num_seeds": 3, "grid_sd_pct": 0.2}  # fmt: skip
    options = [_option("seeds", 0.027, 0.5, "seeds.max: 5"), _option("lr_grid", 0.16, 0.4, "x")]
    return {
        "variants": [{"variant": "nonlinear", "verdict": "undetected"}],
        "resolve": {
            "unit": "CPU-hours",
            "level": 0.016,
            "max_looks": 4,
            "variants": {
                "nonlinear": {**variant, "options": options},
                "residual": {**variant, "options": []},
            },
        },
    }


PLAN = {"budget": 0.5, "max_looks": 4, "alpha": 0.05, "kinds": ["seeds", "lr_grid"],
        "max_seeds": None, "start_seeds": 3}  # fmt: skip
BOUGHT = {"kind": "seeds", "num_runs": 4, "cost": 0.027, "why": "", "p_resolve": 0.5}


def test_each_unresolved_variant_gets_its_best_option_as_after_the_verdict() -> None:
    verdict = _verdict()
    lines = open_question_lines(verdict, None)
    assert lines == resolve_lines(verdict)  # the terminal's function, no second formatter
    assert len(lines) == 1  # the variant with an option; none for the one without
    assert lines[0].startswith("to resolve nonlinear: seeds.max: 5: 0.0270 CPU-hours")
    assert "P(resolve) 0.50" in lines[0]


def test_an_ended_path_is_said_as_the_resolve_said_it() -> None:
    path = {"budget": 0.5, "max_looks": 4, "alpha": 0.05, "levels": [0.001, 0.016],
            "looks": [{"look": 0, "level": 0.001, "words": {"nonlinear": "undetected"}},
                      {"look": 1, "level": 0.016, "words": {"nonlinear": "none"},
                       "bought": BOUGHT}],
            "spent": 0.027, "words": {"nonlinear": "none"}, "resolved": True,
            "stopped": "resolved"}  # fmt: skip
    state = {"plan": PLAN, "looks": path["looks"], "path": path}
    lines = open_question_lines(None, state)  # resolved: verdict.json has no `resolve`
    assert lines == [ended_line(path)]
    assert lines[0] == (
        "resolve: resolved after 1 extension(s), 0.027 of 0.5 device-hours; nonlinear none"
    )


def test_a_path_not_ended_says_how_far_it_went() -> None:
    looks = [
        {"look": 0, "level": 0.001, "words": {"nonlinear": "undetected"}},
        {"look": 1, "round": 2, "cells": [], "bought": BOUGHT},  # bought, not yet judged
    ]
    verdict = _verdict()
    lines = open_question_lines(verdict, {"plan": PLAN, "looks": looks, "path": None})
    assert lines[:-1] == resolve_lines(verdict)
    assert lines[-1].startswith(
        "resolve: not ended, 1 look(s) judged, 1 of at most 4 extension(s) bought, 0.027 of 0.5 "
        "device-hours"
    )
    declared = open_question_lines(None, {"plan": PLAN, "looks": [], "path": None})
    assert declared == [
        "resolve: not ended, 0 look(s) judged, 0 of at most 4 extension(s) bought, 0 of 0.5 "
        "device-hours; run --resolve again with the same flags to go on"
    ]


def test_a_resolved_study_without_a_path_adds_nothing() -> None:
    assert open_question_lines(None, None) == []
    assert open_question_lines({"variants": [{"variant": "v", "verdict": "helps"}]}, None) == []
