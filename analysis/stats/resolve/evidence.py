"""What a look reads of the deciding interval: each variant's top-size gain over the baseline, its
seeds' paired sd and the LR grid's term, and the word its interval gives at the look's level.

Two readers, one shape (``Evidence``):

- ``read_table(table, baseline, level, margin_pct)``: the verdict's binding test read straight
  off a run table (fast: no fit, one vectorised bootstrap at the top). The top size is the
  largest both arms measured, at the largest budget the baseline has there; each arm's best LR
  is its lowest mean loss over its LRs whose runs all completed, on the seeds every one of them
  ran; the gain is the paired mean over the seeds both best LRs ran (% of the baseline's loss);
  its interval is ``gains.resolution.t_half``'s, the paired t with the LR grid's term. The term is
  ``penalty_moments`` of the three-point curvature through each arm's best LR and its neighbours
  (the median over every arm and size whose best LR has both, relative to the arm's loss), each
  optimum uniform between the midpoints to the neighbours (a missing side mirrors the other);
  ``analysis.stats.gains.resolution`` reads more (the reach past a noisy neighbour) and
  ``analyse`` is what a study's verdict uses. The closed loop's tests read this one: it is the
  test the verdict's claims rest on with few seeds (docs/statistics.md, "Power"), and it costs
  milliseconds where ``analyse`` costs a second.

  **The LR choice** is in the interval too (``choice_draws``): the parametric bootstrap of
  ``analyse`` at the top (every run its cell's mean over its seeds plus the noise model's draws,
  ``variance.noise``), each arm's LR chosen again in every draw by the data's rule, and the
  gain's spread about the data's LRs' centre beyond its spread at the data's LRs,
  ``E[(G_again - mean G_fixed)^2] - var G_fixed``, added to the paired t like the grid's term
  (a known variance, Welch-Satterthwaite df; part of ``grid_var``, ``choice_var`` on its own).
  Why: the choice is made on the scan seeds, the seeds every LR ran; a look's seeds are bought
  at the chosen LRs only, so they shrink the paired se but leave the winner's curse of the scan
  seeds in the paired mean (under t noise on 3 df one outlier scan seed picks a worse LR, and
  the seeds bought there confirm a gap the LRs' optima do not have: 17/180 false claims over
  the closed loop's path). In the draws the chosen cell's mean rests on all its seeds, so a
  choice its bought seeds no longer support moves (the move is read on the seeds the choice
  was made on), and the mean square of that move, bias included, is admitted as an error of
  that size, as ``gains.resolution.pair_var`` admits the grid's mean difference. Where every
  LR ran every seed the re-chosen gain is ``analyse``'s pooled draw, and the term came out 0 on
  every such design checked (the choice is already in the paired seeds' spread);
  ``pooled_ci`` is that bootstrap's percentile interval, checked against ``analyse``'s
  (tests/analysis/stats/resolve/test_closed_loop.py).
- ``from_verdict(verdict, table)``: the same fields with a finished analysis's own figures
  (``decision.top_gain_pct``: the estimate, ``seeds_se``, ``grid_sd``, its level and the
  variant's word), for the report's "What would resolve it" and verdict.json's ``resolve``.

Words: ``helps`` (the interval excludes 0 on the gain side: a claim; ``analyse`` would say
``persists``/``grows``/``fades`` once the trend is read), ``hurts``, ``none`` (the interval within
``+-margin``), ``undetected``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from analysis.stats.gains.levels import ci
from analysis.stats.gains.resolution import penalty_moments, t_half
from analysis.stats.variance import noise
from analysis.tables.spec import DEFAULT_MARGIN_PCT

NUM_DRAWS = 4000  # the pooled bootstrap's draws: p-values down to 1/4001
DRAW_SEED = 61
RESOLVED = ("persists", "grows", "fades", "helps", "hurts", "none")
UNRESOLVED = ("undetected", "inconclusive")
CLAIMS = ("persists", "grows", "fades", "helps", "hurts")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One variant's deciding interval at a look: the gain over the baseline at the top size."""

    variant: str
    baseline: str
    size: str
    n_params: float
    tokens: float
    estimate_pct: float  # baseline - variant, % of the baseline's loss
    seed_sd_pct: float  # sd of one seed's paired difference (%)
    num_seeds: int  # paired seeds at the top
    grid_var: float  # the LR grid's term (%^2): no number of seeds shrinks it
    grid_step: float  # ln-LR gap from the best LRs to their neighbours at the top (the widest)
    level: float  # the two-sided level the interval is read at
    margin_pct: float
    word: str
    best_lrs: dict[str, float]  # arm -> its chosen LR at the top
    seeds: tuple[int, ...]  # the paired seeds
    sizes: tuple[tuple[str, float], ...] = ()  # (label, N) of every size both arms measured
    sd_by_size: dict[str, float] = dataclasses.field(default_factory=dict)
    grid_multiples: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    has_tokens_axis: bool = False
    backtest: str = ""  # what the backtest says of extrapolating past the top
    # the pooled bootstrap's interval at ``level`` (each arm's LR chosen again in every draw);
    # None: no noise model (fewer than 2 seeds anywhere), the paired t alone decides
    pooled_ci: tuple[float, float] | None = None
    choice_var: float = 0.0  # the LR choice's part of grid_var (%^2)
    # the compared (arm, size, tokens) whose best LR is not bracketed, with the LRs the frontier
    # says to add and the seeds to run them on (``edges_of``); non-empty only where the verdict
    # holds its LR guard: then no seed and no finer grid can resolve it, only these LRs
    edges: tuple[dict, ...] = ()

    @property
    def seeds_se(self) -> float:
        return self.seed_sd_pct / math.sqrt(self.num_seeds)

    @property
    def half_width_pct(self) -> float:
        return half_width(self.seed_sd_pct, self.num_seeds, self.grid_var, self.level)

    @property
    def resolved(self) -> bool:
        return self.word in RESOLVED

    @property
    def lr_guarded(self) -> bool:
        """Inconclusive because some compared arm's best LR is not bracketed."""
        return self.word == "inconclusive" and bool(self.edges)


