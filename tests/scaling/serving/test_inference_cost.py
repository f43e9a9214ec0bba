"""Inference cost, measured (`scaling.serving.inference`, `scaling.serving.inference_study`).

Real tiny megatron models on this CPU: the figures are positive, labelled CPU, and the CPU
memory estimate is exactly the weights plus the batch-32 KV cache; a local study without a
pilot gets its figures measured once into inference.json (a child process), read back the
second time without measuring. ~10 s in all.
"""

from __future__ import annotations

import json

import pytest
import yaml

from analysis.tables.inference_io import INFERENCE_FILE
from scaling.rounds.environment import load_study_spec
from scaling.serving.inference_study import ENV_SWITCH, study_inference
from tests.distributed import run_ranks
from tests.models._workers import tiny_config
from tests.scaling.conftest import small_spec


def measure_worker(rank: int, world_size: int) -> dict:
    from models.accounting import num_params
    from scaling.serving.inference import InferenceSettings, measure

    configs = {v: tiny_config(query_variant=v) for v in ("linear", "nonlinear")}
    settings = InferenceSettings(prompt_len=6, decode_steps=4, repeats=2)
    figures = measure(configs, settings)
    return {"figures": figures, "params": {v: num_params(c) for v, c in configs.items()}}


def test_measurement_gives_positive_cpu_figures_and_the_memory_it_counts():
    out = run_ranks(measure_worker, 1)[0]
    for variant, f in out["figures"].items():
        assert f["device"] == "cpu" and "CPU" in f["memory_kind"]
        assert f["prefill_tok_s"] > 0 and 0 < f["decode_ms_b1"] < 1000
        assert 0 < f["decode_ms_b32"] < 1000
        # fp32 weights + K and V: 2 layers x [10 positions, 32 sequences, 4 heads, 8] x 4 bytes
        cache = 2 * 2 * 10 * 32 * 4 * 8 * 4
        assert f["peak_mem_mb"] * 2**20 == pytest.approx(4 * out["params"][variant] + cache)


def test_a_local_study_is_measured_once_into_inference_json(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv(ENV_SWITCH, "on")  # tests/conftest.py turns it off for other studies
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    said: list[str] = []
    found = study_inference(study, said.append)
    assert found is not None, said
    arms = {(r["size"], r["variant"]) for r in found["rows"]}
    assert arms == {(s, v) for s in ("30K", "60K") for v in ("linear", "nonlinear")}
    assert json.loads((study.folder / INFERENCE_FILE).read_text())["device"] == "cpu"
    said.clear()
    assert study_inference(study, said.append) == found  # read back, not measured again
    assert said == [f"inference cost: from {INFERENCE_FILE}"]


def test_switched_off_nothing_is_measured(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv(ENV_SWITCH, "off")
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    said: list[str] = []
    assert study_inference(study, said.append) is None
    assert said == [f"inference cost: not measured ({ENV_SWITCH}=off)"]
    assert not (study.folder / INFERENCE_FILE).exists()
