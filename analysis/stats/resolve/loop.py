"""A closed loop that buys the evidence an unresolved verdict needs, inside the error budget.

    judge -> unresolved? -> price the options -> buy the best within the budget -> judge again

Every judgement is a look of one design, declared before the first extension: at most
``max_looks`` extensions after the study as it stands (look 0), within ``budget`` device-hours.
Look ``k`` (0..K) sits at the information fraction ``t_k = (k + 1) / (K + 1)``, fixed in advance,
and is judged at the alpha-spending's increment there,

    a_k = alpha(t_k) - alpha(t_{k-1}),   alpha(t) the Lan-DeMets O'Brien-Fleming-type function

(``analysis.stats.looks.spending.obf_spending``), so ``sum_k a_k = alpha(1) = alpha``.

**Why these fractions and these levels are valid when the option depends on the data.** The
boundaries of ``spending_boundaries`` assume the looks' statistics are jointly a Brownian motion
at their information fractions; a loop that buys seeds at one look and a finer LR grid at the
next, chosen from what it saw, breaks that correlation (and a fraction counted from the variance
bought would itself depend on the data). The increments need nothing of it: any claim on the
path is a claim at some look k, at level ``a_k``, so by the union bound P(any false claim) <=
``sum a_k = alpha`` whatever the looks' joint law, provided each look's own test holds its
level on the data the path bought. The fractions are calendar fractions, fixed when the plan is
declared, which is what makes ``a_k`` a number known before look k's data. What the loop buys is
chosen by the plan's P(resolve) per device-hour (``Option.p_plan``: at a true gain of 0 and of
the margin), a function of the seeds' sd and the grid's term, not of the estimate: under normal
noise a sample's sd is independent of its mean, so the purchase carries no information on where
the estimate lies and each look's test is that of a fixed design of the cells it has. (Buying
by the predictive P(resolve), which reads the estimate, bought a few seeds just when the
estimate sat near the boundary: 16/200 false claims under an arm x seed effect.) The price is
power: the last look is read at ``alpha - alpha(K / (K + 1))`` rather than the Brownian
boundary's nominal level. Each look's own test is the verdict's, its LR choice inside
the interval: ``analyse`` chooses the LR again in every bootstrap draw, and the fast judge
(``evidence.read_table``) adds what that choice moves the gain by (``evidence.choice_draws``),
without which the seeds a look buys at the chosen LRs keep the scan seeds' winner's curse in
the estimate (17/180 false claims under t noise on 3 df).

The loop is a pure function over three callables, so a study with real cells and a test with
instant ones run the same code: ``judge(table, level) -> {variant: Evidence}``, ``cost(variant, N,
tokens) -> hours`` and ``buy(cells) -> new rows``. It records its path: each look's level and
words, what it bought, why, at what predicted P(resolve) and cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pandas as pd

from analysis.stats.gains.levels import ALPHA
from analysis.stats.looks.spending import obf_spending
from analysis.stats.resolve.evidence import CLAIMS, UNRESOLVED, Evidence
from analysis.stats.resolve.options import KINDS, Cost, Grow, Option, price

Judge = Callable[[pd.DataFrame, float], dict[str, Evidence]]
Buy = Callable[[Sequence[dict]], pd.DataFrame]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The declared maximum: ``budget`` device-hours over at most ``max_looks`` extensions."""

    budget: float
    max_looks: int = 4
    alpha: float = ALPHA
    max_seeds: int | None = None  # the design's seeds.max at the top, if any
    start_seeds: int = 3  # seeds a new size starts with
    kinds: tuple[str, ...] = KINDS
    spend: bool = True  # False: every look at alpha (no spending; for the mutation checks only)

    def __post_init__(self) -> None:
        if not (self.budget > 0 and self.max_looks >= 1 and 0 < self.alpha < 1):
            raise ValueError(
                f"a resolve plan needs a positive budget ({self.budget}), at least one look "
                f"({self.max_looks}) and alpha in (0, 1) ({self.alpha})"
            )

    def levels(self) -> list[float]:
        """Each look's level, look 0 (the study as it stands) to look ``max_looks``."""
        if not self.spend:
            return [self.alpha] * (self.max_looks + 1)
        k1 = self.max_looks + 1
        spent = [obf_spending((k + 1) / k1, self.alpha) for k in range(k1)]
        return [b - a for a, b in zip([0.0, *spent], spent, strict=False)]


