"""Benchmark: how often a constant gain reads as a trend (`grows` / `fades`) when the LR grids
miss their optima, with the grid's term in gamma's and k0's draws and without it, side by side
(docs/statistics.md, "The trend carries the grid's term").

    .venv/bin/python benchmarks/bench_trend_grid.py [--studies 100] [--seeds 6,50]

The truth (``analysis.synthetic.scenarios.off_grid_study``): the variant is the baseline at a
constant 1.2x compute (gamma = 0: `persists` is right), 5 sizes 1.2M-100M, each arm's 2x grid
moved off its optimum by up to half a step, one offset per arm at every size (``per arm``) or one
per (arm, size) (``per size``), curvature ``--curve`` nats per ln(LR)^2, under the model's own
noise and the three kinds it does not assume (``NOISES``). Each study runs the full analysis
(``--draws`` draws). A 5% method exceeds the printed bound with probability 1%.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats import analyze
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import NOISES, off_grid_study
from tests.analysis.pool import map_studies

COUNTED = analyze.trend_draws


def one(args: tuple) -> tuple[str, bool]:
    """(the word, whether gamma's interval holds 0) on one study; the term counted or not."""
    noise, i, seeds, per_size, curve, draws, counted = args
    analyze.trend_draws = (
        COUNTED if counted else (lambda _g, _c, rows, *_: np.zeros((rows, len(_c))))
    )
    table = off_grid_study(1.2, rng_seed=9000 + i, num_seeds=seeds, lr_penalty=curve,
                           noise=NOISES[noise], per_size=per_size)  # fmt: skip
    (v,) = analyse(table, table_judgement("linear", num_resamples=draws, seed=i)).verdict[
        "variants"
    ]
    g = v["decision"]["gamma"]
    return v["verdict"], g is not None and g["ci"][0] <= 0.0 <= g["ci"][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument(
        "--rows",
        default="50:arm:model,6:arm:model,50:size:model,6:size:model,"
        + ",".join(f"{s}:arm:{n}" for s in (50, 6) for n in list(NOISES)[1:]),
        help="seeds:arm|size:noise, comma-separated",
    )
    parser.add_argument("--curve", type=float, default=0.08)
    parser.add_argument("--draws", type=int, default=100)
    args = parser.parse_args()
    started = time.time()
    bound = int(stats.binom.ppf(0.99, args.studies, 0.05))
    print(f"{args.studies} studies a row, curve {args.curve}, {args.draws} draws; bound {bound}")
    print("seeds | offsets | noise | grows+fades with the term | without | gamma covers 0 with "
          "| without | words with | words without")  # fmt: skip
    for row in args.rows.split(","):
        seeds, offsets, noise = row.split(":")
        found = []
        for counted in (True, False):
            items = [
                (noise, i, int(seeds), offsets == "size", args.curve, args.draws, counted)
                for i in range(args.studies)
            ]
            got = list(map_studies(one, items))
            words = Counter(w for w, _ in got)
            found.append((words["grows"] + words["fades"], sum(c for _, c in got), words))
        (t1, c1, w1), (t0, c0, w0) = found
        n = args.studies
        print(
            f"{seeds} | per {offsets} | {noise} | {t1}/{n} | {t0}/{n} | {c1}/{n} | {c0}/{n} | "
            f"{dict(w1)} | {dict(w0)}",
            flush=True,
        )
    print(f"took {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
