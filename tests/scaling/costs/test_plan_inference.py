"""`scaling plan` prices what `scaling run` runs after the cells (issue 63): the inference-cost
measurement is a row of the plan's table and part of its device-hours and wall-clock, where the
study measures it (local executor, no figures yet, `SCALING_INFERENCE_COST` on); and the cells'
plan estimates are what the progress line's ETA starts from."""

from __future__ import annotations

import json

import pytest
import yaml

from models.accounting import flops_per_token
from scaling.costs.plan import cell_seconds, format_plan, plan_study
from scaling.costs.wall import planned_seconds, wall_estimate
from scaling.driver.environment import load_study_spec
from scaling.inference_cost.inference import InferenceSettings, measurement_seconds
from tests.scaling.conftest import small_spec

RATE, STARTUP_S, STEP_S = 1e8, 5.0, 0.01


@pytest.fixture
def study(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("SCALING_INFERENCE_COST", "on")  # the suite turns it off
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # priced on CPU: no peak-memory pass
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["cost"] = {"flops_per_gpu_s": RATE, "startup_s": STARTUP_S, "step_s": STEP_S}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path, check_environment=False)


def _expected_seconds(study) -> float:
    """What the measurement runs (`scaling.inference_cost.inference._round`), counted here by
    hand: the child's start, then per (size, variant) 2 warm-up + 6 timed rounds of one prefill
    of 8 x 16 prompt tokens and, at batch 1 and 32, a prefill of the batch's prompts and 16
    decode steps; every call is longer than `min_time_s` (0.02 s) here, so each runs once. A
    forward call costs `cost.step_s` plus its tokens at a third of a training token's time."""
    models = {(c.size, c.variant): c.run.model for c in study.cells}
    assert len(models) == 4  # 2 sizes x 2 arms
    total = STARTUP_S
    for model in models.values():
        token_s = flops_per_token(model) / 3 / RATE

        def forward(tokens: int, token_s: float = token_s) -> float:
            return STEP_S + tokens * token_s

        prefill = forward(8 * 16)
        decode_b1 = 16 * forward(1) + forward(1 * 16)
        decode_b32 = 16 * forward(32) + forward(32 * 16)
        assert min(prefill, 16 * forward(1)) > 0.02
        total += (2 + 6) * (prefill + decode_b1 + decode_b32)
    return total


def test_the_plan_has_a_row_for_the_inference_measurement_and_counts_it(study, monkeypatch):
    plan = plan_study(study)
    inference = plan.inference
    assert inference is not None
    assert (inference.num_models, inference.num_rounds) == (4, 8)
    assert inference.seconds == pytest.approx(_expected_seconds(study))
    assert inference.measured is False  # no pilot: per-token times assumed from FLOPs
    assert plan.total_gpu_hours == pytest.approx(plan.gpu_hours + inference.seconds / 3600)

    header, rows, totals = format_plan(plan, "CPU")
    assert len(rows) == len(plan.rows) + 1
    row = dict(zip(header, rows[-1], strict=True))
    assert row["cell"] == "inference measurement" and row["CPUs"] == "1"
    assert row["cost"] == "assumed" and row["steps"] == "8 rounds"
    assert f"{plan.total_gpu_hours:.4g} CPU-hours" in totals

    wall = wall_estimate(study, plan)
    monkeypatch.setenv("SCALING_INFERENCE_COST", "off")
    cells_only = plan_study(study)
    assert cells_only.inference is None
    assert len(format_plan(cells_only, "CPU")[1]) == len(cells_only.rows)
    without = wall_estimate(study, cells_only)
    assert wall.seconds == pytest.approx(without.seconds + inference.seconds)
    assert wall.worst_seconds == pytest.approx(without.worst_seconds + inference.seconds)


def test_no_inference_row_where_the_figures_are_already_measured(study):
    arms = sorted({(c.size, c.variant) for c in study.cells})
    rows = [{"size": s, "variant": v, "rounds": {}} for s, v in arms]
    study.folder.mkdir(parents=True, exist_ok=True)
    (study.folder / "inference.json").write_text(json.dumps({"device": "cpu", "rows": rows}))
    assert plan_study(study).inference is None


def test_a_timed_figure_repeats_until_min_time_as_the_measurement_does():
    settings = InferenceSettings(prompt_len=16, decode_steps=4, warmup=1, repeats=2)
    # 1 ms a call, tokens free: a prefill runs 20 times (20 ms); a decode of 4 steps (4 ms)
    # 5 times, each after an untimed prefill (1 ms)
    one_round = 20 * 0.001 + 2 * 5 * (4 * 0.001 + 0.001)
    assert measurement_seconds(settings, 0.0, 0.001) == pytest.approx(3 * one_round)
    peak = 0.001 + 4 * 0.001  # on a GPU: one batch-32 prefill + decode for the memory
    assert measurement_seconds(settings, 0.0, 0.001, peak_pass=True) == pytest.approx(
        3 * one_round + peak
    )
    assert measurement_seconds(settings, 0.0, 0.0) == 0.0  # capped at MAX_CALLS: no hang


def test_the_etas_cell_estimates_are_the_plans(study):
    plan = plan_study(study)
    planned = planned_seconds(study, plan)
    assert planned == {r.cell_id: cell_seconds(r, RATE, STARTUP_S, STEP_S) for r in plan.rows}
    assert all(planned[r.cell_id] > STARTUP_S + r.steps * STEP_S for r in plan.rows)