@dataclasses.dataclass
class Path:
    """What the loop did: one row per look, what it bought before it, and how it ended."""

    plan: Plan
    looks: list[dict] = dataclasses.field(default_factory=list)
    spent: float = 0.0
    words: dict[str, str] = dataclasses.field(default_factory=dict)  # final, per variant
    stopped: str = ""

    @property
    def resolved(self) -> bool:
        return bool(self.words) and all(w not in UNRESOLVED for w in self.words.values())

    @property
    def claimed(self) -> bool:
        """Whether some look claimed a gain or a loss for some variant."""
        return any(w in CLAIMS for w in self.words.values())

    def as_dict(self) -> dict:
        return {
            "budget": self.plan.budget,
            "max_looks": self.plan.max_looks,
            "alpha": self.plan.alpha,
            "levels": self.plan.levels(),
            "looks": self.looks,
            "spent": self.spent,
            "words": dict(self.words),
            "resolved": self.resolved,
            "stopped": self.stopped,
        }


def _look_row(k: int, level: float, read: dict[str, Evidence], bought: Option | None) -> dict:
    row = {
        "look": k,
        "level": level,
        "words": {v: e.word for v, e in read.items()},
        "estimate_pct": {v: e.estimate_pct for v, e in read.items()},
        "half_width_pct": {v: e.half_width_pct for v, e in read.items()},
    }
    if bought is not None:
        row["bought"] = bought.as_dict()
    return row


def best_option(options: list[Option], left: float) -> Option | None:
    """The affordable option with the highest plan's P(resolve) per device-hour (``Option.p_plan``:
    at a true gain of 0 and of the margin, so the choice reads the noise and the grid's term,
    not the estimate the next look tests)."""
    fits = [o for o in options if o.cost <= left and o.p_plan > 0]
    return max(fits, key=lambda o: o.plan_per_hour) if fits else None


def resolve_loop(
    table: pd.DataFrame, judge: Judge, cost: Cost, buy: Buy, plan: Plan, grow: Grow | None = None
) -> Path:
    """Judge ``table`` at look 0, then buy and judge until every variant is resolved, the budget
    cannot pay for an option, or the declared looks are spent. A variant resolved at a look
    keeps that look's word (its claim was read there, at that look's level). ``grow``: the
    study's next size (``options.Grow``) where ``size`` is among the plan's kinds."""
    levels = plan.levels()
    path = Path(plan)
    read = judge(table, levels[0])
    path.words = {v: e.word for v, e in read.items()}
    path.looks.append(_look_row(0, levels[0], read, None))
    for k in range(1, plan.max_looks + 1):
        open_ = [read[v] for v, w in path.words.items() if w in UNRESOLVED and v in read]
        if not open_:
            path.stopped = "resolved"
            return path
        options = [o for e in open_ for o in price(
            e, levels[k], cost, max_seeds=plan.max_seeds, start_seeds=plan.start_seeds,
            kinds=plan.kinds, grow=grow,
        )]  # fmt: skip
        choice = best_option(options, plan.budget - path.spent)
        if choice is None:
            path.stopped = "budget" if options else "no option"
            return path
        table = pd.concat([table, buy(choice.cells)], ignore_index=True)
        path.spent += choice.cost
        read = judge(table, levels[k])
        for v, e in read.items():  # a variant resolved earlier keeps its word
            if path.words.get(v, "undetected") in UNRESOLVED:
                path.words[v] = e.word
        path.looks.append(_look_row(k, levels[k], read, choice))
    path.stopped = "resolved" if path.resolved else "looks"
    return path
