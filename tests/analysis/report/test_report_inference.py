"""The "Inference cost" section: ratios in verdict.json and in the report match the figures.

`run_analysis` on the shipped demo run table (4 sizes, linear vs nonlinear) with hand-written
figures whose ratios are known: the report's table must show those numbers with their spread,
beside each size's gain, labelled with the device; a ratio whose rounds disagree reads as a
bound where their spread lies on one side of 1 (unresolved where it holds 1); without figures
the section says how to measure them.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report.fmt import num, with_ci
from analysis.report.sections.inference import NOT_MEASURED
from analysis.report.terminal import verdict_lines
from analysis.stats.inference import RATIO_BOUND, inference_summary
from analysis.tables.runs import load_csv

CSV = Path(__file__).parents[1] / "demo_runs.csv"
SIZES = ("50K", "100K", "300K", "800K")


# per-round load factors: both arms of a round see the same load (measured side by side)
LOAD = (1.0, 1.3, 0.9, 1.1)
# the nonlinear arm's own per-round decode-b32 factors at 800K: its rounds disagree
WILD = (1.0, 1.5, 2.0, 3.0)


def _row(variant: str, size: str, prefill: float, b1: float, b32: list[float], mem: float):
    """A measured row: per round the arm's figure times the round's load, the medians of those."""
    rounds = {
        "prefill_tok_s": [prefill / load for load in LOAD],
        "decode_ms_b1": [b1 * load for load in LOAD],
        "decode_ms_b32": [x * load for x, load in zip(b32, LOAD, strict=True)],
    }
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    return {
        "variant": variant,
        "size": size,
        **medians,
        "peak_mem_mb": mem,
        "kv_cache_mb": 1.0 if variant == "linear" else 0.25,
        "rounds": rounds,
        "session": size,
    }


def _figures() -> dict:
    rows = []
    for i, size in enumerate(SIZES):
        rows.append(_row("linear", size, 1000.0, 2.0, [4.0] * 4, 10.0))
        b32 = [6.0 * w for w in WILD] if size == "800K" else [6.0] * 4  # ratio 1.50
        # prefill ratio 1.25, decode b1 1.10, 1.20, 1.30, 1.40, memory 1.05, KV cache 0.25
        rows.append(_row("nonlinear", size, 800.0, 2.0 * (1.1 + 0.1 * i), b32, 10.5))
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
        # paired round by round, the shared load cancels: every round gives the true ratio
        for name, value in (("prefill", 1.25), ("decode_b1", 1.1 + 0.1 * i)):
            assert r[name]["value"] == pytest.approx(value) and r[name]["resolved"]
            assert r[name]["spread"] == pytest.approx([value, value]) and r[name]["paired"]
            assert r[name]["rounds"] == 4
        assert r["memory"]["value"] == pytest.approx(1.05) and r["memory"]["spread"] is None
        assert r["kv_cache"]["value"] == pytest.approx(0.25) and r["kv_cache"]["resolved"]
    for size in SIZES[:-1]:
        assert ratios[size]["decode_b32"]["value"] == pytest.approx(1.5)
    wild = ratios["800K"]["decode_b32"]  # per-round 1.5 x (1, 1.5, 2, 3): IQR 2.06 .. 3.38
    assert not wild["resolved"] and wild["range"] == pytest.approx([1.5, 4.5])
    assert wild["spread"][1] > RATIO_BOUND * wild["spread"][0]
    assert wild["bound"] == {"side": "at_least", "value": pytest.approx(wild["spread"][0])}


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
        b1 = f"{1.1 + 0.1 * i:.2f}"
        # its rounds disagree, but their whole middle half lies above 1: a lower bound
        b32 = "\u2265 2.06x (2.06-3.38)" if size == "800K" else "1.50x (1.50-1.50)"
        assert cells[1:] == [
            "1.25x (1.25-1.25)",
            f"{b1}x ({b1}-{b1})",
            b32,  # its rounds disagree: not a number, a bound
            "1.05x",
            "0.25x",
        ]
    assert "Measured on cpu (CPU figures" in section
    assert f"exceeds {RATIO_BOUND:g} times the lower" in section  # the bound, stated
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
        "inference cost (cpu, CPU figures) of nonlinear vs linear at 800K: prefill 1.25x "
        "(1.25-1.25), decode b1 1.40x (1.40-1.40), decode b32 \u2265 2.06x (2.06-3.38), memory "
        "1.05x, KV cache 0.25x"
    )


def test_figures_without_repeats_or_measured_apart():
    """An older file without rounds resolves no timed ratio; probes measured apart (no shared
    session) pair every round with every round, so their own load no longer cancels."""
    figures = _figures()
    old = [{k: v for k, v in r.items() if k not in ("rounds", "session")} for r in figures["rows"]]
    ratios = inference_summary({**figures, "rows": old}, "linear")["ratios"]["nonlinear"]["50K"]
    assert ratios["prefill"]["rounds"] == 0 and not ratios["prefill"]["resolved"]
    assert ratios["prefill"]["value"] == pytest.approx(1.25)  # kept, not shown as a number
    assert ratios["memory"]["resolved"]  # not timed
    apart = [{k: v for k, v in r.items() if k != "session"} for r in figures["rows"]]
    ratios = inference_summary({**figures, "rows": apart}, "linear")["ratios"]["nonlinear"]
    prefill = ratios["50K"]["prefill"]
    assert not prefill["paired"] and prefill["rounds"] == 4
    assert prefill["range"] == pytest.approx([1.25 * 0.9 / 1.3, 1.25 * 1.3 / 0.9])


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


def test_the_demo_report_backtests_its_top_size(analysed):
    """The demo's report (4 sizes) holds the backtest verdict.json carries: a "Backtest" section
    with one row per arm's loss and the gain at 800K, the skill sentence above the
    extrapolations with the verdict's largest loss error, and no number ("not predicted") for an
    extrapolation beyond the distance the backtest checked."""
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
            assert "not predicted (beyond" in row and "[" not in row
