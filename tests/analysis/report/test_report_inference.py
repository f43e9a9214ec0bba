"""The "Inference cost" section: ratios in verdict.json and in the report match the figures.

`run_analysis` on the shipped demo run table (4 sizes, linear vs nonlinear) with hand-written
figures whose ratios are known: the report's table must show those numbers, beside each size's
gain, labelled with the device; without figures the section says how to measure them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report.fmt import with_ci
from analysis.report.sections.inference import NOT_MEASURED
from analysis.report.terminal import verdict_lines
from analysis.tables.runs import load_csv

CSV = Path(__file__).parents[1] / "demo_runs.csv"
SIZES = ("50K", "100K", "300K", "800K")


def _figures() -> dict:
    rows = []
    for i, size in enumerate(SIZES):
        base = {"prefill_tok_s": 1000.0, "decode_ms_b1": 2.0, "decode_ms_b32": 4.0}
        rows.append({"variant": "linear", "size": size, **base, "peak_mem_mb": 10.0})
        rows.append(
            {
                "variant": "nonlinear",
                "size": size,
                "prefill_tok_s": 800.0,  # prefill ratio 1.25
                "decode_ms_b1": 2.0 * (1.1 + 0.1 * i),  # 1.10, 1.20, 1.30, 1.40
                "decode_ms_b32": 6.0,  # 1.50
                "peak_mem_mb": 10.5,  # 1.05
            }
        )
    return {"device": "cpu", "memory_kind": "estimate: weights + KV cache (CPU)", "rows": rows}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> tuple[dict, str, dict, str]:
    table = load_csv(CSV)
    with_fig = tmp_path_factory.mktemp("with")
    without = tmp_path_factory.mktemp("without")
    verdict = run_analysis(
        table, table_judgement("linear", num_resamples=50, inference=_figures()), with_fig
    )
    bare = run_analysis(table, table_judgement("linear", num_resamples=50), without)
    return (
        verdict,
        (with_fig / "report.md").read_text(),
        bare,
        (without / "report.md").read_text(),
    )


def test_verdict_holds_cost_ratios_to_the_baseline(analysed):
    ratios = analysed[0]["inference"]["ratios"]["nonlinear"]
    assert set(ratios) == set(SIZES)
    for i, size in enumerate(SIZES):
        r = ratios[size]
        assert r["prefill"] == pytest.approx(1.25)
        assert r["decode_b1"] == pytest.approx(1.1 + 0.1 * i)
        assert r["decode_b32"] == pytest.approx(1.5)
        assert r["memory"] == pytest.approx(1.05)


def test_report_rows_show_the_ratios_beside_the_gain(analysed):
    verdict, report = analysed[0], analysed[1]
    section = report.split("## Inference cost", 1)[1].split("\n## ", 1)[0]
    nonlinear = next(v for v in verdict["variants"] if v["variant"] == "nonlinear")
    for i, size in enumerate(SIZES):
        row = re.search(rf"^\| nonlinear \| {size} \|(.*)$", section, re.M)
        assert row, (size, section)
        cells = [c.strip() for c in row.group(1).split("|") if c.strip()]
        gain = nonlinear["gain_pct_by_size"][size]["gain_pct"]
        assert cells[0] == with_ci(gain["value"], gain["ci95"], "%")  # this size's own gain
        assert cells[1:] == ["1.25x", f"{1.1 + 0.1 * i:.2f}x", "1.50x", "1.05x"]
    assert "Measured on cpu (CPU figures" in section
    (line,) = [x for x in verdict_lines(verdict) if x.startswith("inference cost")]
    assert line == (
        "inference cost (cpu, CPU figures) of nonlinear vs linear at 800K: prefill 1.25x, "
        "decode b1 1.40x, decode b32 1.50x, memory 1.05x"
    )


def test_without_figures_the_report_says_how_to_measure(analysed):
    bare, report = analysed[2], analysed[3]
    assert "inference" not in bare
    assert NOT_MEASURED in report


def test_bad_figures_name_the_field(tmp_path):
    bad = _figures()
    bad["rows"][1]["decode_ms_b1"] = -1.0
    with pytest.raises(ValueError, match=r"inference.rows\[1\].decode_ms_b1: -1.0"):
        run_analysis(
            load_csv(CSV), table_judgement("linear", num_resamples=50, inference=bad), tmp_path
        )
