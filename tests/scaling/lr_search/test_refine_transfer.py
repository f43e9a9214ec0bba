"""`lr.search.transfer: law` (`scaling.lr_search.law_transfer`) driven through the LR search's own
`decide_round`, round after round, on a 5-size synthetic study whose arms' optimal LRs follow a
law with scatter (known truth), as if every round's cells had run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.stats.lr.frontier import lr_frontier
from analysis.tables.runs import normalise
from foundation.config import ConfigError
from scaling.lr_search.extend_grid import decide_round
from scaling.spec.grid import cell_id, grid_points
from scaling.spec.ladder import nominal_params, porian_lr
from scaling.spec.loader import study_from_dict
from scaling.state.files.search_state import SearchState
from tests.scaling.conftest import small_spec

LAYERS = {"30K": 1, "60K": 2, "110K": 4, "220K": 8, "440K": 16}  # 12 L 48^2 = 27.6K L
CURVE = 0.05  # loss at m x the optimum: CURVE ln(m)^2


def _spec(tmp_path, **search):
    shapes = {s: {"num_layers": n, "hidden_size": 48, "num_attention_heads": 2}
              for s, n in LAYERS.items()}  # fmt: skip
    data = small_spec(
        tmp_path / "data",
        tmp_path / "out",
        "sqlite:///" + str(tmp_path / "m.db"),
        sizes=list(LAYERS),
        parallel={},
        ladder={"shapes": shapes},
        tokens={"per_size": {s: 3072 for s in LAYERS}},
        seeds=[0, 1, 2],
        lr={"law": "porian", "multipliers": [0.5, 1.0, 2.0], "search": search},
    )
    return study_from_dict(data)


class Ladder:
    """Runs cells of a known loss surface per (arm, size), like a study's MLflow runs."""

    def __init__(self, spec, optimum, seed=0):
        self.spec, self.optimum = spec, optimum  # (arm, size) -> true best LR
        self.rng = np.random.default_rng(seed)
        self.rows: list[dict] = []

    def run(self, variant, size, seed, lr):
        loss = 3.0 + CURVE * math.log(lr / self.optimum[variant, size]) ** 2
        n = float(nominal_params(self.spec.shape(size)))
        self.rows.append({"variant": variant, "size": size, "tokens": 3072.0, "seed": seed,
                          "num_nonembedding_params": n, "lr": lr,
                          "final_val_loss": loss + self.rng.normal(0, 1e-3), "status": "completed",
                          "run_id": cell_id(size, variant, seed, lr)})  # fmt: skip

    def table(self):
        return normalise(pd.DataFrame(self.rows), "synthetic")

    def known(self):
        return {r["run_id"] for r in self.rows}


def _optima(spec, rng, scatter=0.1, top_factor=None):
    out = {}
    for arm in spec.variants:
        for size in LAYERS:
            lr = (
                1.3 * porian_lr(nominal_params(spec.shape(size))) * math.exp(rng.normal(0, scatter))
            )
            out[arm, size] = lr * (top_factor.get(arm, 1.0) if size == "440K" and top_factor else 1)
    return out


def _search(spec, world):
    for size, variant, seed, lr, _ in grid_points(spec):  # the starting grid
        world.run(variant, size, seed, lr)
    state = SearchState()
    while not state.ended:
        before = len(state.added)
        state = decide_round(spec, world.table(), state, world.known())
        for a in state.added[before:]:
            for seed in a.seeds:
                world.run(a.variant, a.size, seed, a.lr)
        assert state.round < 30, "the search must end"
    return state


def _scan_runs(world, size):
    return sum(1 for r in world.rows if r["size"] == size and r["seed"] == 0)