def half_width(sd_pct: float, num_seeds: int, grid_var: float, level: float) -> float:
    """The deciding interval's half-width at ``level``: the paired t with the grid's term."""
    se = sd_pct / math.sqrt(num_seeds)
    return float(t_half(1.0 - level / 2.0, se, num_seeds - 1, grid_var))


def word_of(estimate: float, half: float, margin_pct: float) -> str:
    if estimate - half > 0:
        return "helps"
    if estimate + half < 0:
        return "hurts"
    if abs(estimate) + half <= margin_pct:
        return "none"
    return "undetected"


Sweeps = dict[float, dict[int, float]]  # lr -> {seed: loss}


def _index(table: pd.DataFrame) -> dict[tuple[str, str, float], Sweeps]:
    """(variant, size, tokens) -> its sweep, LRs whose runs all completed (one pass)."""
    cols = ("variant", "size", "tokens", "lr", "seed", "final_val_loss")
    out: dict[tuple[str, str, float], Sweeps] = {}
    failed = set()
    for arm, size, tok, lr, seed, loss in zip(*(table[c].to_numpy() for c in cols), strict=True):
        key = (str(arm), str(size), float(tok))
        if not np.isfinite(loss):
            failed.add((key, float(lr)))
            continue
        out.setdefault(key, {}).setdefault(float(lr), {})[int(seed)] = float(loss)
    for key, lr in failed:
        out.get(key, {}).pop(lr, None)
    return out


def _best(sweep: Sweeps) -> float:
    """The LR with the lowest mean loss on the seeds every LR ran (the scan's): seeds a look
    added at the chosen LR only do not move the choice, as they do not in a study's looks."""
    common = set.intersection(*(set(runs) for runs in sweep.values()))
    if not common:
        return min(sweep, key=lambda lr: float(np.mean(list(sweep[lr].values()))))
    return min(sweep, key=lambda lr: float(np.mean([sweep[lr][s] for s in common])))


