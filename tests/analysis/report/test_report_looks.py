"""The report of a study with sequential seeds (``run_analysis(..., sequential=looks.json)``).

Two looks of a 3-look design (start 3, max 7, step 2) are judged by the real
``analysis.stats.looks.sequential.decide_look`` on a synthetic study (``compute_law_study``, k0 =
1.2, drawn once with 7 seeds per size; each look reads the seeds the design asked for, as
``replay`` does), written in the looks.json format of docs/interfaces.md, and handed to
``run_analysis``. The study is deterministic: at look 1 (3 seeds, level 0.0028) it reads
``undetected`` where a fixed 5% design on the same runs claims ``persists``; at look 2 (5 seeds
at the top, level 0.019) it stops on ``persists``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report.terminal import verdict_lines
from analysis.stats.looks.replay import reveal
from analysis.stats.looks.sequential import Design, Look, decide_look, judge_at
from analysis.synthetic.scenarios import compute_law_study

SIZES = tuple(float(x) for x in np.geomspace(1.2e6, 1e8, 4))
DESIGN = Design(start=3, max=7, step=2)
DRAWS = 200
RUN_SD = 0.0065  # per-run sd, as tests/analysis/stats/looks/test_sequential.py
K0, RNG_SEED = 1.2, 0  # a 5% design claims `persists` at look 1; the look's level does not


def _design_dict(design: Design) -> dict:
    return {k: getattr(design, k) for k in ("start", "max", "step", "margin_pct", "alpha")}


def _entry(look: Look, round_: int, table: pd.DataFrame) -> dict:
    """One look as looks.json holds it (scaling.looks.sequential_seeds writes the same keys)."""
    from analysis.stats.looks.sequential import analyse_look

    judged = table_judgement("linear", num_resamples=DRAWS, design=DESIGN)
    analysis = analyse_look(table, judged.at_look(DESIGN.alpha))
    decisions = judge_at(analysis, judged.at_look(look.level))
    gains = {}
    for variant, d in decisions.items():
        top = d.get("top_gain_pct") or {}
        ci = top.get("ci") or [None, None]
        gains[variant] = {"estimate": top.get("value"), "lo": ci[0], "hi": ci[1]}
    top_seed = int(table["seed"].max())
    added = [
        {"variant": v, "size": size, "tokens": None, "lr": None,
         "seeds": list(range(top_seed + 1, top_seed + 1 + k))}
        for size, k in look.add_seeds.items() for v in sorted(table["variant"].unique())
    ]  # fmt: skip
    return {**look.record(), "round": round_, "top_gain_pct": gains, "added": added}


@pytest.fixture(scope="module")
def looks():
    """(look-1 table, look-2 table, looks.json after look 1, looks.json after look 2)."""
    full = compute_law_study(K0, 0.0, RNG_SEED, num_seeds=DESIGN.max, sizes=SIZES, run_sd=RUN_SD)
    seeds = {str(s): DESIGN.start for s in full["size"].unique()}
    first_table = reveal(full, seeds)
    first = decide_look(
        first_table, table_judgement("linear", num_resamples=DRAWS, design=DESIGN), 1
    )
    assert not first.stop and first.add_seeds == {"100M": 2}, first.reason
    for size, k in first.add_seeds.items():
        seeds[size] += k
    second_table = reveal(full, seeds)
    second = decide_look(
        second_table, table_judgement("linear", num_resamples=DRAWS, design=DESIGN), 2
    )
    assert second.stop and second.verdict == "persists", second.reason
    one = {"design": _design_dict(DESIGN), "looks": [_entry(first, 2, first_table)]}
    two = {**one, "looks": [*one["looks"], _entry(second, 3, second_table)]}
    # as the round driver writes it and the report reads it back: plain JSON
    return first_table, second_table, json.loads(json.dumps(one)), json.loads(json.dumps(two))


def test_the_report_of_a_finished_design_is_its_last_look(looks, tmp_path):
    _, table, _, state = looks
    last = state["looks"][-1]
    verdict = run_analysis(
        table, table_judgement("linear", num_resamples=DRAWS, looks=state), tmp_path
    )
    (v,) = verdict["variants"]
    assert v["verdict"] == last["verdict"] == "persists"
    assert v["decision"]["level"] == pytest.approx(last["level"])  # the family-wise level
    saved = json.loads((tmp_path / "verdict.json").read_text())
    seq = saved["sequential"]
    assert [x["look"] for x in seq["looks"]] == [1, 2]
    assert seq["looks"] == state["looks"] and seq["design"] == state["design"]
    assert seq["judged_at"]["look"] == 2
    assert seq["judged_at"]["level"] == pytest.approx(last["level"])
    assert seq["finished"] and seq["matches_last_look"] and seq["num_looks_max"] == 3
    assert saved["variants"][0]["verdict"] == last["verdict"]
    assert saved["multiple_comparisons"].startswith("family-wise 1.93% (look 2's nominal level")

    report = (tmp_path / "report.md").read_text()
    section = report.split("## Sequential looks")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 3, rows  # the header and one row per look
    assert rows[1].startswith("| 1 | 3 | 0.43 | 2.994 | 0.0028 | ") and "| continue |" in rows[1], (
        rows[1]
    )
    assert "| **undetected** |" in rows[1] and "+2 at 100M" in rows[1]
    assert rows[2].startswith("| 2 | 5 | 0.71 | 2.339 | ") and "| stop |" in rows[2], rows[2]
    assert "| 0.019 | **persists** |" in rows[2] and "decided: persists" in rows[2]
    assert "seeds: {start: 3, max: 7, step: 2}" in section
    assert "judged at look 2's nominal level 0.019" in section
    assert "rather than at 5%: adjusted for the 2 looks so far" in section
    assert "Lan–DeMets O'Brien–Fleming-type alpha spending" in section
    assert "the chance of any false claim over all the looks the design takes (at most 3) is " \
        "at most 5%" in section  # fmt: skip
    assert "Seeds added: after look 1, +2 at 100M (round 2)." in section
    assert "The design finished at look 2 of at most 3: decided: persists." in section
    assert "has not finished" not in report
    assert "judged as look 2 of at most 3, at its nominal level 0.019" in report  # under the lead
    assert "Sequential looks" in (tmp_path / "report.html").read_text()
    line = verdict_lines(verdict)[0]
    assert line.startswith("nonlinear vs linear: persists (look 2 of at most 3, level 0.019): ")


def test_without_looks_the_report_has_no_such_section_and_judges_at_5_percent(looks, tmp_path):
    _, table, _, _ = looks
    verdict = run_analysis(table, table_judgement("linear", num_resamples=DRAWS), tmp_path)
    assert "sequential" not in verdict
    assert verdict["variants"][0]["decision"]["level"] == 0.05
    assert verdict["multiple_comparisons"].startswith("family-wise 5%")
    report = (tmp_path / "report.md").read_text()
    assert "Sequential" not in report and "nominal level" not in report
    assert "(look " not in verdict_lines(verdict)[0]
    # a looks.json with no look judged yet is no sequential design to report
    empty = {"design": None, "looks": []}
    again = run_analysis(
        table, table_judgement("linear", num_resamples=DRAWS, looks=empty), tmp_path / "empty"
    )
    assert "sequential" not in again


def test_the_report_words_follow_the_looks_level_not_5_percent(looks, tmp_path):
    """Look 1's table: a fixed 5% design claims `persists`; at look 1's level 0.0028 it is not
    resolved, and every word of the report follows the look. The study stopped after look 1
    asked for seeds: the report says the design has not finished."""
    table, _, state, _ = looks
    fixed = run_analysis(
        table, table_judgement("linear", num_resamples=DRAWS, seed=1), tmp_path / "fixed"
    )
    assert fixed["variants"][0]["verdict"] == "persists"
    verdict = run_analysis(
        table, table_judgement("linear", num_resamples=DRAWS, looks=state), tmp_path / "look"
    )
    (v,) = verdict["variants"]
    assert v["verdict"] == "undetected" == state["looks"][0]["verdict"]
    assert verdict["sequential"]["matches_last_look"]
    assert not verdict["sequential"]["finished"]
    top = v["decision"]["top_gain_pct"]
    assert top["level"] == pytest.approx(0.8 * state["looks"][0]["level"])  # top size: 80%
    report = (tmp_path / "look" / "report.md").read_text()
    lead = report.split("\n## ")[0]
    assert "not resolved" in lead and "persists" not in lead, lead
    assert "99.8% CI" in lead  # the headline's interval at the top size's level, not 95%
    row = next(line for line in report.splitlines() if line.startswith("| nonlinear | **"))
    assert "| **undetected** |" in row and "| 99.8% |" in row, row
    section = report.split("## Sequential looks")[1].split("\n## ")[0]
    assert "judged at look 1's nominal level 0.0028" in section
    assert "The design has not finished: look 1 asked for +2 at 100M" in section
    assert "is not the design's final decision" in section
    line = verdict_lines(verdict)[0]
    assert line.startswith(
        "nonlinear vs linear: undetected (look 1 of at most 3, level 0.0028; the design has "
        "not finished): "
    ), line
    fixed_report = (tmp_path / "fixed" / "report.md").read_text()
    assert "persists" in fixed_report.split("\n## ")[0]


def test_a_looks_state_missing_a_field_is_refused_before_anything_is_written(looks, tmp_path):
    table, _, state, _ = looks
    broken = {**state, "looks": [{k: x for k, x in state["looks"][0].items() if k != "level"}]}
    with pytest.raises(ValueError, match="missing level"):
        run_analysis(
            table, table_judgement("linear", num_resamples=DRAWS, looks=broken), tmp_path / "out"
        )
    assert not (tmp_path / "out").exists()


def test_a_verdict_that_is_not_the_last_looks_says_so(looks, tmp_path):
    """Runs that are not the ones the last look read (here: look 2's table under look 1's
    state) are reported at look 1's level, with the seeds counted both ways if the words differ."""
    from analysis.report.sections.looks import look_blocks

    _, table, state, _ = looks
    verdict = run_analysis(
        table, table_judgement("linear", num_resamples=DRAWS, looks=state), tmp_path
    )
    seq = verdict["sequential"]
    assert seq["num_paired_top_now"] == 5 and seq["looks"][-1]["num_paired_top"] == 3
    differs = {**verdict, "sequential": {**seq, "matches_last_look": False}}
    notes = [b[1] for b in look_blocks(differs) if b[0] == "note"]
    assert any(
        "The verdict here is not look 1's (undetected)" in n
        and "(5 paired seeds at the top here, 3 at the look)" in n
        for n in notes
    ), notes
    assert seq["matches_last_look"] == (verdict["variants"][0]["verdict"] == "undetected")