def test_top_sizes_scan_on_each_arm_s_law_and_land_within_one_step(tmp_path):
    spec = _spec(tmp_path, transfer="law", scan_seeds=1)
    assert spec.first_wave == ["30K", "60K", "110K"]
    world = Ladder(spec, _optima(spec, np.random.default_rng(0)))
    state = _search(spec, world)
    assert state.ended and state.broken_laws == [] and state.open_arms == []
    on_law = {(a.variant, a.size) for a in state.added if a.reason.startswith("law")}
    assert ("linear", "440K") in on_law and ("nonlinear", "440K") in on_law
    on_law_lrs = [a for a in state.added if a.size == "440K" and a.reason.startswith("law")]
    assert len(on_law_lrs) <= 4 < 6 <= _scan_runs(world, "110K")  # 2 arms x <=2 LRs vs 3
    final = lr_frontier(world.table())
    # the winner of a law's scan is bracketed by runs, not by the law: its edge was extended
    assert all(f.state == "interior" for f in final if f.size in ("220K", "440K"))
    for f in final:
        assert abs(math.log(f.best_lr / world.optimum[f.variant, f.size])) <= math.log(2) + 1e-9
    waves = [a.round for a in state.added if a.reason.startswith(("law", "wave"))]
    assert sorted({a.size for a in state.added if a.round in waves}) == ["220K", "440K"]


def test_a_law_broken_at_the_top_size_falls_back_and_is_reported(tmp_path):
    spec = _spec(tmp_path, transfer="law", scan_seeds=1)
    optima = _optima(spec, np.random.default_rng(1), scatter=0.05, top_factor={"nonlinear": 8.0})
    world = Ladder(spec, optima)
    state = _search(spec, world)
    assert len(state.broken_laws) == 1 and state.broken_laws[0].startswith("nonlinear")
    top = {f.variant: f for f in lr_frontier(world.table()) if f.size == "440K"}
    assert top["nonlinear"].state == "interior"  # the edge was extended, not taken on the law
    assert abs(math.log(top["nonlinear"].best_lr / optima["nonlinear", "440K"])) <= math.log(2)


def test_without_transfer_every_size_starts_at_once(tmp_path):
    assert _spec(tmp_path, scan_seeds=1).first_wave == list(LAYERS)


@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"transfer": "porian"}, "study.lr.search.transfer"),
        ({"transfer": "law", "law_sizes": 1}, "study.lr.search.law_sizes"),
    ],
)
def test_bad_transfer_settings_name_the_key(tmp_path, search, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")) as err:
        _spec(tmp_path, **search)
    print(err.value)


def test_plan_prices_the_waves_at_their_worst_case():
    """`scaling plan` on the shipped ladder with transfer: the starting grid holds the first
    wave only, the worst case (every law broken) is the study's without transfer, and the
    wall-clock counts the waves one after another."""
    from pathlib import Path

    from foundation.config import load_file
    from scaling.costs.lr_search import format_search_cost, search_cost
    from scaling.costs.plan import plan_study
    from scaling.spec.loader import resolve

    ladder = Path(__file__).parents[3] / "studies" / "ladder.yaml"
    from scaling.costs.wall import wall_estimate

    totals, lines, walls = {}, {}, {}
    for transfer in ("none", "law"):
        data = load_file(ladder)
        data["lr"]["search"]["transfer"] = transfer
        study = resolve(study_from_dict(data, base=ladder.parent))
        plan = plan_study(study)
        base = sum(r.gpu_hours for r in plan.rows)
        cost = search_cost(study, plan)
        totals[transfer] = (base, base + cost.gpu_hours)
        lines[transfer] = format_search_cost(cost, plan, study)
        walls[transfer] = wall_estimate(study, plan)
    assert totals["law"][0] < totals["none"][0] / 5  # 350M and 680M wait for their wave
    assert totals["law"][1] == pytest.approx(totals["none"][1])
    assert "the starting grid holds 25M, 50M, 85M" in lines["law"]
    assert "then 350M, 680M one wave each" in lines["law"]
    # the waves run one after another: longer than launching every size at once
    assert walls["law"].seconds > walls["none"].seconds
    assert walls["law"].worst_seconds > walls["none"].worst_seconds
