"""Diverged runs as censored evidence (`analysis.stats.lr.optimum`, `frontier.LRFrontier`), on
synthetic arms whose truth is known.

The truth: one arm, 5 sizes 1.2M-100M (``analysis.synthetic.scenarios.ladder``: Chinchilla's
loss, a parabola in ln LR about Porian's optimum, seed noise). The four smaller sizes scan 4 LRs
(0.25x-2x) off the optimum by a random half step (their sweeps give the arm's curvature); at the
top size the optimum sits delta ~ U(0.1, 0.9) octaves below a cliff: every seed at an LR at or
past the cliff diverges, and the grid's top LR is on the cliff, its next one down below the
optimum. Noise: the model's own plus one it does not assume (the top size's run noise 3x, or a
per-(arm, seed) part shared across LRs with the loss rising twice as fast above the optimum, so
the curvature of the smaller sizes' sweeps overstates the side the top size's two points see).

Claims, over ``N`` studies each (binomial bound, ``tests/analysis/bounds.py``: a procedure at
exactly 10% misses passes with probability 99%):
- censored (the diverged runs read as a bound): the 90% interval covers the true optimum in at
  least 90% (misses <= ``max_count(N, 0.10)``), and neither it nor the estimate ever reaches
  past the cliff (0 of N);
- dropped (the diverged runs read as gaps, as the frontier and the LR law read them before):
  the cell is `edge_high` (unbracketed) in >= 90% of studies and the interval reaches past the cliff
  in most. With the censoring step removed from `cell_optimum` (checked on a copy), the "never
  past the cliff" assertion fails.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.synthetic.scenarios import NOISES, SIZES, chinchilla, ladder, lr_opt
from analysis.tables.runs import normalise
from tests.analysis.bounds import max_count

N = 100
LEVEL = 0.9


def _study(seed: int, noise: str, skew: float) -> tuple[pd.DataFrame, float, float]:
    """(run table, the cliff LR, the true optimum) at the top size."""
    rng = np.random.default_rng([seed, 7])
    shifts = rng.uniform(-0.5, 0.5, len(SIZES))
    delta = rng.uniform(0.1, 0.9)
    shifts[-1] = delta - 1.0  # the top grid: 2^delta x (1/8, 1/4, 1/2, 1) x the optimum
    rows = ladder(
        {"linear": chinchilla}, seed, num_seeds=4, grids={"linear": (0.25, 0.5, 1.0, 2.0)},
        noise=NOISES[noise], lr_skew=skew, shifts={"linear": shifts},
    )  # fmt: skip
    top, truth = SIZES[-1], lr_opt(SIZES[-1])
    cliff = 2.0**delta * truth
    for r in rows:
        if r["num_nonembedding_params"] == top and r["lr"] >= cliff * (1 - 1e-9):
            r["status"], r["final_val_loss"] = "diverged", float("nan")
    return normalise(pd.DataFrame(rows), "censoring study"), cliff, truth


def _top(table: pd.DataFrame):
    (f,) = [f for f in analysis.lr_frontier(table) if f.size == table["size"].iloc[-1]]
    return f


@pytest.mark.parametrize(("noise", "skew"), [("top_size_3x", 1.0), ("arm_seed_across_lrs", 2.0)])
def test_a_diverged_lr_bounds_the_optimum_and_its_interval_covers_the_truth(noise, skew):
    misses, past, dropped_past, dropped_states = 0, 0, 0, []
    for seed in range(N):
        table, cliff, truth = _study(seed, noise, skew)
        f = _top(table)
        low, high = f.optimum_interval
        assert f.censored_at == pytest.approx(cliff) and f.diverged_seeds == [[0, 1, 2, 3]]
        misses += not ((low is None or low <= truth) and (high is None or truth <= high))
        past += high is None or high > f.censored_at or f.optimum >= f.censored_at
        gaps = _top(table[table["status"] != "diverged"])  # the diverged runs dropped
        dropped_states.append(gaps.state)
        dropped_past += gaps.optimum_interval[1] is None or gaps.optimum_interval[1] > cliff
    print(f"{noise}: {N - misses}/{N} covered, past the cliff {past} (dropped: {dropped_past})")
    assert misses <= max_count(N, 1 - LEVEL)
    assert past == 0  # censored: never past the LR where the arm diverged
    # as gaps: unbracketed (a few best LRs sit one step lower, interior either way)
    assert dropped_states.count("edge_high") >= 0.9 * N
    assert "bracketed_by_divergence" not in dropped_states
    assert dropped_past >= N / 2 if skew == 1.0 else dropped_past >= N / 4


def test_the_report_states_the_censoring_in_words():
    """The lr_selection records of a bracketed_by_divergence cell give the sentence a user
    reads, the seeds that diverged named, and the optimum column ends at the diverged LR."""
    from analysis.report.render import to_markdown
    from analysis.report.sections.lr_selection import lr_blocks
    from analysis.stats.lr.frontier import frontier_frame
    from analysis.stats.rules.summary import records

    table, cliff, _ = _study(0, "model", 1.0)
    table = table[~(np.isclose(table["lr"], cliff) & (table["seed"] == 0))]  # seed 0 never ran
    frame = frontier_frame(analysis.lr_frontier(table))
    verdict = {"lr_selection": records(frame, list(frame.columns)), "lr_chosen_on": "x"}
    text = to_markdown(lr_blocks(verdict, {}))
    assert f"linear 100M: diverged at {cliff:.3g} (seeds 1, 2, 3): optimum bounded below it" in text
    row = next(line for line in text.splitlines() if line.startswith("| linear | 100M |"))
    assert row.split("|")[8].strip().endswith(f"{cliff:.3g})")  # the optimum, censored there
