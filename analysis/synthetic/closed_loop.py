"""Instant cells for the resolve loop: a truth (a loss for any size, arm, seed, LR and tokens)
stands in for training, and everything else is the loop the study runs.

``Truth`` is the synthetic ladder of ``analysis.synthetic.scenarios`` as a function of one cell:
Chinchilla's L(N, D), the variant ``gain_pct`` % below the baseline at every size, an LR penalty
``lr_penalty ln(lr / opt)^2`` around each arm's optimum (Porian et al.'s law moved by a factor
``2^u`` per arm, ``u`` uniform in +-half a 2x step, so the grid misses it), and seed noise. The
noise of a cell is a function of the cell (a hash of its size, arm, seed, LR and tokens), so a
cell bought twice reads the same loss and the order of purchase does not matter:

- ``model``: the analysis's own: a part shared by every run of one (size, seed), one per run;
- ``t3``: both parts Student's t on 3 df, scaled to the same sd (heavy tails; not assumed);
- ``size_correlated``: the model's plus an arm x seed effect shared by every size and LR of the
  arm (sd ``run_sd``): a seed that is lucky for one arm is lucky at every size (not assumed).

``closed_loop(truth, plan, ...)`` runs ``analysis.stats.resolve.loop.resolve_loop`` on the start
design (every arm at LRs 0.5x/1x/2x the law's optimum, ``start_seeds`` seeds, each size) with
the fast judge (``resolve.evidence.read_table``) or any other ``judge(table, level)``;
``analyse_judge`` is the study path's: ``analyse`` itself at the look's level (every rule and
guard: the trend over >= 4 sizes, the LR brackets, the backtest), read by ``from_verdict``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.stats.analyze import analyse
from analysis.stats.resolve.evidence import from_verdict, read_table
from analysis.stats.resolve.loop import Judge, Path, Plan, resolve_loop
from analysis.synthetic.scenarios import GRID, chinchilla, lr_opt
from analysis.tables.judgement import Judgement
from analysis.tables.runs import normalise

BASELINE, VARIANT = "linear", "nonlinear"
SIZES = (25e6, 50e6, 100e6)
FOUR_SIZES = (12.5e6, 25e6, 50e6, 100e6)  # the fewest a study's verdict judges a trend on
TOKENS_PER_PARAM = 20.0
# one run's device-hours: 6 N D FLOPs at 40% of a 400 TFLOP/s accelerator
FLOPS_PER_HOUR = 0.4 * 400e12 * 3600.0
NOISES = ("model", "t3", "size_correlated")
LossFn = Callable[[float, str, int, float, float], float]  # (N, variant, seed, lr, tokens)


def flops_hours(variant: str, n_params: float, tokens: float) -> float:
    return 6.0 * n_params * tokens / FLOPS_PER_HOUR


def _key(x: float, scale: float) -> int:
    return int(round(math.log2(x) * scale)) + (1 << 24)


@dataclasses.dataclass(frozen=True)
class Truth:
    """A study's truth: ``truth(N, variant, seed, lr, tokens) -> final loss`` (module doc)."""

    gain_pct: float = 0.0
    study_seed: int = 0
    noise: str = "model"
    shared_sd: float = 0.006
    run_sd: float = 0.012
    lr_penalty: float = 0.02
    grid_miss: float = 1.0  # the arms' optimum lies up to grid_miss / 2 of a 2x step off the grid

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"noise {self.noise!r}: one of {', '.join(NOISES)}")

    def optimum(self, n_params: float, variant: str) -> float:
        u = np.random.default_rng([self.study_seed, 7, variant == VARIANT]).uniform(-0.5, 0.5)
        return lr_opt(n_params) * 2.0 ** (self.grid_miss * u)

    def _draw(self, key: list[int], sd: float) -> float:
        rng = np.random.default_rng([self.study_seed, *key])
        if self.noise == "t3":
            return float(rng.standard_t(3) * sd / math.sqrt(3.0))
        return float(rng.normal(0.0, sd))

    def __call__(self, n_params: float, variant: str, seed: int, lr: float, tokens: float) -> float:
        arm = int(variant == VARIANT)
        clean = chinchilla(n_params, tokens) * (1.0 - arm * self.gain_pct / 100.0)
        clean += self.lr_penalty * math.log(lr / self.optimum(n_params, variant)) ** 2
        size, lr_k, tok = _key(n_params, 64), _key(lr, 256), _key(tokens, 64)
        noise = self._draw([1, size, seed], self.shared_sd)  # every run of (size, seed)
        noise += self._draw([2, size, arm, seed, lr_k, tok], self.run_sd)  # the run's own
        if self.noise == "size_correlated":
            noise += self._draw([3, arm, seed], self.run_sd)  # the arm's seed, at every size
        return clean + noise


