"""`lr.search.find_edge`: each arm's scan climbs one LR step a round until one of its cells
diverges, on the synthetic loss surfaces of test_refine.py (where each arm diverges is known)."""

from __future__ import annotations

import math

import pytest

from analysis.stats.lr.stability import stability_verdict
from foundation.config import ConfigError

from .test_refine import Synthetic, _search, _spec

GRID = {"linear": [1e-3, 2e-3, 4e-3], "nonlinear": [1e-3, 2e-3, 4e-3]}


class PerArmEdge(Synthetic):
    """Synthetic runs whose LR of divergence differs by arm."""

    def __init__(self, optimum: dict[str, float], edges: dict[str, float]) -> None:
        super().__init__(optimum)
        self.edges = edges

    def run(self, variant: str, seed: int, lr: float) -> None:
        self.diverge_above = self.edges[variant]
        super().run(variant, seed, lr)


def _scanned(state, variant: str) -> list[float]:
    return sorted(a.lr for a in state.added if a.variant == variant and a.seeds == [0])


def test_each_arm_climbs_until_it_diverges_then_its_followers_run(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 6, "scan_seeds": 1, "find_edge": True}, GRID)
    world = PerArmEdge({"linear": 2e-3, "nonlinear": 2e-3}, {"linear": 0.01, "nonlinear": 0.05})
    state, per_round = _search(spec, world)
    # linear: 8e-3 fine, 1.6e-2 diverges; nonlinear: up to 3.2e-2 fine, 6.4e-2 diverges
    assert _scanned(state, "linear") == pytest.approx([8e-3, 1.6e-2])
    assert _scanned(state, "nonlinear") == pytest.approx([8e-3, 1.6e-2, 3.2e-2, 6.4e-2])
    assert per_round == [2, 2, 1, 1, 12] and state.ended and state.open_arms == []
    assert all(a.reason.startswith("find_edge") for a in state.added if a.seeds == [0])
    # the optimum search is unchanged: followers at the winner 2e-3 and its neighbours
    followers = sorted({a.lr for a in state.added if a.seeds == [1, 2]})
    assert followers == pytest.approx([1e-3, 2e-3, 4e-3])
    edges = {e["variant"]: e for e in stability_verdict(world.table(), "linear")["edges"]}
    assert edges["linear"]["max_stable_lr"] == pytest.approx(8e-3)
    assert edges["nonlinear"]["first_diverged_lr"] == pytest.approx(6.4e-2)


def test_without_find_edge_an_interior_optimum_adds_no_scan(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 6, "scan_seeds": 1}, GRID)
    world = PerArmEdge({"linear": 2e-3, "nonlinear": 2e-3}, {"linear": 0.01, "nonlinear": 0.05})
    state, per_round = _search(spec, world)
    assert per_round == [12] and _scanned(state, "linear") == []


def test_max_rounds_names_the_arm_whose_edge_was_not_found(tmp_path):
    spec = _spec(tmp_path, {"max_rounds": 2, "scan_seeds": 1, "find_edge": True}, GRID)
    world = PerArmEdge({"linear": 2e-3, "nonlinear": 2e-3}, {"linear": 0.01, "nonlinear": math.inf})
    state, _ = _search(spec, world)
    assert _scanned(state, "nonlinear") == pytest.approx([8e-3, 1.6e-2])
    assert state.open_arms == ["nonlinear 30K @1e+06 tokens: no divergence up to 0.016"]
    assert stability_verdict(world.table(), "linear")["verdict"] == "unresolved"


def test_find_edge_with_token_branches_is_refused(tmp_path):
    from scaling.spec.loader import study_from_dict
    from tests.scaling.conftest import small_spec

    data = small_spec(
        tmp_path / "data",
        tmp_path / "out",
        "sqlite:///" + str(tmp_path / "m.db"),
        sizes=["30K"],
        parallel={},
        tokens={"tokens_per_param": None, "per_size": {"30K": 6144}, "branches": [0.5, 1.0]},
        schedule={"kind": "wsd", "warmup_steps": 2},
        lr={"law": "none", "grid": {"*": {"30K": [3e-3]}}, "search": {"find_edge": True}},
    )
    with pytest.raises(ConfigError, match="lr.search.find_edge.*tokens.branches"):
        study_from_dict(data)
