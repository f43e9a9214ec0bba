"""A verdict held by its LR guard (a compared arm's best LR not bracketed) is resolved only by the
LRs past that edge: the options price those (`lr_edge`) and nothing else, and the loop, judged by
the study's own `analyse`, buys them rather than seeds that could not lift the guard.

The studies: 4 sizes (12.5M-100M) x 2 arms x 3 seeds at one LR per size (the law's optimum, as
a fixed recipe gives), identical arms. One LR tried is at both edges of its grid, so every
compared cell is unbracketed and the verdict is `inconclusive` whatever its interval says.
"""

from __future__ import annotations

from analysis.judgement import table_judgement
from analysis.stats.resolve.loop import Plan
from analysis.stats.resolve.options import price
from analysis.synthetic.closed_loop import (
    BASELINE,
    FOUR_SIZES,
    VARIANT,
    Truth,
    analyse_judge,
    closed_loop,
    flops_hours,
    rows_of,
    start_cells,
)

SIZES = FOUR_SIZES
ONE_LR = (1.0,)  # x the law's optimum at each size
RESAMPLES = 300


# the study path's judge: `analyse` at each look's level
_judge = analyse_judge(table_judgement(BASELINE, num_resamples=RESAMPLES))


def test_a_verdict_held_by_its_lr_guard_prices_only_the_lrs_past_the_edge() -> None:
    cells = start_cells(SIZES, 3, ONE_LR)
    table = rows_of(Truth(study_seed=4), cells)
    (ev,) = _judge(table, 0.05).values()
    assert ev.word == "inconclusive" and ev.lr_guarded, ev
    assert {(e["arm"], e["size"]) for e in ev.edges} == {
        (arm, c["size"]) for c in cells for arm in (BASELINE, VARIANT)
    }
    (option,) = price(ev, 0.01, flops_hours)
    assert option.kind == "lr_edge" and option.p_plan > 0 and option.cost > 0
    best = {(c["variant"], c["size"]): c["lr"] for c in cells}
    bought = {(c["variant"], c["size"], round(c["lr"] / best[c["variant"], c["size"]], 6))
              for c in option.cells}  # fmt: skip
    assert {r for _, _, r in bought} == {0.5, 2.0}  # one step either side of the one LR
    assert len(option.cells) == 4 * 2 * 2 * 3  # sizes x arms x LRs x the best LR's seeds
    assert {c["seed"] for c in option.cells} == {0, 1, 2}
    # each size's two LRs named once for both arms (one recipe LR: the same at a size)
    top = sorted({c["lr"] for c in option.cells if c["size"] == "100M"})
    assert option.edit.startswith("lr.grid: add "), option.edit
    assert f"{top[0]:.3g}, {top[1]:.3g} for linear and nonlinear at 100M" in option.edit
    # seeds or a finer grid cannot lift the guard: without lr_edge nothing is priced
    assert price(ev, 0.01, flops_hours, kinds=("seeds", "lr_grid")) == []


def test_the_loop_buys_the_lrs_past_the_edge_until_the_guard_lifts() -> None:
    """The closed loop through `analyse`: while a look's verdict is held by the LR guard the next
    extension buys `lr_edge` (not seeds), and within the declared looks every compared arm's
    best LR is bracketed (the truth's optimum lies within half a 2x step of the law's), so the
    last look's word is the interval's, not the guard's."""
    plan = Plan(budget=1e6, max_looks=4, kinds=("seeds", "lr_grid", "lr_edge"))
    seen: list[dict] = []

    def judge(table, level):
        read = _judge(table, level)
        seen.append(read)
        return read

    path, _ = closed_loop(Truth(study_seed=4), plan, 1.0, SIZES, judge=judge, grid=ONE_LR)
    assert path.looks[0]["words"] == {VARIANT: "inconclusive"}
    kinds = [look["bought"]["kind"] for look in path.looks[1:]]
    guarded = [read[VARIANT].lr_guarded for read in seen]
    print(f"\nbought {kinds}; guarded at each look {guarded}; words {path.words}")
    assert guarded[0] and not guarded[-1], (guarded, kinds)
    assert kinds[: guarded.index(False)] == ["lr_edge"] * guarded.index(False), (guarded, kinds)
