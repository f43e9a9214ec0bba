"""What the report, verdict.json and the terminal say, checked on real renderings of synthetic
studies with a known truth: small studies without intervals anywhere, the one terminal line,
single-LR tables, parameters at a bound, named scales and how far plots reach."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report import figures, fmt
from analysis.report.terminal import verdict_lines
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import at_compute_multiplier, chinchilla, ladder
from analysis.synthetic.studies import Effect, Law, make_study
from analysis.tables.runs import load_csv, normalise
from scaling.cli import app as scaling_app

DEMO = Path(__file__).parents[1] / "demo_runs.csv"
STUDY = {"linear": Effect(), "nonlinear": Effect(k0=1.5)}
SIZES = (2e6, 5e6, 1e7, 2e7, 5e7)
INTERVAL = re.compile(r"\[[\u2212\-]?\d[\d.]*%?×?, [\u2212\-]?\d|\d% CI|CI \[|95% band")
RAW_FLOAT = re.compile(r"\d\.\d{8,}")  # a float printed raw: 0.4338732400572969


def _cli(args: list[str]):
    app = scaling_app  # the `scaling` command itself
    return CliRunner().invoke(app, ["analyze", *args])


# every interval or p-value verdict.json can carry, listed here (not imported) so that a key
# the analysis forgets to clear still fails the test
KEYS = ("ci", "ci95", "k0_ci95", "gamma_ci95", "paired_ci", "pooled_ci", "p", "variant_p")


def _intervals_in(value, path="") -> list[str]:
    """Paths of every non-null interval or p-value in verdict data."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in KEYS and v is not None:
                found.append(f"{path}.{k}")
            found += _intervals_in(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _intervals_in(v, f"{path}[{i}]")
    return found


def test_a_two_seed_study_shows_no_interval_anywhere_and_says_why_once(tmp_path):
    table = make_study(STUDY, sizes=SIZES, num_seeds=2)
    csv = tmp_path / "runs.csv"
    table.to_csv(csv, index=False)
    out = tmp_path / "out"
    res = _cli(["--runs-csv", str(csv), "--out", str(out), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    verdict = json.loads((out / "verdict.json").read_text())
    assert _intervals_in(verdict) == []
    assert verdict["intervals"]["available"] is False and verdict["num_resamples"] == 0
    assert all(f["resamples_fitted"] == 0 for f in verdict["fits"])  # nothing to draw a band
    report = (out / "report.md").read_text()
    assert not INTERVAL.search(report.split("## The verdict rule")[0]), INTERVAL.findall(report)
    assert report.count("an interval needs at least 3") == 1
    assert "none (no intervals)" in report and "bootstrap draws" not in report.replace(
        "no bootstrap draws", ""
    )
    # the terminal: the shared lines, rounded, with no interval, None or doubled "not available"
    for line in verdict_lines(verdict):
        assert line in res.output
    terminal = res.output
    assert not re.search(r"\bNone\b|not available", terminal), terminal
    assert not INTERVAL.search(terminal) and "no CIs with 2 seed(s)" in terminal, terminal
    assert not RAW_FLOAT.search(terminal), terminal
    an = analyse(table, table_judgement("linear", num_resamples=200))
    assert an.groups.draws.shape[0] == 1  # no draws: the plots have no band to draw


def test_single_lr_table_lists_its_cells_once_and_gives_the_conditional_verdict(tmp_path):
    """One LR per arm: inconclusive, but a variant that truly hurts (k = 0.8) reads as
    "if each arm's LR was its best: hurts"; the 10 unbracketed cells are named once."""
    arms = {"linear": chinchilla, "nonlinear": at_compute_multiplier(lambda c: 0.8)}
    rows = ladder(arms, 3, grids={"linear": (1.0,), "nonlinear": (1.0,)})
    verdict = run_analysis(
        normalise(pd.DataFrame(rows), "single LR"),
        table_judgement("linear", num_resamples=100),
        tmp_path,
    )
    (v,) = verdict["variants"]
    assert v["verdict"] == "inconclusive" and v["conditional_verdict"] == "hurts"
    guard = v["reason"].split("; if ")[0]
    assert guard.startswith("LR not bracketed at 10 cell(s): linear and nonlinear at 1.2M")
    assert guard.count("one LR tried") == 1 and guard.count("add LR") == 1
    for size in v["gain_pct_by_size"]:
        assert guard.count(f"{size},") + guard.count(f"{size}:") == 1, size
    report = (tmp_path / "report.md").read_text()
    assert "if each arm's LR was its best: hurts" in report  # headline
    assert "(if each arm's LR was its best: **hurts**)" in report  # the verdict table


def test_a_parameter_at_its_bound_is_not_identified_never_a_long_decimal(tmp_path):
    """A pure power law (true E = 0) with one seed: the fitted floor runs to ~1e-21."""
    table = make_study(STUDY, num_seeds=1, law=Law(E=0.0, A=79.0, alpha=0.05), rng_seed=0)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=0), tmp_path)
    floors = [f["params"]["E"]["value"] for f in verdict["fits"]]
    assert min(floors) < 1e-6  # the case this test is about
    report = (tmp_path / "report.md").read_text()
    fitted = report.split("## Fitted laws")[1].split("## ")[0]
    assert fmt.NOT_IDENTIFIED in fitted
    assert not re.search(r"0\.0{6,}|\d{12,}", fitted), fitted


def test_named_scales_far_beyond_the_data_are_listed_not_drawn(tmp_path, monkeypatch):
    """The demo (800K-3M parameters): 1B and 7B lie >10,000x beyond its compute. The report
    lists them in words; the plots' axes stop within 100x of the data."""
    limits = {}
    save = figures.save

    def spy(fig, out_dir, name, tight=True):
        limits[name] = fig.axes[0].get_xlim()
        return save(fig, out_dir, name, tight)

    monkeypatch.setattr(figures, "save", spy)
    table = load_csv(DEMO)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=100), tmp_path)
    used = table[table["status"] == "completed"]
    n_max, c_max = used["num_nonembedding_params"].max(), used["flops"].max()
    (v,) = verdict["variants"]
    for ext in v["extrapolated_gain_pct"].values():
        assert ext["far_extrapolation"] and ext["times_largest_measured_compute"] > 100
    assert limits["gain_vs_n"][1] <= 100 * n_max
    assert limits["k_vs_c"][1] <= 100 * c_max
    report = (tmp_path / "report.md").read_text()
    assert "listed here but not drawn" in report
    assert "| nonlinear | 1B |" in report and "| nonlinear | 7B |" in report


