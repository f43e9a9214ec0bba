"""Benchmark: each arm at its LR optimum (``analysis.stats.lr.optimum``) against each arm at its
best grid LR, on studies whose LR grids miss the optima.

    .venv/bin/python benchmarks/bench_lr_optimum.py [--studies 200] [--seeds 6] [--curve 0.15]

The truth (``analysis.synthetic.scenarios.off_grid_study``): 5 sizes 1.2M-100M, each arm's grid
0.5x/1x/2x its optimum moved by its own factor 2^u, u uniform in (-1/2, 1/2), so each best grid
LR sits up to half a step off and the grid alone moves a gain by up to ``curve`` ln(2)^2 / 4
(0.018 of the loss at curve 0.15, about 0.5% at the top size). Rows:

- identical arms (k0 = 1) under the model's own noise and the three kinds it does not assume
  (``analysis.synthetic.scenarios.NOISES``): the share of studies that claim anything (persists,
  grows, fades, helps, hurts), with the binomial's 99% bound for a 5% method;
- a true gain (``--k0``, top-size gain printed) under the model's noise: the share that claims
  it, i.e. what the shift's noise costs in power.

Each row runs the full analysis (``analysis.stats.core.analyse``, ``--draws`` bootstrap draws)
twice per study: as shipped, and with the shift removed (``brackets`` returning nothing).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from scipy import stats

from analysis.stats import core
from analysis.synthetic.scenarios import NOISES, off_grid_study, true_gain_pct
from tests.analysis.pool import map_studies

CLAIMS = ("persists", "grows", "fades", "helps", "hurts")


def one(args: tuple) -> tuple[str, str]:
    """(the word at the LR optima, the word at the best grid LRs) of one study."""
    k0, noise, i, seeds, curve, draws = args
    table = off_grid_study(k0, rng_seed=7000 + i, num_seeds=seeds, lr_penalty=curve,
                           noise=NOISES[noise])  # fmt: skip
    words = []
    for at_optimum in (True, False):
        shipped = core.lr_brackets
        if not at_optimum:
            core.lr_brackets = lambda table, frontiers: {}
        try:
            (v,) = core.analyse(table, "linear", num_resamples=draws, seed=i).verdict["variants"]
        finally:
            core.lr_brackets = shipped
        words.append(v["verdict"])
    return words[0], words[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--curve", type=float, default=0.15)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--k0", type=float, default=1.06)
    parser.add_argument("--noises", default=",".join(NOISES))
    args = parser.parse_args()
    started = time.time()
    bound = int(stats.binom.ppf(0.99, args.studies, 0.05))
    print(
        f"{args.studies} studies a row, {args.seeds} seeds, curve {args.curve}, {args.draws} "
        f"draws; a 5% method exceeds {bound}/{args.studies} claims with probability 1%"
    )
    print("row | noise | claims at the LR optima | claims at the best grid LRs | words (optima)")
    rows = [(1.0, noise) for noise in args.noises.split(",")] + [(args.k0, "model")]
    for k0, noise in rows:
        items = [(k0, noise, i, args.seeds, args.curve, args.draws) for i in range(args.studies)]
        results = list(map_studies(one, items))
        at_opt = sum(a in CLAIMS for a, _ in results)
        at_grid = sum(b in CLAIMS for _, b in results)
        label = "identical arms" if k0 == 1 else f"gain {true_gain_pct(k0, 1e8):.2f}% at 100M"
        words = dict(Counter(a for a, _ in results))
        print(f"{label} | {noise} | {at_opt}/{args.studies} | {at_grid}/{args.studies} | {words}")
    print(f"took {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
