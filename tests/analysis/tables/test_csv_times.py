"""A run CSV's ``tokens_per_s`` column reaches the gain at matched GPU-hours, as MLflow's logged
``tokens_per_s`` does: `scaling analyze --runs-csv` used to drop the column and report "no time
measurement" with no hint. A bad value is refused in one line naming the column and the row.

The demo's runs (`tests/analysis/demo_runs.csv`) with a throughput per run: linear 1000 tokens/s,
nonlinear 800 (1.25x the time per token), each run off by a few per cent.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.tables.csv_times import load_csv_runs
from analysis.tables.runs import load_csv
from scaling.cli import app as scaling_app

DEMO = Path(__file__).parents[1] / "demo_runs.csv"
SPEED = {"linear": 1000.0, "nonlinear": 800.0}


def _cli(args: list[str]):
    app = scaling_app  # the `scaling` command itself
    return CliRunner().invoke(app, ["analyze", *args])


def _timed_csv(tmp_path: Path) -> Path:
    runs = pd.read_csv(DEMO)
    jitter = np.exp(np.random.default_rng(63).normal(0, 0.03, len(runs)))
    runs["tokens_per_s"] = runs["variant"].map(SPEED) * jitter
    runs["device"] = "cpu"
    path = tmp_path / "timed.csv"
    runs.to_csv(path, index=False)
    return path


def test_the_csv_column_becomes_each_runs_time_per_token(tmp_path):
    path = _timed_csv(tmp_path)
    table, times = load_csv_runs(path)
    assert table.equals(load_csv(path))  # the run table itself is as before
    assert times["device"] == "cpu" and "tokens_per_s" in times["source"]
    raw = pd.read_csv(path)
    assert len(times["rows"]) == len(raw)
    for row, (_, run) in zip(times["rows"], raw.iterrows(), strict=True):
        assert row["time_per_token_s"] == pytest.approx(1 / run["tokens_per_s"])
        assert (row["variant"], row["size"]) == (run["variant"], run["size"])


def test_analyze_runs_csv_states_the_time_matched_gain_from_the_column(tmp_path):
    out = tmp_path / "out"
    res = _cli(["--runs-csv", str(_timed_csv(tmp_path)), "--out", str(out), "--resamples", "50"])
    assert res.exit_code == 0, res.output
    timed = json.loads((out / "verdict.json").read_text())["time_matched"]
    assert timed["measured"] is True and timed["device"] == "cpu"
    (v,) = timed["variants"]
    assert set(v["by_size"]) == {"50K", "100K", "300K", "800K"}
    for row in v["by_size"].values():
        ratio = row["time_ratio"]["value"]
        assert math.isclose(ratio, 1.25, rel_tol=0.08), ratio  # 1000 / 800 tokens/s
        assert row["stated"] and row["gain_pct"]["ci95"] is not None


def test_a_bad_tokens_per_s_is_refused_naming_the_column_and_row(tmp_path):
    runs = pd.read_csv(DEMO)
    runs["tokens_per_s"] = 1000.0
    runs.loc[4, "tokens_per_s"] = -3.0
    path = tmp_path / "bad.csv"
    runs.to_csv(path, index=False)
    res = _cli(["--runs-csv", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "column 'tokens_per_s' row 5" in res.output, res.output
    assert not (tmp_path / "out" / "verdict.json").exists()
