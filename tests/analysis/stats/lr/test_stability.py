"""The stability words (`analysis.stats.lr.stability`) on synthetic studies whose truth is known.

Each arm and size has a true edge (the LR above which training diverges). The scan climbs a
grid of step sqrt(2) (half an octave) from below, one cell per LR, and stops at the first
divergence, as `lr.search.find_edge` does. Divergence is chancy near the edge: a cell at LR x
diverges with probability sigmoid(log2(x / edge) / 0.1), so the grid point just below the edge
diverges by chance ~8% of the time and the one just above survives ~8% of the time (edges sit
midway between grid points). Three follower seeds run the lowest LRs, as followers do.

Truths (margins in octaves of LR, 3 sizes): persists log2(5) (the paper's 5x) at every size;
fades log2(5), log2(5)/2, 0; none 0, 0, 0; unresolved: the variant's scan stopped (max_rounds)
before the baseline's first divergence, its edge not found; beyond_scan: the variant's edge lies
beyond the scan's reach, but it was stable far above the baseline's first divergence, censored
evidence of the margin's lower bound, so the word is `persists` (before diverged cells bounded
the edge, this read `unresolved`: a censored edge was a gap). Each scenario runs N = 300
studies; the word must be right in more than 95%: the test asserts that the number right
would have probability < 5% were the true rate only 95% (a one-sided
binomial bound: at N = 300 that needs at least 292 right).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from analysis.stats.lr.stability import arm_edges, stability_verdict

SIZES = {"2M": 2e6, "8M": 8e6, "32M": 32e6}
STEP = 0.5  # octaves per grid step
WIDTH = 0.1  # octaves: how sharp the edge is
N_STUDIES = 300
MAX_LR_STEPS = 20  # the scan's reach: 9.5 octaves above its start (max_rounds)


def _arm_rows(
    rng, variant: str, size: str, edge_log2: float, start_log2: float, steps: int = MAX_LR_STEPS
) -> list[dict]:
    rows = []
    for k in range(steps):
        lr_log2 = start_log2 + k * STEP
        p = 1 / (1 + math.exp(-(lr_log2 - edge_log2) / WIDTH))
        diverged = rng.random() < p
        seeds = [0, 1, 2] if k < 3 else [0]
        for seed in seeds:
            bad = diverged if seed == 0 else False
            rows.append(
                {
                    "variant": variant,
                    "size": size,
                    "seed": seed,
                    "lr": 2.0**lr_log2,
                    "status": "diverged" if bad else "completed",
                    "final_val_loss": math.nan if bad else 3.0,
                }
            )
        if diverged:
            break
    return rows


def _study(rng, margins: list[float], reach: float = 0.0, steps=MAX_LR_STEPS) -> pd.DataFrame:
    """One study: baseline edges midway between grid points, the variant's `margins` above;
    the variant's scan climbs at most `steps` LRs."""
    rows = []
    for (size, _), margin in zip(SIZES.items(), margins, strict=True):
        start = -12.0  # 2^-12 ~ 2.4e-4
        base_edge = start + 4.25 - 0.5 * list(SIZES).index(size)  # edges drop with size
        rows += _arm_rows(rng, "linear", size, base_edge, start)
        rows += _arm_rows(rng, "nonlinear", size, base_edge + margin + reach, start, steps)
    return pd.DataFrame(rows)


P = math.log2(5)
SCENARIOS = {
    "persists": [P, P, P],
    "fades": [P, P / 2, 0.0],
    "none": [0.0, 0.0, 0.0],
}


