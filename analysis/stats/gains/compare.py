"""One variant against the baseline at matched (size, tokens), on the seeds both arms have.

Why matched: a gain compares two losses; losses at different token budgets differ by the budget
alone (a variant also run at 40 tokens/param "beat" an identical baseline at 20 by 5-7%). So a
per-size gain compares only groups of one (size, tokens); several budgets give several gains,
and the effective-compute fit k(C) uses one point per size per arm, the largest budget both
arms have. Why paired: same seed = same data order; averaging only the seeds both arms
completed lets that shared noise cancel in the difference.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analysis.stats.variance.cells import Groups


@dataclasses.dataclass
class Budget:
    """One matched (size, tokens): the two groups and the paired gain per draw."""

    size: str
    tokens: float
    base: int  # group index of the baseline (for a composite baseline, the best arm here)
    var: int
    base_arm: str
    seeds: np.ndarray  # [n_seeds] bool, paired seeds
    gain_loss: np.ndarray  # [B+1] baseline - variant
    gain_pct: np.ndarray  # [B+1] 100 * gain / baseline loss
    base_loss: np.ndarray  # [B+1]
    var_loss: np.ndarray  # [B+1]
    # at matched compute (analysis.stats.gains.matched): each seed's move of an arm's loss, [seeds]
    base_seed_shift: np.ndarray | None = None
    var_seed_shift: np.ndarray | None = None

    @property
    def num_paired(self) -> int:
        return int(self.seeds.sum())


@dataclasses.dataclass
class Comparison:
    variant: str
    budgets: list[Budget]  # every matched (size, tokens), by N then tokens
    curve: list[Budget]  # one per size: its largest matched budget, by N

    @property
    def top(self) -> Budget | None:
        """The largest size both arms measured (its largest matched budget)."""
        return self.curve[-1] if self.curve else None

    def k_points(self, groups: Groups) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(compute [2P], is_variant [2P], loss [B+1, 2P], group indices [2P]) for k(C)."""
        flops = groups.info["flops"].to_numpy(float)
        idx = np.array([b.base for b in self.curve] + [b.var for b in self.curve], dtype=int)
        loss = np.stack([b.base_loss for b in self.curve] + [b.var_loss for b in self.curve], 1)
        is_variant = np.arange(len(idx)) >= len(self.curve)
        return flops[idx], is_variant, loss, idx


def baseline_map(groups: Groups, baselines: list[str]) -> dict[tuple[str, float], int]:
    """(size, tokens) -> the baseline group there: with several baseline arms, the one with the
    lowest loss at its best LR (the strongest baseline is the fair one to beat)."""
    info = groups.info
    out: dict[tuple[str, float], int] = {}
    for g in np.flatnonzero(info["variant"].isin(baselines).to_numpy()):
        key = (info.at[g, "size"], float(info.at[g, "tokens"]))
        if key not in out or groups.loss[0, g] < groups.loss[0, out[key]]:
            out[key] = int(g)
    return out


def compare(groups: Groups, base_of: dict[tuple[str, float], int], variant: str) -> Comparison:
    """Paired gains at every (size, tokens) both arms have, and the per-size curve points."""
    info = groups.info
    rows = info[info["variant"] == variant].sort_values(["num_nonembedding_params", "tokens"])
    budgets = []
    for g, row in rows.iterrows():
        b = base_of.get((row["size"], float(row["tokens"])))
        if b is None:
            continue
        seeds = groups.seed_sets[b] & groups.seed_sets[g]
        if not seeds.any():
            continue
        lb, lv = groups.paired_loss(b, seeds), groups.paired_loss(g, seeds)  # [B+1] each
        budgets.append(
            Budget(
                row["size"],
                float(row["tokens"]),
                int(b),
                int(g),
                str(info.at[b, "variant"]),
                seeds,
                lb - lv,
                100.0 * (lb - lv) / lb,
                lb,
                lv,
            )
        )
    last: dict[str, Budget] = {}
    for budget in budgets:  # sorted by tokens within a size: the last is the largest
        last[budget.size] = budget
    return Comparison(variant, budgets, list(last.values()))
