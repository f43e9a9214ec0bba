"""Seeds where they resolve the verdict: a group-sequential design over rounds of seeds.

A study with ``seeds: {start: 3, max: 10, step: 2}`` runs ``start`` seeds, looks, and adds
``step`` seeds where they are needed until the verdict is decided or ``max`` is reached. Testing
again after every round at 5% would claim a gain on identical arms far more often than 5% (each
look is another chance); so each look is judged at a *nominal* level from an alpha-spending
function, and the chance of any claim over all looks stays at ``alpha``.

**Spending and boundaries**: ``analysis.stats.looks.spending`` (Lan & DeMets' O'Brien-Fleming-type
function; each look's nominal level replaces the verdict's 5% at that look: the family-wise
level of every claim and the level of the equivalence interval).

**Information** is the number of paired seeds at the top size (the largest size both arms
measured), as a fraction of ``max``: ``t_k = n_top / max``. Every claim but ``fades`` rests on
the top-size test, and with few seeds its binding interval is Student's t on that size's paired
seeds, whose variance is ``sigma^2 / n``: information ``n / sigma^2`` is proportional to ``n``,
with the same (unknown) sigma at every look. Counting seeds, not ``1 / variance`` estimated on
2-8 df, keeps the fractions known in advance and increasing, as the spending needs; a look whose
top size lost seeds to crashes is judged at the fraction it has.

**Seeds go where they narrow the deciding interval per GPU-hour.** The deciding interval is the
top gain's while it holds 0 (``undetected``), gamma's when a significant gain's trend is not
pinned (``helps``). Its squared width is ``W^2 = sum_i c_i^2 sd_i^2 / n_i`` over sizes (``sd_i``
the per-seed paired sd at size i, ``n_i`` its paired seeds): for the top gain ``c = 1`` at the
top and 0 elsewhere; for gamma, the least-squares slope weights of the per-size log multiplier
on ``log C``: ``c_i = (x_i - mean x) / sum (x - mean x)^2 / s_i``, ``s_i`` the % gain per unit of
log k at that size (``100 alpha (L_i - E) / L_i`` from the baseline's L(C) fit). A seed at size
i costs what a look adds there (``seed_cost``): one run per arm at its chosen LR. The top
size always gets ``step`` seeds (information is counted there); then, greedily, any other size
whose ``step`` seeds cut ``W`` by at least as much per FLOP as the top's did gets them too.

A look's gains and added cells: ``analysis.stats.looks.outcome``; a design replayed on a study
that already holds every seed: ``analysis.stats.looks.replay``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.analyze import Analysis, analyse
from analysis.stats.gains.levels import ALPHA, MIN_SEEDS, holm_levels
from analysis.stats.gains.robust import GainTest
from analysis.stats.looks.outcome import added_cells, top_gains
from analysis.stats.looks.spending import Boundary, spending_boundaries
from analysis.stats.rules.verdict_guards import decide_held
from analysis.tables.judgement import Judgement, data_seed
from analysis.tables.spec import DEFAULT_MARGIN_PCT

DECIDED = ("persists", "grows", "fades", "hurts", "none")  # a look stops on these
CLAIMS = ("persists", "grows", "fades", "helps", "hurts")


@dataclasses.dataclass(frozen=True)
class Design:
    """``seeds: {start, max, step}`` with the verdict's margin and family-wise level."""

    start: int = 3
    max: int = 10
    step: int = 2
    margin_pct: float = DEFAULT_MARGIN_PCT
    alpha: float = ALPHA  # the study's verdict.alpha

    def __post_init__(self) -> None:
        if self.start < MIN_SEEDS:
            raise ValueError(
                f"seeds.start {self.start}: a look needs >= {MIN_SEEDS} paired seeds for an "
                "interval"
            )
        if self.max < self.start:
            raise ValueError(f"seeds.max {self.max} is below seeds.start {self.start}")
        if self.step < 1:
            raise ValueError(f"seeds.step {self.step} must be >= 1")
        if not (0 < self.alpha < 1 and self.margin_pct > 0):
            raise ValueError("alpha must lie in (0, 1) and margin_pct be positive")

    def planned_seeds(self) -> list[int]:
        """Paired seeds at the top size at each look: start, start + step, ..., max."""
        return list(range(self.start, self.max, self.step)) + [self.max]

    def info_fractions(self) -> list[float]:
        return [n / self.max for n in self.planned_seeds()]

    def boundaries(self) -> list[Boundary]:
        return spending_boundaries(self.info_fractions(), self.alpha)

    @property
    def num_looks(self) -> int:
        return len(self.planned_seeds())


