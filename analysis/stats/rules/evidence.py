"""One variant's evidence against its baseline: what every step of the rule reads.

``analysis.stats.analyze`` gathers it once per variant (the matched-compute comparison, a gain
test per size, the k(C) draws, the guards and the backtest's top step); the rule
(``analysis.stats.rules.verdict.apply_rule``), its conditional verdict
(``analysis.stats.rules.verdict_guards``) and a sequential look judged again at its own level
(``analysis.stats.looks.sequential.judge_at``) all read this one frozen value with the
`Judgement` (margin, level) beside it, never a thread of its parts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from analysis.stats.gains.compare import Comparison
from analysis.stats.gains.robust import GainTest


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the rule reads of one variant; everything but the level it is judged at."""

    comparison: Comparison  # matched compute, per size: the variant against its baseline
    tests: tuple[GainTest, ...]  # one per ``comparison.curve`` point
    gamma: np.ndarray | None  # [B+1] from the k(C) fit (None: no intervals)
    k0: np.ndarray | None  # [B+1]
    guards: tuple[str, ...] = ()  # failed guards that no condition lifts (sentences)
    lr_guard: tuple[str, ...] = ()  # held: an LR not bracketed (the conditional verdict lifts it)
    flops_guard: tuple[str, ...] = ()  # held: FLOPs the variant did not declare (lifted too)
    p: float = 1.0  # the variant's weighted-Bonferroni p of "no gain at any size" (Holm's input)
    # the backtest's top step at a per-row level (``analysis.stats.backtest.Backtest.top_check``),
    # called only when a word needs it (rule 9); None: not checked (tests of steps 1-8 alone)
    law: Callable[[float], dict] | None = None

    @property
    def held(self) -> tuple[str, ...]:
        """The guards a conditional verdict lifts."""
        return self.lr_guard + self.flops_guard

    @property
    def all_guards(self) -> tuple[str, ...]:
        return self.guards + self.held

    def lifted(self) -> Evidence:
        """The same evidence with the held guards lifted: what the conditional verdict judges."""
        return dataclasses.replace(self, lr_guard=(), flops_guard=())
