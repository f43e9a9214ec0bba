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
from analysis.report.fmt import num, with_ci
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
    verdict = run_analysis(table, with_fig, "linear", num_resamples=50, inference=_figures())
    bare = run_analysis(table, without, "linear", num_resamples=50)
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
    # break-even at the top size: what a baseline 1.40x larger gains on the baseline's own L(N)
    (fit,) = [f for f in verdict["fits"] if f["law"] == "L(N)" and f["variant"] == "linear"]
    e, a, alpha = (fit["params"][k]["value"] for k in ("E", "A", "alpha"))
    n = nonlinear["gain_pct_by_size"]["800K"]["n_params"]
    law = lambda x: e + a * x**-alpha  # noqa: E731
    need = 100 * (law(n) - law(1.4 * n)) / law(n)
    assert f"only with a loss gain above {num(need, sig=2)}%" in section
    assert "nonlinear at 800K decodes at 1.40x the baseline's time per step" in section
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
        run_analysis(load_csv(CSV), tmp_path, "linear", num_resamples=50, inference=bad)


def test_the_demo_report_backtests_its_top_size(analysed):
    """The demo's report (4 sizes) holds the backtest verdict.json carries: a "Backtest" section
    with one row per arm's loss and the gain at 800K, the skill sentence above the
    extrapolations with the verdict's largest loss error, and no interval on an extrapolation
    beyond the distance the backtest checked."""
    verdict, report = analysed[0], analysed[1]
    found = verdict["backtest"]
    (step,) = found["steps"]
    assert step["held_out"] == "800K" and step["fitted_sizes"] == ["50K", "100K", "300K"]
    section = report.split("## Backtest", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| 50K, 100K, 300K → 800K")]
    assert len(rows) == 3  # linear's loss, nonlinear's loss, the gain
    for row, want in zip(rows, step["losses"] + step["gains"], strict=True):
        assert with_ci(want["predicted"], want["ci95"]) in row.replace("%", "")
    extrap = report.split("## Extrapolation", 1)[1].split("\n## ", 1)[0]
    error = num(found["skill"]["max_abs_loss_error_pct"], sig=2)
    assert "the laws predicted 800K" in extrap and f"within {error}% of each arm's loss" in extrap
    for v in verdict["variants"]:
        for name, e in v["extrapolated_gain_pct"].items():
            assert e["within_backtest_skill"] is False  # 10^7x and more beyond the data
            row = next(line for line in extrap.splitlines() if f"| {name} |" in line)
            assert "no interval: beyond" in row and "[" not in row