def test_named_scales_use_the_accounting_not_a_fit_over_tiny_models():
    """FLOPs per parameter per token at 1B and 7B: the accounting at a standard shape (about 7,
    never the 1.05 / 0.69 a log-log fit over the demo's sizes gave), the same on any subset."""
    table = load_csv(DEMO)
    full = analyse(table, table_judgement("linear", num_resamples=0)).verdict
    sizes = sorted(table["size"].unique())
    subset = analyse(
        table[table["size"] != sizes[0]], table_judgement("linear", num_resamples=0)
    ).verdict
    per = full["flops_per_param_token_at_named_scales"]
    assert per == subset["flops_per_param_token_at_named_scales"]
    assert 6.0 < per["7B"] < per["1B"] < 8.0
    scale = full["named_scales"]["1B"]
    assert scale["flops"] == pytest.approx(scale["flops_per_token"] * scale["tokens"])


def test_the_why_column_and_the_terminal_are_in_words_rounded_like_the_tables(tmp_path):
    table = make_study(STUDY, sizes=SIZES, num_seeds=4, rng_seed=2)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=200), tmp_path)
    (v,) = verdict["variants"]
    top = v["decision"]["top_gain_pct"]
    rounded = fmt.num(top["value"], fmt.decimals(top["ci"]))
    row = next(
        line for line in (tmp_path / "report.md").read_text().splitlines()
        if line.startswith("| nonlinear | **")
    )  # fmt: skip
    why = row.rstrip(" |").split(" | ")[-1]
    assert "CI [" not in why and f"gain at {top['size']} {rounded}%" in why, why
    lines = verdict_lines(verdict)
    assert f"gain at {top['size']} {rounded}%" in lines[0]
    assert not any(RAW_FLOAT.search(line) or "None" in line for line in lines), lines
    assert np.isfinite(top["value"])
