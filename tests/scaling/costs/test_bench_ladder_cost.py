"""benchmarks/bench_ladder_cost.py, smoke-run with tiny counts: it drives the pipeline's own LR
search on the shipped ladder, and its law-breaking rows fall back."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from analysis.stats.looks import seq_cost
from scaling.lr_search import extend_grid

BENCH = Path(__file__).parents[3] / "benchmarks" / "bench_ladder_cost.py"


def test_the_benchmark_runs_the_pipeline_s_decisions(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_ladder_cost", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.decide_round is extend_grid.decide_round
    assert bench.simulate_sequential is seq_cost.simulate_sequential
    monkeypatch.setattr(sys, "argv", ["bench", "--studies", "1", "--looks", "400"])
    bench.main()
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if "% |" in line]
    assert [r[0] for r in rows] == ["law holds", "law breaks at top"] * 2
    assert [r[-3] for r in rows][1::2] == ["1/1", "1/1"]  # the moved optimum breaks the law
    assert all(float(r[4].rstrip("x")) < 1 for r in rows)  # cheaper than the naive grid
    # the floor (a perfect law) is never above what the pipeline spends
    assert all(float(r[-2].rstrip("x")) <= float(r[4].rstrip("x")) + 0.005 for r in rows)
    # the verdict's test carries the grid's term, from the study's own runs
    assert all(float(r[-1].rstrip("%")) > 0 for r in rows)
