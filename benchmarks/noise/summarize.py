"""Tables for docs/noise.md from the JSON lines of `sweep.py`.

    python benchmarks/noise/summarize.py results.jsonl [--tags TAG ...]

Per (recipe, shape, variant, lr): seeds, mean final validation loss, seed sd, sd as % of the
loss, mean CPU seconds per run. Then, where both arms ran the same seeds: the paired difference
nonlinear - linear per seed, its sd, and the sd of each arm alone, in % of the loss.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def tuned_table(groups: dict[tuple, dict[int, dict]]) -> None:
    """Each arm at its tuned LR (of its LRs with >= 3 seeds, the lowest mean): the demo's view."""
    tuned: dict[tuple, dict[int, dict]] = {}
    for (tag, shape, variant, _lr), by_seed in groups.items():
        if len(by_seed) < 3:
            continue
        mean = statistics.fmean(r["loss"] for r in by_seed.values())
        best = tuned.get((tag, shape, variant))
        if best is None or mean < statistics.fmean(r["loss"] for r in best.values()):
            tuned[(tag, shape, variant)] = by_seed
    if not tuned:
        return
    print()
    print("At each arm's tuned LR:")
    print(
        "| recipe | shape | variant | lr | seeds | losses by seed | mean | sd % | "
        "paired gain % | sd of paired gain % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (tag, shape, variant), by_seed in sorted(tuned.items()):
        seeds = sorted(by_seed)
        losses = [by_seed[s]["loss"] for s in seeds]
        mean = statistics.fmean(losses)
        gain = sd_gain = ""
        base = tuned.get((tag, shape, "linear"))
        if variant != "linear" and base and set(seeds) <= set(base):
            gains = [100 * (base[s]["loss"] - by_seed[s]["loss"]) / base[s]["loss"] for s in seeds]
            gain, sd_gain = f"{statistics.fmean(gains):.2f}", f"{sd(gains):.2f}"
        print(
            f"| {tag} | {shape} | {variant} | {by_seed[seeds[0]]['lr']:g} | {len(seeds)} | "
            f"{' / '.join(f'{x:.4f}' for x in losses)} | {mean:.4f} | "
            f"{100 * sd(losses) / mean:.2f} | {gain} | {sd_gain} |"
        )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--tags", nargs="*")
    args = p.parse_args()
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    if args.tags:
        rows = [r for r in rows if r["tag"] in args.tags]

    groups: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for r in rows:
        groups[(r["tag"], r["shape"], r["variant"], r["lr"])][r["seed"]] = r  # last one wins

    print("| recipe | shape L,d,h | variant | lr | seeds | mean loss | sd | sd % | CPU s/run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (tag, shape, variant, lr), by_seed in groups.items():
        losses = [by_seed[s]["loss"] for s in sorted(by_seed)]
        mean = statistics.fmean(losses)
        cpu = statistics.fmean(r["cpu_s"] for r in by_seed.values())
        print(
            f"| {tag} | {shape} | {variant} | {lr:g} | {len(losses)} | {mean:.4f} | "
            f"{sd(losses):.4f} | {100 * sd(losses) / mean:.2f} | {cpu:.1f} |"
        )

    tuned_table(groups)

    paired = []
    for (tag, shape, variant, lr), lin in groups.items():
        if variant != "linear" or (tag, shape, "nonlinear", lr) not in groups:
            continue
        non = groups[(tag, shape, "nonlinear", lr)]
        seeds = sorted(set(lin) & set(non))
        if len(seeds) < 2:
            continue
        diffs = [non[s]["loss"] - lin[s]["loss"] for s in seeds]
        mean = statistics.fmean(lin[s]["loss"] for s in seeds)
        paired.append((tag, shape, lr, seeds, diffs, mean, lin, non))
    if paired:
        print()
        print(
            "| recipe | shape | lr | seeds | gain % (lin-non)/lin | sd of paired diff % | "
            "sd linear % | sd nonlinear % |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for tag, shape, lr, seeds, diffs, mean, lin, non in paired:
            sd_lin = sd([lin[s]["loss"] for s in seeds])
            sd_non = sd([non[s]["loss"] for s in seeds])
            print(
                f"| {tag} | {shape} | {lr:g} | {len(seeds)} | "
                f"{-100 * statistics.fmean(diffs) / mean:.2f} | {100 * sd(diffs) / mean:.2f} | "
                f"{100 * sd_lin / mean:.2f} | {100 * sd_non / mean:.2f} |"
            )


if __name__ == "__main__":
    main()
