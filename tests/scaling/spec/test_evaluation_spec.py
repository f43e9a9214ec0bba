"""`evaluation:` in a study: refused at load (so at `plan`, before anything is submitted) with
the task and the fix named; accepted specs give every cell the same evaluation."""

from __future__ import annotations

import pytest

import jobs.evaluation.run as evaluation
from foundation.config import ConfigError
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import write_and_load


def test_unknown_task_missing_data_and_model_parallel_sizes_are_refused(
    tmp_path, data_dir, monkeypatch
):
    gone = tmp_path / "gone.jsonl"
    monkeypatch.setitem(evaluation.LOCAL_TASKS, "scaling_local", gone)
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        f"sqlite:///{tmp_path}/mlflow.db",
        evaluation={"tasks": ["scaling_local", "hellaswagg"], "limit": 5},
        parallel={"60K": {"tensor_parallel": 2}},
    )
    with pytest.raises(ConfigError) as err:
        write_and_load(spec, tmp_path / "study.yaml")
    text = str(err.value)
    assert f"scaling_local: its data file {gone} is missing" in text
    assert "'hellaswagg' is not an lm-evaluation-harness task" in text
    assert "size 60K runs with tensor_parallel=2" in text
    assert not (tmp_path / "study").exists()  # nothing written


def test_an_empty_task_list_is_refused_and_a_valid_one_reaches_every_cell(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec = small_spec(data_dir, tmp_path / "s", uri, evaluation={"tasks": []})
    with pytest.raises(ConfigError, match="evaluation.tasks: empty"):
        write_and_load(spec, tmp_path / "empty.yaml")
    spec = small_spec(data_dir, tmp_path / "s", uri, evaluation={"tasks": ["scaling_local"]})
    study = write_and_load(spec, tmp_path / "ok.yaml")
    runs = [cell.run for cell in study.cells]
    assert runs and all(r.evaluation.tasks == ["scaling_local"] for r in runs)
    assert all(r.evaluation.limit is None for r in runs)
