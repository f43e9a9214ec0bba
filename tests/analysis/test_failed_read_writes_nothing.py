"""A read that fails while the analysis runs (the tracking server gone when the training curves
are fetched) leaves the study's earlier verdict.json and report as they were: every read comes
before the first write."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.tables.runs import load_csv
from foundation.mlflow_rest import TrackingUnavailable

DEMO = Path(__file__).resolve().parent / "demo_runs.csv"


def test_a_failed_curves_read_leaves_the_old_verdict_and_report(tmp_path):
    out = tmp_path / "analysis"
    out.mkdir()
    before = {name: f"earlier {name}\n" for name in ("verdict.json", "report.md")}
    for name, text in before.items():
        (out / name).write_text(text)

    def gone(run_ids: list[str]) -> dict:
        raise TrackingUnavailable("http://127.0.0.1:9: the tracking server did not answer")

    with pytest.raises(TrackingUnavailable):
        run_analysis(load_csv(DEMO), table_judgement("linear", num_resamples=0), out, curves=gone)
    assert {p.name: p.read_text() for p in out.iterdir()} == before
