"""One more size and longer training bought by `--resolve`, trained for real on the local
executor.

- One more size: the size the study's rules derive (`scaling.spec.next_size`) is priced by the
  study's own `study_price`, its cells go into `resolve.json` as the loop's buy writes them, and
  the study's driver trains them with the grid's cells: each at the rule's shape and the
  study's tokens per parameter, tagged with its size, listed by `status` and `plan`, and read
  by the analysis as the new top size.
- Longer training (a study with a tokens axis, WSD branches): each arm's run to twice the top
  budget, one WSD run each (`scaling.spec.branches.longer_run`), recorded by the loop's own
  `_Path._cell`, trained, and read by the analysis as the top's largest budget.

The whole loop choosing `size` is proven on instant cells (tests/scaling/spec/test_next_size.py);
what only real runs show is that cells no study file lists expand, train, log and are read back
like the study's own.
"""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from analysis.stats.resolve.evidence import Evidence, read_table
from analysis.stats.resolve.options import size_option, tokens_option
from analysis.tables.mlflow_io import load_study_runs
from foundation import contract as C
from scaling.cli import app
from scaling.costs.plan import plan_study
from scaling.driver.resolve import _Path, declared, default_kinds
from scaling.driver.run import study_price
from scaling.spec.loader import read_study
from scaling.spec.next_size import next_size
from scaling.state.files.resolve_state import write_resolve
from scaling.state.status import study_status
from scaling.study import Study
from tests.scaling.conftest import small_spec

pytestmark = pytest.mark.slow

SIZES = ["83K", "110K"]  # the ladder rule's shapes at head_dim 16, aspect 16: 3 and 4 layers x 48


