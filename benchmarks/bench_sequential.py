"""Benchmark: the sequential seed design (``analysis.stats.looks.sequential``) against the fixed
one, for the shipped ladder study (studies/ladder.yaml) at the demo's measured seed noise.

    .venv/bin/python benchmarks/bench_sequential.py [--studies 200000] [--noise SOURCE]

Costs come from the study's own plan, priced as ``scaling plan`` prices sequential seeds
(``scaling.costs.seeds.seed_cost`` on the ladder with ``seeds: {start, max, step}``): the first
round's ``start`` seeds as the ladder runs them (seed 0 scans every LR, seeds 1-2 follow at the
winner and one LR each side: 3 LRs per arm); a seed a look adds runs each arm once, at its chosen
LR (``scaling.looks.sequential_seeds``). Two fixed designs of ``n`` seeds: "as run", the ladder with
``seeds: [0..n-1]``, whose every seed past the scan follows at 3 LRs per arm (what a user of this
pipeline pays for a fixed design); and "like for like", whose seeds past ``start`` run at the
chosen LR only, as the looks' do (the saving of the design alone, early stopping and seeds at
the top size only, with no saving from the LRs).
The noise is the paired-difference
sd in % of the loss per size from ``analysis.stats.planning.power.noise_from_source`` (default: the
6-seed demo of docs/noise.md, ``benchmarks/noise/demo6.jsonl``, at each arm's winning LR, planned on
its upper 80% bound as ``scaling plan`` does), carried to the ladder's sizes by
``sd_for_sizes`` (nearest size in log N).

What is simulated (``analysis.stats.looks.seq_cost.simulate_sequential``, which ``scaling plan``
runs for its expected seed cost too): the verdict's binding test, Student's t on the top size's
paired seeds (``analysis.stats.planning.power``; tests/analysis/stats/planning/test_power.py checks
it predicts the verdict's own detection rate), one variant against the baseline. Sequential: at look
k the top size is tested at 80% (its weighted-Holm share) of the look's nominal level from
``spending_boundaries``; a look stops on a claim (interval excludes 0), on equivalence
(interval within +-margin) or at ``max``; while the top gain's interval holds 0 only the top
size gets seeds (``analysis.stats.looks.sequential.allocate``), the other sizes keep ``start``.
Fixed: every size at ``n`` seeds, one test at 80% of 5%. "Equal power": the fixed design is the
smallest ``n`` whose power at the margin (``analysis.stats.planning.power.power_of``, exact for this
test) reaches the sequential design's simulated power. The full pipeline (``decide_look`` on
synthetic studies) is exercised by tests/analysis/stats/looks/test_sequential.py.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.gains.levels import TOP_WEIGHT
from analysis.stats.looks.seq_cost import simulate_sequential
from analysis.stats.looks.sequential import Design
from analysis.stats.planning.power import (
    noise_from_source,
    noise_from_table,
    power_of,
    sd_for_sizes,
)
from analysis.tables.runs import normalise
from scaling.costs.seeds import SeedCost

ROOT = Path(__file__).resolve().parents[1]
LADDER = ROOT / "studies" / "ladder.yaml"
DEMO6 = ROOT / "benchmarks" / "noise" / "demo6.jsonl"


def demo_table(path: Path = DEMO6) -> pd.DataFrame:
    """The 6-seed demo's runs at each arm's winning LR (the LR all six seeds ran at)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    frame = pd.DataFrame(rows)
    layers, width = zip(*[map(int, s.split(",")[:2]) for s in frame["shape"]], strict=True)
    frame["num_nonembedding_params"] = 12 * np.array(layers) * np.array(width) ** 2
    frame["tokens"] = frame["steps"] * frame["batch_tokens"]
    frame["final_val_loss"] = frame["loss"]
    seeds = frame.groupby(["shape", "variant", "lr"])["seed"].transform("nunique")
    return normalise(frame[seeds == seeds.max()], str(path))


def fixed_lr_ladder(study_path: Path = LADDER) -> dict:
    """The study at ``study_path`` as this benchmark measures it: every size scanning its full
    LR grid and seeds 1-2 following at the winner and one LR each side (``transfer: none``,
    ``follow_neighbours: 1``), whatever the file ships (the ladder transfers LRs since issue 37:
    ``benchmarks/bench_ladder_cost.py`` measures that)."""
    from foundation.config import load_file

    data = load_file(study_path)
    data["lr"]["search"].update({"transfer": "none", "follow_neighbours": 1})
    return data


def seed_cost(study_path: Path = LADDER, start: int = Design().start) -> SeedCost:
    """The plan's prices for seeds of the study at ``study_path`` (``fixed_lr_ladder``) run as
    ``seeds: {start, ...}`` (``max`` and ``step`` change no price: ``dataclasses.replace`` them
    per design)."""
    from scaling.costs.seeds import seed_cost as plan_seed_cost
    from scaling.spec.loader import resolve, study_from_dict

    data = fixed_lr_ladder(study_path)
    data["seeds"] = {"start": start, "max": start, "step": 1}
    return plan_seed_cost(resolve(study_from_dict(data, base=study_path.absolute().parent)))


