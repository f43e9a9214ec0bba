"""analysis.stats.looks.seq_cost: the sequential design's expected seeds, by simulation of its
binding test (the simulation bench_sequential runs and `scaling plan` prints)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from analysis.stats.looks import seq_cost
from analysis.stats.looks.sequential import Design

BENCH = Path(__file__).parents[4] / "benchmarks" / "bench_sequential.py"


def test_the_benchmark_runs_the_library_simulation():
    spec = importlib.util.spec_from_file_location("bench_sequential", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.simulate_sequential is seq_cost.simulate_sequential


def test_the_default_design_reproduces_the_published_seeds():
    """docs/statistics.md: 9.85 seeds at 680M on average at the 0.5% margin, paired sd 1.99%
    (200,000 studies there; the benchmark lets equivalence stop any look: draws=None)."""
    out = seq_cost.expected_seeds(Design(), 0.5, 1.99, num=20_000, draws=None)
    assert out.mean_top_seeds == pytest.approx(9.85, abs=0.05)
    assert out.claim_rate == pytest.approx(0.088, abs=0.01)


def test_deterministic_and_the_shares_add_up():
    design = Design(3, 7, 2)
    a = seq_cost.expected_seeds(design, 1.0, 0.3)
    assert a == seq_cost.expected_seeds(design, 1.0, 0.3)
    assert sum(a.stop_share) == pytest.approx(1.0)
    seeds = np.array(design.planned_seeds())
    assert a.mean_top_seeds == pytest.approx(float(seeds @ np.array(a.stop_share)))


def test_a_large_gain_stops_at_look_2_and_no_gain_by_the_noise():
    design = Design(3, 7, 2)  # looks at 3, 5, 7; look 1 tests at 0.22% on 2 df
    large = seq_cost.expected_seeds(design, 1.0, 0.3)
    assert large.claim_rate > 0.99 and large.stop_share[1] > 0.85
    assert 4.8 < large.mean_top_seeds < 5.0
    quiet = seq_cost.expected_seeds(design, 0.0, 0.1)  # equivalence by look 2
    assert quiet.stop_share[2] < 0.01 and quiet.claim_rate < 0.01
    noisy = seq_cost.expected_seeds(design, 0.0, 5.0)  # equivalence out of reach: to max
    assert noisy.stop_share[2] > 0.95 and noisy.claim_rate < 0.03  # one side of ~5%


def test_equivalence_waits_for_the_draws_to_resolve_the_interval():
    """With 100 draws look 1's top level (0.22%) is below 2 / draws: no stop on `none` there."""
    design = Design(3, 7, 2)
    few = seq_cost.expected_seeds(design, 0.0, 0.05, draws=100)
    assert few.stop_share[0] < 0.01  # only the rare claim on a 2-df sd that came out tiny
    assert seq_cost.expected_seeds(design, 0.0, 0.05, draws=1000).stop_share[0] > 0.3


def test_the_benchmark_prices_a_look_seed_at_one_lr_per_arm():
    """A look adds each arm once at its chosen LR (scaling.looks.sequential_seeds); a fixed design's
    follower seed runs the winner and one LR each side. The ladder's seed 0 scans 3 LRs per arm,
    so one look seed costs a third of seed 0's cells at that size."""
    spec = importlib.util.spec_from_file_location("bench_sequential", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from scaling.costs.plan import plan_study
    from scaling.spec.loader import resolve, study_from_dict

    cost = bench.seed_cost()
    ladder = resolve(study_from_dict(bench.fixed_lr_ladder(), base=bench.LADDER.parent))
    seed0 = {}
    for row in plan_study(ladder).rows:
        if row.seed == 0:
            seed0[row.size] = seed0.get(row.size, 0.0) + row.gpu_hours
    assert cost.follower_lrs == 3 and set(cost.per_seed) == set(seed0)
    for size, hours in seed0.items():
        assert cost.per_seed[size] == pytest.approx(hours / 3)
    assert bench.fixed_gpu_hours(cost, cost.start, like_for_like=False) == cost.minimum
    assert cost.at_top_seeds(cost.start) == cost.minimum
    more = bench.fixed_gpu_hours(cost, cost.start + 1, like_for_like=False) - cost.minimum
    assert more == pytest.approx(sum(seed0.values()))
    like = bench.fixed_gpu_hours(cost, cost.start + 1, like_for_like=True) - cost.minimum
    assert like == pytest.approx(sum(seed0.values()) / 3)
