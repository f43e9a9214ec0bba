"""Inference cost, measured (`scaling.inference_cost.inference`,
`scaling.inference_cost.inference_study`).

Real tiny megatron models on this CPU: the figures are positive, labelled CPU, and the CPU
memory estimate is exactly the weights plus the batch-32 KV cache, which follows the arm's own
key/value heads (grouped-query attention: a quarter); every timed ratio carries its repeats and
is either within the stated bound or marked unresolved (no stopwatch asserted); a local study
without a pilot gets its figures measured once into inference.json (a child process), read back
the second time without measuring. ~15 s in all.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict

import pytest
import yaml

from analysis.report.sections.inference import inference_blocks
from analysis.stats.inference import MIN_ROUNDS, RATIO_BOUND, inference_summary
from analysis.tables.inference_io import INFERENCE_FILE
from scaling.driver.environment import load_study_spec
from scaling.inference_cost.inference_study import ENV_SWITCH, study_inference
from tests.distributed import run_ranks
from tests.models._workers import tiny_config
from tests.scaling.conftest import small_spec

GQA = "examples.site_examples:gqa"  # one key/value head for the 4 query heads (Variant.model)
ROUNDS = 4


def measure_worker(rank: int, world_size: int) -> dict:
    from models.accounting import num_params
    from models.config import ModelConfig, arm_model_fields
    from scaling.inference_cost.inference import InferenceSettings, measure

    configs = {v: tiny_config(query_variant=v) for v in ("linear", "nonlinear")}
    configs["gqa"] = ModelConfig(**arm_model_fields(asdict(tiny_config(query_variant=GQA))))
    settings = InferenceSettings(prompt_len=6, decode_steps=4, repeats=ROUNDS, min_time_s=0.005)
    figures = measure(configs, settings)
    return {"figures": figures, "params": {v: num_params(c) for v, c in configs.items()}}


@pytest.fixture(scope="module")
def measured() -> dict:
    return run_ranks(measure_worker, 1)[0]


def test_measurement_gives_positive_cpu_figures_and_the_memory_it_counts(measured):
    out = measured
    for variant, f in out["figures"].items():
        assert f["device"] == "cpu" and "CPU" in f["memory_kind"]
        assert f["prefill_tok_s"] > 0 and 0 < f["decode_ms_b1"] < 1000
        assert 0 < f["decode_ms_b32"] < 1000
        # fp32 K and V: 2 layers x [10 positions, 32 sequences, 4 heads (gqa: 1), 8] x 4 bytes
        cache = 2 * 2 * 10 * 32 * (1 if variant == "gqa" else 4) * 8 * 4
        assert f["kv_cache_mb"] * 2**20 == cache
        assert f["peak_mem_mb"] * 2**20 == pytest.approx(4 * out["params"][variant] + cache)
        assert {k: len(v) for k, v in f["rounds"].items()} == {
            "prefill_tok_s": ROUNDS,
            "decode_ms_b1": ROUNDS,
            "decode_ms_b32": ROUNDS,
        }
        assert f["decode_ms_b1"] == statistics.median(f["rounds"]["decode_ms_b1"])


def test_each_ratio_is_within_the_bound_or_unresolved(measured):
    """The analysis pairs round r with round r; a ratio reads as a number only where its rounds
    agree within the bound, as a bound (≥ / ≤) where they disagree but lie wholly on one side of
    1, else as unresolved (recomputed here from the raw rounds)."""
    figures = measured["figures"]
    rows = [{"variant": v, "size": "tiny", "session": "tiny", **f} for v, f in figures.items()]
    summary = inference_summary({"device": "cpu", "rows": rows}, "linear")
    cells = {row[0]: row[3:] for row in inference_blocks({"inference": summary})[1][2]}
    for variant in ("nonlinear", "gqa"):
        ratios = summary["ratios"][variant]["tiny"]
        for i, (name, figure, larger_cheaper) in enumerate(
            [
                ("prefill", "prefill_tok_s", True),
                ("decode_b1", "decode_ms_b1", False),
                ("decode_b32", "decode_ms_b32", False),
            ]
        ):
            arm, base = figures[variant]["rounds"][figure], figures["linear"]["rounds"][figure]
            pairs = zip(arm, base, strict=True)
            per_round = [(b / a if larger_cheaper else a / b) for a, b in pairs]
            low, _, high = statistics.quantiles(per_round, n=4, method="inclusive")
            entry = ratios[name]
            assert entry["value"] == pytest.approx(statistics.median(per_round))
            assert entry["spread"] == pytest.approx([low, high]) and entry["rounds"] == ROUNDS
            assert entry["resolved"] == (high <= RATIO_BOUND * low and ROUNDS >= MIN_ROUNDS)
            shown = cells[variant][i]
            if entry["resolved"]:
                assert not shown.startswith(("unresolved (", "≥", "≤")), shown
            elif low > 1 or high < 1:  # disagreeing repeats wholly on one side of 1: a bound
                side = "at_least" if low > 1 else "at_most"
                assert entry["bound"] == {"side": side, "value": low if low > 1 else high}
                assert shown.startswith("≥ " if low > 1 else "≤ "), shown
            else:
                assert entry["bound"] is None and shown.startswith("unresolved ("), shown
    # not timed: a quarter of the key/value heads hold a quarter of the cache
    gqa = summary["ratios"]["gqa"]["tiny"]
    assert gqa["kv_cache"]["value"] == 0.25 and gqa["memory"]["value"] < 1
    assert cells["gqa"][4] == "0.25x"
    assert summary["ratios"]["nonlinear"]["tiny"]["kv_cache"]["value"] == 1.0


def test_a_local_study_is_measured_once_into_inference_json(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv(ENV_SWITCH, "on")  # tests/conftest.py turns it off for other studies
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    said: list[str] = []
    found = study_inference(study, said.append, measures_here=True)
    assert found is not None, said
    assert said[0].startswith("inference cost: measuring 2 arms x 2 sizes on this machine")
    arms = {(r["size"], r["variant"]) for r in found["rows"]}
    assert arms == {(s, v) for s in ("30K", "60K") for v in ("linear", "nonlinear")}
    assert json.loads((study.folder / INFERENCE_FILE).read_text())["device"] == "cpu"
    said.clear()
    # read back, not measured again
    assert study_inference(study, said.append, measures_here=True) == found
    assert said == [f"inference cost: from {INFERENCE_FILE}"]


def test_switched_off_nothing_is_measured(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv(ENV_SWITCH, "off")
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    said: list[str] = []
    assert study_inference(study, said.append, measures_here=True) is None
    assert said == [f"inference cost: not measured ({ENV_SWITCH}=off)"]
    assert not (study.folder / INFERENCE_FILE).exists()


def test_a_study_off_this_machine_is_not_measured_here(tmp_path, data_dir, monkeypatch):
    """Whether a study's figures may be measured here is its executor's capability
    (`measures_inference_here`), not a comparison of its name: Slurm's cells run elsewhere."""
    from scaling.backends.executors import executor_for
    from scaling.spec.loader import read_study

    monkeypatch.setenv(ENV_SWITCH, "on")
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db")
    spec["executor"] = "slurm"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = read_study(path)
    assert executor_for(study).measures_inference_here is False
    said: list[str] = []
    assert study_inference(study, said.append, executor_for(study).measures_inference_here) is None
    assert said == ["inference cost: not measured (run `scaling pilot` on the study's executor)"]
    assert not (study.folder / INFERENCE_FILE).exists()