@dataclasses.dataclass(frozen=True)
class Look:
    look: int
    info_fraction: float
    num_paired_top: int  # the information: paired seeds at the top size
    z: float  # the boundary used
    level: float  # the nominal level every claim (and equivalence) was judged at
    verdict: str  # the word (variants joined as "name: word; ..." when several)
    verdicts: dict[str, str]
    stop: bool
    reason: str
    add_seeds: dict[str, int]  # size -> seeds to add before the next look (empty on stop)
    allocation: tuple[dict, ...] = ()  # the arithmetic behind add_seeds, one row per size
    # variant -> {size, estimate, lo, hi}: its top-size gain (%) and interval at ``level``
    top_gains: dict[str, dict] = dataclasses.field(default_factory=dict)
    added: tuple[dict, ...] = ()  # the cells of add_seeds: {variant, size, tokens, lr, seeds}

    def record(self) -> dict:
        """The look as plain data: the fields a study's ``looks.json`` keeps of it."""
        keys = ("look", "info_fraction", "num_paired_top", "z", "level", "verdict", "stop")
        out = {k: getattr(self, k) for k in keys}
        out.update(verdicts=dict(self.verdicts), reason=self.reason)
        return {**out, "add_seeds": dict(self.add_seeds)}

    def entry(self, round_: int, baseline: str) -> dict:
        """The look as ``looks.json`` keeps it: its record, the round its seeds form, each
        variant's top gain, the cells it adds and the baseline it was judged against."""
        added = [] if self.stop else [dict(a) for a in self.added]
        gains = {v: dict(g) for v, g in self.top_gains.items()}
        extra = {"round": round_, "top_gain_pct": gains, "added": added, "baseline": baseline}
        return {**self.record(), **extra}


def paired_top_seeds(table: pd.DataFrame, baseline: str) -> int:
    """The information: per variant, the seeds with a completed run of both it and the
    baseline at the largest size both measured; the fewest over variants."""
    done = table[table["status"] == "completed"]
    base = done[done["variant"] == baseline]
    counts = []
    for variant in sorted(set(done["variant"]) - {baseline}):
        var = done[done["variant"] == variant]
        common = set(base["size"]) & set(var["size"])
        if not common:
            continue
        top = max(
            common, key=lambda s: float(var[var["size"] == s]["num_nonembedding_params"].min())
        )
        seeds = set(base[base["size"] == top]["seed"]) & set(var[var["size"] == top]["seed"])
        counts.append(len(seeds))
    return min(counts) if counts else 0


def judge_at(result: Analysis, judgement: Judgement) -> dict[str, dict]:
    """Each variant's decision at ``judgement.level`` (a look's nominal level, or 5%): the calls
    ``analyse`` makes (Holm across variants, then ``decide_held`` with the backtest's top step:
    rule 9), on the analysis's own evidence, so one analysis can be judged at a look's level and
    at 5% without refitting."""
    evidence = result.evidence
    levels = holm_levels({v: e.p for v, e in evidence.items()}, judgement.level) if evidence else {}
    return {v: decide_held(e, levels.get(v), judgement) for v, e in evidence.items()}


def look_level(table: pd.DataFrame, design: Design, look: int, baseline: str):
    """(paired seeds at the top, information fraction, boundary) of look ``look``: earlier
    looks at their planned fractions, this one at the fraction its table has."""
    if not 1 <= look <= design.num_looks:
        raise ValueError(f"look {look}: the design has looks 1..{design.num_looks}")
    n_top = paired_top_seeds(table, baseline)
    if n_top < 1:
        raise ValueError("no size has a completed run of the baseline and a variant")
    frac = min(n_top, design.max) / design.max
    earlier = [f for f in design.info_fractions()[: look - 1] if f < frac]
    return n_top, frac, spending_boundaries([*earlier, frac], design.alpha)[-1]


def analyse_look(table: pd.DataFrame, judgement: Judgement) -> Analysis:
    """The analysis a look reads: the bootstrap seeded from the data (``data_seed``), the
    design's margin, at ``judgement.level`` (``Judgement.at_look``)."""
    return analyse(table, judgement, data_seed(table))