def rows_of(truth: LossFn, cells: Sequence[dict]) -> pd.DataFrame:
    """Instant runs of ``cells`` ({variant, size, n_params, tokens, lr, seed})."""
    rows = [
        {
            "variant": c["variant"],
            "size": c["size"],
            "num_nonembedding_params": c["n_params"],
            "tokens": c["tokens"],
            "flops": 6.0 * c["n_params"] * c["tokens"],
            "seed": int(c["seed"]),
            "lr": c["lr"],
            "final_val_loss": truth(c["n_params"], c["variant"], c["seed"], c["lr"], c["tokens"]),
            "status": "completed",
        }
        for c in cells
    ]
    return pd.DataFrame(rows)


def start_cells(
    sizes: Sequence[float] = SIZES, start_seeds: int = 3, grid: Sequence[float] = GRID
) -> list[dict]:
    """The start design: every arm at LRs ``grid`` x the law's optimum (0.5x/1x/2x), each size
    and seed."""
    return [
        {
            "variant": arm,
            "size": f"{n / 1e6:.3g}M",
            "n_params": n,
            "tokens": TOKENS_PER_PARAM * n,
            "lr": m * lr_opt(n),
            "seed": s,
        }
        for n in sizes
        for arm in (BASELINE, VARIANT)
        for m in grid
        for s in range(start_seeds)
    ]


def fast_judge(margin_pct: float) -> Judge:
    return lambda table, level: read_table(table, BASELINE, level, margin_pct)


def analyse_judge(judgement: Judgement) -> Judge:
    """The study path's judge on instant cells: ``analyse`` with ``judgement`` (the table's:
    ``table_judgement("linear", margin_pct=..., num_resamples=...)``) at the look's level, its
    bootstrap seeded from the runs as a study's is, read by ``from_verdict``."""

    def judge(table: pd.DataFrame, level: float) -> dict:
        table = normalise(table, "synthetic")
        j = judgement.at_level(level)
        return from_verdict(analyse(table, j, j.bootstrap_seed(table)).verdict, table)

    return judge


def closed_loop(
    truth: LossFn,
    plan: Plan,
    margin_pct: float,
    sizes: Sequence[float] = SIZES,
    judge: Judge | None = None,
    grid: Sequence[float] = GRID,
) -> tuple[Path, float]:
    """Run the loop on ``truth``'s instant cells from the start design at LRs ``grid`` x the
    law's optimum: (its path, the start design's device-hours)."""
    cells = start_cells(sizes, plan.start_seeds, grid)
    table = rows_of(truth, cells)
    start = sum(flops_hours(c["variant"], c["n_params"], c["tokens"]) for c in cells)
    judge = judge or fast_judge(margin_pct)
    path = resolve_loop(table, judge, flops_hours, lambda c: rows_of(truth, c), plan)
    return path, start


def outcome(path: Path, start_hours: float) -> dict:
    """A closed-loop study as plain figures: its final word, whether it claimed or resolved, the
    device-hours (the start design's and the loop's), the kind of its first purchase, and each
    purchase's predicted P(resolve) beside whether the look after it resolved."""
    (word,) = path.words.values() if len(path.words) == 1 else ("; ".join(path.words.values()),)
    bought = [look for look in path.looks if "bought" in look]
    return {
        "word": word,
        "claimed": path.claimed,
        "resolved": path.resolved,
        "start_hours": start_hours,
        "spent": path.spent,
        "num_looks": len(path.looks) - 1,
        "first_kind": bought[0]["bought"]["kind"] if bought else None,
        "predicted": [
            (
                b["bought"]["p_resolve"],
                all(w not in ("undetected", "inconclusive") for w in b["words"].values()),
            )
            for b in bought
        ],  # fmt: skip
        "stopped": path.stopped,
    }