def _curvature(sweep: dict[float, dict[int, float]], best: float) -> float | None:
    """Relative second divided difference in ln LR through the best LR and its neighbours."""
    lrs = sorted(sweep)
    i = lrs.index(best)
    if i == 0 or i == len(lrs) - 1:
        return None
    lo, hi = lrs[i - 1], lrs[i + 1]
    seeds = set(sweep[lo]) & set(sweep[best]) & set(sweep[hi])
    if not seeds:
        return None
    y = [float(np.mean([sweep[lr][s] for s in seeds])) for lr in (lo, best, hi)]
    h_lo, h_hi = math.log(best / lo), math.log(hi / best)
    c = ((y[2] - y[1]) / h_hi - (y[1] - y[0]) / h_lo) / (h_lo + h_hi)
    return max(c, 0.0) / y[1]


def _sides(sweep: dict[float, dict[int, float]], best: float) -> tuple[float, float]:
    """Half the ln-LR gaps to the best LR's neighbours (a missing side mirrors the other)."""
    lrs = sorted(sweep)
    i = lrs.index(best)
    lo = math.log(best / lrs[i - 1]) / 2 if i > 0 else None
    hi = math.log(lrs[i + 1] / best) / 2 if i < len(lrs) - 1 else None
    lo = lo if lo is not None else hi if hi is not None else math.log(2.0) / 2
    hi = hi if hi is not None else lo
    return lo, hi


def _paired(index: dict, baseline: str, variant: str, size: str, n_params: float) -> dict | None:
    """The paired gain at one size (the baseline's largest budget there), or None."""
    budgets = [tok for arm, s, tok in index if arm == baseline and s == size]
    if not budgets:
        return None
    tokens = max(budgets)
    sweeps = {arm: index.get((arm, size, tokens), {}) for arm in (baseline, variant)}
    if not all(sweeps.values()):
        return None
    best = {arm: _best(s) for arm, s in sweeps.items()}
    seeds = sorted(set(sweeps[baseline][best[baseline]]) & set(sweeps[variant][best[variant]]))
    if len(seeds) < 2:
        return None
    b = np.array([sweeps[baseline][best[baseline]][s] for s in seeds])
    v = np.array([sweeps[variant][best[variant]][s] for s in seeds])
    scale = 100.0 / float(b.mean())
    return {
        "tokens": tokens,
        "n_params": n_params,
        "sweeps": sweeps,
        "best": best,
        "seeds": tuple(seeds),
        "estimate": float((b - v).mean() * scale),
        "sd": float((b - v).std(ddof=1) * scale),
    }


def _grid(p: dict, c: float) -> tuple[float, float, dict[str, tuple[float, ...]]]:
    """(grid term %^2, widest ln-LR gap to a neighbour, each arm's LRs as multiples of its best)
    at relative curvature ``c``."""
    sweeps, best = p["sweeps"], p["best"]
    moments = {arm: penalty_moments(c, *_sides(sweeps[arm], best[arm])) for arm in sweeps}
    (mb, vb), (mv, vv) = moments.values()
    step = max(2 * max(_sides(sweeps[arm], best[arm])) for arm in sweeps)
    mult = {arm: tuple(lr / best[arm] for lr in sorted(sweeps[arm])) for arm in sweeps}
    return vb + vv + (mb - mv) ** 2, step, mult


def noise_model(index: dict, sizes: list[tuple[str, float]]) -> noise.NoiseModel | None:
    """The analysis's noise model (``variance.noise.estimate``: per size the ANOVA of its cells
    x the seeds every cell ran, pooled across sizes as ``c N^slope``) over every sweep's LRs."""
    keys = [(key, lr) for key in index for lr in sorted(index[key])]
    seeds = sorted({seed for key, lr in keys for seed in index[key][lr]})
    col = {seed: j for j, seed in enumerate(seeds)}
    y = np.full((len(keys), len(seeds)), np.nan)
    for i, (key, lr) in enumerate(keys):
        for seed, loss in index[key][lr].items():
            y[i, col[seed]] = loss
    order = {s: i for i, (s, _) in enumerate(sizes)}
    cell_size = np.array([order[key[1]] for key, _ in keys])
    log_n = np.log([n for _, n in sizes])
    return noise.estimate(y, cell_size, log_n, [s for s, _ in sizes])