@pytest.mark.parametrize("truth", [*SCENARIOS, "unresolved", "beyond_scan"])
def test_each_word_is_right_in_more_than_95_percent(truth):
    rng = np.random.default_rng(sum(map(ord, truth)))
    words = []
    for _ in range(N_STUDIES):
        if truth == "unresolved":  # the variant's scan stops 7 steps up, below the baseline's edge
            table = _study(rng, [P, P, P], reach=4.0, steps=7)
        elif truth == "beyond_scan":  # the variant's edge is beyond the scan at every size
            table = _study(rng, [P, P, P], reach=4.0)
        else:
            table = _study(rng, SCENARIOS[truth])
        words.append(stability_verdict(table, "linear")["verdict"])
    expected = "persists" if truth == "beyond_scan" else truth
    right = words.count(expected)
    assert binom.sf(right - 1, N_STUDIES, 0.95) < 0.05, (truth, right, set(words))


def test_edges_are_read_below_the_first_divergence():
    # a chance divergence at 4e-3 ends the scan; 8e-3 above it (another budget) survived
    rows = [
        ("completed", 1e-3, 3.1),
        ("completed", 2e-3, 3.0),
        ("diverged", 4e-3, math.nan),
        ("completed", 8e-3, 3.4),
        ("completed", 1.6e-2, math.inf),  # a completed run with a non-finite loss diverged
        ("failed", 3.2e-2, math.nan),  # a crash says nothing about stability
    ]
    arm = {"variant": "linear", "size": "2M", "seed": 0}
    table = pd.DataFrame([{**arm, "lr": lr, "status": s, "final_val_loss": x} for s, lr, x in rows])
    (edge,) = arm_edges(table)
    assert edge["max_stable_lr"] == 2e-3 and edge["first_diverged_lr"] == 4e-3
    assert edge["edge_bounds"] == [2e-3, 4e-3]  # the edge lies in [2e-3, 4e-3): censored there
    assert edge["lrs"] == [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
    assert edge["step"] == pytest.approx(2.0)


def test_a_diverged_cell_bounds_the_edge_it_does_not_leave_it_open():
    """The baseline diverged at its lowest LR (2e-3) and the variant was stable at 4e-3 on the
    same grid: the baseline's edge lies below 2e-3, so the variant's margin is at least one
    octave, a margin shown from censored edges alone. Read as gaps (no stable baseline LR) it
    was `unresolved`."""
    rows = [("linear", 2e-3, "diverged"), ("nonlinear", 1e-3, "completed")]
    rows += [("nonlinear", 2e-3, "completed"), ("nonlinear", 4e-3, "completed")]
    rows += [("nonlinear", 8e-3, "diverged")]
    table = pd.DataFrame(
        [{"variant": v, "size": "2M", "seed": 0, "lr": lr, "status": st,
          "final_val_loss": 3.0 if st == "completed" else math.nan} for v, lr, st in rows]
    )  # fmt: skip
    out = stability_verdict(table, "linear")
    (v,) = out["variants"]
    assert v["margin_bounds"] == {"2M": [pytest.approx(1.0), None]}  # [log2(4e-3/2e-3), open)
    assert v["shown"] == {"2M": True} and out["verdict"] == "persists"
    assert v["margin"] == {}  # no point margin: the baseline has no stable LR
    # the variant stable only up to the baseline's divergence: nothing shown, interval open
    table = table[~((table["variant"] == "nonlinear") & (table["lr"] > 2e-3))]
    assert stability_verdict(table, "linear")["verdict"] == "unresolved"


def test_report_section_is_written_from_the_verdict_and_absent_without_it():
    from analysis.report.render import to_markdown
    from analysis.report.sections.stability import stability_blocks

    rng = np.random.default_rng(0)
    stability = stability_verdict(_study(rng, SCENARIOS["persists"]), "linear")
    text = to_markdown(stability_blocks({"stability": stability}))
    assert "## Stability" in text and "largest stable LR" in text
    assert "known only to the LR grid's resolution" in text
    assert f"**{stability['verdict']}**" in text
    for edge in stability["edges"]:
        assert f"{edge['max_stable_lr']:.3g}" in text
    assert stability_blocks({}) == [] and stability_blocks({"stability": None}) == []