def fixed_gpu_hours(cost: SeedCost, n: int, like_for_like: bool) -> float:
    """GPU-hours of a fixed design of ``n`` seeds at every size: the first round's ``start``,
    then each further seed at the follower LRs ("as run") or at the chosen LR only."""
    lrs = 1 if like_for_like else cost.follower_lrs
    return cost.minimum + (n - cost.start) * lrs * sum(cost.per_seed.values())


def fixed_false_claims(n: int, sd: float, num: int, rng) -> float:
    """Simulated share of identical-arm studies whose fixed top-size test (n seeds, 80% of
    5%) rejects."""
    diffs = rng.normal(0.0, sd, size=(num, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    return float((np.abs(t) > stats.t.isf(TOP_WEIGHT * 0.05 / 2, n - 1)).mean())


def compare(design: Design, sd: float, cost: SeedCost, num: int, rng) -> dict:
    plus, minus, n_top = simulate_sequential(design, design.margin_pct, sd, num, rng)
    power = float(plus.mean())
    null_plus, null_minus, null_n = simulate_sequential(design, 0.0, sd, num, rng)
    n_fixed = next(n for n in range(2, 100_000) if power_of(design.margin_pct, sd, n) >= power)
    return {
        "design": design,
        "power": power,
        "seq_top_seeds": float(n_top.mean()),
        "seq_gpu_hours": cost.at_top_seeds(float(n_top.mean())),
        "seq_gpu_hours_null": cost.at_top_seeds(float(null_n.mean())),
        "seq_false_claims": float((null_plus | null_minus).mean()),
        "n_fixed": n_fixed,
        "fixed_power": power_of(design.margin_pct, sd, n_fixed),
        "fixed_gpu_hours": fixed_gpu_hours(cost, n_fixed, like_for_like=False),
        "fixed_gpu_hours_like": fixed_gpu_hours(cost, n_fixed, like_for_like=True),
        "fixed_false_claims": fixed_false_claims(n_fixed, sd, min(num, 50_000), rng),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200_000)
    parser.add_argument("--noise", default=None, help="a noise source (default: the demo)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cost = seed_cost()
    sizes = list(cost.sizes)
    if args.noise is None:
        by_size = noise_from_table(demo_table(), baseline="linear")
        source = f"{DEMO6.relative_to(ROOT)} (upper 80% bound, as scaling plan)"
    else:
        by_size, source = noise_from_source(args.noise, baseline="linear"), args.noise
    sd = sd_for_sizes(by_size, sizes)[sizes[-1]][0]
    print(
        f"ladder sizes {sizes}; GPU-hours of one seed a look adds (each arm at its chosen LR): "
        + ", ".join(f"{s} {cost.per_seed[s]:.2f}" for s in sizes)
        + f"; a fixed design's follower seed runs {cost.follower_lrs} LRs per arm; the first "
        f"round ({cost.start} seeds everywhere) {cost.minimum:.0f}"
    )
    print(
        f"noise: {source}: {json.dumps({k: round(v, 3) for k, v in by_size.items()})}; "
        f"top size {sizes[-1]} planned at paired sd {sd:.3f}%"
    )
    rng = np.random.default_rng(args.seed)
    default = Design()
    designs = [default]
    for num_looks in (5, 10, 20):  # the smallest design with that many looks and 80% power
        for maximum in range(default.max, 1000):
            step = max(1, math.ceil((maximum - default.start) / (num_looks - 1)))
            design = Design(default.start, maximum, step, default.margin_pct)
            sim = simulate_sequential(design, design.margin_pct, sd, 20_000, rng)
            if sim[0].mean() >= 0.8:
                designs.append(design)
                break
    header = (
        "design (start/max/step) | power at margin | E[top seeds] | E[GPU-h] gain=margin | "
        "E[GPU-h] gain=0 | false claims | fixed n (equal power) | fixed GPU-h | "
        "fixed false claims | fixed like-for-like GPU-h | cost ratio (as run) | "
        "cost ratio (like for like)"
    )
    print(header)
    for design in designs:
        r = compare(design, sd, replace(cost, max=design.max, step=design.step), args.studies, rng)
        ratio = r["seq_gpu_hours"] / r["fixed_gpu_hours"]
        like = r["seq_gpu_hours"] / r["fixed_gpu_hours_like"]
        print(
            f"{design.start}/{design.max}/{design.step} | {r['power']:.3f} | "
            f"{r['seq_top_seeds']:.2f} | {r['seq_gpu_hours']:.0f} | {r['seq_gpu_hours_null']:.0f}"
            f" | {r['seq_false_claims']:.4f} | {r['n_fixed']} ({r['fixed_power']:.3f}) | "
            f"{r['fixed_gpu_hours']:.0f} | {r['fixed_false_claims']:.4f} | "
            f"{r['fixed_gpu_hours_like']:.0f} | {ratio:.2f} | {like:.2f}"
        )


if __name__ == "__main__":
    main()
