"""Benchmark: the resolve loop (``analysis.stats.resolve.loop``) over whole synthetic studies, its
figures side by side (docs/statistics.md, "What would resolve it").

    PYTHONPATH=. .venv/bin/python benchmarks/bench_resolve.py [--studies 200] [--budget 150]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_resolve.py --truth mymodule:my_loss
    PYTHONPATH=. .venv/bin/python benchmarks/bench_resolve.py --study-path 3
    PYTHONPATH=. .venv/bin/python benchmarks/bench_resolve.py --analyse 50

Each study starts from the design of ``analysis.synthetic.closed_loop`` (25M/50M/100M, LRs
0.5x/1x/2x the law's optimum, 3 seeds) and runs the loop that a study runs: judge at look 0,
price the options, buy the best within the budget, judge again at the next look's spent level,
at most 4 extensions. Cells are instant: a truth gives each one's loss.

Rows: identical arms under three noises (the model's, t on 3 df, an arm x seed effect shared
across sizes), with the spending and with every look at 5% (no spending); a gain at the margin
(1%, margin 1%): resolved, device-hours, the fixed design of equal power; the predicted
P(resolve) against the realised, in bins; a truth only the LR grid's resolution hides: what the
loop buys first.

``--study-path K``: K studies through ``Study.resolve`` itself (``benchmarks/study_path.py``: the
local executor, MLflow, the round driver, the study's own analysis at every look; instant cells
stand in only for training), each beside the fast judge's loop on the same cells, truth and costs:
the cases cycle over identical arms (the model's noise, t on 3 df) and a 1% gain at a 1% margin.

``--analyse K``: K studies a case through the loop judged by ``analyse`` itself (the study path's
judge, ``closed_loop.analyse_judge``: every rule and guard, the trend over 4 sizes, the LR
brackets) at 4 sizes (12.5M-100M): identical arms under the three noises (false claims over the
whole path) and a 1% gain at a 1% margin (resolved, device-hours); the words, and what each
purchase bought. Seconds a study, where the study path costs minutes.

``--truth MODULE:FUNCTION``: a function ``(N, variant, seed, lr, tokens) -> loss`` (arms
``linear`` and ``nonlinear``); study ``i`` passes seeds ``1000 i + s`` so each study draws its
own noise if the function reads the seed. Printed: the words, how many resolved, the
device-hours and what was bought.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections import Counter

import numpy as np
from scipy import stats

from analysis.judgement import table_judgement
from analysis.stats.planning.power import power_of
from analysis.stats.resolve.loop import Plan
from analysis.synthetic.closed_loop import (
    FOUR_SIZES,
    NOISES,
    SIZES,
    Truth,
    analyse_judge,
    closed_loop,
    flops_hours,
    outcome,
    start_cells,
)
from tests.analysis.pool import map_studies

BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0 + 1e-9)
GRID_TRUTH = dict(run_sd=0.002, lr_penalty=0.3, grid_miss=1.0)


def _null(args: tuple) -> dict:
    noise, i, spend, budget = args
    plan = Plan(budget=budget, spend=spend)
    return outcome(*closed_loop(Truth(0.0, 20_000 + i, noise), plan, margin_pct=0.5))


def _margin(args: tuple) -> dict:
    i, budget = args
    return outcome(*closed_loop(Truth(1.0, 30_000 + i), Plan(budget=budget), margin_pct=1.0))


def _calibration(args: tuple) -> dict:
    i, budget = args
    gain = float(np.random.default_rng([i, 99]).uniform(-1.5, 1.5))
    return outcome(*closed_loop(Truth(gain, 5000 + i), Plan(budget=budget), margin_pct=0.5))


def _grid(args: tuple) -> dict:
    i, budget = args
    plan = Plan(budget=budget, start_seeds=4)
    return outcome(*closed_loop(Truth(0.6, 7000 + i, **GRID_TRUTH), plan, margin_pct=0.5))


class _Shifted:
    """A user's truth with study ``i``'s seeds moved to ``1000 i + s`` (picklable)."""

    def __init__(self, spec: str, i: int) -> None:
        self.spec, self.i = spec, i

    def __call__(self, n: float, variant: str, seed: int, lr: float, tokens: float) -> float:
        return float(load_truth(self.spec)(n, variant, 1000 * self.i + seed, lr, tokens))


def load_truth(spec: str):
    module, _, name = spec.partition(":")
    if not name:
        raise SystemExit(f"--truth {spec!r}: give MODULE:FUNCTION")
    return getattr(importlib.import_module(module), name)


def _user(args: tuple) -> dict:
    spec, i, budget, margin = args
    return outcome(*closed_loop(_Shifted(spec, i), Plan(budget=budget), margin_pct=margin))


def fixed_hours(num_seeds: int) -> float:
    return sum(
        flops_hours(c["variant"], c["n_params"], c["tokens"]) for c in start_cells(SIZES, num_seeds)
    )


def _bought(results: list[dict]) -> str:
    kinds = Counter(r["first_kind"] for r in results if r["first_kind"])
    return ", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "nothing"


STUDY_CASES = (  # (case, gain %, noise, margin %)
    ("identical arms, model noise", 0.0, "model", 0.5),
    ("identical arms, t3 noise", 0.0, "t3", 0.5),
    ("1% gain, 1% margin", 1.0, "model", 1.0),
)


ANALYSE_CASES = (  # (case, gain %, noise, margin %)
    *((f"identical arms, {noise} noise", 0.0, noise, 0.5) for noise in NOISES),
    ("1% gain, 1% margin", 1.0, "model", 1.0),
)


def _analysed(args: tuple) -> dict:
    i, gain, noise, margin, budget = args
    judge = analyse_judge(table_judgement("linear", margin_pct=margin))
    path, start = closed_loop(Truth(gain, 40_000 + i, noise), Plan(budget=budget), margin,
                              FOUR_SIZES, judge=judge)  # fmt: skip
    out = outcome(path, start)
    out["kinds"] = [look["bought"]["kind"] for look in path.looks if "bought" in look]
    out["first_word"] = next(iter(path.looks[0]["words"].values()), "-")
    return out


def analysed(k: int, budget: float) -> None:
    """``--analyse K``: the closed loop judged by ``analyse`` at 4 sizes, K studies a case."""
    bound = int(stats.binom.ppf(0.99, k, 0.05))
    print(f"the loop judged by analyse at 4 sizes, {k} studies a case (a 5% method exceeds "
          f"{bound} false claims with probability 1%)")  # fmt: skip
    print("| truth | claims | resolved | look 0 words | final words | purchases | device-h |")
    print("|---|---|---|---|---|---|---|")
    for case, gain, noise, margin in ANALYSE_CASES:
        t0 = time.perf_counter()
        res = list(map_studies(_analysed, [(i, gain, noise, margin, budget) for i in range(k)]))
        first = Counter(r["first_word"] for r in res)
        final = Counter(r["word"] for r in res)
        kinds = Counter(kind for r in res for kind in r["kinds"])
        hours = np.mean([r["spent"] for r in res])
        print(f"| {case} | {sum(r['claimed'] for r in res)}/{k} | "
              f"{sum(r['resolved'] for r in res)}/{k} | {_counts(first)} | {_counts(final)} | "
              f"{_counts(kinds) or 'nothing'} | {hours:.1f} | "
              f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip


def _counts(c: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in c.most_common())


def _path_words(s: dict) -> str:
    bought = ", ".join(k or "?" for k in s["bought"]) or "nothing"
    words = ", ".join(s["words"].values()) or "-"
    return f"{bought} / {words} / {s['spent']:.3g} h"


def study_paths(k: int, budget: float, max_looks: int) -> None:
    from benchmarks.study_path import study_path  # lazy: the study machinery

    print(f"the study's own path (Study.resolve, instant cells) beside the fast judge's loop "
          f"({k} studies, {budget:g} CPU-hours, {max_looks} looks)")  # fmt: skip
    print("| case | study: bought / words / spent | fast loop: bought / words / spent | wall |")
    print("|---|---|---|---|")
    same_words = same_first = 0
    for i in range(k):
        case, gain, noise, margin = STUDY_CASES[i % len(STUDY_CASES)]
        r = study_path(Truth(gain, 60_000 + i, noise), budget, margin, max_looks, f"sp{i}")
        a, b = r["study"], r["pure"]
        same_words += a["words"] == b["words"]
        same_first += a["bought"][:1] == b["bought"][:1]
        print(f"| {case} | {_path_words(a)} | {_path_words(b)} | {r['wall_s']:.0f} s |")
    print(f"final words the same in {same_words}/{k}; first purchase of the same kind in "
          f"{same_first}/{k}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--budget", type=float, default=150.0, help="device-hours per study")
    ap.add_argument("--truth", help="MODULE:FUNCTION, (N, variant, seed, lr, tokens) -> loss")
    ap.add_argument("--margin", type=float, default=0.5, help="%% of the loss (with --truth)")
    ap.add_argument(
        "--study-path",
        type=int,
        default=0,
        metavar="K",
        help="K studies through Study.resolve with instant cells (minutes each)",
    )
    ap.add_argument(
        "--analyse",
        type=int,
        default=0,
        metavar="K",
        help="K studies a case judged by analyse at 4 sizes (seconds each)",
    )
    ap.add_argument("--study-budget", type=float, default=0.3, help="CPU-hours (--study-path)")
    args = ap.parse_args()
    if args.analyse:
        analysed(args.analyse, args.budget)
        return
    if args.study_path:
        study_paths(args.study_path, args.study_budget, max_looks=2)
        return
    n, budget = args.studies, args.budget
    t0 = time.perf_counter()
    if args.truth:
        load_truth(args.truth)  # fail early on a bad name
        res = list(map_studies(_user, [(args.truth, i, budget, args.margin) for i in range(n)]))
        words = Counter(r["word"] for r in res)
        hours = np.mean([r["start_hours"] + r["spent"] for r in res])
        print(f"{args.truth}: {n} studies, words {dict(words)}")
        print(f"  resolved {sum(r['resolved'] for r in res)}/{n}; {hours:.1f} device-hours each")
        print(f"  first purchase: {_bought(res)}")
        print(f"{time.perf_counter() - t0:.0f} s")
        return
    bound = int(stats.binom.ppf(0.99, n, 0.05))
    print(f"identical arms, false claims over the whole path ({n} studies; a 5% method exceeds "
          f"{bound} with probability 1%)")  # fmt: skip
    print("| noise | with the spending | every look at 5% |")
    print("|---|---|---|")
    for noise in NOISES:
        spent = list(map_studies(_null, [(noise, i, True, budget) for i in range(n)]))
        naive = list(map_studies(_null, [(noise, i, False, budget) for i in range(n)]))
        a, b = sum(r["claimed"] for r in spent), sum(r["claimed"] for r in naive)
        print(f"| {noise} | {a}/{n} | {b}/{n} |")
    res = list(map_studies(_margin, [(i, budget) for i in range(n)]))
    rate = sum(r["word"] == "helps" for r in res) / n
    hours = float(np.mean([r["start_hours"] + r["spent"] for r in res]))
    sd = 100 * np.sqrt(2) * 0.012 / 3.43  # the truth's paired sd at the top, % of the loss
    k = next(k for k in range(3, 400) if power_of(1.0, sd, k, 0.05) >= min(rate, 0.95))
    start, fixed, target = res[0]["start_hours"], fixed_hours(k), min(rate, 0.95)
    print(f"\ngain at the margin (1%): resolved {rate:.3f}; {hours:.1f} device-hours on average "
          f"(start design {start:.1f}); fixed design of equal power ({target:.2f}): {k} seeds, "
          f"{fixed:.1f} device-hours; ratio {hours / fixed:.2f}")  # fmt: skip
    cal = list(map_studies(_calibration, [(i, budget) for i in range(n)]))
    pairs = [p for r in cal for p in r["predicted"]]
    pred = np.array([p for p, _ in pairs])
    real = np.array([r for _, r in pairs], float)
    print("\npredicted P(resolve) against the next look (every purchase; gains uniform +-1.5%)")
    print("| bin | purchases | predicted | realised |")
    print("|---|---|---|---|")
    for lo, hi in zip(BINS, BINS[1:], strict=False):
        m = (pred >= lo) & (pred < hi)
        if m.any():
            p, r = pred[m].mean(), real[m].mean()
            print(f"| {lo:.1f}-{min(hi, 1):.1f} | {int(m.sum())} | {p:.3f} | {r:.3f} |")
    grid = list(map_studies(_grid, [(i, budget) for i in range(n)]))
    print(f"\nonly the LR grid hides a 0.6% gain: first purchase {_bought(grid)}; "
          f"resolved {sum(r['resolved'] for r in grid)}/{n}")  # fmt: skip
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
