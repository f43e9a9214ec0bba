"""Benchmark: what the LR grid's resolution alone makes the verdict claim, on identical arms
whose LR grids miss their optima (docs/statistics.md, "The LR grid's resolution"), with the
grid's resolution in the test (``analysis.stats.gains.resolution``) and without it, side by side.

    .venv/bin/python benchmarks/bench_lr_grid.py [--studies 200] [--seeds 6] [--curve 0.15]

The truth (``analysis.synthetic.scenarios.off_grid_study``): 5 sizes 1.2M-100M, each arm's grid
0.5x/1x/2x its optimum moved by its own factor 2^u, u uniform in (-1/2, 1/2), so each best grid
LR sits up to half a step off and the grid alone moves a gain by up to ``curve`` ln(2)^2 / 4.
Rows: the model's own noise and the three kinds it does not assume
(``analysis.synthetic.scenarios.NOISES``), with curves as steep on both sides, then curves
``--skews`` times steeper above the optimum, then real gains (``--gains``: compute multipliers;
1.1 is 0.8% at the top size) where a claim of a gain is the power. Each study runs the full analysis
(``analysis.stats.analyze.analyse``, ``--draws`` bootstrap draws); a claim is any of persists,
grows, fades, helps, hurts. The binomial's 99% bound for a 5% method is printed beside them.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats import analyze
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import NOISES, off_grid_study
from tests.analysis.pool import map_studies

CLAIMS = ("persists", "grows", "fades", "helps", "hurts")
GAINS = ("persists", "grows", "fades", "helps")
COUNTED = analyze.tuning_variances


def one(args: tuple) -> str:
    """The verdict's word on one study (identical arms at k0 1), the grid's term counted or not."""
    noise, i, seeds, curve, draws, skew, k0, counted = args
    analyze.tuning_variances = COUNTED if counted else (lambda *_: {})
    table = off_grid_study(k0, rng_seed=7000 + i, num_seeds=seeds, lr_penalty=curve,
                           noise=NOISES[noise], lr_skew=skew)  # fmt: skip
    (v,) = analyse(table, table_judgement("linear", num_resamples=draws, seed=i)).verdict[
        "variants"
    ]
    return v["verdict"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--curve", type=float, default=0.15)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--noises", default=",".join(NOISES))
    parser.add_argument("--skews", default="4", help="rows whose loss rises N x as fast above")
    parser.add_argument("--gains", default="1.1", help="rows with a real compute multiplier")
    args = parser.parse_args()
    started = time.time()
    bound = int(stats.binom.ppf(0.99, args.studies, 0.05))
    print(
        f"{args.studies} identical-arms studies a row, {args.seeds} seeds, curve {args.curve}, "
        f"{args.draws} draws; a 5% method exceeds {bound}/{args.studies} with probability 1%"
    )
    print(
        "noise | curve above the optimum | compute multiplier | claims (of a gain, for k0 > 1) "
        "with the grid's resolution | without | words with | words without"
    )
    rows = [(noise, 1.0, 1.0) for noise in args.noises.split(",") if noise]
    rows += [("model", float(x), 1.0) for x in args.skews.split(",") if x]
    rows += [("model", 1.0, float(k)) for k in args.gains.split(",") if k]
    for noise, skew, k0 in rows:
        found = []
        for counted in (True, False):
            items = [
                (noise, i, args.seeds, args.curve, args.draws, skew, k0, counted)
                for i in range(args.studies)
            ]
            words = Counter(map_studies(one, items))
            claims = sum(words[c] for c in (CLAIMS if k0 == 1.0 else GAINS))
            found.append((claims, dict(words)))
        (w, with_words), (wo, without_words) = found
        print(
            f"{noise} | {skew:g}x | {k0:g} | {w}/{args.studies} | {wo}/{args.studies} | "
            f"{with_words} | {without_words}"
        )
    print(f"took {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
