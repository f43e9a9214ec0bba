"""One more size by the study's own rules (`scaling.spec.next_size`): what `--resolve` buys when
its `size` option is chosen, the option priced at that size, the bought cells expanded by the
loader like the study's own, and the studies that cannot take one told why in one line.
"""

from __future__ import annotations

import math

import pytest
import yaml

from analysis.stats.resolve.evidence import read_table
from analysis.stats.resolve.loop import Plan, resolve_loop
from analysis.stats.resolve.options import price
from analysis.synthetic.closed_loop import BASELINE, Truth, fast_judge, flops_hours, rows_of
from scaling.driver.resolve import declared
from scaling.spec.ladder import nominal_params, shape_for_size
from scaling.spec.loader import read_study, study_from_dict
from scaling.spec.next_size import grow_problem, next_size, study_grow
from scaling.state.files.resolve_state import write_resolve
from tests.scaling.conftest import FOUR_SHAPES, small_spec

RULE_SIZES = ["25K", "55K", "83K", "110K"]  # the rule's shapes at head_dim 16, aspect 16
LADDER = {"head_dim": 16, "aspect_ratio": 16}
TOKENS_PER_PARAM = 0.05  # a few steps of 256 tokens a cell


def rule_spec(tmp_path, data_dir, **overrides) -> dict:
    """A study whose sizes are the ladder rule's and whose tokens are tokens_per_param's."""
    spec = small_spec(data_dir, tmp_path / "runs", f"sqlite:///{tmp_path}/mlflow.db",
                      sizes=RULE_SIZES, ladder=LADDER, parallel={},
                      tokens={"tokens_per_param": TOKENS_PER_PARAM})  # fmt: skip
    return spec | overrides


def test_a_rule_study_grows_by_its_own_rules(tmp_path, data_dir) -> None:
    spec = study_from_dict(rule_spec(tmp_path, data_dir))
    assert grow_problem(spec) is None
    found = next_size(spec, "110K", 2.0)
    top = nominal_params(shape_for_size("110K", 16, 16))
    assert found.label == "221K"  # 2 x the top's 12 L d^2 = 110,592
    assert found.shape == shape_for_size("221K", 16, 16) and found.nominal > top
    assert found.n_ratio == pytest.approx(found.nominal / top)
    assert found.tokens == pytest.approx(TOKENS_PER_PARAM * found.nominal)
    assert found.tokens_ratio == pytest.approx(found.n_ratio)  # tokens per parameter kept
    assert study_grow(spec)("110K", 2.0) == (
        found.label, found.n_ratio, found.tokens_ratio, found.words,
    )  # fmt: skip
    assert study_grow(spec)("110K", 1.0) is None  # not a size above the top
    # explicit WSD branch counts, no tokens_per_param: the new size's budget is the counts'
    counted = study_from_dict(rule_spec(tmp_path, data_dir, tokens={
        "tokens_per_param": None, "branches": [2048, 4096], "cooldown": 0.25}))  # fmt: skip
    assert next_size(counted, "110K", 2.0).tokens == 4096 and grow_problem(counted) is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"ladder": {"shapes": FOUR_SHAPES}, "sizes": list(FOUR_SHAPES)}, "study.ladder.shapes"),
        ({"tokens": {"per_size": dict.fromkeys(RULE_SIZES, 3072)}}, "tokens.per_size"),
        ({"parallel": {"*": {"tensor_parallel": 3}}}, "tensor_parallel"),
    ],
)
def test_a_study_that_cannot_take_a_size_says_which_field(tmp_path, data_dir, change, field):
    spec = rule_spec(tmp_path, data_dir, **change)
    if "parallel" in change:  # a layout the study's own sizes take and the next one does not
        spec["sizes"] = ["55K", "110K"]  # 3 heads each; the next, 221K, has 4
    problem = grow_problem(study_from_dict(spec))
    assert problem is not None and field in problem, problem
    assert "\n" not in problem


