"""verdict.json's `resolve` prices what would resolve an open verdict in the caller's unit
(`analysis.api.run_analysis(..., price=(cost, unit))`: a study's plan device-hours), and a run
table of no study, which has no plan (`scaling analyze --runs-csv`), in PFLOPs, saying so.
The demo's runs end inconclusive, so both verdicts carry options.
"""

from __future__ import annotations

from pathlib import Path

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.tables.runs import load_csv

DEMO = Path(__file__).resolve().parent / "demo_runs.csv"
HOURS = 2.0  # one run's device-hours, whatever its arm, size and tokens


def test_options_are_priced_by_the_callers_cost_else_in_pflops(tmp_path) -> None:
    table = load_csv(DEMO)
    judgement = table_judgement("linear", num_resamples=200)
    asked: list[tuple] = []

    def cost(variant: str, n_params: float, tokens: float) -> float:
        asked.append((variant, n_params, tokens))
        return HOURS

    priced = run_analysis(table, judgement, tmp_path / "a", price=(cost, "CPU-hours"))["resolve"]
    assert priced["unit"] == "CPU-hours"
    options = [o for v in priced["variants"].values() for o in v["options"]]
    assert options and all(o["cost"] == HOURS * o["num_runs"] for o in options), options
    assert {a[0] for a in asked} == {"linear", "nonlinear"}  # each run priced by its arm

    table_only = run_analysis(table, judgement, tmp_path / "b")["resolve"]
    assert table_only["unit"] == "PFLOPs"
    flops = [o["cost"] for v in table_only["variants"].values() for o in v["options"]]
    assert flops and flops != [o["cost"] for o in options]
