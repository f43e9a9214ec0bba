"""A design replayed on a study that already holds every seed (a simulation, or a fixed study
re-read): each look sees the seeds the design has asked for so far (``reveal``), and is judged
by ``decide_look`` (``analysis.stats.looks.sequential``). The benchmarks and the tests compare
the design with naive re-testing this way."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from analysis.stats.analyze import Analysis
from analysis.stats.looks.sequential import Look, analyse_look, decide_look
from analysis.tables.judgement import Judgement


@dataclasses.dataclass(frozen=True)
class Replay:
    looks: list[Look]
    num_runs: int  # seed-runs the design ran (rows of the revealed table)
    flops: float  # their FLOPs

    @property
    def final(self) -> Look:
        return self.looks[-1]


def reveal(full: pd.DataFrame, seeds_by_size: dict[str, int]) -> pd.DataFrame:
    """The runs of each size's first ``seeds_by_size[size]`` seeds (by seed number)."""
    rank = full.groupby("size")["seed"].rank(method="dense").astype(int)
    return full[rank <= full["size"].map(seeds_by_size)].reset_index(drop=True)


def replay(
    full: pd.DataFrame, judgement: Judgement, levels: Sequence[float | None] = (None,)
) -> list[Replay]:
    """Run ``judgement.design`` on a study whose every size already holds ``design.max`` seeds
    (a simulation, or a fixed study re-read): each look sees the seeds the design has asked for.
    One replay per entry of ``levels`` (None: the design's boundaries; a number: every look at
    that level, naive re-testing); a table two of them reach is analysed once, at the design's
    family-wise level (each look judges it again at its own)."""
    design = judgement.design
    analysed = judgement.at_look(design.alpha)
    cache: dict[tuple, Analysis] = {}
    out = []
    for level in levels:
        seeds = {str(s): design.start for s in full["size"].unique()}
        looks: list[Look] = []
        for k in range(1, design.num_looks + 1):
            table = reveal(full, seeds)
            key = tuple(sorted(seeds.items()))
            if key not in cache:
                cache[key] = analyse_look(table, analysed)
            looks.append(
                decide_look(
                    table, judgement, k, naive_level=level, analysis=cache[key], with_cells=False
                )
            )
            if looks[-1].stop:
                break
            for size, extra in looks[-1].add_seeds.items():
                seeds[size] = min(design.max, seeds[size] + extra)
        out.append(Replay(looks, int(len(table)), float(table["flops"].sum())))
    return out