def _evidence(tmp_path, data_dir):
    """A study's deciding interval read off instant runs at its own sizes (Chinchilla's tokens:
    the truth's loss at the study's own few tokens is all data term), a gain its seeds do not
    resolve."""
    spec = study_from_dict(rule_spec(tmp_path, data_dir))
    cells = [
        {"variant": v, "size": s, "n_params": float(nominal_params(spec.shape(s))),
         "tokens": 20.0 * nominal_params(spec.shape(s)), "lr": lr, "seed": seed}
        for s in RULE_SIZES for v in (BASELINE, "nonlinear")
        for lr in (0.01, 0.02, 0.04) for seed in range(3)
    ]  # fmt: skip
    table = rows_of(Truth(gain_pct=0.3, study_seed=7, run_sd=0.2), cells)
    return spec, table, read_table(table, BASELINE, 0.02, 0.5)["nonlinear"]


def test_the_size_option_is_the_size_the_study_would_train(tmp_path, data_dir) -> None:
    spec, _, ev = _evidence(tmp_path, data_dir)
    grow = study_grow(spec)
    (option,) = [o for o in price(ev, 0.02, flops_hours, grow=grow) if o.kind == "size"]
    found = next_size(spec, ev.size, ev.sizes[-1][1] / ev.sizes[-2][1])
    assert {c["size"] for c in option.cells} == {found.label}
    assert [c["n_params"] for c in option.cells] == pytest.approx(
        [ev.n_params * found.n_ratio] * len(option.cells)
    )
    assert [c["tokens"] for c in option.cells] == pytest.approx(
        [ev.tokens * found.tokens_ratio] * len(option.cells)
    )
    assert found.label in option.edit and "--options size" in option.edit
    for c in option.cells:  # each arm's best LR carried up by N^-1/3, on its grid multiples
        multiple = c["lr"] / (ev.best_lrs[c["variant"]] * found.n_ratio ** (-1 / 3))
        assert any(math.isclose(multiple, m) for m in ev.grid_multiples[c["variant"]])
    assert [o for o in price(ev, 0.02, flops_hours, grow=lambda *_: None) if o.kind == "size"] == []
    hand = [o for o in price(ev, 0.02, flops_hours) if o.kind == "size"]
    assert hand and hand[0].edit.startswith("sizes: add")


def test_the_loop_buys_the_studys_size_and_judges_it_at_the_top(tmp_path, data_dir) -> None:
    spec, table, ev = _evidence(tmp_path, data_dir)
    truth = Truth(gain_pct=0.3, study_seed=7, run_sd=0.2)
    bought: list[list[dict]] = []

    def buy(cells):
        bought.append(list(cells))
        return rows_of(truth, cells)

    judged: list[str] = []  # each look's deciding size

    def judge(t, level):
        read = fast_judge(0.5)(t, level)
        judged.append(read["nonlinear"].size)
        return read

    plan = Plan(budget=1e9, max_looks=1, kinds=("size",))
    path = resolve_loop(table, judge, flops_hours, buy, plan, study_grow(spec))
    (cells,) = bought
    label = next_size(spec, "110K", ev.sizes[-1][1] / ev.sizes[-2][1]).label
    assert {c["size"] for c in cells} == {label}
    assert path.looks[1]["bought"]["kind"] == "size"
    assert judged == ["110K", label]  # the look after it is decided at the new top


def test_bought_cells_of_a_new_size_expand_like_the_studys_own(tmp_path, data_dir) -> None:
    spec_dict = rule_spec(tmp_path, data_dir)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec_dict))
    study = read_study(path)
    found = next_size(study.spec, "110K", 2.0)
    cells = [
        {"cell_id": f"bought-{v}", "variant": v, "spec_variant": v, "size": found.label,
         "seed": 0, "lr": 0.01}
        for v in ("linear", "nonlinear")
    ]  # fmt: skip
    plan = declared(study, 1.0, None, ("size",))  # as `--resolve --options size` declares it
    state = {"plan": plan, "looks": [{"look": 0}, {"look": 1, "round": 1, "cells": cells}],
             "path": None}  # fmt: skip
    study.folder.mkdir(parents=True, exist_ok=True)
    write_resolve(study.folder, state)  # what the loop's buy writes before training them
    grown = read_study(path)
    new = [c for c in grown.cells if c.size == found.label]
    assert len(new) == 2 and {c.variant for c in new} == {"linear", "nonlinear"}
    for c in new:
        model = c.run.model
        assert (model.num_layers, model.hidden_size) == (
            found.shape.num_layers, found.shape.hidden_size,
        )  # fmt: skip
        assert c.tokens >= found.tokens and c.tokens - found.tokens < c.run.tokens_per_step
        assert c.round == 1
    assert len(grown.cells) == len(study.cells) + 2
