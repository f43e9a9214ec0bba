"""Benchmark: the shipped ladder (studies/ladder.yaml) under LR transfer + sequential seeds against
the naive grid at equal power: GPU-hours to a resolved verdict, false claims, LRs chosen.

    .venv/bin/python benchmarks/bench_ladder_cost.py [--studies 20] [--looks 20000]
        [--transfer none]  # the LR search without transfer, all else equal

What runs is the pipeline's own decision code: the LR search (`scaling.lr_search.extend_grid.
decide_round`, with `lr.search.transfer: law`, i.e. `scaling.lr_search.law_transfer` and
`analysis.stats.lr.lr_law`, and `analysis.lr_frontier` for edges) driven round after round on a
synthetic world, as `scaling run` drives it on MLflow runs; then the looks' seeds as
`scaling plan` prices them (`analysis.stats.looks.seq_cost.simulate_sequential`: the verdict's
binding top-size test at each look's spending level, `seeds: {start: 3, max: 10, step: 2}`).

The world (assumptions, stated): each arm's true best LR is 1.3x Porian's law times an arm
offset (log-normal, sd 0.2) times per-size scatter (log-normal, sd `--scatter`); the loss at LR
m x the optimum rises by `--curve` ln(m)^2 (0.05: +0.024 at one 2x step); each run's loss has
noise of sd `--run-frac` x the seed noise (the part of the seed noise not shared by the LRs of
one seed: same data order and init). The seed noise (paired sd, % of the loss) is 0.3% and 1%.
"law breaks" moves one arm's (nonlinear's) top-size optimum 8x off its law.

Costs: GPU-hours per run of each (arm, size) from the ladder's plan (`scaling.costs.plan`).
LR search: every cell the search ran (scan seed 0 on the starting grid, edges, waves; seeds 1
and 2 at each arm's winner: `follow_neighbours: 0`). Looks: (E[top seeds] - 3) more seeds at the
top size, each arm at its chosen LR. Naive: 3 LRs x n seeds at every (arm, size), n the smallest
fixed seed count whose power at the +-0.5% margin (`analysis.stats.planning.power.power_of`) reaches
the sequential design's simulated power. Floor: what a perfect law would cost (3 LRs at every
size: past the first wave the law's 2 and the 1 past the winner's edge, which the analysis needs
for a bracket; no further edges, no break, the same seeds): the part of the ratio that LR
transfer cannot remove, because the seeds (3 at each winner, then the looks) remain.
False claims on identical arms: "tuned", both arms at their
true optimum; "with grid tuning error", the loss penalty (% of the loss) of the baseline's and
nonlinear's chosen top-size LRs enters as a gain, for the pipeline's sequential looks and for the
naive grid's fixed test (its best of Porian x {0.5, 1, 2}; a grid's resolution alone leaves a
penalty of up to `curve` ln(2)^2 / 4 per arm: docs/statistics.md, "The LR grid's
resolution").
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stats.gains.resolution import pair_var, tuning_variances
from analysis.stats.looks.seq_cost import simulate_sequential
from analysis.stats.looks.sequential import Design
from analysis.stats.lr.frontier import lr_frontier
from analysis.stats.planning.power import power_of
from analysis.tables.runs import normalise
from foundation.config import load_file
from scaling.costs.plan import plan_study
from scaling.lr_search.extend_grid import decide_round
from scaling.spec.grid import cell_id, grid_points
from scaling.spec.ladder import nominal_params, porian_lr
from scaling.spec.loader import resolve, study_from_dict
from scaling.state.files.search_state import SearchState

ROOT = Path(__file__).resolve().parents[1]
LADDER = ROOT / "studies" / "ladder.yaml"
LOSS = 3.0  # the loss level the % noise refers to
BASELINE, VARIANT = "linear", "nonlinear"


def ladder_spec(transfer: str):
    data = load_file(LADDER)
    data["lr"]["search"].update({"transfer": transfer, "follow_neighbours": 0, "scan_seeds": 1})
    return study_from_dict(data, base=LADDER.absolute().parent)


def run_gpu_hours(spec) -> dict[tuple[str, str], float]:
    """GPU-hours of one run of each (arm, size), from the plan of the full starting grid."""
    plan = plan_study(resolve(ladder_spec("none")))
    out: dict[tuple[str, str], float] = {}
    for row in plan.rows:
        out.setdefault((row.variant, row.size), row.gpu_hours)
    return out


class World:
    """The synthetic runs of one study: true optima per (arm, size), a noisy loss per run."""

    def __init__(self, spec, rng, scatter, curve, run_sd, break_top):
        self.spec, self.rng, self.curve, self.run_sd = spec, rng, curve, run_sd
        sizes = sorted(spec.sizes, key=lambda s: nominal_params(spec.shape(s)))
        self.optimum = {}
        for arm in spec.variants:
            offset = rng.normal(0, 0.2)
            for size in sizes:
                n = nominal_params(spec.shape(size))
                lr = 1.3 * porian_lr(n) * math.exp(offset + rng.normal(0, scatter))
                moved = break_top and arm == VARIANT and size == sizes[-1]
                self.optimum[arm, size] = lr * (8.0 if moved else 1.0)
        self.rows: list[dict] = []

    def penalty(self, arm, size, lr) -> float:
        return self.curve * math.log(lr / self.optimum[arm, size]) ** 2

    def run(self, arm, size, seed, lr):
        loss = LOSS + self.penalty(arm, size, lr) + self.rng.normal(0, self.run_sd)
        self.rows.append({"variant": arm, "size": size, "tokens": 1.0, "seed": seed, "lr": lr,
                          "num_nonembedding_params": float(nominal_params(self.spec.shape(size))),
                          "final_val_loss": loss, "status": "completed",
                          "run_id": cell_id(size, arm, seed, lr)})  # fmt: skip

    def table(self) -> pd.DataFrame:
        return normalise(pd.DataFrame(self.rows), "synthetic")


def search(spec, world) -> SearchState:
    for size, arm, seed, lr, _ in grid_points(spec):
        world.run(arm, size, seed, lr)
    state = SearchState()
    while not state.ended:
        before = len(state.added)
        state = decide_round(spec, world.table(), state, {r["run_id"] for r in world.rows})
        for a in state.added[before:]:
            for seed in a.seeds:
                world.run(a.variant, a.size, seed, a.lr)
    return state


def one_study(spec, cost, rng, args, sd_pct, break_top) -> dict:
    run_sd = args.run_frac * sd_pct / 100 * LOSS
    world = World(spec, rng, args.scatter, args.curve, run_sd, break_top)
    state = search(spec, world)
    search_gpu_h = sum(cost[r["variant"], r["size"]] for r in world.rows)
    chosen = {(f.variant, f.size): f.best_lr for f in lr_frontier(world.table())}
    within = [
        abs(math.log(lr / world.optimum[key])) <= math.log(2) + 1e-9 for key, lr in chosen.items()
    ]
    top = max(spec.sizes, key=lambda s: nominal_params(spec.shape(s)))
    bias = (
        100
        * (
            world.penalty(BASELINE, top, chosen[BASELINE, top])
            - world.penalty(VARIANT, top, chosen[VARIANT, top])
        )
        / LOSS
    )  # % gain a mis-tuned pair shows on identical arms
    scan = sum(1 for r in world.rows if r["seed"] == 0)
    # the naive grid at the top size: Porian x {0.5, 1, 2}, the best of three (its seeds average
    # the run noise away), no refinement
    grid = [porian_lr(nominal_params(spec.shape(top))) * m for m in (0.5, 1.0, 2.0)]
    naive = {arm: min(world.penalty(arm, top, lr) for lr in grid) for arm in (BASELINE, VARIANT)}
    naive_bias = 100 * (naive[BASELINE] - naive[VARIANT]) / LOSS
    # the grid's resolution in the verdict's test, as the analysis takes it from this study's
    # runs (its curvature, each arm's neighbours and picks; the run noise: the world's own)
    table = world.table()
    tune = tuning_variances(table, lr_frontier(table), {s: run_sd for s in spec.sizes})
    tune_top = pair_var(tune, (BASELINE, top, 1.0), (VARIANT, top, 1.0))
    return {"search": search_gpu_h, "within": within, "bias": bias, "scan_runs": scan,
            "broken": state.broken_laws, "naive_bias": naive_bias, "tune": tune_top}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=20, help="synthetic studies per row")
    parser.add_argument("--looks", type=int, default=20_000, help="simulated look sequences")
    parser.add_argument("--scatter", type=float, default=0.1)
    parser.add_argument("--curve", type=float, default=0.05)
    parser.add_argument("--run-frac", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-resolution",
        action="store_true",
        help="the test without the grid's resolution term (as before it was counted)",
    )
    parser.add_argument(
        "--seeds",
        default=None,
        metavar="START/MAX/STEP",
        help="the looks' design instead of the ladder's `seeds:` (e.g. 3/16/2)",
    )
    parser.add_argument(
        "--transfer", default="law", choices=["law", "none"], help="none: the LR search alone"
    )
    args = parser.parse_args()
    started = time.time()
    spec = ladder_spec(args.transfer)
    cost = run_gpu_hours(spec)
    sizes = sorted(spec.sizes, key=lambda s: nominal_params(spec.shape(s)))
    top, arms = sizes[-1], list(spec.variants)
    per_seed_top = sum(cost[a, top] for a in arms)
    all_cells = sum(cost.values())
    print(f"ladder {sizes} x {arms}; GPU-h of one run of every (arm, size): {all_cells:.1f}; "
          f"of one seed at the top size (every arm): {per_seed_top:.1f}")  # fmt: skip
    print(f"world: scatter {args.scatter}, curve {args.curve}, run noise {args.run_frac} x seed "
          f"noise; {args.studies} studies per row, {args.looks} look sequences")  # fmt: skip
    print(
        f"row | seed noise | E[GPU-h] transfer {args.transfer} + seq | naive GPU-h (n seeds) | "
        "ratio | power (seeds alone) | false claims: tuned / with grid tuning error (naive) | "
        "LR within 1 step | scan runs | LR search GPU-h | laws broken | floor | grid sd in the test"
    )
    # a perfect law still scans 3 LRs a size: past the first wave its 2, then 1 past the edge
    scans = sum(cost[a, s] * 3 for a in arms for s in sizes)
    floor_search = scans + 2 * all_cells  # seeds 1 and 2 at every (arm, size)'s winner
    rounds = spec.seed_rounds
    start, most, step = (
        map(int, args.seeds.split("/")) if args.seeds else (rounds.start, rounds.max, rounds.step)
    )
    design = Design(start, most, step, spec.verdict.margin_pct, spec.verdict.alpha)
    print(f"looks: seeds {start}/{most}/{step} at the top size")
    rng = np.random.default_rng(args.seed)
    for sd_pct in (0.3, 1.0):
        for break_top in (False, True):
            studies = [
                one_study(spec, cost, rng, args, sd_pct, break_top) for _ in range(args.studies)
            ]
            if args.no_resolution:
                for s in studies:
                    s["tune"] = 0.0
            tune = float(np.mean([s["tune"] for s in studies]))  # the row's mean grid term
            # the looks as they run (the test with the grid's term): the seeds they spend
            plus, _, n_top = simulate_sequential(
                design, design.margin_pct, sd_pct, args.looks, rng, tune_var=tune
            )
            power = float(plus.mean())
            seq_seeds = (float(n_top.mean()) - design.start) * per_seed_top
            expected = float(np.mean([s["search"] for s in studies])) + seq_seeds
            # the naive grid as `scaling plan` prices it: the fixed seeds that match the design's
            # power on the seeds alone (the grid's term is a floor no fixed seed count lowers,
            # and would make "equal power" cost any number of seeds)
            seeds_power = float(
                simulate_sequential(design, design.margin_pct, sd_pct, args.looks, rng)[0].mean()
            )
            n_fixed = next(
                n for n in range(2, 10_000) if power_of(design.margin_pct, sd_pct, n) >= seeds_power
            )
            naive = 3 * n_fixed * all_cells
            p0, m0, _ = simulate_sequential(design, 0.0, sd_pct, args.looks, rng, tune_var=tune)
            false = []
            for s in studies:
                p, m, _ = simulate_sequential(
                    design, s["bias"], sd_pct, args.looks // 10, rng, tune_var=s["tune"]
                )
                false.append(float((p | m).mean()))
            naive_false = [
                power_of(s["naive_bias"], sd_pct, n_fixed, tune_var=tune) for s in studies
            ]
            within = np.concatenate([s["within"] for s in studies])
            broken = sum(bool(s["broken"]) for s in studies)
            label = "law breaks at top" if break_top else "law holds"
            print(f"{label} | {sd_pct}% | {expected:.0f} | {naive:.0f} ({n_fixed}) | "
                  f"{expected / naive:.2f}x | {power:.3f} ({seeds_power:.3f}) | "
                  f"{float((p0 | m0).mean()):.3f} / "
                  f"{np.mean(false):.3f} (naive {np.mean(naive_false):.3f}) | "
                  f"{within.mean():.3f} | {np.mean([s['scan_runs'] for s in studies]):.1f} | "
                  f"{np.mean([s['search'] for s in studies]):.0f} | "
                  f"{broken}/{len(studies)} | "
                  f"{(floor_search + seq_seeds) / naive:.2f}x | "
                  f"{math.sqrt(tune):.3f}%")  # fmt: skip
    print(f"took {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
