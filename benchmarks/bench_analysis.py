"""Benchmark: Approach-3 fits plus a 1,000-draw parametric bootstrap for a 200-run study.

Budget: <= 30 s on 2 cores. The study: 2 arms x 5 sizes x 4 LRs x 5 seeds =
200 runs; the seed noise is fitted as two variance components, and each of the 1,000 draws
re-selects the best usable LR per cell and refits L(N), L(C) per arm and k(C) (every draw is
distinct, so all 1,000 are fitted: together, by the batched fitter). Beside it,
the real 24-run demo study (tests/analysis/demo_runs.csv: 4 sizes x 2 arms x 3 seeds, very
noisy small-model losses), whose bootstrap was once far slower than the synthetic one.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_analysis.py [--resamples 1000]
        [--chinchilla]   # also time the full 4,500-start grid on the Chinchilla fixture
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.synthetic.studies import Effect, make_study

BUDGET_S = 30.0
FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "chinchilla_fig4_points.csv"
DEMO = Path(__file__).resolve().parents[1] / "tests" / "analysis" / "demo_runs.csv"


def bench_study(num_resamples: int) -> float:
    table = make_study(
        {"linear": Effect(), "nonlinear": Effect(k0=1.5)},
        sizes=(2e6, 5e6, 1e7, 2e7, 5e7),
        num_seeds=5,
        lrs=(4e-3, 8e-3, 1.6e-2, 3.2e-2),  # brackets the synthetic optimum at every size
    )
    assert len(table) == 200
    t0 = time.perf_counter()
    result = analyse(table, table_judgement("linear", num_resamples=num_resamples))
    elapsed = time.perf_counter() - t0
    (variant,) = result.verdict["variants"]
    print(
        f"200 runs, {num_resamples} resamples: {elapsed:.1f} s "
        f"({'within' if elapsed <= BUDGET_S else 'OVER'} the {BUDGET_S:.0f} s budget); "
        f"verdict {variant['verdict']} ({variant['reason']})"
    )
    return elapsed


def bench_demo(num_resamples: int) -> float:
    from analysis.tables.runs import load_csv

    table = load_csv(DEMO)
    t0 = time.perf_counter()
    result = analyse(table, table_judgement("linear", num_resamples=num_resamples))
    elapsed = time.perf_counter() - t0
    (variant,) = result.verdict["variants"]
    fits = sum(f.counts.distinct for f in result.fits)  # draws fitted
    failed = sum(f["resamples_failed"] for f in result.verdict["fits"])
    print(
        f"demo study, {len(table)} real runs, {num_resamples} resamples: {elapsed:.1f} s "
        f"({'within' if elapsed <= BUDGET_S else 'OVER'} the {BUDGET_S:.0f} s budget); "
        f"{fits} draw fits over {len(result.fits)} laws, {failed} not converged; "
        f"verdict {variant['verdict']} ({variant['reason']})"
    )
    return elapsed


def bench_chinchilla() -> float:
    import pandas as pd

    from analysis.stats.fits import fit

    table = pd.read_csv(FIXTURE).sort_values("loss").iloc[:-5]
    n = table["Model Size"].to_numpy()
    d = table["Training FLOP"].to_numpy() / (6 * n)
    model = fit.chinchilla_model(n, d)
    t0 = time.perf_counter()
    got = fit.fit(model, np.log(table["loss"].to_numpy()), fit.grid_starts(model)).as_dict()
    elapsed = time.perf_counter() - t0
    print(
        f"Chinchilla L(N, D), 4,500 starts x {len(n)} points: {elapsed:.1f} s; "
        f"E {np.exp(got['e']):.4f} alpha {got['alpha']:.4f} beta {got['beta']:.4f}"
    )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--chinchilla", action="store_true")
    args = parser.parse_args()
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    bench_study(args.resamples)
    bench_demo(args.resamples)
    if args.chinchilla:
        bench_chinchilla()


if __name__ == "__main__":
    main()