def choice_draws(
    p: dict, model: noise.NoiseModel, size: str, num_draws: int = NUM_DRAWS, seed: int = DRAW_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """``([num_draws], [num_draws])`` top gains (%) of the parametric bootstrap: at the data's
    chosen LRs, and with each arm's LR chosen again in every draw.

    Every run at the top is its cell's mean over its seeds plus the model's noise (one shared
    draw per seed, one per run, each inflated by t/z for its df: ``noise.simulate``, as
    ``analyse`` draws). At the data's LRs the gain is the paired mean over the paired seeds, %
    of the baseline's loss. Chosen again, each arm takes the LR of lowest mean on the seeds every
    one of its LRs ran (the data's rule, ``_best``), and its loss moves by what that LR's mean
    there differs from the data's LR's: the choice's own move, read on the seeds the choice was
    made on (where every LR ran every seed, the gain at the re-chosen LRs, as ``analyse``'s)."""
    arms = list(p["sweeps"])  # baseline, variant
    cells = [(arm, lr) for arm in arms for lr in sorted(p["sweeps"][arm])]
    seeds = sorted({s for arm, lr in cells for s in p["sweeps"][arm][lr]})
    col = {s: j for j, s in enumerate(seeds)}
    y = np.full((len(cells), len(seeds)), np.nan)
    for i, (arm, lr) in enumerate(cells):
        for s, loss in p["sweeps"][arm][lr].items():
            y[i, col[s]] = loss
    present = np.isfinite(y)
    cell_size = np.full(len(cells), model.sizes.index(size))
    rng = np.random.default_rng(seed)
    draws = noise.simulate(np.nanmean(y, axis=1), present, cell_size, model, num_draws, rng)
    paired = np.isin(seeds, p["seeds"])
    at_data, moved = [], []
    for arm in arms:
        members = np.array([i for i, (a, _) in enumerate(cells) if a == arm])
        own = members.tolist().index(cells.index((arm, p["best"][arm])))
        at_data.append(draws[:, members[own], paired].mean(axis=1))  # [B]
        common = present[members].all(axis=0)
        mask = np.broadcast_to(common if common.any() else present[members], present[members].shape)
        means = np.where(mask, draws[:, members], 0.0).sum(axis=2) / mask.sum(axis=1)  # [B, lrs]
        moved.append(means.min(axis=1) - means[:, own])  # [B] <= 0: the choice's move
    (lb, lv), (mb, mv) = at_data, moved
    fixed = 100.0 * (lb - lv) / lb
    again = 100.0 * ((lb + mb) - (lv + mv)) / (lb + mb)
    return fixed, again


def read_table(
    table: pd.DataFrame, baseline: str, level: float, margin_pct: float
) -> dict[str, Evidence]:
    """Each variant's deciding interval read off ``table`` at ``level`` (see the module)."""
    if "status" in table:
        table = table[table["status"] == "completed"]
    sizes = (
        table.groupby("size")["num_nonembedding_params"].max().sort_values(kind="stable").items()
    )
    sizes = [(str(s), float(n)) for s, n in sizes]
    index = _index(table)
    model = noise_model(index, sizes)
    out = {}
    for variant in sorted(set(table["variant"]) - {baseline}):
        per_size = {s: p for s, n in sizes if (p := _paired(index, baseline, variant, s, n))}
        if not per_size:
            continue
        top = max(per_size, key=lambda s: per_size[s]["n_params"])
        p = per_size[top]
        curv = [
            c
            for q in per_size.values()
            for arm in q["sweeps"]
            if (c := _curvature(q["sweeps"][arm], q["best"][arm])) is not None
        ]  # every sweep bracketing its best, at every size: the same relative curvature
        grid_var, step, mult = _grid(p, float(np.median(curv)) if curv else 0.0)
        n = len(p["seeds"])
        pooled, choice_var = None, 0.0
        if model is not None:
            fixed, again = choice_draws(p, model, top)
            spread = float(np.mean((again - fixed.mean()) ** 2))  # about the data's LRs' centre
            choice_var = max(0.0, spread - float(fixed.var()))
            drawn = ci(again, level)
            pooled = None if drawn is None else (drawn[0], drawn[1])
        half = half_width(p["sd"], n, grid_var + choice_var, level)
        out[variant] = Evidence(
            variant=variant,
            baseline=baseline,
            size=top,
            n_params=p["n_params"],
            tokens=p["tokens"],
            estimate_pct=p["estimate"],
            seed_sd_pct=p["sd"],
            num_seeds=n,
            grid_var=grid_var + choice_var,
            grid_step=step,
            level=level,
            margin_pct=margin_pct,
            word=word_of(p["estimate"], half, margin_pct),
            best_lrs=dict(p["best"]),
            seeds=p["seeds"],
            sizes=tuple((s, n_) for s, n_ in sizes if s in per_size),
            sd_by_size={s: q["sd"] for s, q in per_size.items()},
            grid_multiples=mult,
            has_tokens_axis=sum(a == baseline and s == top for a, s, _ in index) > 1,
            pooled_ci=pooled,
            choice_var=choice_var,
        )
    return out


def from_verdict(verdict: dict, table: pd.DataFrame) -> dict[str, Evidence]:
    """Each variant's ``Evidence`` with a finished analysis's own figures: the top gain, its
    seeds' standard error and grid sd (``decision.top_gain_pct``), its level and word; the
    seeds, LRs and sizes are read off ``table`` as ``read_table`` reads them."""
    baseline = str(verdict.get("baseline"))
    margin = float(verdict.get("margin_pct", DEFAULT_MARGIN_PCT))
    fast = read_table(table, baseline, 0.05, margin)
    out = {}
    for row in verdict.get("variants", []):
        ev = fast.get(row.get("variant"))
        top = (row.get("decision") or {}).get("top_gain_pct") or {}
        if ev is None or top.get("value") is None:
            continue
        se = top.get("seeds_se")
        sd = float(se) * math.sqrt(ev.num_seeds) if se is not None else ev.seed_sd_pct
        grid_sd = top.get("grid_sd")
        out[ev.variant] = dataclasses.replace(
            ev,
            estimate_pct=float(top["value"]),
            seed_sd_pct=sd,
            grid_var=float(grid_sd) ** 2 if grid_sd is not None else ev.grid_var,
            choice_var=0.0 if grid_sd is not None else ev.choice_var,  # analyse's pooled carries it
            pooled_ci=tuple(top["pooled_ci"]) if top.get("pooled_ci") else ev.pooled_ci,
            level=float((row.get("decision") or {}).get("level", 0.05)),
            word=str(row.get("verdict")),
            backtest=_backtest_word(verdict, ev.variant),
            edges=edges_of(verdict, table, ev) if row.get("verdict") == "inconclusive" else (),
        )
    return out


def edges_of(verdict: dict, table: pd.DataFrame, ev: Evidence) -> tuple[dict, ...]:
    """verdict.json's unbracketed LR frontiers (``lr_selection``) of the variant's and the
    baseline's compared sizes, each with the LRs to add (``next_lrs``) and the seeds that ran
    its best LR (all its seeds when no LR is usable), so that each added LR is run by every
    seed the choice is made on and can be chosen."""
    n_of = dict(ev.sizes)
    out = []
    for r in verdict.get("lr_selection") or []:
        arm, size, lrs = str(r.get("variant")), str(r.get("size")), r.get("next_lrs") or []
        if r.get("bracketed", True) or arm not in (ev.variant, ev.baseline) or size not in n_of:
            continue
        lrs = [float(x) for x in lrs if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
        rows = table[(table["variant"] == arm) & (table["size"] == size)]
        rows = rows[rows["tokens"].astype(float) == float(r.get("tokens", math.nan))]
        best = r.get("best_lr")
        at_best = rows[rows["lr"].astype(float) == float(best)] if best is not None else rows
        seeds = sorted({int(s) for s in at_best["seed"]})
        if lrs and seeds:
            out.append({"arm": arm, "size": size, "n_params": n_of[size],
                        "tokens": float(r["tokens"]), "lrs": lrs, "seeds": seeds})  # fmt: skip
    return tuple(out)


def _backtest_word(verdict: dict, variant: str) -> str:
    """What the study's backtest says of extrapolating one step past what it measured."""
    bt = verdict.get("backtest")
    if not isinstance(bt, dict) or not bt:
        return "no backtest (too few sizes)"
    top = bt.get("top_step") or {}
    flag = (top.get("flagged") or {}).get(variant) if isinstance(top, dict) else None
    if flag is None:
        return "the backtest did not check this variant"
    return "the backtest's top step disagreed" if flag else "the backtest's top step agreed"