def test_a_bought_size_trains_at_the_rules_shape_and_is_read_as_the_top(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "runs", f"sqlite:///{tmp_path}/mlflow.db",
                      sizes=SIZES, ladder={"head_dim": 16, "aspect_ratio": 16}, parallel={},
                      tokens={"tokens_per_param": 0.05},
                      lr={"law": "none", "grid": {"*": {s: [1e-2] for s in SIZES}}})  # fmt: skip
    spec["name"] = "resolve-size"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = read_study(path)
    cost, _, grow = study_price(study)
    n_top = float(plan_study(study).rows[-1].num_nonembedding_params)
    ev = Evidence(
        variant="nonlinear", baseline="linear", size="110K", n_params=n_top, tokens=5530.0,
        estimate_pct=0.2, seed_sd_pct=1.0, num_seeds=2, grid_var=0.0, grid_step=0.69,
        level=0.02, margin_pct=0.5, word="undetected", best_lrs={"linear": 1e-2,
        "nonlinear": 1e-2}, seeds=(0, 1), sizes=(("83K", n_top * 0.75), ("110K", n_top)),
    )  # fmt: skip
    option = size_option(ev, 0.02, cost, start_seeds=2, grow=grow)
    found = next_size(study.spec, "110K", 110592 / 82944)
    assert {c["size"] for c in option.cells} == {found.label} and len(option.cells) == 4
    plan = declared(study, 1.0, None, ("size",))
    cells = [_Path(study, plan, print, None)._cell(c) for c in option.cells]  # as buy records
    study.folder.mkdir(parents=True, exist_ok=True)
    looks = [{"look": 0}, {"look": 1, "round": 1, "cells": cells}]
    write_resolve(study.folder, {"plan": plan, "looks": looks, "path": None})

    grown = Study.load(path)
    assert len(grown.resolved.cells) == len(study.cells) + 4
    assert grown.submit(rounds=False).submitted  # the grid's 4 cells and the size's 4
    rows = study_status(grown.resolved)
    assert [r.state for r in rows] == ["completed"] * 8, rows
    new = [c for c in grown.resolved.cells if c.size == found.label]
    assert sorted(c.variant for c in new) == ["linear", "linear", "nonlinear", "nonlinear"]
    assert all(
        (c.run.model.num_layers, c.run.model.hidden_size)
        == (found.shape.num_layers, found.shape.hidden_size)
        for c in new
    )

    uri, exp = grown.resolved.mlflow.tracking_uri, grown.resolved.mlflow.experiment
    table = load_study_runs(uri, exp, grown.name)[0]
    at_new = table[table["size"] == found.label]
    assert len(at_new) == 4
    planned = {r.variant: r for r in plan_study(grown.resolved).rows if r.size == found.label}
    for _, row in at_new.iterrows():  # the runs logged the N and tokens the plan priced
        assert row["num_nonembedding_params"] == planned[row["variant"]].num_nonembedding_params
        assert row["tokens"] == planned[row["variant"]].tokens

    assert read_table(table, "linear", 0.02, 0.5)["nonlinear"].size == found.label  # the top

    out = CliRunner().invoke(app, ["status", str(path)], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert found.label in out.output


def test_a_bought_longer_run_trains_to_twice_the_top_budget_and_is_read_there(tmp_path, data_dir):
    step = 256  # tokens per step: small_spec's batch
    spec = small_spec(data_dir, tmp_path / "runs", f"sqlite:///{tmp_path}/mlflow.db",
                      sizes=["30K"], parallel={}, seeds=[0, 1],
                      lr={"law": "none", "grid": {"*": {"30K": [3e-3]}}},
                      tokens={"tokens_per_param": None, "per_size": {"30K": 8 * step},
                              "branches": [0.5, 1.0], "cooldown": 0.25},
                      schedule={"kind": "wsd", "warmup_steps": 2})  # fmt: skip
    spec["name"] = "resolve-tokens"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = read_study(path)
    assert default_kinds(study) == ("seeds", "lr_grid", "lr_edge", "tokens")  # no rule shapes
    cost, _, _ = study_price(study)
    ev = Evidence(
        variant="nonlinear", baseline="linear", size="30K", n_params=27648.0, tokens=8.0 * step,
        estimate_pct=0.2, seed_sd_pct=1.0, num_seeds=2, grid_var=0.0, grid_step=0.69,
        level=0.02, margin_pct=0.5, word="undetected", best_lrs={"linear": 3e-3,
        "nonlinear": 3e-3}, seeds=(0, 1), has_tokens_axis=True,
    )  # fmt: skip
    option = tokens_option(ev, 0.02, cost)
    assert {c["budget"] for c in option.cells} == {16.0 * step} and len(option.cells) == 4
    here = _Path(study, declared(study, 1.0, None, ("tokens",)), print, None)
    cells = [here._cell(c) for c in option.cells]  # as the loop's buy records them
    assert {c["tokens"] for c in cells} == {16 * step}
    looks = [{"look": 0}, {"look": 1, "round": 1, "cells": cells}]
    write_resolve(study.folder, {"plan": here.plan, "looks": looks, "path": None})

    grown = Study.load(path)
    longer = [c for c in grown.resolved.cells if c.cell_id in {c["cell_id"] for c in cells}]
    assert len(longer) == 4
    for c in longer:  # one WSD run to its budget, not a branch of a longer stable run
        assert c.kind == C.KIND_RUN and c.depends_on is None
        assert c.run.schedule.kind == "wsd" and c.run.train.steps == 16 and c.tokens == 16 * step
    assert grown.submit(rounds=False).submitted
    rows = study_status(grown.resolved)
    assert [r.state for r in rows] == ["completed"] * len(rows) and len(rows) == 16, rows

    uri, exp = grown.resolved.mlflow.tracking_uri, grown.resolved.mlflow.experiment
    table = load_study_runs(uri, exp, grown.name)[0]
    assert sorted(table["tokens"].unique()) == [4.0 * step, 8.0 * step, 16.0 * step]
    assert read_table(table, "linear", 0.02, 0.5)["nonlinear"].tokens == 16.0 * step  # the top
    verdict = grown.analyze().verdict  # the study's own analysis chooses LRs at that budget
    assert {e["tokens"] for e in verdict["lr_selection"]} == {16.0 * step}