def decide_look(
    table: pd.DataFrame,
    judgement: Judgement,
    look: int,
    naive_level: float | None = None,
    analysis: Analysis | None = None,
    with_cells: bool = True,
) -> Look:
    """Judge look ``look`` (1-based) of ``judgement.design`` on the finished runs in ``table``,
    against ``judgement.baseline`` with ``judgement.num_resamples`` draws.

    The verdict is run with its family-wise level replaced by the look's nominal level
    (``Judgement.at_look``; ``naive_level`` overrides it: naive re-testing, for comparisons
    only). It stops when every
    variant is decided (persists, grows, fades, hurts, or none by equivalence at that level),
    on a design defect (``inconclusive`` with enough seeds: an LR not bracketed, a divergence,
    too few sizes; more seeds change none of these), or at the last look; otherwise it says which
    sizes get ``step`` more seeds. ``analysis``: ``analyse_look(table, judgement.at_look(...))``
    already computed (it is judged again at the look's level). ``with_cells``: name the cells
    the added seeds run (``Look.added``, each arm at its chosen LR); a replay needs the sizes
    only. The pooled bootstrap cannot reject below ``1 / (num_resamples + 1)``: at early looks
    (level ~3e-4 at t = 0.3) it is conservative unless ``num_resamples`` is in the thousands. A pure
    function of the table: the bootstrap's seed comes from the data (``data_seed``). ``none``
    stops a look only when the draws resolve the interval at its level (``draws * level / 2 >=
    1``; 1,000 draws: from look 2 of the
    default design)."""
    design = judgement.design
    n_top, frac, bound = look_level(table, design, look, judgement.baseline)
    alpha_k = bound.level if naive_level is None else naive_level
    at_look = judgement.at_look(alpha_k)
    if analysis is None:
        analysis = analyse_look(table, at_look)
    decisions = judge_at(analysis, at_look)
    gains = {"top_gains": top_gains(decisions)}
    verdicts = {v: d["verdict"] for v, d in decisions.items()}
    word = next(iter(verdicts.values())) if len(verdicts) == 1 else _joined(verdicts)
    at = f"look {look} (t = {frac:.2f}, {n_top} paired seeds at the top, level {alpha_k:.3g})"
    z = bound.z if naive_level is None else float(stats.norm.isf(naive_level / 2))
    args = (look, frac, n_top, z, alpha_k, word, verdicts)
    defects = {v: d for v, d in decisions.items() if d["verdict"] == "inconclusive"}
    if defects and n_top >= MIN_SEEDS:
        why = "; ".join(f"{v}: {d['reason']}" for v, d in defects.items())
        reason = (
            f"{at}: inconclusive for a design defect ({why}); more seeds do not bracket an LR, "
            "undo a divergence or add a size: fix the design, then look again"
        )
        return Look(*args, True, reason, {}, **gains)
    draws = int(analysis.verdict["num_resamples"])
    thin = [v for v, d in decisions.items() if d["verdict"] == "none" and not _resolved(d, draws)]
    if all(w in DECIDED for w in verdicts.values()) and not thin:
        return Look(*args, True, f"{at}: decided: {word}", {}, **gains)
    if look == design.num_looks or n_top >= design.max:
        reason = f"{at}: {word} at the design's maximum of {design.max} seeds"
        return Look(*args, True, reason, {}, **gains)
    open_words = {v: w for v, w in verdicts.items() if w not in DECIDED or v in thin}
    add, allocation = allocate(analysis, table, design, open_words)
    sizes = ", ".join(f"+{k} at {s}" for s, k in add.items())
    reason = f"{at}: {word}, not decided; {sizes} (the deciding interval's width per FLOP)"
    if thin:
        reason += (
            f"; equivalence not resolved with {draws} draws: the pooled interval at this level "
            "is the draws' range (needs >= 2 / level draws)"
        )
    cells = tuple(added_cells(table, add)) if with_cells else ()
    return Look(*args, False, reason, add, tuple(allocation), added=cells, **gains)


def _resolved(decision: dict, draws: int) -> bool:
    """Whether the pooled percentile interval at the top size's level is a quantile of the
    draws, not their range: at least one draw beyond each end (``draws * level / 2 >= 1``).
    Below that the interval is too narrow for its level, which only matters for ``none`` (a
    claim's p-value is floored at ``1 / (draws + 1)`` instead, which is conservative)."""
    top = decision.get("top_gain_pct") or {}
    return draws * float(top.get("level") or 0.0) / 2 >= 1.0


def _joined(verdicts: dict[str, str]) -> str:
    return "; ".join(f"{k}: {w}" for k, w in verdicts.items())


def seed_cost(table: pd.DataFrame) -> dict[str, float]:
    """FLOPs of one more seed at each size: what a look adds there
    (``scaling.looks.sequential_seeds``),
    each arm once at its chosen LR, a run per token budget; the LRs an arm scanned (more at a
    size where the search went past an edge) cost it nothing more."""
    cells = table.drop_duplicates(["variant", "size", "tokens"])
    return {str(s): float(f.sum()) for s, f in cells.groupby("size")["flops"]}


def _trend_weights(result: Analysis, curve: list, flops: np.ndarray) -> np.ndarray:
    """gamma's weights on the per-size paired gains (%): the least-squares slope on log C of
    log k_i ~ gain_i / s_i, ``s_i`` the % gain per unit log k at size i from the baseline's
    L(C) fit (1 where that fit is missing)."""
    x = np.log(flops)
    slope = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    sens = np.ones(len(curve))
    for i, b in enumerate(curve):
        fit = next((f for f in result.fits if f.law == "L(C)" and f.variant == b.base_arm), None)
        p = fit.full() if fit is not None else None
        if p:
            floor = math.exp(p["e"])
            loss = floor + math.exp(p["a"] - p["alpha"] * x[i])
            sens[i] = 100.0 * p["alpha"] * (loss - floor) / loss
    return slope / sens


def allocate(
    result: Analysis, table: pd.DataFrame, design: Design, open_words: dict[str, str]
) -> tuple[dict[str, int], list[dict]]:
    """(size -> seeds to add, one row of arithmetic per size): greedy on the deciding
    interval's width reduction per FLOP, the top size first (see the module docstring)."""
    cost = seed_cost(table)
    terms: dict[str, list[tuple[float, float]]] = {}  # size -> [(c^2 sd^2, variant)]
    n_of: dict[str, int] = {}
    tops = []
    for variant, word in open_words.items():
        comp = result.comparisons[variant]
        curve = comp.curve
        if not curve:
            continue
        tests = [GainTest.of(b, result.groups) for b in curve]
        sd = np.array([t.se * math.sqrt(t.df + 1) if t.df >= 1 else np.nan for t in tests])
        if word == "helps":
            flops = np.array([result.groups.info.at[b.base, "flops"] for b in curve], float)
            c = _trend_weights(result, curve, flops)
        else:
            c = np.zeros(len(curve))
            c[-1] = 1.0
        for b, ci, si in zip(curve, c, sd, strict=True):
            n_of[b.size] = b.num_paired
            if ci != 0 and np.isfinite(si):
                terms.setdefault(b.size, []).append(ci * ci * si * si)
        tops.append(curve[-1].size)

    def width(n: dict[str, int]) -> float:
        return math.sqrt(sum(sum(v) / n[s] for s, v in terms.items()))

    room = {s: max(0, min(design.step, design.max - n_of[s])) for s in n_of}
    now = dict(n_of)
    add: dict[str, int] = {}
    rows = []
    for top in dict.fromkeys(tops):
        if room[top]:
            before = width(now)
            now[top] += room[top]
            add[top] = room[top]
            rows.append(_row(top, n_of[top], room[top], cost, before - width(now), "top size"))
    bar = min((r["width_cut_per_flop"] for r in rows), default=0.0)
    while True:
        best = None
        for s in n_of:
            if s in add or not room[s] or s not in terms:
                continue
            trial = {**now, s: now[s] + room[s]}
            cut = width(now) - width(trial)
            per = cut / (room[s] * cost[s])
            if best is None or per > best[1]:
                best = (s, per, cut)
        if best is None or best[1] < bar or best[2] <= 0:
            break
        s = best[0]
        add[s] = room[s]
        now[s] += room[s]
        rows.append(_row(s, n_of[s], room[s], cost, best[2], "cuts as much per FLOP as the top"))
    return add, rows


def _row(size: str, n: int, k: int, cost: dict[str, float], cut: float, why: str) -> dict:
    return {
        "size": size,
        "paired_seeds": n,
        "add": k,
        "flops_per_seed": cost[size],
        "width_cut_pct": cut,
        "width_cut_per_flop": cut / (k * cost[size]),
        "why": why,
    }
